/* BERT encoder forward pass on packed sequences, float32 throughout.
 *
 * All tokens of a batch are rows of one [T][dim] matrix, so the linear layers
 * are single matrix products over the whole batch (CBLAS sgemm when built with
 * BLAS) and no work is spent on padding; only attention looks at sequence
 * boundaries. */
#include "bert.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#ifdef INFS_HAVE_BLAS
#include <cblas.h>
#endif

/* ---- a fork-join over index ranges ------------------------------------- */

typedef void (*range_fn)(void *ctx, size_t begin, size_t end, unsigned worker);

struct range_task {
	range_fn fn;
	void *ctx;
	size_t begin, end;
	unsigned worker;
};

static void *range_run(void *arg)
{
	struct range_task *t = arg;
	t->fn(t->ctx, t->begin, t->end, t->worker);
	return NULL;
}

#define MAX_THREADS INFS__BERT_MAX_THREADS

/* Splits [0, n) into n_threads contiguous parts and runs them concurrently,
 * part 0 on the calling thread. A part whose thread cannot be started runs on
 * the calling thread instead, so this never fails. */
static void parallel_for(unsigned n_threads, size_t n, range_fn fn, void *ctx)
{
	if (n_threads > MAX_THREADS)
		n_threads = MAX_THREADS;
	if (n_threads > n)
		n_threads = (unsigned)n;
	if (n_threads <= 1) {
		if (n)
			fn(ctx, 0, n, 0);
		return;
	}
	struct range_task tasks[MAX_THREADS];
	pthread_t tids[MAX_THREADS];
	int started[MAX_THREADS];
	for (unsigned i = 0; i < n_threads; i++) {
		tasks[i] = (struct range_task){fn, ctx, n * i / n_threads, n * (i + 1) / n_threads, i};
		started[i] = i > 0 && pthread_create(&tids[i], NULL, range_run, &tasks[i]) == 0;
	}
	for (unsigned i = 0; i < n_threads; i++)
		if (!started[i])
			range_run(&tasks[i]);
	for (unsigned i = 1; i < n_threads; i++)
		if (started[i])
			pthread_join(tids[i], NULL);
}

/* ---- linear layers: y[t][o] = b[o] + sum_i x[t][i] * w[o][i] ----------- */

struct linear {
	const float *x, *w, *b;
	float *y;
	size_t n_in, n_out;
};

#ifndef INFS_HAVE_BLAS
/* Rows [begin, end) of y, four rows by four outputs at a time so that every
 * loaded element of x and w is used four times. */
static void linear_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
	const struct linear *l = ctx;
	size_t n_in = l->n_in, n_out = l->n_out, t = begin;
	for (; t + 4 <= end; t += 4) {
		const float *x0 = l->x + t * n_in, *x1 = x0 + n_in, *x2 = x1 + n_in, *x3 = x2 + n_in;
		size_t o = 0;
		for (; o + 4 <= n_out; o += 4) {
			const float *w0 = l->w + o * n_in, *w1 = w0 + n_in, *w2 = w1 + n_in,
			            *w3 = w2 + n_in;
			float a[4][4] = {{0}};
			for (size_t i = 0; i < n_in; i++) {
				float xs[4] = {x0[i], x1[i], x2[i], x3[i]};
				float ws[4] = {w0[i], w1[i], w2[i], w3[i]};
				for (int r = 0; r < 4; r++)
					for (int c = 0; c < 4; c++)
						a[r][c] += xs[r] * ws[c];
			}
			for (int r = 0; r < 4; r++)
				for (int c = 0; c < 4; c++)
					l->y[(t + r) * n_out + o + c] = a[r][c] + l->b[o + c];
		}
		for (; o < n_out; o++) {
			const float *wo = l->w + o * n_in;
			float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
			for (size_t i = 0; i < n_in; i++) {
				a0 += x0[i] * wo[i];
				a1 += x1[i] * wo[i];
				a2 += x2[i] * wo[i];
				a3 += x3[i] * wo[i];
			}
			l->y[t * n_out + o] = a0 + l->b[o];
			l->y[(t + 1) * n_out + o] = a1 + l->b[o];
			l->y[(t + 2) * n_out + o] = a2 + l->b[o];
			l->y[(t + 3) * n_out + o] = a3 + l->b[o];
		}
	}
	for (; t < end; t++) {
		const float *xt = l->x + t * n_in;
		for (size_t o = 0; o < n_out; o++) {
			const float *wo = l->w + o * n_in;
			float a = 0;
			for (size_t i = 0; i < n_in; i++)
				a += xt[i] * wo[i];
			l->y[t * n_out + o] = a + l->b[o];
		}
	}
}
#endif

static void linear(const float *x, size_t n_tok, size_t n_in, const float *w, const float *b,
                   size_t n_out, float *y, unsigned n_threads)
{
#ifdef INFS_HAVE_BLAS
	/* BLAS runs its own threads for the product. */
	(void)n_threads;
	for (size_t t = 0; t < n_tok; t++)
		memcpy(y + t * n_out, b, n_out * sizeof *y);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_tok, (int)n_out, (int)n_in,
	            1.0f, x, (int)n_in, w, (int)n_in, 1.0f, y, (int)n_out);
#else
	struct linear l = {x, w, b, y, n_in, n_out};
	parallel_for(n_threads, n_tok, linear_rows, &l);
#endif
}

/* ---- the rest of a layer ------------------------------------------------ */

static void layer_norm(float *x, const float *g, const float *b, size_t n, float eps)
{
	double mean = 0, var = 0;
	for (size_t i = 0; i < n; i++)
		mean += x[i];
	mean /= (double)n;
	for (size_t i = 0; i < n; i++)
		var += (x[i] - mean) * (x[i] - mean);
	float inv = (float)(1.0 / sqrt(var / (double)n + eps));
	for (size_t i = 0; i < n; i++)
		x[i] = ((float)(x[i] - mean)) * inv * g[i] + b[i];
}

struct job {
	const infs__bert_config *cfg;
	const infs__bert_weights *w;
	const infs__bert_layer *layer;
	const int32_t *ids;
	const uint32_t *offsets;
	float *h, *q, *k, *v, *ctx, *tmp, *up, *rows;
};

/* Sequences [begin, end): word + position + type embedding, then LayerNorm. */
static void embed_seqs(void *arg, size_t begin, size_t end, unsigned worker)
{
	const struct job *j = arg;
	size_t dim = j->cfg->dim;
	for (size_t s = begin; s < end; s++) {
		for (uint32_t t = j->offsets[s]; t < j->offsets[s + 1]; t++) {
			float *h = j->h + (size_t)t * dim;
			const float *we = j->w->word + (size_t)j->ids[t] * dim;
			const float *pe = j->w->pos + (size_t)(t - j->offsets[s]) * dim;
			for (size_t i = 0; i < dim; i++)
				h[i] = we[i] + pe[i] + j->w->type[i];
			layer_norm(h, j->w->ln_w, j->w->ln_b, dim, j->cfg->ln_eps);
		}
	}
}

/* (sequence, head) pairs [begin, end): softmax(q k^T / sqrt(d)) v, one query
 * row at a time, keys limited to the query's own sequence. */
static void attend(void *arg, size_t begin, size_t end, unsigned worker)
{
	const struct job *j = arg;
	size_t dim = j->cfg->dim, n_heads = j->cfg->n_heads, hd = dim / n_heads;
	float scale = 1.0f / sqrtf((float)hd);
	float *p = j->rows + (size_t)worker * j->cfg->n_pos;
	for (size_t item = begin; item < end; item++) {
		size_t s = item / n_heads, col = (item % n_heads) * hd;
		size_t first = j->offsets[s], len = j->offsets[s + 1] - first;
		for (size_t qi = 0; qi < len; qi++) {
			const float *q = j->q + (first + qi) * dim + col;
			float max = -INFINITY;
			for (size_t ki = 0; ki < len; ki++) {
				const float *k = j->k + (first + ki) * dim + col;
				float a = 0;
				for (size_t d = 0; d < hd; d++)
					a += q[d] * k[d];
				p[ki] = a * scale;
				if (p[ki] > max)
					max = p[ki];
			}
			float sum = 0;
			for (size_t ki = 0; ki < len; ki++) {
				p[ki] = expf(p[ki] - max);
				sum += p[ki];
			}
			float *c = j->ctx + (first + qi) * dim + col;
			for (size_t d = 0; d < hd; d++)
				c[d] = 0;
			for (size_t ki = 0; ki < len; ki++) {
				const float *v = j->v + (first + ki) * dim + col;
				float pk = p[ki] / sum;
				for (size_t d = 0; d < hd; d++)
					c[d] += pk * v[d];
			}
		}
	}
}

/* Tokens [begin, end): h = LayerNorm(h + tmp) with the first norm. */
static void residual_norm1(void *arg, size_t begin, size_t end, unsigned worker)
{
	const struct job *j = arg;
	size_t dim = j->cfg->dim;
	for (size_t t = begin; t < end; t++) {
		float *h = j->h + t * dim;
		const float *x = j->tmp + t * dim;
		for (size_t i = 0; i < dim; i++)
			h[i] += x[i];
		layer_norm(h, j->layer->ln1_w, j->layer->ln1_b, dim, j->cfg->ln_eps);
	}
}

static void residual_norm2(void *arg, size_t begin, size_t end, unsigned worker)
{
	const struct job *j = arg;
	size_t dim = j->cfg->dim;
	for (size_t t = begin; t < end; t++) {
		float *h = j->h + t * dim;
		const float *x = j->tmp + t * dim;
		for (size_t i = 0; i < dim; i++)
			h[i] += x[i];
		layer_norm(h, j->layer->ln2_w, j->layer->ln2_b, dim, j->cfg->ln_eps);
	}
}

/* Tokens [begin, end) of the FFN's hidden layer: exact GELU, x Phi(x). */
static void gelu_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
	const struct job *j = arg;
	size_t n = j->cfg->n_ffn;
	for (size_t i = begin * n; i < end * n; i++) {
		float x = j->up[i];
		j->up[i] = 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
	}
}

size_t infs__bert_scratch_floats(const infs__bert_config *cfg, uint32_t max_tokens,
                                 unsigned n_threads)
{
	if (n_threads < 1)
		n_threads = 1;
	if (n_threads > MAX_THREADS)
		n_threads = MAX_THREADS;
	/* h, q, k, v, ctx, the FFN's hidden layer, one score row per worker */
	return (size_t)max_tokens * (5 * (size_t)cfg->dim + cfg->n_ffn) +
	       (size_t)n_threads * cfg->n_pos;
}

void infs__bert_encode(const infs__bert_config *cfg, const infs__bert_weights *w,
                       const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
                       infs__bert_pooling pooling, int normalize, unsigned n_threads,
                       float *scratch, float *out)
{
	if (n_threads < 1)
		n_threads = 1;
	if (n_threads > MAX_THREADS)
		n_threads = MAX_THREADS;
	size_t dim = cfg->dim, n_tok = offsets[n_seq];
	struct job j = {.cfg = cfg, .w = w, .ids = ids, .offsets = offsets};
	j.h = scratch;
	j.q = j.h + n_tok * dim;
	j.k = j.q + n_tok * dim;
	j.v = j.k + n_tok * dim;
	j.ctx = j.v + n_tok * dim;
	j.up = j.ctx + n_tok * dim;
	j.rows = j.up + n_tok * cfg->n_ffn;
	j.tmp = j.q; /* q is dead once attention has run */

	parallel_for(n_threads, n_seq, embed_seqs, &j);
	for (uint32_t l = 0; l < cfg->n_layers; l++) {
		const infs__bert_layer *L = &w->layers[l];
		j.layer = L;
		linear(j.h, n_tok, dim, L->wq, L->bq, dim, j.q, n_threads);
		linear(j.h, n_tok, dim, L->wk, L->bk, dim, j.k, n_threads);
		linear(j.h, n_tok, dim, L->wv, L->bv, dim, j.v, n_threads);
		parallel_for(n_threads, (size_t)n_seq * cfg->n_heads, attend, &j);
		linear(j.ctx, n_tok, dim, L->wo, L->bo, dim, j.tmp, n_threads);
		parallel_for(n_threads, n_tok, residual_norm1, &j);
		linear(j.h, n_tok, dim, L->w_up, L->b_up, cfg->n_ffn, j.up, n_threads);
		parallel_for(n_threads, n_tok, gelu_rows, &j);
		linear(j.up, n_tok, cfg->n_ffn, L->w_down, L->b_down, dim, j.tmp, n_threads);
		parallel_for(n_threads, n_tok, residual_norm2, &j);
	}

	for (uint32_t s = 0; s < n_seq; s++) {
		size_t first = offsets[s], len = offsets[s + 1] - offsets[s];
		const float *h = j.h + first * dim;
		float *o = out + (size_t)s * dim;
		switch (pooling) {
		case INFS__POOL_CLS:
			memcpy(o, h, dim * sizeof *o);
			break;
		case INFS__POOL_MAX:
			memcpy(o, h, dim * sizeof *o);
			for (size_t t = 1; t < len; t++)
				for (size_t i = 0; i < dim; i++)
					if (h[t * dim + i] > o[i])
						o[i] = h[t * dim + i];
			break;
		case INFS__POOL_MEAN:
		case INFS__POOL_MEAN_SQRT_LEN:
			for (size_t i = 0; i < dim; i++) {
				float a = 0;
				for (size_t t = 0; t < len; t++)
					a += h[t * dim + i];
				o[i] = pooling == INFS__POOL_MEAN ? a / (float)len : a / sqrtf((float)len);
			}
			break;
		}
		if (normalize) {
			double n2 = 0;
			for (size_t i = 0; i < dim; i++)
				n2 += (double)o[i] * o[i];
			/* as torch.nn.functional.normalize: divide by max(norm, 1e-12) */
			float inv = (float)(1.0 / fmax(sqrt(n2), 1e-12));
			for (size_t i = 0; i < dim; i++)
				o[i] *= inv;
		}
	}
}

/* BERT encoder forward pass on packed sequences, float32 throughout.
 *
 * All tokens of a batch are rows of one [T][dim] matrix, so the linear layers
 * are single matrix products over the whole batch (CBLAS sgemm when built with
 * BLAS) and no work is spent on padding; only attention looks at sequence
 * boundaries. */
#include "embed/bert.h"

#include <math.h>
#include <string.h>

#include "model/matmul.h"

/* Tokens per task of the row-wise steps. */
#define ROWS_PER_TASK 16

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
	const float *norm_w, *norm_b; /* the LayerNorm residual_norm applies: the layer's first or second */
	const int32_t *ids;
	const uint32_t *offsets;
	size_t n_tok;
	float *h, *q, *k, *v, *ctx, *tmp, *up, *rows;
};

static size_t rows_end(const struct job *j, uint32_t task)
{
	size_t end = ((size_t)task + 1) * ROWS_PER_TASK;
	return end < j->n_tok ? end : j->n_tok;
}

/* Sequence s: word + position + type embedding, then LayerNorm. */
static void embed_seq(void *arg, uint32_t s, uint32_t worker)
{
	const struct job *j = arg;
	size_t dim = j->cfg->dim;
	for (uint32_t t = j->offsets[s]; t < j->offsets[s + 1]; t++) {
		float *h = j->h + (size_t)t * dim;
		const float *we = j->w->word + (size_t)j->ids[t] * dim;
		const float *pe = j->w->pos + (size_t)(t - j->offsets[s]) * dim;
		for (size_t i = 0; i < dim; i++)
			h[i] = we[i] + pe[i] + j->w->type[i];
		layer_norm(h, j->w->ln_w, j->w->ln_b, dim, j->cfg->ln_eps);
	}
}

/* Independent partial sums, so that the compiler can vectorise the loop
 * without reassociating float additions. */
#define LANES 8

static float dot(const float *a, const float *b, size_t n)
{
	float acc[LANES] = {0};
	size_t i = 0;
	for (; i + LANES <= n; i += LANES)
		for (size_t l = 0; l < LANES; l++)
			acc[l] += a[i + l] * b[i + l];
	float s = 0;
	for (size_t l = 0; l < LANES; l++)
		s += acc[l];
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* One (sequence, head) pair: softmax(q k^T / sqrt(d)) v, one query row at a
 * time, keys limited to the query's own sequence. */
static void attend(void *arg, uint32_t item, uint32_t worker)
{
	const struct job *j = arg;
	size_t dim = j->cfg->dim, n_heads = j->cfg->n_heads, hd = dim / n_heads;
	float scale = 1.0f / sqrtf((float)hd);
	float *p = j->rows + (size_t)worker * j->cfg->n_pos;
	size_t s = item / n_heads, col = (item % n_heads) * hd;
	size_t first = j->offsets[s], len = j->offsets[s + 1] - first;
	for (size_t qi = 0; qi < len; qi++) {
		const float *q = j->q + (first + qi) * dim + col;
		float max = -INFINITY;
		for (size_t ki = 0; ki < len; ki++) {
			p[ki] = dot(q, j->k + (first + ki) * dim + col, hd) * scale;
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

/* The tokens of one task: h = LayerNorm(h + tmp) with the job's norm. */
static void residual_norm(void *arg, uint32_t task, uint32_t worker)
{
	const struct job *j = arg;
	size_t dim = j->cfg->dim, end = rows_end(j, task);
	for (size_t t = (size_t)task * ROWS_PER_TASK; t < end; t++) {
		float *h = j->h + t * dim;
		const float *x = j->tmp + t * dim;
		for (size_t i = 0; i < dim; i++)
			h[i] += x[i];
		layer_norm(h, j->norm_w, j->norm_b, dim, j->cfg->ln_eps);
	}
}

/* The tokens of one task in the FFN's hidden layer: exact GELU, x Phi(x). */
static void gelu_rows(void *arg, uint32_t task, uint32_t worker)
{
	const struct job *j = arg;
	size_t n = j->cfg->n_ffn;
	for (size_t i = (size_t)task * ROWS_PER_TASK * n; i < rows_end(j, task) * n; i++) {
		float x = j->up[i];
		j->up[i] = 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
	}
}

size_t infs__bert_scratch_floats(const infs__bert_config *cfg, uint32_t max_tokens,
                                 uint32_t n_threads)
{
	/* h, q, k, v, ctx, the FFN's hidden layer, one score row per worker */
	return (size_t)max_tokens * (5 * (size_t)cfg->dim + cfg->n_ffn) +
	       (size_t)n_threads * cfg->n_pos;
}

void infs__bert_encode(const infs__bert_config *cfg, const infs__bert_weights *w,
                       const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
                       infs__bert_pooling pooling, int normalize, infs__pool *pool,
                       float *scratch, float *out)
{
	size_t dim = cfg->dim, n_tok = offsets[n_seq];
	uint32_t row_tasks = (uint32_t)((n_tok + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
	struct job j = {.cfg = cfg, .w = w, .ids = ids, .offsets = offsets, .n_tok = n_tok};
	j.h = scratch;
	j.q = j.h + n_tok * dim;
	j.k = j.q + n_tok * dim;
	j.v = j.k + n_tok * dim;
	j.ctx = j.v + n_tok * dim;
	j.up = j.ctx + n_tok * dim;
	j.rows = j.up + n_tok * cfg->n_ffn;
	j.tmp = j.q; /* q is dead once attention has run */

	infs__pool_run(pool, embed_seq, &j, n_seq);
	for (uint32_t l = 0; l < cfg->n_layers; l++) {
		const infs__bert_layer *L = &w->layers[l];
		uint32_t n = (uint32_t)n_tok, d = cfg->dim, f = cfg->n_ffn;
		j.layer = L;
		infs__matmul(j.q, j.h, L->wq, L->bq, n, d, d, pool);
		infs__matmul(j.k, j.h, L->wk, L->bk, n, d, d, pool);
		infs__matmul(j.v, j.h, L->wv, L->bv, n, d, d, pool);
		infs__pool_run(pool, attend, &j, n_seq * cfg->n_heads);
		infs__matmul(j.tmp, j.ctx, L->wo, L->bo, n, d, d, pool);
		j.norm_w = L->ln1_w, j.norm_b = L->ln1_b;
		infs__pool_run(pool, residual_norm, &j, row_tasks);
		infs__matmul(j.up, j.h, L->w_up, L->b_up, n, d, f, pool);
		infs__pool_run(pool, gelu_rows, &j, row_tasks);
		infs__matmul(j.tmp, j.up, L->w_down, L->b_down, n, f, d, pool);
		j.norm_w = L->ln2_w, j.norm_b = L->ln2_b;
		infs__pool_run(pool, residual_norm, &j, row_tasks);
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

/* The decoder's forward pass on the CPU, activations in f32 (weights as the
 * model keeps them, model/qmatmul.h): embeddings, per layer
 * RMSNorm -> q/k/v (+ bias, + Qwen3 q/k norm) -> RoPE -> grouped-query
 * attention -> output projection -> residual -> RMSNorm -> SwiGLU MLP ->
 * residual, then the final norm and the output head. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/dtype.h"
#include "util/error.h"
#include "util/f16_rows.h"
#include "util/options.h"
#include "model/forward.h"
#include "model/qmatmul.h"
#include "model/recompute_select.h"

/* Bound one call's scratch; longer inputs are fed in several calls over a
 * paged cache. */
#define MAX_TOKENS (1u << 20)
#define MAX_CONTEXT (1u << 24)

static void rmsnorm(float *out, const float *x, const float *w, uint32_t d, float eps)
{
	double ss = 0;
	for (uint32_t i = 0; i < d; i++)
		ss += (double)x[i] * x[i];
	float r = 1.0f / sqrtf((float)(ss / d) + eps);
	for (uint32_t i = 0; i < d; i++)
		out[i] = w[i] * (x[i] * r);
}

/* Element (pos, head h, dim 0) of layer l in a paged cache, and the
 * stride between dims in bytes. */
static char *cache_row(const infs_kv_layout *c, void *const *layers, uint32_t l, uint32_t pos,
                       const int32_t *table, uint32_t h)
{
	int64_t b = table[pos / c->block_size], s = pos % c->block_size;
	int64_t off = b * c->stride_block + s * c->stride_slot + (int64_t)h * c->stride_head;
	return (char *)layers[l] + off * (int64_t)infs_dtype_size(c->dtype);
}

/* Copies head rows between the cache and f32 rows of head_dim floats. */
static void cache_gather(float *dst, const infs_kv_layout *c, void *const *layers, uint32_t l, uint32_t pos,
                         const int32_t *table, uint32_t h)
{
	const char *src = cache_row(c, layers, l, pos, table, h);
	int64_t step = c->stride_dim * (int64_t)infs_dtype_size(c->dtype);
	if (c->dtype == INFS_DTYPE_F16 && step == 2) {
		infs__f16_to_f32_n(dst, (const uint16_t *)src, c->head_dim);
		return;
	}
	for (uint32_t e = 0; e < c->head_dim; e++, src += step)
		dst[e] = infs__load(src, c->dtype, 0);
}

static void cache_scatter(const infs_kv_layout *c, void *const *layers, uint32_t l, uint32_t pos,
                          const int32_t *table, uint32_t h, const float *src)
{
	char *dst = cache_row(c, layers, l, pos, table, h);
	int64_t step = c->stride_dim * (int64_t)infs_dtype_size(c->dtype);
	for (uint32_t e = 0; e < c->head_dim; e++, dst += step)
		infs__store(dst, c->dtype, 0, src[e]);
}

static int check_block(const infs__paged_kv *pk, uint64_t pos, const char *what)
{
	const infs_kv_layout *c = pk->cache;
	uint64_t bi = pos / c->block_size;
	if (bi >= pk->block_table_len)
		return infs__error(INFS_ERANGE, "infs_model_forward: %s position %llu needs block table entry %llu of %zu",
		                   what, (unsigned long long)pos, (unsigned long long)bi, pk->block_table_len);
	int32_t b = pk->block_table[bi];
	if (b < 0 || (uint32_t)b >= c->n_blocks)
		return infs__error(INFS_ERANGE, "infs_model_forward: block table entry %llu is block %d, not in 0..%u",
		                   (unsigned long long)bi, b, c->n_blocks - 1);
	return INFS_OK;
}

static int check_args(const infs_model *m, const infs__forward_args *a)
{
	const infs__model_config *c = &m->cfg;
	if (!a->tokens)
		return infs__error(INFS_EINVAL, "infs_model_forward: tokens is NULL");
	if (a->n_tokens == 0 || a->n_tokens > MAX_TOKENS)
		return infs__error(INFS_EINVAL, "infs_model_forward: n_tokens %u is not in 1..%u", a->n_tokens,
		                   MAX_TOKENS);
	for (uint32_t i = 0; i < a->n_tokens; i++)
		if (a->tokens[i] < 0 || (uint32_t)a->tokens[i] >= c->n_vocab)
			return infs__error(INFS_ERANGE, "infs_model_forward: token %u is %d, not in 0..%u", i,
			                   a->tokens[i], c->n_vocab - 1);
	for (uint32_t i = 0; a->positions && i < a->n_tokens; i++)
		if (a->positions[i] < 0)
			return infs__error(INFS_ERANGE, "infs_model_forward: position %u is %d", i, a->positions[i]);
	if ((a->k_out || a->v_out) && infs_dtype_size(a->kv_dtype) == 0)
		return infs__error(INFS_EINVAL, "infs_model_forward: unknown kv_dtype %d", (int)a->kv_dtype);
	if ((a->k_out || a->v_out) && !infs__dtype_cache_ok(a->kv_dtype))
		return infs__error(INFS_EUNSUPPORTED, "infs_model_forward: kv_dtype %s", INFS__FP8_CACHE_MSG);
	const infs__paged_kv *pk = a->past;
	if (a->seq && pk && pk->write)
		return infs__error(INFS_EINVAL, "infs_model_forward: seq_ids (independent sequences) cannot be combined with "
		                                "write_cache (they may read a cache they share)");
	if (!pk || !pk->cache) {
		if (pk && (pk->n_past || pk->write))
			return infs__error(INFS_EINVAL, "infs_model_forward: n_past or write_cache without a cache");
		return INFS_OK;
	}
	const infs_kv_layout *kl = pk->cache;
	if (kl->device != -1)
		return infs__error(INFS_EUNSUPPORTED, "infs_model_forward: the CPU forward pass needs a host cache (device -1), not device %d",
		                   kl->device);
	if (infs_dtype_size(kl->dtype) == 0)
		return infs__error(INFS_EINVAL, "infs_model_forward: cache dtype %d is unknown", (int)kl->dtype);
	if (!infs__dtype_cache_ok(kl->dtype))
		return infs__error(INFS_EUNSUPPORTED, "infs_model_forward: cache dtype %s", INFS__FP8_CACHE_MSG);
	if (kl->n_layers != c->n_layers || kl->n_kv_heads != c->n_kv_heads || kl->head_dim != c->head_dim)
		return infs__error(INFS_EMISMATCH, "infs_model_forward: cache is %u layers x %u KV heads x %u, the model %u x %u x %u",
		                   kl->n_layers, kl->n_kv_heads, kl->head_dim, c->n_layers, c->n_kv_heads, c->head_dim);
	if (kl->block_size == 0 || kl->n_blocks == 0)
		return infs__error(INFS_EINVAL, "infs_model_forward: cache has block_size %u, n_blocks %u",
		                   kl->block_size, kl->n_blocks);
	if (!kl->k_layers || !kl->v_layers)
		return infs__error(INFS_EINVAL, "infs_model_forward: cache k_layers or v_layers is NULL");
	for (uint32_t l = 0; l < c->n_layers; l++)
		if (!kl->k_layers[l] || !kl->v_layers[l])
			return infs__error(INFS_EINVAL, "infs_model_forward: cache layer %u pointer is NULL", l);
	if ((pk->n_past || pk->write) && !pk->block_table)
		return infs__error(INFS_EINVAL, "infs_model_forward: block_table is NULL");
	for (uint32_t p = 0; p < pk->n_past; p += kl->block_size) {
		int rc = check_block(pk, p, "cached");
		if (rc)
			return rc;
	}
	if (pk->n_past > MAX_CONTEXT - a->n_tokens)
		return infs__error(INFS_ERANGE, "infs_model_forward: n_past %u + %u tokens is above %u", pk->n_past,
		                   a->n_tokens, MAX_CONTEXT);
	if (pk->n_past) {
		int rc = check_block(pk, pk->n_past - 1, "cached");
		if (rc)
			return rc;
	}
	for (uint32_t i = 0; pk->write && i < a->n_tokens; i++) {
		int rc = check_block(pk, a->positions ? (uint32_t)a->positions[i] : i, "new token");
		if (rc)
			return rc;
	}
	return INFS_OK;
}

/* Scratch of one call, allocated before anything is written. */
typedef struct scratch {
	float *x, *xb, *q, *k, *v, *att, *gate, *up, *cos, *sin, *attn_rows;
	int32_t *pos;
	float *kn, *vn;             /* several sequences: the rows' new K and V */
} scratch;

static void scratch_free(scratch *s)
{
	free(s->x);
	free(s->xb);
	free(s->q);
	free(s->k);
	free(s->v);
	free(s->att);
	free(s->gate);
	free(s->up);
	free(s->cos);
	free(s->sin);
	free(s->attn_rows);
	free(s->pos);
	free(s->kn);
	free(s->vn);
}

static float *alloc_f(size_t n, int *fail)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	if (!p)
		*fail = 1;
	return p;
}

/* Scratch for n rows over n_ctx keys, and the rows started: each token's
 * embedding, position (positions NULL: 0, 1, ...) and cos/sin. Returns
 * nonzero (everything freed) when memory runs out. */
static int scratch_start(scratch *s, const infs_model *m, const int32_t *tokens, const int32_t *positions,
                         uint32_t n, size_t n_ctx, infs__pool *pool)
{
	const infs__model_config *c = &m->cfg;
	const uint32_t d = c->n_embd, np = m->rope.n_pairs;
	const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
	int fail = 0;
	s->kn = s->vn = NULL;
	s->x = alloc_f((size_t)n * d, &fail);
	s->xb = alloc_f((size_t)n * d, &fail);
	s->q = alloc_f(n * qd, &fail);
	s->k = alloc_f(n_ctx * kvd, &fail);
	s->v = alloc_f(n_ctx * kvd, &fail);
	s->att = alloc_f(n * qd, &fail);
	s->gate = alloc_f((size_t)n * c->n_ff, &fail);
	s->up = alloc_f((size_t)n * c->n_ff, &fail);
	s->cos = alloc_f((size_t)n * np, &fail);
	s->sin = alloc_f((size_t)n * np, &fail);
	s->attn_rows = alloc_f((size_t)infs__pool_size(pool) * n_ctx, &fail);
	s->pos = malloc((size_t)n * sizeof *s->pos);
	if (fail || !s->pos) {
		scratch_free(s);
		return -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		s->pos[i] = positions ? positions[i] : (int32_t)i;
		infs__rope_cos_sin(&m->rope, s->pos[i], s->cos + (size_t)i * np, s->sin + (size_t)i * np);
		infs__wmat_row(s->x + (size_t)i * d, &m->tok_embd, (uint32_t)tokens[i]);
	}
	return 0;
}

static void put_kv(void *out, infs_dtype dt, const infs__model_config *c, uint32_t l, uint32_t n,
                   const float *src)
{
	size_t row = (size_t)c->n_kv_heads * c->head_dim, base = (size_t)l * n * row;
	for (size_t i = 0; i < (size_t)n * row; i++)
		infs__store(out, dt, base + i, src[i]);
}

/* The cache's positions [0, n_past) of layer l into the scratch's first
 * rows. */
static void gather_past(const infs_kv_layout *kl, const infs__paged_kv *pk, uint32_t l, scratch *s)
{
	const size_t hd = kl->head_dim, kvd = (size_t)kl->n_kv_heads * hd;
	/* A position's heads one f16 row, a block's slots one after another
	 * (the engine's layout): each block's run of positions in one go. */
	if (kl->dtype == INFS_DTYPE_F16 && kl->stride_dim == 1 && kl->stride_head == (int64_t)hd &&
	    kl->stride_slot == (int64_t)kvd) {
		for (uint32_t p = 0, n; p < pk->n_past; p += n) {
			n = kl->block_size - p % kl->block_size;
			n = n < pk->n_past - p ? n : pk->n_past - p;
			const void *k = cache_row(kl, kl->k_layers, l, p, pk->block_table, 0);
			const void *v = cache_row(kl, kl->v_layers, l, p, pk->block_table, 0);
			infs__f16_to_f32_n(s->k + (size_t)p * kvd, k, n * kvd);
			infs__f16_to_f32_n(s->v + (size_t)p * kvd, v, n * kvd);
		}
		return;
	}
	for (uint32_t p = 0; p < pk->n_past; p++)
		for (uint32_t h = 0; h < kl->n_kv_heads; h++) {
			size_t o = (size_t)p * kvd + (size_t)h * hd;
			cache_gather(s->k + o, kl, kl->k_layers, l, p, pk->block_table, h);
			cache_gather(s->v + o, kl, kl->v_layers, l, p, pk->block_table, h);
		}
}

/* Whether layer l's past can be read where it lies (an f16 cache with a
 * slot's heads as one row), and where: into *out. */
static int past_in_place(infs__attn_past *out, const infs_kv_layout *kl, const infs__paged_kv *pk, uint32_t l)
{
	if (kl->dtype != INFS_DTYPE_F16 || kl->stride_dim != 1 || kl->stride_head != (int64_t)kl->head_dim ||
	    kl->stride_slot != (int64_t)kl->n_kv_heads * kl->head_dim || kl->stride_block < 0)
		return 0;
	*out = (infs__attn_past){ kl->k_layers[l], kl->v_layers[l], pk->block_table, kl->block_size,
		                  (size_t)kl->stride_block, (size_t)kl->stride_slot };
	return 1;
}

/* The n rows' K and V of layer l into the cache at their positions pos,
 * when the cache is written. */
static void scatter_rows(const infs_kv_layout *kl, const infs__paged_kv *pk, uint32_t l, const int32_t *pos,
                         uint32_t n, const float *k_new, const float *v_new)
{
	const size_t hd = kl->head_dim, kvd = (size_t)kl->n_kv_heads * hd;
	for (uint32_t i = 0; pk->write && i < n; i++)
		for (uint32_t h = 0; h < kl->n_kv_heads; h++) {
			size_t o = (size_t)i * kvd + (size_t)h * hd;
			uint32_t p = (uint32_t)pos[i];
			cache_scatter(kl, kl->k_layers, l, p, pk->block_table, h, k_new + o);
			cache_scatter(kl, kl->v_layers, l, p, pk->block_table, h, v_new + o);
		}
}

/* What one layer reads and writes besides the scratch: the cache (NULL:
 * none); in_place: the rows' positions are already in the cache, their
 * new K/V overwrite it and the attention reads only the cache; pre-RoPE
 * K/V outputs; dev (NULL, or a float per row): for the first n_dev rows,
 * the squared distance of each row's new rotated keys from the cache's
 * before they are overwritten. */
typedef struct layer_io {
	const infs__paged_kv *pk;
	int in_place;
	const int32_t *seq;
	void *k_out, *v_out;
	infs_dtype kv_dtype;
	float *dev;
	uint32_t n_dev;
	const infs__calib *calib;
	const infs__seqs *seqs;     /* several sequences over pk->cache (s->kn, s->vn) */
} layer_io;

/* Attention of layer l sequence by sequence: each one's past gathered from
 * its blocks, its rows' new K/V (k_new, v_new, rotated) written there and
 * appended, its rows attending to both. */
static void attend_seqs(const infs_model *m, uint32_t l, scratch *s, const layer_io *io, const float *k_new,
                        const float *v_new, infs__pool *pool)
{
	const infs__model_config *c = &m->cfg;
	const infs__seqs *sq = io->seqs;
	const infs_kv_layout *kl = io->pk->cache;
	const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
	for (uint32_t q = 0; q < sq->n; q++) {
		const uint32_t b = (uint32_t)sq->starts[q], n = (uint32_t)sq->starts[q + 1] - b;
		const uint32_t n_past = (uint32_t)sq->n_past[q];
		const infs__paged_kv pk = { kl, sq->tables + q * sq->stride, sq->stride, n_past, io->pk->write };
		gather_past(kl, &pk, l, s);
		memcpy(s->k + (size_t)n_past * kvd, k_new + b * kvd, n * kvd * sizeof(float));
		memcpy(s->v + (size_t)n_past * kvd, v_new + b * kvd, n * kvd * sizeof(float));
		scatter_rows(kl, &pk, l, s->pos + b, n, k_new + b * kvd, v_new + b * kvd);
		infs__attn_args aa = { s->att + b * qd, s->q + b * qd, s->k, s->v, s->pos + b, n, n_past + n, c->n_heads,
			               c->n_kv_heads, c->head_dim, c->sliding_window, NULL, s->attn_rows, 0,
			               io->calib ? &io->calib[q] : NULL, NULL };
		infs__attention(&aa, pool);
	}
}

/* Layer l over the n rows of s->x at s->pos (s->cos, s->sin): RMSNorm ->
 * q/k/v -> RoPE -> attention over the cache and the rows -> output
 * projection and residual -> RMSNorm -> SwiGLU -> residual. */
static void run_layer(const infs_model *m, uint32_t l, scratch *s, uint32_t n, const layer_io *io,
                      infs__pool *pool)
{
	const infs__model_config *c = &m->cfg;
	const infs__layer *L = &m->layers[l];
	const infs__paged_kv *pk = io->pk;
	const uint32_t d = c->n_embd, hd = c->head_dim, np = m->rope.n_pairs, n_past = pk ? pk->n_past : 0;
	const size_t qd = (size_t)c->n_heads * hd, kvd = (size_t)c->n_kv_heads * hd;
	float *k_new = s->k + (size_t)n_past * kvd, *v_new = s->v + (size_t)n_past * kvd;
	if (io->seqs) {
		k_new = s->kn;
		v_new = s->vn;
	}
	for (uint32_t i = 0; i < n; i++)
		rmsnorm(s->xb + (size_t)i * d, s->x + (size_t)i * d, L->attn_norm, d, c->norm_eps);
	{
		float *const ys[3] = { s->q, k_new, v_new };
		const infs__wmat *const ws[3] = { &L->wq, &L->wk, &L->wv };
		const float *const bs[3] = { L->bq, L->bk, L->bv };
		infs__matmul_w_multi(ys, s->xb, ws, bs, 3, n, pool);
	}
	if (c->qk_norm) {
		for (size_t r = 0; r < (size_t)n * c->n_heads; r++)
			rmsnorm(s->q + r * hd, s->q + r * hd, L->q_norm, hd, c->norm_eps);
		for (size_t r = 0; r < (size_t)n * c->n_kv_heads; r++)
			rmsnorm(k_new + r * hd, k_new + r * hd, L->k_norm, hd, c->norm_eps);
	}
	if (io->k_out)
		put_kv(io->k_out, io->kv_dtype, c, l, n, k_new);
	if (io->v_out)
		put_kv(io->v_out, io->kv_dtype, c, l, n, v_new);
	for (uint32_t i = 0; i < n; i++) {
		const float *cs = s->cos + (size_t)i * np, *sn = s->sin + (size_t)i * np;
		for (uint32_t h = 0; h < c->n_heads; h++)
			infs__rope_apply(&m->rope, s->q + i * qd + (size_t)h * hd, cs, sn);
		for (uint32_t h = 0; h < c->n_kv_heads; h++)
			infs__rope_apply(&m->rope, k_new + i * kvd + (size_t)h * hd, cs, sn);
	}
	if (io->seqs) {
		attend_seqs(m, l, s, io, k_new, v_new, pool);
	} else if (pk) {
		const infs_kv_layout *kl = pk->cache;
		for (uint32_t i = 0; io->dev && i < io->n_dev; i++) {
			double sum = 0;
			for (uint32_t h = 0; h < c->n_kv_heads; h++) {
				float *old = s->att; /* free until the attention */
				cache_gather(old, kl, kl->k_layers, l, (uint32_t)s->pos[i], pk->block_table, h);
				for (uint32_t e = 0; e < hd; e++) {
					double t = (double)k_new[i * kvd + (size_t)h * hd + e] - old[e];
					sum += t * t;
				}
			}
			io->dev[i] = (float)sum;
		}
	}
	infs__attn_args aa = { s->att, s->q, s->k, s->v, s->pos, n, io->in_place ? n_past : n_past + n, c->n_heads,
		               c->n_kv_heads, hd, c->sliding_window, io->seq, s->attn_rows, io->in_place, io->calib, NULL };
	int attended = io->seqs != NULL; /* attend_seqs has attended */
	if (pk && !io->seqs) {
		/* In place the rows' own positions take their new K/V before the
		 * cache is read; otherwise the cache is read first: gathered, or
		 * where it lies by the attention of a few rows. */
		const infs_kv_layout *kl = pk->cache;
		if (io->in_place)
			scatter_rows(kl, pk, l, s->pos, n, k_new, v_new);
		infs__attn_past past;
		if (!io->in_place && !io->seq && past_in_place(&past, kl, pk, l)) {
			aa.past = &past;
			attended = infs__attention_few(&aa, pool, 1) == 0;
			aa.past = NULL;
		}
		if (!attended)
			gather_past(kl, pk, l, s);
		if (!io->in_place)
			scatter_rows(kl, pk, l, s->pos, n, k_new, v_new);
	}
	if (!attended)
		infs__attention(&aa, pool);
	infs__matmul_w(s->xb, s->att, &L->wo, L->bo, n, pool);
	for (size_t i = 0; i < (size_t)n * d; i++)
		s->x[i] += s->xb[i];

	for (uint32_t i = 0; i < n; i++)
		rmsnorm(s->xb + (size_t)i * d, s->x + (size_t)i * d, L->ffn_norm, d, c->norm_eps);
	{
		float *const ys[2] = { s->gate, s->up };
		const infs__wmat *const ws[2] = { &L->w_gate, &L->w_up };
		const float *const bs[2] = { NULL, NULL };
		infs__matmul_w_multi(ys, s->xb, ws, bs, 2, n, pool);
	}
	for (size_t i = 0; i < (size_t)n * c->n_ff; i++) {
		float g = s->gate[i];
		s->gate[i] = g / (1.0f + expf(-g)) * s->up[i];
	}
	infs__matmul_w(s->xb, s->gate, &L->w_down, NULL, n, pool);
	for (size_t i = 0; i < (size_t)n * d; i++)
		s->x[i] += s->xb[i];
}

/* infs__forward over several sequences (a->seqs): every argument checked
 * as for each sequence alone, then the layers run over all the rows at
 * once, each sequence attending to its own past. */
static int forward_seqs(const infs_model *m, const infs__forward_args *a)
{
	static const char fn[] = "infs_model_forward";
	const infs__model_config *c = &m->cfg;
	const infs__seqs *sq = a->seqs;
	const infs__paged_kv *past = a->past;
	if (!sq->n || !sq->starts || !sq->n_past || !sq->tables || !sq->stride || !a->tokens)
		return infs__error(INFS_EINVAL, "%s: %u sequences: starts, n_past, tables, a table stride and tokens are needed",
		                   fn, sq->n);
	if (a->positions || a->seq || a->k_out || a->v_out || a->all_logits || !past || !past->cache)
		return infs__error(INFS_EINVAL, "%s: several sequences take a cache, and no positions, sequence ids, "
		                                "K/V outputs or all logits", fn);
	if (sq->starts[0] != 0 || (uint32_t)sq->starts[sq->n] != a->n_tokens)
		return infs__error(INFS_EINVAL, "%s: the sequences' tokens run from %d to %d, not 0 to %u", fn,
		                   sq->starts[0], sq->starts[sq->n], a->n_tokens);
	int32_t *pos = malloc((size_t)(a->n_tokens ? a->n_tokens : 1) * sizeof *pos);
	if (!pos)
		return infs__error(INFS_ENOMEM, "%s: out of memory for %u tokens", fn, a->n_tokens);
	int rc = INFS_OK;
	size_t n_ctx = 0;
	for (uint32_t q = 0; q < sq->n && !rc; q++) {
		const int32_t b = sq->starts[q], e = sq->starts[q + 1];
		if (e <= b || sq->n_past[q] < 0) {
			rc = infs__error(INFS_EINVAL, "%s: sequence %u has tokens [%d, %d) after %d cached positions", fn, q,
			                 b, e, sq->n_past[q]);
			break;
		}
		for (int32_t i = b; i < e; i++)
			pos[i] = sq->n_past[q] + (i - b);
		/* Each sequence as a call of its own would be checked. */
		const infs__paged_kv pk = { past->cache, sq->tables + q * sq->stride, sq->stride, (uint32_t)sq->n_past[q],
			                    past->write };
		const infs__forward_args one = { .tokens = a->tokens + b, .positions = pos + b, .n_tokens = (uint32_t)(e - b),
			                         .kv_dtype = INFS_DTYPE_F32, .past = &pk };
		if ((rc = check_args(m, &one)))
			break;
		n_ctx = (size_t)sq->n_past[q] + (e - b) > n_ctx ? (size_t)sq->n_past[q] + (e - b) : n_ctx;
	}
	infs__pool *pool = a->pool, *borrowed = NULL;
	if (!rc && !pool)
		rc = infs__pool_borrow(m->pool, m->n_threads, &borrowed);
	pool = pool ? pool : borrowed;
	const uint32_t n = a->n_tokens, d = c->n_embd;
	const size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
	scratch s;
	int have_s = !rc && !scratch_start(&s, m, a->tokens, pos, n, n_ctx, pool);
	if (have_s) {
		int fail = 0;
		s.kn = alloc_f(n * kvd, &fail);
		s.vn = alloc_f(n * kvd, &fail);
		if (fail) {
			scratch_free(&s);
			have_s = 0;
		}
	}
	if (!rc && !have_s)
		rc = infs__error(INFS_ENOMEM, "%s: out of memory for %u tokens", fn, n);
	for (uint32_t l = 0; !rc && l < c->n_layers; l++) {
		const layer_io io = { .pk = past, .kv_dtype = INFS_DTYPE_F32, .calib = a->calib, .seqs = sq };
		run_layer(m, l, &s, n, &io, pool);
	}
	if (!rc && a->logits) {
		for (uint32_t q = 0; q < sq->n; q++)
			rmsnorm(s.xb + (size_t)q * d, s.x + (size_t)(sq->starts[q + 1] - 1) * d, m->out_norm, d, c->norm_eps);
		infs__matmul_w(a->logits, s.xb, &m->output, NULL, sq->n, pool);
	}
	if (have_s)
		scratch_free(&s);
	free(pos);
	infs__pool_give_back(m->pool, borrowed);
	return rc;
}

int infs__forward(const infs_model *m, const infs__forward_args *a)
{
	if (!m)
		return infs__error(INFS_EINVAL, "infs_model_forward: model is NULL");
	if (!a)
		return infs__error(INFS_EINVAL, "infs_model_forward: arguments are NULL");
	if (!m->tok_embd.data)
		return infs__error(INFS_EINVAL, "infs_model_forward: the model has no host weights (a benchmark's "
		                                "random model, on device %d only: use infs_model_forward_device)",
		                   m->device);
	if (a->seqs)
		return forward_seqs(m, a);
	int rc = check_args(m, a);
	if (rc)
		return rc;
	const infs__model_config *c = &m->cfg;
	const infs__paged_kv *pk = a->past && a->past->cache ? a->past : NULL;
	uint32_t n = a->n_tokens, d = c->n_embd, n_ctx = (pk ? pk->n_past : 0) + n;
	infs__pool *pool = a->pool, *borrowed = NULL;
	if (!pool && (rc = infs__pool_borrow(m->pool, m->n_threads, &borrowed)))
		return rc;
	pool = pool ? pool : borrowed;
	scratch s;
	if (scratch_start(&s, m, a->tokens, a->positions, n, n_ctx, pool)) {
		infs__pool_give_back(m->pool, borrowed);
		return infs__error(INFS_ENOMEM, "infs_model_forward: out of memory for %u tokens", n);
	}

	for (uint32_t l = 0; l < c->n_layers; l++) {
		const layer_io io = { pk, 0, a->seq, a->k_out, a->v_out, a->kv_dtype, NULL, 0, a->calib, NULL };
		run_layer(m, l, &s, n, &io, pool);
	}

	if (a->logits) {
		uint32_t first = a->all_logits ? 0 : n - 1, rows = n - first;
		for (uint32_t i = first; i < n; i++)
			rmsnorm(s.xb + (size_t)(i - first) * d, s.x + (size_t)i * d, m->out_norm, d, c->norm_eps);
		infs__matmul_w(a->logits, s.xb, &m->output, NULL, rows, pool);
	}
	scratch_free(&s);
	infs__pool_give_back(m->pool, borrowed);
	return INFS_OK;
}

INFS__DEFINE_INIT(infs_forward_options_init, infs_forward_options, infs__sizes_forward_options, INFS_FORWARD_OPTIONS_INIT)

int infs_model_forward(float *logits, void *k_out, void *v_out, const infs_model *model,
                       const int32_t *tokens, const int32_t *positions, uint32_t n_tokens,
                       const infs_forward_options *opts)
{
	infs_forward_options o = INFS_FORWARD_OPTIONS_INIT;
	int rc = INFS__TAKE(o, opts, infs__sizes_forward_options, "infs_model_forward", "options");
	if (rc)
		return rc;
	infs_kv_layout cache = INFS_KV_LAYOUT_INIT;
	if (o.cache) {
		rc = INFS__TAKE(cache, o.cache, infs__sizes_kv_layout, "infs_model_forward", "cache layout");
		if (rc)
			return rc;
		o.cache = &cache;
	}
	infs__paged_kv pk = { o.cache, o.block_table, o.block_table_len, o.n_past, o.write_cache };
	infs__forward_args a = { tokens, positions, n_tokens, logits, o.all_logits, k_out, v_out,
	                         o.kv_dtype, o.seq_ids, &pk, NULL, NULL, NULL };
	return infs__forward(model, &a);
}

/* mass[p] += the attention probability that rows [first, n) of s (after
 * run_layer in place over n_ctx cached positions) give position p, summed
 * over those rows and the heads: the softmax of infs__attention, again. */
static void query_mass(double *mass, const infs_model *m, const scratch *s, uint32_t first, uint32_t n,
                       uint32_t n_ctx)
{
	const infs__model_config *c = &m->cfg;
	const uint32_t hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
	const size_t qd = (size_t)c->n_heads * hd, kvd = (size_t)c->n_kv_heads * hd;
	const float scale = 1.0f / sqrtf((float)hd);
	float *sc = s->attn_rows; /* n_ctx floats, free after the layer */
	for (uint32_t i = first; i < n; i++) {
		const int64_t p = s->pos[i];
		uint32_t lo = c->sliding_window && p >= c->sliding_window ? (uint32_t)(p - c->sliding_window + 1) : 0;
		uint32_t hi = p < n_ctx ? (uint32_t)p + 1 : n_ctx;
		for (uint32_t h = 0; h < c->n_heads; h++) {
			const float *q = s->q + i * qd + (size_t)h * hd, *k = s->k + (size_t)(h / group) * hd;
			float mx = -INFINITY;
			for (uint32_t j = lo; j < hi; j++) {
				float d = 0;
				for (uint32_t e = 0; e < hd; e++)
					d += q[e] * k[j * kvd + e];
				sc[j] = d * scale;
				mx = sc[j] > mx ? sc[j] : mx;
			}
			double z = 0;
			for (uint32_t j = lo; j < hi; j++)
				z += exp((double)sc[j] - mx);
			for (uint32_t j = lo; j < hi; j++)
				mass[j] += exp((double)sc[j] - mx) / z;
		}
	}
}

int infs__recompute(const infs_model *m, const infs__recompute_args *a)
{
	static const char fn[] = "infs__recompute";
	if (!m->tok_embd.data)
		return infs__error(INFS_EINVAL, "%s: the model has no host weights", fn);
	int rc = infs__recompute_check(m, a, fn);
	if (rc)
		return rc;
	const infs__model_config *c = &m->cfg;
	const infs__paged_kv *pk = a->past;
	const uint32_t nt = a->n_tokens, nq = a->query_weight > 0 ? a->n_query : 0, n = nt + nq;
	/* Through the check layer the cache reaches over the question's tokens. */
	infs__paged_kv ext = *pk;
	ext.n_past += nq;
	int32_t *tok = malloc((size_t)n * sizeof *tok), *pos = malloc((size_t)n * sizeof *pos);
	double *mass = nq ? calloc(ext.n_past, sizeof *mass) : NULL, *mrow = nq ? malloc((size_t)nt * sizeof *mrow) : NULL;
	float *dev = malloc((size_t)n * sizeof *dev);
	uint32_t *keep = malloc((size_t)(a->n_keep ? a->n_keep : 1) * sizeof *keep);
	rc = !tok || !pos || (nq && (!mass || !mrow)) || !dev || !keep ? infs__error(INFS_ENOMEM, "%s: out of memory", fn)
	                                                                  : 0;
	for (uint32_t i = 0; !rc && i < n; i++) {
		tok[i] = i < nt ? a->tokens[i] : a->query[i - nt];
		pos[i] = i < nt ? a->positions[i] : (int32_t)(pk->n_past + i - nt);
	}
	infs__forward_args fa = { .tokens = tok, .positions = pos, .n_tokens = n, .kv_dtype = INFS_DTYPE_F32,
		                  .past = pk };
	if (!rc)
		rc = check_args(m, &fa);
	const uint32_t d = c->n_embd, np = m->rope.n_pairs;
	infs__pool *pool = a->pool, *borrowed = NULL;
	if (!rc && !pool)
		rc = infs__pool_borrow(m->pool, m->n_threads, &borrowed);
	pool = pool ? pool : borrowed;
	scratch s;
	const int have_s = !rc && !scratch_start(&s, m, tok, pos, n, (size_t)ext.n_past + n, pool);
	if (!rc && !have_s)
		rc = infs__error(INFS_ENOMEM, "%s: out of memory for %u tokens", fn, n);
	uint32_t n_act = n;
	for (uint32_t l = 0; !rc && l < c->n_layers && n_act; l++) {
		const int select = l == a->check_layer && a->n_keep < n_act;
		const layer_io io = { l <= a->check_layer ? &ext : pk, 1, NULL, NULL, NULL, INFS_DTYPE_F32,
			              select ? dev : NULL, nt, NULL, NULL };
		run_layer(m, l, &s, n_act, &io, pool);
		if (!select)
			continue;
		if (nq) {
			query_mass(mass, m, &s, nt, n, ext.n_past);
			for (uint32_t i = 0; i < nt; i++)
				mrow[i] = mass[s.pos[i]];
		}
		/* The rows that keep going: the highest scores, in their order;
		 * the question's rows stop here. */
		if ((rc = infs__recompute_select(keep, dev, mrow, s.pos, a->forced, nt, a->n_keep, a->query_weight)))
			break;
		if (a->kept)
			memcpy(a->kept, keep, a->n_keep * sizeof *keep);
		if (a->dev)
			memcpy(a->dev, dev, nt * sizeof *dev);
		if (a->mass && mrow)
			memcpy(a->mass, mrow, nt * sizeof *mrow);
		n_act = a->n_keep;
		for (uint32_t i = 0; i < n_act; i++) {
			const uint32_t r = keep[i]; /* r >= i: rows only move down */
			memmove(s.x + (size_t)i * d, s.x + (size_t)r * d, d * sizeof(float));
			memmove(s.cos + (size_t)i * np, s.cos + (size_t)r * np, np * sizeof(float));
			memmove(s.sin + (size_t)i * np, s.sin + (size_t)r * np, np * sizeof(float));
			s.pos[i] = s.pos[r];
		}
	}
	if (have_s)
		scratch_free(&s);
	free(tok);
	free(pos);
	free(mass);
	free(mrow);
	free(dev);
	free(keep);
	infs__pool_give_back(m->pool, borrowed);
	return rc;
}

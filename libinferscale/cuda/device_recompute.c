/* Accuracy recovery on the device (infs__recompute_device and, with the
 * question's prefill fused in, infs__recompute_prefill_device;
 * model/forward.h): the forward's layers over every row, each attending
 * to the cache in place, through the check layer; there the rows' key
 * deviations (from infs_k_qkv, before their keys are overwritten) and the
 * question's attention mass (kernels/model_recompute.cu) come to the
 * host, infs__recompute_select chooses the rows that go on, exactly as on
 * the host, and their hidden states are gathered for the later layers
 * (fused: followed by the whole question's, which ends the pass with its
 * last token's logits). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cuda/device_copy.h"
#include "cuda/device_model.h"
#include "rows_kernels.h"
#include "model/forward.h"
#include "model/recompute_select.h"
#include "util/error.h"

static const char fn[] = "infs__recompute_device";

/* Host buffers of one call. */
typedef struct host_bufs {
	int32_t *tok, *pos;
	float *dev_h, *dev;
	double *mass;
	uint32_t *keep;             /* the kept rows, then (fused) the question's */
} host_bufs;

static void bufs_free(host_bufs *b)
{
	free(b->tok);
	free(b->pos);
	free(b->dev_h);
	free(b->dev);
	free(b->mass);
	free(b->keep);
}

/* At the check layer, after its layer ran over n = nt + nq rows (nq:
 * the question's tokens in the pass; mass from them with query_weight):
 * the scores to the host, the selection, the kept rows (and their
 * positions) gathered to the front, the question's (fused) after them.
 * *n_act: the rows that go on. */
static int select_rows(const infs_model *m, const infs__recompute_args *a, host_bufs *b, uint32_t nq, int fused,
                       uint32_t n_ctx, uint32_t *n_act, cudaStream_t s)
{
	const struct infs__model_dev *d = m->dev;
	const infs__model_config *g = &m->cfg;
	const uint32_t nt = a->n_tokens, T = m->device_max_tokens, D = g->n_embd;
	const uint32_t nm = a->query_weight > 0 ? nq : 0;
	int32_t *d_pos = d->rc_in + T;
	uint32_t *d_rows = (uint32_t *)(d->rc_in + 2 * T);
	cudaError_t err = cudaSuccess;
	if (nm) {
		const infs_kv_layout *kl = a->past->cache;
		infs_k_mass_params mp = {
			.mass = d->rc_mass, .norm = d->rc_norm, .q = d->q, .positions = d_pos, .n_rows = nt, .n_query = nm,
			.n_ctx = n_ctx, .n_heads = g->n_heads, .n_kv_heads = g->n_kv_heads, .head_dim = g->head_dim,
			.sliding_window = g->sliding_window, .scale = 1.0f / sqrtf((float)g->head_dim),
			.cache = {
				.k = kl->k_layers[a->check_layer], .v = kl->v_layers[a->check_layer],
				.blocks = a->past->block_table, .n_table = a->past->block_table_len,
				.n_blocks = kl->n_blocks, .block_size = kl->block_size, .stride_block = kl->stride_block,
				.stride_slot = kl->stride_slot, .stride_head = kl->stride_head,
				.stride_dim = kl->stride_dim, .dtype = (int)kl->dtype,
			},
		};
		err = infs_k_query_mass(&mp, s);
		if (err == cudaSuccess)
			err = cudaMemcpyAsync(b->mass, d->rc_mass, nt * sizeof *b->mass, cudaMemcpyDeviceToHost, s);
	}
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(b->dev_h, d->rc_dev, (size_t)nt * g->n_kv_heads * sizeof *b->dev_h,
		                      cudaMemcpyDeviceToHost, s);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(s);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "scoring the rows at the check layer");
	for (uint32_t i = 0; i < nt; i++) {
		double sum = 0;
		for (uint32_t h = 0; h < g->n_kv_heads; h++)
			sum += b->dev_h[(size_t)i * g->n_kv_heads + h];
		b->dev[i] = (float)sum;
		if (sum != sum || (nm && b->mass[i] != b->mass[i]))
			return infs__error(INFS_ERANGE, "%s: row %u (position %d) or a position the question sees has no valid "
			                   "block in the block table", fn, i, b->pos[i]);
	}
	int rc = infs__recompute_select(b->keep, b->dev, nm ? b->mass : NULL, b->pos, a->forced, nt, a->n_keep,
	                                a->query_weight);
	if (rc)
		return rc;
	if (a->kept)
		memcpy(a->kept, b->keep, a->n_keep * sizeof *b->keep);
	if (a->dev)
		memcpy(a->dev, b->dev, nt * sizeof *b->dev);
	if (a->mass && nm)
		memcpy(a->mass, b->mass, nt * sizeof *b->mass);
	*n_act = a->n_keep + (fused ? nq : 0);
	for (uint32_t j = 0; fused && j < nq; j++)
		b->keep[a->n_keep + j] = nt + j;
	int moved = 0;
	for (uint32_t i = 0; i < *n_act; i++) {
		b->pos[i] = b->pos[b->keep[i]]; /* keep[i] >= i: rows only move down */
		moved |= b->keep[i] != i;
	}
	if (!moved || !*n_act) /* in place already (a question that runs no further drops off) */
		return INFS_OK;
	err = cudaMemcpyAsync(d_rows, b->keep, *n_act * sizeof *b->keep, cudaMemcpyHostToDevice, s);
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(d_pos, b->pos, *n_act * sizeof *b->pos, cudaMemcpyHostToDevice, s);
	if (err == cudaSuccess)
		err = infs_k_gather_rows(d->gu, d->x, (size_t)D * sizeof(float), d_rows, *n_act, s);
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(d->x, d->gu, (size_t)*n_act * D * sizeof(float), cudaMemcpyDeviceToDevice, s);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "gathering the kept rows");
}

/* The pass; with logits (device) set the whole question runs through
 * every layer and its last token's logits end it. */
static int run(const infs_model *m, const infs__recompute_args *a, float *logits, host_bufs *b, cudaStream_t s)
{
	const struct infs__model_dev *d = m->dev;
	const infs__model_config *g = &m->cfg;
	const infs__paged_kv *pk = a->past;
	const infs_kv_layout *kl = pk->cache;
	const int fused = logits != NULL;
	const uint32_t nt = a->n_tokens, nq = fused || a->query_weight > 0 ? a->n_query : 0, n = nt + nq;
	const uint32_t T = m->device_max_tokens, ext = pk->n_past + nq;
	int32_t *d_tok = d->rc_in, *d_pos = d->rc_in + T;
	int rc = infs__device_check_ptr(pk->block_table, d->device, fn, "block_table");
	for (uint32_t l = 0; !rc && l < g->n_layers; l++) {
		rc = infs__device_check_ptr(kl->k_layers[l], d->device, fn, "a cache K layer");
		if (!rc)
			rc = infs__device_check_ptr(kl->v_layers[l], d->device, fn, "a cache V layer");
	}
	if (!rc && fused)
		rc = infs__device_check_ptr(logits, d->device, fn, "logits");
	if (!rc)
		rc = infs__device_blas_stream(d, s, fn);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		b->tok[i] = i < nt ? a->tokens[i] : a->query[i - nt];
		b->pos[i] = i < nt ? a->positions[i] : (int32_t)(pk->n_past + i - nt);
	}
	cudaError_t err = cudaMemcpyAsync(d_tok, b->tok, n * sizeof *b->tok, cudaMemcpyHostToDevice, s);
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(d_pos, b->pos, n * sizeof *b->pos, cudaMemcpyHostToDevice, s);
	if (err == cudaSuccess)
		err = infs_k_embed(d->x, d->emb, d_tok, n, g->n_embd, g->n_vocab, s);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "starting the rows");
	infs__dlayer la = {
		.kl = kl, .write_cache = 1, .in_place = 1, .stream = s,
		.cache = {
			.blocks = pk->block_table, .n_table = pk->block_table_len, .n_blocks = kl->n_blocks,
			.block_size = kl->block_size, .stride_block = kl->stride_block, .stride_slot = kl->stride_slot,
			.stride_head = kl->stride_head, .stride_dim = kl->stride_dim, .dtype = (int)kl->dtype,
		},
		.seqs = { .n_seqs = 1, .positions = d_pos },
	};
	if (fused && a->calib) { /* the question's rows see the facts calibrated */
		int32_t *d_calib = d->rc_in + 3 * T, h_calib[4];
		infs__calib_pack(h_calib, a->calib);
		if ((err = cudaMemcpyAsync(d_calib, h_calib, sizeof h_calib, cudaMemcpyHostToDevice, s)) != cudaSuccess)
			return infs__cuda_error(err, fn, "copying the calibration");
		la.calib = d_calib;
	}
	/* Whether the check layer chooses: fewer rows go on, or there are
	 * scores to report (a question in them). */
	const int choose = a->n_keep < nt || (a->query_weight > 0 && nq);
	uint32_t n_act = n;
	for (uint32_t l = 0; !rc && l < g->n_layers && n_act; l++) {
		const int select = l == a->check_layer && choose;
		/* The cache reaches over the question's tokens while they run. */
		const uint32_t n_past = l <= a->check_layer || fused ? ext : pk->n_past;
		la.n = la.seqs.n_tokens = n_act;
		la.seqs.n_past0 = n_past;
		infs__device_attn_plan(&la, d, g, n_act, 0, n_past);
		la.dev = select ? d->rc_dev : NULL;
		rc = infs__device_layer(m, l, &la, fn);
		if (!rc && select)
			rc = select_rows(m, a, b, nq, fused, ext, &n_act, s);
	}
	/* The question's last token is the last row. */
	if (!rc && fused &&
	    (err = infs_k_rmsnorm(d->xb, d->x + (size_t)(n_act - 1) * g->n_embd, d->out_norm, 1, g->n_embd, g->norm_eps,
	                          s)) != cudaSuccess)
		rc = infs__cuda_error(err, fn, "queueing the question's logits");
	if (!rc && fused)
		rc = infs__device_logits(m, logits, 1, fn);
	err = cudaStreamSynchronize(s);
	if (!rc && err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "running the recompute");
	return rc;
}

int infs__device_model_recompute(const infs_model *m, const infs__recompute_args *a, float *logits, void *stream)
{
	const struct infs__model_dev *d = m->dev;
	const infs__model_config *g = &m->cfg;
	const uint32_t nt = a->n_tokens, n = nt + (logits || a->query_weight > 0 ? a->n_query : 0);
	host_bufs b = {
		.tok = malloc(n * sizeof *b.tok), .pos = malloc(n * sizeof *b.pos),
		.dev_h = malloc((size_t)nt * g->n_kv_heads * sizeof *b.dev_h), .dev = malloc(nt * sizeof *b.dev),
		.mass = malloc(nt * sizeof *b.mass), .keep = malloc(n * sizeof *b.keep),
	};
	int prev, rc = INFS_OK;
	if (!b.tok || !b.pos || !b.dev_h || !b.dev || !b.mass || !b.keep)
		rc = infs__error(INFS_ENOMEM, "%s: out of memory for %u rows", fn, n);
	if (!rc && !(rc = infs__device_enter(&prev, d->device, fn))) {
		rc = run(m, a, logits, &b, (cudaStream_t)stream);
		infs__device_restore(prev);
	}
	bufs_free(&b);
	return rc;
}

/* The model on a device: its weights as bf16 (or the matrices as fp8
 * codes with a scale per row, kernels/model_fp8.cu) in one allocation
 * (q|k|v and gate|up fused), a workspace sized at load for device_max_tokens so that
 * a forward call allocates nothing, a cuBLAS handle with its own
 * workspace; and the forward pass: cuBLAS GEMMs (bf16 in, f32 accumulate
 * and out) between the kernels of kernels/model_*.cu. The host keeps its
 * f32 weights, so one model serves both infs_model_forward and
 * infs_model_forward_device; a benchmark's random model
 * (infs__model_random_device) has its weights on the device only. */
#include <cublas_v2.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/carve.h"
#include "backend/backend.h"
#include "cuda/device_copy.h"
#include "cuda/device_model.h"
#include "model/forward.h"
#include "model_kernels.h"
#include "util/dtype.h"
#include "util/error.h"

#define BLAS_WORKSPACE (32u << 20) /* what cuBLAS asks for on Hopper */
#define STAGE_ELEMS (4u << 20)     /* f32 -> bf16 conversion, 8 MiB at a time */
#define MAX_SPLITS INFS_K_ATTN_MAX_SPLITS /* key ranges one attention row may be split into */

static void take_mat(infs__dev_mat *M, infs__carve *c, uint64_t out, uint64_t in, int fp8)
{
	M->w = infs__carve_take(c, out * in * (fp8 ? 1 : 2));
	M->scale = fp8 ? infs__carve_take(c, out * 4) : NULL;
}

/* Lays every buffer out in c (counting only when c->base is NULL). */
static void layout(struct infs__model_dev *d, const infs_model *m, infs__carve *c, uint32_t T)
{
	const infs__model_config *g = &m->cfg;
	const uint64_t D = g->n_embd, hd = g->head_dim, qd = g->n_heads * hd, kvd = g->n_kv_heads * hd;
	const uint64_t qkv = qd + 2 * kvd, ff = g->n_ff, V = g->n_vocab;
	const int fp8 = m->device_weights == INFS_DTYPE_FP8_E4M3;
	for (uint32_t l = 0; l < g->n_layers; l++) {
		infs__dev_layer *L = &d->layers[l];
		L->attn_norm = infs__carve_take(c, D * 4);
		L->ffn_norm = infs__carve_take(c, D * 4);
		L->bqkv = g->bias_qkv ? infs__carve_take(c, qkv * 4) : NULL;
		L->bo = g->bias_o ? infs__carve_take(c, D * 4) : NULL;
		L->q_norm = g->qk_norm ? infs__carve_take(c, hd * 4) : NULL;
		L->k_norm = g->qk_norm ? infs__carve_take(c, hd * 4) : NULL;
		take_mat(&L->wqkv, c, qkv, D, fp8);
		take_mat(&L->wo, c, D, qd, fp8);
		take_mat(&L->wgu, c, 2 * ff, D, fp8);
		take_mat(&L->wdown, c, D, ff, fp8);
	}
	d->emb = infs__carve_take(c, V * D * 2);
	d->output = g->tied ? d->emb : infs__carve_take(c, V * D * 2);
	d->out_norm = infs__carve_take(c, D * 4);
	d->inv_freq = infs__carve_take(c, INFS_ROPE_MAX_PAIRS * 4);
	d->rope = infs__carve_take(c, INFS_K_GEMV_MAX_TOKENS * INFS_ROPE_MAX_PAIRS * 2 * 4);
	d->x = infs__carve_take(c, T * D * 4);
	d->xb = infs__carve_take(c, T * D * 2);
	d->qkv = infs__carve_take(c, T * qkv * 4);
	d->q = infs__carve_take(c, T * qd * 4);
	d->k = infs__carve_take(c, T * kvd * 2);
	d->v = infs__carve_take(c, T * kvd * 2);
	d->att = infs__carve_take(c, T * qd * 2);
	d->gu = infs__carve_take(c, T * (2 * ff > D ? 2 * ff : D) * 4);
	d->act = infs__carve_take(c, T * ff * 2);
	d->part_tokens = MAX_SPLITS * (T < 128 ? T : 128);
	d->part_o = infs__carve_take(c, (uint64_t)d->part_tokens * qd * 4);
	d->part_ml = infs__carve_take(c, (uint64_t)d->part_tokens * g->n_heads * 2 * 4);
	d->rc_in = infs__carve_take(c, (3 * T + 4) * 4); /* tokens, positions, rows, a calibration */
	d->rc_dev = infs__carve_take(c, T * g->n_kv_heads * 4);
	d->rc_mass = infs__carve_take(c, T * 8);
	d->rc_norm = infs__carve_take(c, T * g->n_heads * 2 * 8);
	d->blas_ws = infs__carve_take(c, BLAS_WORKSPACE);
	uint64_t widest = qkv * D > 2 * ff * D ? qkv * D : 2 * ff * D;
	widest = widest > D * qd ? widest : D * qd;
	d->wide = fp8 ? infs__carve_take(c, widest * 2) : NULL;
}

/* The bf16 rows at src (device memory) into M when it holds fp8 codes;
 * nothing for a bf16 matrix, whose rows were written in place. */
static cudaError_t settle(const infs__dev_mat *M, const uint16_t *src, size_t rows, size_t cols)
{
	return M->scale ? infs_k_fp8_quant_rows(M->w, M->scale, src, (uint32_t)rows, (uint32_t)cols, 0) : cudaSuccess;
}

/* Where a matrix's bf16 rows are written before settle. */
static uint16_t *rows_of(const struct infs__model_dev *d, const infs__dev_mat *M)
{
	return M->scale ? d->wide : M->w;
}

static const char load_fn[] = "infs_model_load";

/* INFS_OK, or INFS_EDEVICE naming cuBLAS's status (fn names the caller). */
static int blas_status(cublasStatus_t st, const char *fn)
{
	if (st == CUBLAS_STATUS_SUCCESS)
		return INFS_OK;
	return infs__error(INFS_EDEVICE, "%s: cuBLAS error %d: %s", fn, (int)st, cublasGetStatusString(st));
}

/* Copies n floats from src to dst on the device, as bf16 when bf is set. */
static int upload(void *dst, const float *src, size_t n, int bf, uint16_t *stage)
{
	cudaError_t err = cudaSuccess;
	if (!bf)
		err = cudaMemcpy(dst, src, n * 4, cudaMemcpyHostToDevice);
	for (size_t i = 0; bf && err == cudaSuccess && i < n; i += STAGE_ELEMS) {
		size_t k = n - i < STAGE_ELEMS ? n - i : STAGE_ELEMS;
		for (size_t j = 0; j < k; j++)
			stage[j] = infs__f32_to_bf16(src[i + j]);
		err = cudaMemcpy((uint16_t *)dst + i, stage, k * 2, cudaMemcpyHostToDevice);
	}
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, load_fn, "uploading the weights");
}

/* A host weight matrix (f32 or quantized, model/wmat.h) into dst on the
 * device as bf16, row by row. */
static int upload_w(void *dst, const infs__wmat *w, uint16_t *stage)
{
	float *row = malloc((size_t)(w->cols ? w->cols : 1) * sizeof *row);
	if (!row)
		return infs__error(INFS_ENOMEM, "%s: out of memory", load_fn);
	int rc = INFS_OK;
	for (uint32_t r = 0; !rc && r < w->rows; r++) {
		infs__wmat_row(row, w, r);
		rc = upload((uint16_t *)dst + (size_t)r * w->cols, row, w->cols, 1, stage);
	}
	free(row);
	return rc;
}

static int settled(cudaError_t err)
{
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, load_fn, "quantizing the weights to fp8");
}

static int upload_all(struct infs__model_dev *d, const infs_model *m)
{
	const infs__model_config *g = &m->cfg;
	const size_t D = g->n_embd, hd = g->head_dim, qd = g->n_heads * hd, kvd = g->n_kv_heads * hd, ff = g->n_ff;
	uint16_t *stage = malloc(STAGE_ELEMS * sizeof *stage);
	if (!stage)
		return infs__error(INFS_ENOMEM, "%s: out of memory", load_fn);
	int rc = INFS_OK;
	for (uint32_t l = 0; !rc && l < g->n_layers; l++) {
		const infs__dev_layer *L = &d->layers[l];
		const infs__layer *H = &m->layers[l];
		if (!rc)
			rc = upload(L->attn_norm, H->attn_norm, D, 0, stage);
		if (!rc)
			rc = upload(L->ffn_norm, H->ffn_norm, D, 0, stage);
		if (!rc && L->bqkv) {
			const float *b[3] = { H->bq, H->bk, H->bv };
			const size_t n[3] = { qd, kvd, kvd }, at[3] = { 0, qd, qd + kvd };
			for (int i = 0; !rc && i < 3; i++) {
				cudaError_t err = cudaSuccess;
				if (b[i])
					rc = upload(L->bqkv + at[i], b[i], n[i], 0, stage);
				else if ((err = cudaMemset(L->bqkv + at[i], 0, n[i] * 4)) != cudaSuccess)
					rc = infs__cuda_error(err, load_fn, "zeroing a bias");
			}
		}
		if (!rc && L->bo)
			rc = upload(L->bo, H->bo, D, 0, stage);
		if (!rc && L->q_norm)
			rc = upload(L->q_norm, H->q_norm, hd, 0, stage);
		if (!rc && L->k_norm)
			rc = upload(L->k_norm, H->k_norm, hd, 0, stage);
		uint16_t *w = rows_of(d, &L->wqkv);
		if (!rc)
			rc = upload_w(w, &H->wq, stage);
		if (!rc)
			rc = upload_w(w + qd * D, &H->wk, stage);
		if (!rc)
			rc = upload_w(w + (qd + kvd) * D, &H->wv, stage);
		if (!rc)
			rc = settled(settle(&L->wqkv, w, qd + 2 * kvd, D));
		if (!rc)
			rc = upload_w(w = rows_of(d, &L->wo), &H->wo, stage);
		if (!rc)
			rc = settled(settle(&L->wo, w, D, qd));
		if (!rc)
			rc = upload_w(w = rows_of(d, &L->wgu), &H->w_gate, stage);
		if (!rc)
			rc = upload_w(w + ff * D, &H->w_up, stage);
		if (!rc)
			rc = settled(settle(&L->wgu, w, 2 * ff, D));
		if (!rc)
			rc = upload_w(w = rows_of(d, &L->wdown), &H->w_down, stage);
		if (!rc)
			rc = settled(settle(&L->wdown, w, D, ff));
	}
	if (!rc)
		rc = upload_w(d->emb, &m->tok_embd, stage);
	if (!rc && !g->tied)
		rc = upload_w(d->output, &m->output, stage);
	if (!rc)
		rc = upload(d->out_norm, m->out_norm, D, 0, stage);
	if (!rc)
		rc = upload(d->inv_freq, m->rope.inv_freq, m->rope.n_pairs, 0, stage);
	free(stage);
	return rc;
}

/* A random model's weights: matrices ~N(0, 0.02) in bf16 (each from its
 * own seed), norms 1, biases 0; the RoPE frequencies are the host's. */
static int randomize(struct infs__model_dev *d, const infs_model *m, uint64_t seed)
{
	const infs__model_config *g = &m->cfg;
	const size_t D = g->n_embd, hd = g->head_dim, qd = g->n_heads * hd, kvd = g->n_kv_heads * hd, ff = g->n_ff;
	const float std = 0.02f;
	cudaError_t err = cudaSuccess;
	uint64_t t = seed * 0x100000001b3ull; /* one seed per matrix */
	for (uint32_t l = 0; err == cudaSuccess && l < g->n_layers; l++) {
		const infs__dev_layer *L = &d->layers[l];
		err = infs_k_fill_f32(L->attn_norm, D, 1.0f, 0);
		if (err == cudaSuccess)
			err = infs_k_fill_f32(L->ffn_norm, D, 1.0f, 0);
		if (err == cudaSuccess && L->bqkv)
			err = infs_k_fill_f32(L->bqkv, qd + 2 * kvd, 0.0f, 0);
		if (err == cudaSuccess && L->bo)
			err = infs_k_fill_f32(L->bo, D, 0.0f, 0);
		if (err == cudaSuccess && L->q_norm)
			err = infs_k_fill_f32(L->q_norm, hd, 1.0f, 0);
		if (err == cudaSuccess && L->k_norm)
			err = infs_k_fill_f32(L->k_norm, hd, 1.0f, 0);
		const struct { const infs__dev_mat *m; size_t rows, cols; } mats[] = {
			{ &L->wqkv, qd + 2 * kvd, D }, { &L->wo, D, qd }, { &L->wgu, 2 * ff, D }, { &L->wdown, D, ff },
		};
		for (int i = 0; err == cudaSuccess && i < 4; i++) {
			uint16_t *w = rows_of(d, mats[i].m);
			err = infs_k_fill_random_bf16(w, mats[i].rows * mats[i].cols, ++t, std, 0);
			if (err == cudaSuccess)
				err = settle(mats[i].m, w, mats[i].rows, mats[i].cols);
		}
	}
	if (err == cudaSuccess)
		err = infs_k_fill_random_bf16(d->emb, (size_t)g->n_vocab * D, ++t, std, 0);
	if (err == cudaSuccess && !g->tied)
		err = infs_k_fill_random_bf16(d->output, (size_t)g->n_vocab * D, ++t, std, 0);
	if (err == cudaSuccess)
		err = infs_k_fill_f32(d->out_norm, D, 1.0f, 0);
	if (err == cudaSuccess)
		err = cudaMemcpy(d->inv_freq, m->rope.inv_freq, m->rope.n_pairs * 4, cudaMemcpyHostToDevice);
	if (err == cudaSuccess)
		err = cudaDeviceSynchronize();
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, load_fn, "filling the random weights");
}

void infs__device_model_release(infs_model *m)
{
	struct infs__model_dev *d = m->dev;
	if (!d)
		return;
	int prev;
	if (infs__device_enter(&prev, d->device, "infs_model_free") == INFS_OK) {
		if (d->blas)
			cublasDestroy(d->blas);
		cudaFree(d->arena);
		infs__device_restore(prev);
	}
	free(d->layers);
	free(d);
	m->dev = NULL;
}

/* Lays out and allocates m->dev, then fills its weights: with the host's
 * when random is NULL, else with values from *random (a seed). */
static int create(infs_model *m, int device, uint64_t budget, uint32_t max_tokens, const uint64_t *random)
{
	const infs__model_config *g = &m->cfg;
	if (!INFS_K_ATTN_HEAD_DIM_OK(g->head_dim))
		return infs__error(INFS_EUNSUPPORTED, "%s: head_dim %u: the device kernels take multiples of 16 up to 128",
		                   load_fn, g->head_dim);
	if (g->n_ff % 4)
		return infs__error(INFS_EUNSUPPORTED, "%s: n_ff %u: the device kernels take multiples of 4", load_fn, g->n_ff);
	if (m->device_weights == INFS_DTYPE_FP8_E4M3 && g->n_embd % 2)
		return infs__error(INFS_EUNSUPPORTED, "%s: n_embd %u: fp8 weights take an even width (or load bf16 weights)",
		                   load_fn, g->n_embd);
	if (g->n_heads / g->n_kv_heads > INFS_K_ATTN_ROWS)
		return infs__error(INFS_EUNSUPPORTED, "%s: %u query heads per KV head: the device kernels take at most %u",
		                   load_fn, g->n_heads / g->n_kv_heads, INFS_K_ATTN_ROWS);
	struct infs__model_dev *d = calloc(1, sizeof *d);
	infs__dev_layer *layers = d ? calloc(g->n_layers, sizeof *layers) : NULL;
	if (!layers) {
		free(d);
		return infs__error(INFS_ENOMEM, "%s: out of memory", load_fn);
	}
	d->device = device;
	d->layers = layers;
	infs__carve count = { NULL, 0 };
	layout(d, m, &count, max_tokens);
	d->bytes = count.used;
	int prev, rc = infs__device_enter(&prev, device, load_fn);
	if (rc) {
		free(layers);
		free(d);
		return rc;
	}
	m->dev = d;
	size_t free_b = 0, total_b = 0;
	int n_sm = 0;
	cudaError_t err = cudaMemGetInfo(&free_b, &total_b);
	if (err == cudaSuccess)
		err = cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device);
	d->n_sm = (uint32_t)n_sm;
	d->few_tokens = 1;
	if (err != cudaSuccess)
		rc = infs__cuda_error(err, load_fn, "reading the device's free memory and multiprocessors");
	else if (budget && d->bytes > budget)
		rc = infs__error(INFS_EBUDGET,
		                 "%s: the model needs %llu bytes of device memory (weights in %s and a workspace for %u "
		                 "tokens), above device_budget_bytes %llu",
		                 load_fn, (unsigned long long)d->bytes,
		                 m->device_weights == INFS_DTYPE_FP8_E4M3 ? "fp8" : "bf16", max_tokens,
		                 (unsigned long long)budget);
	else if (d->bytes > free_b)
		rc = infs__error(INFS_EBUDGET, "%s: the model needs %llu bytes of device memory, device %d has %llu free",
		                 load_fn, (unsigned long long)d->bytes, device, (unsigned long long)free_b);
	if (!rc && (err = cudaMalloc((void **)&d->arena, d->bytes)) != cudaSuccess)
		rc = infs__cuda_error(err, load_fn, "allocating the model's device memory");
	if (!rc) {
		infs__carve c = { d->arena, 0 };
		layout(d, m, &c, max_tokens);
		rc = random ? randomize(d, m, *random) : upload_all(d, m);
	}
	if (!rc) {
		cublasStatus_t st = cublasCreate(&d->blas);
		if (st == CUBLAS_STATUS_SUCCESS)
			st = cublasSetWorkspace(d->blas, d->blas_ws, BLAS_WORKSPACE);
		rc = blas_status(st, load_fn);
	}
	infs__device_restore(prev);
	if (rc)
		infs__device_model_release(m);
	return rc;
}

int infs__device_model_upload(infs_model *m, int device, uint64_t budget, uint32_t max_tokens)
{
	return create(m, device, budget, max_tokens, NULL);
}

int infs__device_model_random(infs_model *m, int device, uint32_t max_tokens, uint64_t seed)
{
	return create(m, device, 0, max_tokens, &seed);
}

static const char fwd_fn[] = "infs_model_forward_device";

int infs__device_check_ptr(const void *p, int device, const char *fn, const char *what)
{
	struct cudaPointerAttributes at;
	cudaError_t err = cudaPointerGetAttributes(&at, p);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "reading a pointer's attributes");
	if ((at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged) || at.device != device)
		return infs__error(INFS_EINVAL, "%s: %s is not memory of device %d", fn, what, device);
	return INFS_OK;
}

static int check_ptr(const void *p, int device, const char *what)
{
	return infs__device_check_ptr(p, device, fwd_fn, what);
}

/* y[n][out] (+)= x[n][in] W[out][in]^T: bf16 in, f32 accumulate and out. */
static cublasStatus_t gemm(cublasHandle_t h, float *y, const uint16_t *x, const uint16_t *w, uint32_t n,
                           uint32_t in, uint32_t out, float beta)
{
	const float one = 1.0f;
	return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n, (int)in, &one, w, CUDA_R_16BF, (int)in, x,
	                    CUDA_R_16BF, (int)in, &beta, y, CUDA_R_32F, (int)out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* The attention's blocks (infs_k_attn_block_rows), and into how many of
 * them each row's keys are split: enough blocks for two waves over the
 * device (eight for a decoding step of several sequences, whose blocks
 * hold one token each: they wait on memory, not on arithmetic), at least
 * two key tiles per block, within the partial results' workspace. */
void infs__device_attn_plan(infs__dlayer *a, const struct infs__model_dev *d, const infs__model_config *g,
                            uint32_t n_tokens, uint32_t n_seqs, uint64_t max_keys)
{
	const uint32_t group = g->n_heads / g->n_kv_heads;
	a->attn_rows = infs_k_attn_block_rows(n_tokens, n_seqs, group, max_keys);
	const uint64_t per_tile = a->attn_rows / group;
	const uint64_t blocks = ((n_tokens + per_tile - 1) / per_tile + n_seqs) * g->n_kv_heads;
	const uint64_t waves = n_seqs > 1 && n_tokens == n_seqs ? 8 : 2;
	uint64_t s = (waves * d->n_sm + blocks - 1) / blocks;
	const uint64_t by_keys = (max_keys + 127) / 128, by_space = d->part_tokens / n_tokens;
	s = s < by_keys ? s : by_keys;
	s = s < MAX_SPLITS ? s : MAX_SPLITS;
	s = s < by_space ? s : by_space;
	a->splits = s ? (uint32_t)s : 1;
}

int infs__device_model_forward(const infs_model *m, const infs__device_forward *a)
{
	const struct infs__model_dev *d = m->dev;
	const infs__model_config *g = &m->cfg;
	const infs_kv_layout *kl = a->cache;
	int prev, rc = infs__device_enter(&prev, d->device, fwd_fn);
	if (rc)
		return rc;
	rc = a->logits ? check_ptr(a->logits, d->device, "logits") : INFS_OK;
	if (!rc)
		rc = check_ptr(a->tokens, d->device, "tokens");
	if (!rc && a->positions)
		rc = check_ptr(a->positions, d->device, "positions");
	if (!rc)
		rc = check_ptr(a->block_table, d->device, "block_table");
	if (!rc && a->n_seqs)
		rc = check_ptr(a->seq_starts, d->device, "seq_starts");
	if (!rc && a->n_seqs)
		rc = check_ptr(a->seq_n_past, d->device, "seq_n_past");
	if (!rc && a->k_out)
		rc = check_ptr(a->k_out, d->device, "k_out");
	if (!rc && a->v_out)
		rc = check_ptr(a->v_out, d->device, "v_out");
	for (uint32_t l = 0; !rc && l < g->n_layers; l++) {
		if (!rc)
			rc = check_ptr(kl->k_layers[l], d->device, "a cache K layer");
		if (!rc)
			rc = check_ptr(kl->v_layers[l], d->device, "a cache V layer");
	}
	if (rc) {
		infs__device_restore(prev);
		return rc;
	}
	const cudaStream_t s = (cudaStream_t)a->stream;
	const uint32_t n = a->n_tokens, D = g->n_embd;
	infs__dlayer la = {
		.n = n, .kl = kl, .write_cache = !a->no_cache_write, .k_out = a->k_out, .v_out = a->v_out,
		.out_dtype = (int)a->out_dtype, .stream = s, .calib = a->calib,
		.cache = {
			.blocks = a->block_table, .n_table = a->block_table_len, .table_stride = a->table_stride,
			.n_blocks = kl->n_blocks, .block_size = kl->block_size, .stride_block = kl->stride_block,
			.stride_slot = kl->stride_slot, .stride_head = kl->stride_head, .stride_dim = kl->stride_dim,
			.dtype = (int)kl->dtype,
		},
		.seqs = {
			.n_seqs = a->n_seqs ? a->n_seqs : 1, .n_tokens = n, .starts = a->n_seqs ? a->seq_starts : NULL,
			.n_past = a->n_seqs ? a->seq_n_past : NULL, .n_past0 = a->n_past, .positions = a->positions,
		},
	};
	const infs_k_seqs *seqs = &la.seqs;
	const uint64_t max_keys = a->n_seqs ? a->max_context : (uint64_t)a->n_past + n;
	infs__device_attn_plan(&la, d, g, n, a->n_seqs, max_keys);
	rc = infs__device_blas_stream(d, s, fwd_fn);
	cudaError_t err = cudaSuccess;
	if (!rc && (err = infs_k_embed(d->x, d->emb, a->tokens, n, D, g->n_vocab, s)) != cudaSuccess)
		rc = infs__cuda_error(err, fwd_fn, "queueing the forward pass");
	/* A step of few tokens rotates its q and k inside the q|k|v product
	 * (when the model needs nothing else there: INFS_K_GEMV_QKV_OK), with
	 * the cos and sin of its positions computed once for every layer. */
	if (!rc && d->few_tokens && n <= INFS_K_GEMV_MAX_TOKENS) {
		if ((err = infs_k_rope_table(d->rope, seqs, d->inv_freq, m->rope.n_pairs, m->rope.attn_scale, s)) !=
		    cudaSuccess)
			rc = infs__cuda_error(err, fwd_fn, "queueing the forward pass");
		la.rope = d->rope;
	}
	for (uint32_t l = 0; l < g->n_layers && !rc; l++)
		rc = infs__device_layer(m, l, &la, fwd_fn);
	/* The rows that get logits: every token, each sequence's last, or the
	 * last token. */
	uint32_t rows = 1;
	if (!rc && a->logits) {
		rows = a->all_logits ? n : seqs->n_seqs;
		if (a->all_logits)
			err = infs_k_rmsnorm(d->xb, d->x, d->out_norm, n, D, g->norm_eps, s);
		else if (a->n_seqs)
			err = infs_k_rmsnorm_last(d->xb, d->x, d->out_norm, seqs, D, g->norm_eps, s);
		else
			err = infs_k_rmsnorm(d->xb, d->x + (size_t)(n - 1) * D, d->out_norm, 1, D, g->norm_eps, s);
		if (err != cudaSuccess)
			rc = infs__cuda_error(err, fwd_fn, "queueing the forward pass");
	}
	if (!rc && a->logits)
		rc = infs__device_logits(m, a->logits, rows, fwd_fn);
	infs__device_restore(prev);
	return rc;
}

int infs__device_logits(const infs_model *m, float *logits, uint32_t rows, const char *fn)
{
	const struct infs__model_dev *d = m->dev;
	return blas_status(gemm(d->blas, logits, d->xb, d->output, rows, m->cfg.n_embd, m->cfg.n_vocab, 0.0f), fn);
}

int infs__device_blas_stream(const struct infs__model_dev *d, cudaStream_t stream, const char *fn)
{
	cublasStatus_t st = cublasSetStream(d->blas, stream);
	/* cublasSetStream puts back cuBLAS's own workspace pool: the model's
	 * again, so that a call (or its capture) allocates nothing */
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasSetWorkspace(d->blas, d->blas_ws, BLAS_WORKSPACE);
	return blas_status(st, fn);
}

/* y[n][out] (+)= x[n][in] M^T. fp8 codes: the fp8 kernel for few tokens,
 * else the matrix widened to bf16 for cuBLAS. Returns an INFS code. */
static int matmul(const struct infs__model_dev *d, const infs__dev_mat *M, float *y, const uint16_t *x, uint32_t n,
                  uint32_t in, uint32_t out, int accumulate, cudaStream_t s, const char *fn)
{
	const uint16_t *w = M->w;
	if (M->scale) {
		const int direct = INFS_K_FP8_GEMM_OK(n, in, out);
		const cudaError_t err = direct ? infs_k_fp8_gemm(y, x, M->w, M->scale, n, in, out, accumulate, d->n_sm, s)
		                               : infs_k_fp8_widen_rows(d->wide, M->w, M->scale, out, in, s);
		if (err != cudaSuccess)
			return infs__cuda_error(err, fn, "queueing a product of fp8 weights");
		if (direct)
			return INFS_OK;
		w = d->wide;
	}
	return blas_status(gemm(d->blas, y, x, w, n, in, out, accumulate ? 1.0f : 0.0f), fn);
}

static int queued(cudaError_t err, const char *fn)
{
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "queueing a layer");
}

void infs__device_model_few_tokens(infs_model *m, int fused)
{
	m->dev->few_tokens = fused;
}

/* p (the step's tokens and inputs) by M [out][in] with the epilogue, in
 * the fused kernel of few tokens. */
static int gemv(infs_k_gemv_params p, const infs__dev_mat *M, uint32_t in, uint32_t out, int epilogue,
                cudaStream_t s, const char *fn)
{
	p.w = M->w, p.scale = M->scale, p.in = in, p.out = out, p.epilogue = epilogue;
	return queued(infs_k_gemv(&p, s), fn);
}

int infs__device_layer(const infs_model *m, uint32_t l, const infs__dlayer *a, const char *fn)
{
	const struct infs__model_dev *d = m->dev;
	const infs__model_config *g = &m->cfg;
	const infs__dev_layer *L = &d->layers[l];
	const cudaStream_t s = a->stream;
	const uint32_t n = a->n, D = g->n_embd, hd = g->head_dim, ff = g->n_ff;
	const uint32_t qd = g->n_heads * hd, kvd = g->n_kv_heads * hd, qkv = qd + 2 * kvd;
	infs_k_cache_layer cl = a->cache;
	cl.k = a->kl->k_layers[l];
	cl.v = a->kl->v_layers[l];
	/* A step of few tokens reads each weight once: the fused products
	 * (RMSNorm before, SwiGLU or the residual after) run at the weights'
	 * speed; longer calls go through cuBLAS between the kernels. */
	const int few = d->few_tokens && INFS_K_GEMV_OK(n, D, qkv) && qd % 16 == 0 && ff % 16 == 0;
	const infs_k_gemv_params gp = { .n = n, .eps = g->norm_eps, .n_sm = d->n_sm };
	infs_k_gemv_params to_qkv = gp, to_o = gp, to_gu = gp, to_down = gp; /* each product's inputs and outputs */
	to_qkv.x = d->x, to_qkv.norm = L->attn_norm, to_qkv.y = d->qkv;
	to_o.a = d->att, to_o.y = d->x;
	to_gu.x = d->x, to_gu.norm = L->ffn_norm, to_gu.act = d->act;
	to_down.a = d->act, to_down.y = d->x;
	/* q|k|v's epilogue: bias, q/k norms, RoPE, the cache write */
	const infs_k_qkv_params qp = {
		.qkv = d->qkv, .bias = L->bqkv, .q_norm = L->q_norm, .k_norm = L->k_norm, .eps = g->norm_eps,
		.q = d->q, .k = d->k, .v = d->v, .seqs = a->seqs, .n_heads = g->n_heads,
		.n_kv_heads = g->n_kv_heads, .head_dim = hd, .rotary_dim = 2 * m->rope.n_pairs,
		.style = m->rope.style == INFS_ROPE_NEOX ? 0 : 1, .attn_scale = m->rope.attn_scale,
		.inv_freq = d->inv_freq, .cache = cl, .write_cache = a->write_cache,
		.k_pre = a->k_out, .v_pre = a->v_out, .pre_dtype = a->out_dtype, .pre_layer = l,
		.pre_layers = g->n_layers, .dev = a->dev,
	};
	int rc;
	if (few && a->rope && INFS_K_GEMV_QKV_OK(&qp)) { /* RoPE and the cache write inside the product */
		to_qkv.qkv = qp, to_qkv.rope = a->rope;
		rc = gemv(to_qkv, &L->wqkv, D, qkv, INFS_K_GEMV_QKV, s, fn);
	} else {
		if (few) {
			rc = gemv(to_qkv, &L->wqkv, D, qkv, INFS_K_GEMV_STORE, s, fn);
		} else {
			rc = queued(infs_k_rmsnorm(d->xb, d->x, L->attn_norm, n, D, g->norm_eps, s), fn);
			if (!rc)
				rc = matmul(d, &L->wqkv, d->qkv, d->xb, n, D, qkv, 0, s, fn);
		}
		if (!rc)
			rc = queued(infs_k_qkv(&qp, s), fn);
	}
	if (!rc) {
		infs_k_attn_params ap = {
			.out = d->att, .q = d->q, .k = d->k, .v = d->v, .seqs = a->seqs, .n_heads = g->n_heads,
			.n_kv_heads = g->n_kv_heads, .head_dim = hd, .sliding_window = g->sliding_window,
			.scale = 1.0f / sqrtf((float)hd), .cache = cl, .write_cache = a->write_cache, .n_splits = a->splits,
			.block_rows = a->attn_rows,
			.part_o = d->part_o, .part_ml = d->part_ml, .in_place = a->in_place, .calib = a->calib,
		};
		rc = queued(infs_k_attention(&ap, s), fn);
	}
	if (!rc) /* into the residual */
		rc = few ? gemv(to_o, &L->wo, qd, D, INFS_K_GEMV_ADD, s, fn)
		         : matmul(d, &L->wo, d->x, d->att, n, qd, D, 1, s, fn);
	if (!rc && L->bo)
		rc = queued(infs_k_add_bias(d->x, L->bo, n, D, s), fn);
	if (!rc && few) {
		rc = gemv(to_gu, &L->wgu, D, 2 * ff, INFS_K_GEMV_SWIGLU, s, fn);
	} else if (!rc) {
		rc = queued(infs_k_rmsnorm(d->xb, d->x, L->ffn_norm, n, D, g->norm_eps, s), fn);
		if (!rc)
			rc = matmul(d, &L->wgu, d->gu, d->xb, n, D, 2 * ff, 0, s, fn);
		if (!rc)
			rc = queued(infs_k_swiglu(d->act, d->gu, n, ff, s), fn);
	}
	if (!rc)
		rc = few ? gemv(to_down, &L->wdown, ff, D, INFS_K_GEMV_ADD, s, fn)
		         : matmul(d, &L->wdown, d->x, d->act, n, ff, D, 1, s, fn);
	return rc;
}

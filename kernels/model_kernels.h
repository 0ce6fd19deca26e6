/* The model runtime's CUDA launchers as C sees them (model_*.cu). Each
 * queues its work on the given stream and returns the launch's cudaError_t;
 * the host-side arguments have been checked by libinferscale/cuda/
 * device_model.c. What only the device knows (token ids, positions, block
 * table entries) is checked by the kernels: a bad one never leads to an
 * access out of bounds, it turns the affected outputs into NaN. Pointers
 * are device pointers; matrices are row-major. */
#ifndef INFS_MODEL_KERNELS_H
#define INFS_MODEL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest head the RoPE kernel takes; attention takes head_dim a
 * multiple of 16 up to 128 (INFS_K_ATTN_HEAD_DIM_OK). */
#define INFS_K_MODEL_MAX_HEAD_DIM 128u
#define INFS_K_ATTN_HEAD_DIM_OK(hd) ((hd) % 16 == 0 && (hd) >= 16 && (hd) <= 128)

/* One layer of a paged KV cache: position p of sequence s lives in block
 * blocks[s * table_stride + p / block_size] (p / block_size checked against
 * n_table, the block against n_blocks), slot p % block_size; element
 * (b, s, h, e) of K is at k + b*stride_block + s*stride_slot +
 * h*stride_head + e*stride_dim elements of dtype (INFS_K_*), likewise for
 * V. */
typedef struct infs_k_cache_layer {
	void *k, *v;
	const int32_t *blocks;
	uint64_t n_table, table_stride;
	uint32_t n_blocks, block_size;
	int64_t stride_block, stride_slot, stride_head, stride_dim;
	int dtype;
} infs_k_cache_layer;

/* The sequences of a call: sequence s is tokens [starts[s], starts[s + 1])
 * (starts NULL: one sequence of every token), with cache positions
 * [0, n_past[s]) (n_past NULL: n_past0 for every sequence). Token i of a
 * sequence is at positions[i] (NULL: its n_past + its index in the
 * sequence). Starts are clamped to [0, n_tokens]: bad ones never lead to an
 * access out of bounds. */
typedef struct infs_k_seqs {
	uint32_t n_seqs, n_tokens;
	const int32_t *starts;
	const int32_t *n_past;
	uint32_t n_past0;
	const int32_t *positions;
} infs_k_seqs;

/* x[i] = emb[tokens[i]] (bf16 rows of d) in f32; NaN for a token outside
 * 0..n_vocab-1. */
cudaError_t infs_k_embed(float *x, const uint16_t *emb, const int32_t *tokens, uint32_t n, uint32_t d,
                         uint32_t n_vocab, cudaStream_t stream);

/* out[i] = bf16(w * x[i] / rms(x[i])) for n rows of d, the sum of squares
 * in double as on the CPU. */
cudaError_t infs_k_rmsnorm(uint16_t *out, const float *x, const float *w, uint32_t n, uint32_t d, float eps,
                           cudaStream_t stream);

/* The same for the last token of each sequence: out[s] from row
 * seqs.starts[s + 1] - 1 of x, NaN for a sequence without tokens. */
cudaError_t infs_k_rmsnorm_last(uint16_t *out, const float *x, const float *w, const infs_k_seqs *seqs, uint32_t d,
                                float eps, cudaStream_t stream);

/* out[r] = the index of the largest of logits[r][0..n_vocab), the lowest on
 * a tie, NaN ignored (0 for a row of NaN), for n_rows rows (kernels/sample.cu). */
cudaError_t infs_k_argmax(int32_t *out, const float *logits, uint32_t n_rows, uint32_t n_vocab, cudaStream_t stream);

/* y[i] += b for n rows of d. */
cudaError_t infs_k_add_bias(float *y, const float *b, uint32_t n, uint32_t d, cudaStream_t stream);

/* out[i][j] = bf16(silu(gu[i][j]) * gu[i][ff + j]): gate then up in each
 * row of gu; ff a multiple of 4. */
cudaError_t infs_k_swiglu(uint16_t *out, const float *gu, uint32_t n, uint32_t ff, cudaStream_t stream);

/* The fused q|k|v projection of n tokens, [n][(n_heads + 2 n_kv_heads) *
 * head_dim]: adds bias (NULL: none), normalises each q and k head with
 * q_norm/k_norm (NULL: none; Qwen3), rotates q and k to the token's
 * position with inv_freq (rotary_dim / 2 floats) and attn_scale, NeoX
 * (style 0) or GPT-J (style 1) pairs, and writes q (f32), k and v (bf16),
 * each [n][heads][head_dim], and, when write_cache is set, the rotated K
 * and V into the cache at the token's position when its block is valid;
 * with k_pre/v_pre set, also the token's K before RoPE (after q/k norm) and
 * V of layer pre_layer of pre_layers, in pre_dtype (INFS_K_*): each
 * sequence's [pre_layers][its tokens][n_kv_heads][head_dim] from element
 * starts[s] * pre_layers * n_kv_heads * head_dim. A token outside every sequence gets
 * NaN q, k and v. With dev set (accuracy recovery), dev[i * n_kv_heads + h]
 * is the squared distance of token i's new rotated K of head h from the K
 * the cache held at its position before it is written (NaN when the
 * position has no valid block). */
typedef struct infs_k_qkv_params {
	const float *qkv;
	const float *bias;
	const float *q_norm, *k_norm;
	float eps;
	float *q;
	uint16_t *k, *v;
	infs_k_seqs seqs;
	uint32_t n_heads, n_kv_heads, head_dim, rotary_dim;
	int style;
	float attn_scale;
	const float *inv_freq;
	infs_k_cache_layer cache;
	int write_cache;
	void *k_pre, *v_pre;
	int pre_dtype;
	uint32_t pre_layer, pre_layers;
	float *dev;
} infs_k_qkv_params;

cudaError_t infs_k_qkv(const infs_k_qkv_params *p, cudaStream_t stream);

/* cs[i][t] = {cos, sin} of token i's position (as seqs gives it) times
 * inv_freq[t], each times attn_scale, as infs_k_qkv computes them (the
 * angle in double), for the seqs.n_tokens tokens and n_pairs pairs: the
 * rotations of a step, once for all its layers (infs_k_gemv's q|k|v
 * epilogue). A token outside every sequence gets position -1's. */
cudaError_t infs_k_rope_table(float *cs, const infs_k_seqs *seqs, const float *inv_freq, uint32_t n_pairs,
                              float attn_scale, cudaStream_t stream);

/* Causal grouped-query attention of the new tokens, flash style (tensor
 * cores, bf16 operands, f32 softmax and accumulation): token i of sequence
 * s at position p attends to the cache positions of s below its n_past and
 * <= p, and to the new tokens of s (k, v bf16 [n][n_kv_heads][head_dim]) at
 * positions <= p, within sliding_window (0: none); scores scaled by scale.
 * out is bf16 [n][n_heads][head_dim]. Each block takes up to 64 query rows
 * (the heads sharing a KV head, token by token) of one sequence and one KV
 * head (16 for calls of few rows, block_rows below, its warps then
 * splitting the keys); with 1 < n_splits <= INFS_K_ATTN_MAX_SPLITS the
 * keys are divided among n_splits blocks whose partial results (part_o f32
 * [n_splits][n][n_heads][head_dim], part_ml [n_splits][n][n_heads][2]) a
 * second kernel merges. A token whose own
 * position (when write_cache) or a visible cache position has no valid
 * block gets NaN. With in_place (accuracy recovery) the new tokens' own
 * positions lie below n_past and already hold their K and V (written by
 * infs_k_qkv): each token attends to the cache alone. */
typedef struct infs_k_attn_params {
	uint16_t *out;
	const float *q;
	const uint16_t *k, *v;
	infs_k_seqs seqs;
	uint32_t n_heads, n_kv_heads, head_dim, sliding_window;
	float scale;
	infs_k_cache_layer cache;
	int write_cache;
	uint32_t n_splits;
	float *part_o, *part_ml;
	int in_place;
	/* 0: INFS_K_ATTN_ROWS, or INFS_K_ATTN_FEW_ROWS for a decoding step
	 * (infs_k_attn_block_rows with the keys not known); else the rows a
	 * block takes, INFS_K_ATTN_ROWS or INFS_K_ATTN_FEW_ROWS. */
	uint32_t block_rows;
	/* NULL, or per sequence {lo, hi, inv_temp, log2_scale} (the floats as
	 * their bits): a token at a position >= hi scores the keys at
	 * positions [lo, hi) as s * inv_temp + log2_scale, s in log2 units
	 * (attention calibration for injected facts; lo == hi: none). */
	const int32_t *calib;
} infs_k_attn_params;

/* Query rows one attention block takes: INFS_K_ATTN_ROWS, or
 * INFS_K_ATTN_FEW_ROWS for a call of few rows, whose blocks of 64 would
 * leave the device idle while each walks its keys with one warp per 16
 * rows: blocks of 16 rows split each tile's keys among their four warps
 * instead, at the price of reading every key tile once per 16 rows. So:
 * a decoding step (one token a sequence; n_seqs 0: one sequence without
 * starts, of at most 16 rows), or one sequence of at most
 * INFS_K_ATTN_FEW_MAX rows over at most INFS_K_ATTN_FEW_KEYS keys (a
 * question; over longer contexts the tiles read again cost more than the
 * shorter walks save). max_keys: the most keys a row sees (UINT64_MAX:
 * not known). On the H200 at 8B geometry, a 32-token question over 32 /
 * 1,264 / 2,464 / 4,864 positions: 5.44 -> 5.19 / 5.85 -> 5.67 / 6.05 ->
 * 6.12 / 6.41 -> 7.17 ms a step with blocks of 16 rows. */
#define INFS_K_ATTN_ROWS 64u
#define INFS_K_ATTN_MAX_SPLITS 32u
#define INFS_K_ATTN_FEW_ROWS 16u
#define INFS_K_ATTN_FEW_MAX 256u
#define INFS_K_ATTN_FEW_KEYS 2048u
static inline uint32_t infs_k_attn_block_rows(uint32_t n_tokens, uint32_t n_seqs, uint32_t group, uint64_t max_keys)
{
	const uint64_t rows = (uint64_t)n_tokens * group;
	const int decoding = n_seqs ? n_tokens == n_seqs : rows <= INFS_K_ATTN_FEW_ROWS;
	const int question = n_seqs <= 1 && rows <= INFS_K_ATTN_FEW_MAX && max_keys <= INFS_K_ATTN_FEW_KEYS;
	return group <= INFS_K_ATTN_FEW_ROWS && (decoding || question) ? INFS_K_ATTN_FEW_ROWS : INFS_K_ATTN_ROWS;
}

cudaError_t infs_k_attention(const infs_k_attn_params *p, cudaStream_t stream);

/* Accuracy recovery's question mass (kernels/model_recompute.cu): rows
 * [0, n_rows) are the recomputed tokens, rows [n_rows, n_rows + n_query)
 * the question's, each at positions[row], their rotated queries q (f32
 * [row][n_heads][head_dim]) and the cache's K (already written at every
 * row's position) those of one layer. mass[i] = the softmax probability
 * (scores q.k * scale over cache positions [0, n_ctx) at or below the
 * question token's, within sliding_window) that the question's tokens give
 * row i's position, summed over question tokens and heads, in double.
 * norm: n_query * n_heads * 2 doubles of scratch (each softmax's max and
 * sum). A position without a valid block gives NaN. */
typedef struct infs_k_mass_params {
	double *mass, *norm;
	const float *q;
	const int32_t *positions;
	uint32_t n_rows, n_query, n_ctx;
	uint32_t n_heads, n_kv_heads, head_dim, sliding_window;
	float scale;
	infs_k_cache_layer cache;
} infs_k_mass_params;

cudaError_t infs_k_query_mass(const infs_k_mass_params *p, cudaStream_t stream);

/* fp8 weights (kernels/model_fp8.cu): each of rows rows of cols bf16
 * values in src as e4m3 codes (row-major [rows][cols]) and an f32 scale,
 * the row's largest magnitude / 448 (1 for a row of zeros); code =
 * e4m3(x / scale), rounded to nearest even, saturated at 448. */
cudaError_t infs_k_fp8_quant_rows(uint8_t *codes, float *scales, const uint16_t *src, uint32_t rows, uint32_t cols,
                                  cudaStream_t stream);

/* dst[r][c] = bf16(e4m3(codes[r][c]) * scales[r]); cols even. */
cudaError_t infs_k_fp8_widen_rows(uint16_t *dst, const uint8_t *codes, const float *scales, uint32_t rows,
                                  uint32_t cols, cudaStream_t stream);

/* y[n][out] (+)= x[n][in] (W[out][in] * scale[out])^T for W in e4m3 codes,
 * x bf16, y f32, 1 <= n <= INFS_K_FP8_GEMM_MAX_TOKENS, in a multiple of 64,
 * out of 16 (INFS_K_FP8_GEMM_OK); accumulate 0 first zeroes y. The sums
 * are f32 on tensor cores, added into y atomically by slices of the inner
 * dimension (not bitwise repeatable). n_sm: the device's multiprocessors. */
#define INFS_K_FP8_GEMM_MAX_TOKENS 64u
#define INFS_K_FP8_GEMM_OK(n, in, out) \
	((n) >= 1 && (n) <= INFS_K_FP8_GEMM_MAX_TOKENS && (in) % 64 == 0 && (in) > 0 && (out) % 16 == 0)
cudaError_t infs_k_fp8_gemm(float *y, const uint16_t *x, const uint8_t *w, const float *scale, uint32_t n, uint32_t in,
                            uint32_t out, int accumulate, uint32_t n_sm, cudaStream_t stream);

/* A step of 1..INFS_K_GEMV_MAX_TOKENS tokens by a matrix W [out][in]
 * (kernels/model_gemv.cu): bf16 (scale NULL) or e4m3 codes with scale[out];
 * in a multiple of 16 (INFS_K_GEMV_OK). The inputs are bf16 rows a[n][in],
 * or, with norm set, the f32 rows x[n][in] normalised as infs_k_rmsnorm
 * does with weights norm and eps. f32 sums, then by epilogue: STORE
 * y[n][out] = x W^T; ADD y += x W^T (the residual); SWIGLU (W = gate rows
 * then up rows, out even) act[n][out / 2] = bf16(silu(gate) * up) as
 * infs_k_swiglu; QKV (W the fused q|k|v projection, out = (n_heads + 2
 * n_kv_heads) * head_dim) q, k, v and the cache written as infs_k_qkv
 * writes them with the parameters in qkv (its qkv input unused; no bias,
 * q/k norms, pre-RoPE outputs or deviations: INFS_K_GEMV_QKV_OK; the
 * cache f32, f16 or bf16), cos and sin from rope (infs_k_rope_table of
 * the step, qkv.rotary_dim / 2 pairs a token). n_sm: the device's
 * multiprocessors. */
#define INFS_K_GEMV_MAX_TOKENS 4u
#define INFS_K_GEMV_OK(n, in, out) \
	((n) >= 1 && (n) <= INFS_K_GEMV_MAX_TOKENS && (in) % 16 == 0 && (in) > 0 && (out) > 0)
#define INFS_K_GEMV_QKV_OK(q) \
	(!(q)->bias && !(q)->q_norm && !(q)->k_norm && !(q)->k_pre && !(q)->v_pre && !(q)->dev && \
	 (q)->head_dim % 2 == 0 && (q)->rotary_dim % 2 == 0 && (q)->rotary_dim <= (q)->head_dim)
enum { INFS_K_GEMV_STORE, INFS_K_GEMV_ADD, INFS_K_GEMV_SWIGLU, INFS_K_GEMV_QKV };
typedef struct infs_k_gemv_params {
	const void *w;
	const float *scale;
	const uint16_t *a;
	const float *x, *norm;
	float eps;
	uint32_t n, in, out;
	int epilogue;
	float *y;
	uint16_t *act;
	infs_k_qkv_params qkv;
	const float *rope;
	uint32_t n_sm;
} infs_k_gemv_params;

cudaError_t infs_k_gemv(const infs_k_gemv_params *p, cudaStream_t stream);

/* dst[0..n) = bf16 values of mean 0 and deviation std, a hash of (seed, i)
 * (near normal: a sum of four uniforms): a benchmark model's weights. */
cudaError_t infs_k_fill_random_bf16(uint16_t *dst, size_t n, uint64_t seed, float std, cudaStream_t stream);

/* dst[0..n) = v. */
cudaError_t infs_k_fill_f32(float *dst, size_t n, float v, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif

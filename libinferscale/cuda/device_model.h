/* The model on a device as its files share it (device_model.c: weights,
 * workspace, the forward pass; device_recompute.c: accuracy recovery):
 * the device copy and one decoder layer over rows of its workspace. */
#ifndef INFS_DEVICE_MODEL_H
#define INFS_DEVICE_MODEL_H

#include <cublas_v2.h>

#include "model/model.h"
#include "model_kernels.h"

/* A matrix [out][in] on the device: bf16 values, or e4m3 codes with an f32
 * scale per row (infs_model_options.device_weights). */
typedef struct infs__dev_mat {
	void *w;
	float *scale; /* NULL: bf16 */
} infs__dev_mat;

typedef struct infs__dev_layer {
	float *attn_norm, *ffn_norm, *bqkv, *bo, *q_norm, *k_norm; /* f32, NULL when absent */
	infs__dev_mat wqkv, wo, wgu, wdown;
} infs__dev_layer;

struct infs__model_dev {
	int device;
	cublasHandle_t blas;
	char *arena;                /* weights, then the workspace */
	uint64_t bytes;
	infs__dev_layer *layers;
	uint16_t *emb, *output;     /* output == emb when tied */
	float *out_norm, *inv_freq;
	/* workspace for max_tokens tokens */
	float *x, *qkv, *q, *gu;    /* gu: at least n_embd floats a token too (recompute's gather) */
	uint16_t *xb, *k, *v, *att, *act;
	float *part_o, *part_ml;    /* split attention's partial results */
	uint32_t part_tokens;       /* tokens x splits they hold */
	/* accuracy recovery: tokens | positions | kept rows; deviations
	 * [token][KV head]; the question's attention mass per row; its
	 * softmax's (max, sum) per question token and head */
	int32_t *rc_in;
	float *rc_dev;
	double *rc_mass, *rc_norm;
	float *rope;                /* a step of few tokens: its cos and sin (infs_k_rope_table) */
	uint32_t n_sm;
	int few_tokens;             /* steps of few tokens through infs_k_gemv */
	void *blas_ws;
	/* fp8 weights: one matrix widened to bf16 (at load, and for a product
	 * of more tokens than the fp8 kernel takes); NULL with bf16 weights */
	uint16_t *wide;
};

/* One layer's work over rows [0, n) of the workspace's x. */
typedef struct infs__dlayer {
	uint32_t n;
	infs_k_seqs seqs;
	infs_k_cache_layer cache;   /* k and v are set from kl for the layer */
	const infs_kv_layout *kl;
	int write_cache;
	int in_place;               /* the rows' positions are in the cache: attend to it alone */
	void *k_out, *v_out;        /* pre-RoPE K and V (encoding), out_dtype */
	int out_dtype;
	float *dev;                 /* NULL, or [n][n_kv_heads]: the rows' key deviations (model_kernels.h) */
	const int32_t *calib;       /* NULL, or the attention's calibration (infs_k_attn_params) */
	uint32_t splits, attn_rows; /* the attention's (infs__device_attn_plan) */
	const float *rope;          /* NULL, or the step's cos and sin: q|k|v's epilogue in its product */
	cudaStream_t stream;
} infs__dlayer;

/* Refuses p unless it points into memory of device (fn names the
 * caller). */
int infs__device_check_ptr(const void *p, int device, const char *fn, const char *what);

/* Points the model's cuBLAS handle at stream, with the model's own
 * workspace. Returns an INFS code (fn names the caller). */
int infs__device_blas_stream(const struct infs__model_dev *d, cudaStream_t stream, const char *fn);

/* The attention of a call of n_tokens in n_seqs sequences (0: one without
 * starts) whose rows see at most max_keys keys: the query rows its blocks
 * take (infs_k_attn_block_rows) and the splits of each row's keys, into
 * a->attn_rows and a->splits (see device_model.c). */
void infs__device_attn_plan(infs__dlayer *a, const struct infs__model_dev *d, const infs__model_config *g,
                            uint32_t n_tokens, uint32_t n_seqs, uint64_t max_keys);

/* Whether forward calls of at most INFS_K_GEMV_MAX_TOKENS tokens go
 * through the fused products of kernels/model_gemv.cu (on after load) or,
 * as longer calls do, through RMSNorm, cuBLAS (or the fp8 kernel) and
 * SwiGLU: for tests and benchmarks that compare the two. */
void infs__device_model_few_tokens(infs_model *m, int fused);

/* Queues layer l over a's rows: RMSNorm -> q|k|v -> bias, norms, RoPE,
 * cache write -> attention -> output projection and residual -> RMSNorm
 * -> SwiGLU -> down projection and residual. Returns an INFS code. */
int infs__device_layer(const infs_model *m, uint32_t l, const infs__dlayer *a, const char *fn);

/* Queues the output projection of rows [0, rows) of the workspace's xb
 * (normed with out_norm) into logits (rows * n_vocab floats, device), on
 * the stream the cuBLAS handle was given. Returns an INFS code. */
int infs__device_logits(const infs_model *m, float *logits, uint32_t rows, const char *fn);

#endif

/* The model runtime's internals: hyper-parameters, weights and the handle
 * behind infs_model. */
#ifndef INFS_MODEL_INTERNAL_H
#define INFS_MODEL_INTERNAL_H

#include "inferscale/model.h"
#include "gguf/gguf.h"
#include "model/wmat.h"
#include "util/json.h"
#include "util/rope.h"

typedef enum infs__arch {
	INFS_ARCH_LLAMA,
	INFS_ARCH_MISTRAL,
	INFS_ARCH_QWEN2,
	INFS_ARCH_QWEN3
} infs__arch;

typedef struct infs__model_config {
	infs__arch arch;
	uint32_t n_vocab;
	uint32_t n_embd;
	uint32_t n_layers;
	uint32_t n_heads;
	uint32_t n_kv_heads;
	uint32_t head_dim;
	uint32_t n_ff;
	uint32_t n_ctx_train;
	uint32_t sliding_window; /* 0: every earlier position is visible */
	float norm_eps;
	int tied;                /* the output head is the token embedding matrix */
	int bias_qkv;            /* q, k and v projections have biases */
	int bias_o;              /* the output projection has a bias */
	int qk_norm;             /* per-head RMSNorm of q and k before RoPE (Qwen3) */
	infs_geometry geom;      /* kv_dtype is set per request */
} infs__model_config;

const char *infs__arch_name(infs__arch arch);

/* Reads a Hugging Face config.json (path is for messages). */
int infs__config_from_json(infs__model_config *c, const infs__json *root, const char *path);

/* Reads GGUF metadata ({arch}.block_count, ...) and the tensor infos that
 * fix the rest (vocabulary size, tied output, biases). path is for
 * messages. */
int infs__config_from_gguf(infs__model_config *c, const infs__gguf *g, const char *path);

/* Range checks shared by both formats. */
int infs__config_check(const infs__model_config *c, const char *path);

typedef struct infs__layer {
	float *attn_norm, *ffn_norm;
	infs__wmat wq, wk, wv, wo;      /* [out][in] */
	float *bq, *bk, *bv, *bo;       /* NULL when absent */
	float *q_norm, *k_norm;         /* [head_dim], Qwen3 */
	infs__wmat w_gate, w_up, w_down;
} infs__layer;

struct infs_model {
	infs__model_config cfg;
	infs__wmat tok_embd; /* [n_vocab][n_embd]; data NULL: no host weights */
	float *out_norm;
	infs__wmat output;   /* [n_vocab][n_embd]; data == tok_embd's when tied */
	infs__layer *layers;
	infs__rope rope;
	uint32_t n_threads;
	struct infs__pool_keep *pool; /* the threads of the calls that bring no pool */
	uint64_t weights_hash;
	uint64_t tokenizer_hash; /* tokenizer and chat template sources; 0 when absent */
	size_t weight_bytes;     /* bytes of weights held on the host */
	uint64_t n_params;       /* weights held, in elements */
	infs_tokenizer *tok;     /* NULL when the model has none */
	int device;              /* -1: host only; else the device holding dev */
	uint32_t device_max_tokens; /* tokens a device forward call may take */
	int device_weights;         /* INFS_DTYPE_BF16 or INFS_DTYPE_FP8_E4M3: the device copy's matrices */
	struct infs__model_dev *dev; /* the weights on the device (cuda/device_model.c), or NULL */
};

/* For benchmarks: a model of configuration cfg whose weights exist only on
 * device, random bf16 values made there from seed (matrices ~N(0, 0.02),
 * norms 1, biases 0; with weights INFS_DTYPE_FP8_E4M3 the matrices are
 * those values quantized as infs_model_options.device_weights says), with
 * a workspace for max_tokens tokens. It has no
 * host weights (tok_embd NULL): infs_model_forward refuses it; only
 * infs_model_forward_device runs it. Released with infs_model_free. */
int infs__model_random_device(infs_model **out, const infs__model_config *cfg, int device, uint32_t max_tokens,
                              uint64_t seed, int weights);

#endif

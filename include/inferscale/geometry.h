/* inferscale — the model geometry a store is bound to: KV shape, rotary
 * embedding and the retrieval embedding's size. */
#ifndef INFERSCALE_GEOMETRY_H
#define INFERSCALE_GEOMETRY_H

#include "inferscale/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the rotary dimensions are paired. */
typedef enum infs_rope_style {
	INFS_ROPE_NEOX = 0, /* pairs (i, i + rotary_dim/2): Llama, Mistral, Qwen in HF */
	INFS_ROPE_GPTJ = 1  /* pairs (2i, 2i + 1): GPT-J, llama.cpp's "normal" mode */
} infs_rope_style;

/* How the rotary frequencies are rescaled for long contexts. */
typedef enum infs_rope_scaling {
	INFS_ROPE_SCALING_NONE = 0,
	INFS_ROPE_SCALING_LINEAR = 1, /* inv_freq / factor */
	INFS_ROPE_SCALING_LLAMA3 = 2, /* Llama 3.1: factor, low/high freq factor, original max */
	INFS_ROPE_SCALING_YARN = 3    /* YaRN: factor, beta fast/slow, original max, attn factor */
} infs_rope_scaling;

#define INFS_GEOMETRY_VERSION 1

/* Everything that fixes the shape and the position encoding of stored KV.
 * Initialise with INFS_GEOMETRY_INIT (or infs_geometry_init) and set fields;
 * fields are only ever appended. */
typedef struct infs_geometry {
	unsigned version;
	uint32_t n_layers;
	uint32_t n_kv_heads;
	uint32_t head_dim;
	uint32_t rotary_dim;          /* even, <= head_dim; the rest is not rotated */
	infs_rope_style rope_style;
	double rope_theta;
	infs_rope_scaling rope_scaling;
	double rope_factor;            /* linear, llama3, yarn */
	double rope_low_freq_factor;   /* llama3 */
	double rope_high_freq_factor;  /* llama3 */
	uint32_t rope_original_max_pos;/* llama3, yarn */
	double rope_beta_fast;         /* yarn (HF default 32) */
	double rope_beta_slow;         /* yarn (HF default 1) */
	double rope_attn_factor;       /* yarn: cos/sin scale; 0 = 0.1 ln(factor) + 1 */
	infs_dtype kv_dtype;
	uint32_t embed_dim;            /* retrieval embedding size; 0 = no embeddings */
} infs_geometry;

#define INFS_GEOMETRY_INIT                                                  \
	{ INFS_GEOMETRY_VERSION, 0, 0, 0, 0, INFS_ROPE_NEOX, 10000.0,           \
	  INFS_ROPE_SCALING_NONE, 1.0, 1.0, 4.0, 8192, 32.0, 1.0, 0.0,          \
	  INFS_DTYPE_F16, 0 }

/* Fills g with the defaults of INFS_GEOMETRY_INIT for the given struct
 * version. Returns INFS_EINVAL for a NULL g or an unknown version. */
INFS_API int infs_geometry_init(infs_geometry *g, unsigned version);

/* Checks that g describes a usable geometry. On error the message names the
 * offending field. */
INFS_API int infs_geometry_validate(const infs_geometry *g);

/* Bytes of K (or of V) that one token occupies across all layers: for
 * INFS_DTYPE_FP8_E4M3, n_layers * n_kv_heads * (head_dim + 4). */
INFS_API size_t infs_geometry_kv_token_bytes(const infs_geometry *g);

/* Converts one fact's K (or V) of n_tokens tokens between element types:
 * src in src_dtype to dst in dst_dtype, both laid out as the store keeps
 * them, with g's shape (its kv_dtype is not used). For f32, f16 and bf16
 * that is [n_layers][n_tokens][n_kv_heads][head_dim]; for fp8 e4m3 the
 * e4m3 bytes in that order, then an f32 scale per (layer, token, head):
 * [n_layers][n_tokens][n_kv_heads], together
 * n_tokens * infs_geometry_kv_token_bytes bytes. An element's value is its
 * e4m3 value times its row's scale. Quantizing sets scale = amax / 448 over
 * the row's head_dim values (0 for a row of zeros, whose bytes are then 0)
 * and rounds value / scale to the nearest e4m3, ties to even, saturating at
 * +-448; it never produces NaN. Dequantizing computes e4m3 * scale in f32
 * and rounds to dst_dtype. Other conversions round through f32 to nearest
 * even. src and dst must not overlap and be aligned to their elements
 * (fp8: to 4 bytes); NaN or infinite input is INFS_EINVAL, naming the
 * element. So a caller with its own KV can fill an fp8 store. */
INFS_API int infs_kv_convert(void *dst, infs_dtype dst_dtype, const void *src, infs_dtype src_dtype,
                             const infs_geometry *g, uint32_t n_tokens);

#ifdef __cplusplus
}
#endif
#endif

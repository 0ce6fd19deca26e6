/* The BERT encoder (post-LN transformer, as in BertModel) on the CPU, with the
 * sentence-transformers pooling on top: what the built-in embedder runs. */
#ifndef INFS_BERT_H
#define INFS_BERT_H

#include <stddef.h>
#include <stdint.h>

#include "util/pool.h"

typedef struct infs__bert_config {
	uint32_t n_vocab;  /* rows of the word embedding */
	uint32_t n_pos;    /* max_position_embeddings */
	uint32_t n_types;  /* type_vocab_size */
	uint32_t dim;      /* hidden_size */
	uint32_t n_layers;
	uint32_t n_heads;  /* dim is a multiple of n_heads */
	uint32_t n_ffn;    /* intermediate_size */
	float ln_eps;      /* layer_norm_eps */
} infs__bert_config;

/* Weights of one layer. Matrices are in nn.Linear's layout, [out][in]
 * row-major, so that safetensors tensors are used in place. */
typedef struct infs__bert_layer {
	const float *wq, *bq, *wk, *bk, *wv, *bv; /* [dim][dim], [dim] */
	const float *wo, *bo;                     /* attention output [dim][dim] */
	const float *ln1_w, *ln1_b;               /* after attention + residual */
	const float *w_up, *b_up;                 /* [n_ffn][dim], [n_ffn] */
	const float *w_down, *b_down;             /* [dim][n_ffn], [dim] */
	const float *ln2_w, *ln2_b;               /* after the FFN + residual */
} infs__bert_layer;

typedef struct infs__bert_weights {
	const float *word; /* [n_vocab][dim] */
	const float *pos;  /* [n_pos][dim] */
	const float *type; /* [n_types][dim]; every token has type 0 */
	const float *ln_w, *ln_b;
	const infs__bert_layer *layers; /* n_layers */
} infs__bert_weights;

typedef enum infs__bert_pooling {
	INFS__POOL_MEAN,          /* mean over the sequence's tokens */
	INFS__POOL_CLS,           /* the first token */
	INFS__POOL_MAX,           /* element-wise max over the tokens */
	INFS__POOL_MEAN_SQRT_LEN  /* sum over the tokens / sqrt(length) */
} infs__bert_pooling;

/* Floats of scratch that infs__bert_encode needs for batches of up to
 * max_tokens tokens in all, run on a pool of n_threads threads. */
size_t infs__bert_scratch_floats(const infs__bert_config *cfg, uint32_t max_tokens,
                                 uint32_t n_threads);

/* Encodes n_seq sequences stored back to back: sequence s is
 * ids[offsets[s] .. offsets[s+1]), offsets[0] = 0, 1 <= length <= cfg->n_pos, every id below
 * cfg->n_vocab (the caller has checked). The sequences are packed rather than
 * padded: each token attends only to the tokens of its own sequence, which is
 * exactly what BertModel computes for the unpadded positions of a padded batch
 * whose attention mask zeroes the padding. Writes the pooled vector of each
 * sequence to out[s * dim], L2-normalised when normalize is set. The pool
 * runs the work and must not be running anything else. Cannot fail. */
void infs__bert_encode(const infs__bert_config *cfg, const infs__bert_weights *w,
                       const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
                       infs__bert_pooling pooling, int normalize, infs__pool *pool,
                       float *scratch, float *out);

#endif

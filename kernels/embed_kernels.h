/* The embedder's BERT encoder as C sees it (embed_bert.cu), f32 throughout.
 * Each launcher queues its work on the given stream and returns the
 * launch's cudaError_t (cudaErrorInvalidValue for sizes it cannot take);
 * libinferscale/cuda/device_embed.c has checked everything else on the
 * host: every id below n_vocab, every sequence 1..n_pos tokens. Pointers
 * are device pointers unless said; matrices are row-major. A batch is
 * packed: sequence s is tokens [offsets[s], offsets[s + 1]), offsets[0] =
 * 0, the tokens the rows of one [n_tokens][dim] matrix. */
#ifndef INFS_EMBED_KERNELS_H
#define INFS_EMBED_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest head the attention kernel takes. */
#define INFS_K_BERT_MAX_HEAD_DIM 128u

/* Pooling modes, numbered as infs__bert_pooling (embed/bert.h). */
enum { INFS_K_POOL_MEAN = 0, INFS_K_POOL_CLS = 1, INFS_K_POOL_MAX = 2, INFS_K_POOL_MEAN_SQRT_LEN = 3 };

/* dst[0..n) = src[0..n), 32-bit words from host memory, passed as kernel
 * arguments (960 words per launch): the host buffer may be reused as soon
 * as this returns, and nothing waits for the device. */
cudaError_t infs_k_bert_put(void *dst, const void *src_host, size_t n, cudaStream_t stream);

/* h[t] = LayerNorm(word[ids[t]] + pos[t - offsets[s]] + type[0]) with
 * ln_w, ln_b (t in sequence s), for n_tokens rows of dim; NaN rows for an
 * id outside 0..n_vocab-1. */
cudaError_t infs_k_bert_embed(float *h, const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
                              uint32_t n_tokens, const float *word, const float *pos, const float *type,
                              const float *ln_w, const float *ln_b, uint32_t dim, uint32_t n_vocab, float eps,
                              cudaStream_t stream);

/* Attention of each token over the tokens of its own sequence:
 * softmax(q k^T / sqrt(head_dim)) v per head, q|k|v the rows of qkv
 * ([n_tokens][3 dim], q then k then v, head h at columns h * head_dim of
 * each) plus bqkv ([3 dim]); ctx is [n_tokens][dim]. max_len is the
 * longest sequence's length. head_dim = dim / n_heads at most
 * INFS_K_BERT_MAX_HEAD_DIM. */
cudaError_t infs_k_bert_attention(float *ctx, const float *qkv, const float *bqkv, const uint32_t *offsets,
                                  uint32_t n_seq, uint32_t max_len, uint32_t dim, uint32_t n_heads,
                                  cudaStream_t stream);

/* h[t] = LayerNorm(h[t] + (x[t] + bias)) with g, b, for n rows of dim. */
cudaError_t infs_k_bert_residual_norm(float *h, const float *x, const float *bias, const float *g, const float *b,
                                      uint32_t n, uint32_t dim, float eps, cudaStream_t stream);

/* x[t][j] = gelu(x[t][j] + bias[j]), the exact (erf) GELU, for n rows of f. */
cudaError_t infs_k_bert_gelu(float *x, const float *bias, uint32_t n, uint32_t f, cudaStream_t stream);

/* out[s] ([n_seq][dim]) = the pooled rows of h of sequence s (INFS_K_POOL_*),
 * divided by max(|out[s]|, 1e-12) when normalize is set. */
cudaError_t infs_k_bert_pool(float *out, const float *h, const uint32_t *offsets, uint32_t n_seq, uint32_t dim,
                             int mode, int normalize, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif

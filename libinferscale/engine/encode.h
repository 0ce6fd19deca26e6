/* Fact encoding internals that composition and the engine share. */
#ifndef INFS_ENCODE_H
#define INFS_ENCODE_H

#include "inferscale/encode.h"
#include "engine/kvcache.h"
#include "util/pool.h"

/* The store's geometry, after checking that it and the store's identity are
 * the model's (INFS_EMISMATCH otherwise). */
int infs__encode_check_store(infs_geometry *out, infs_store *store, const infs_model *model);

/* text through the model's tokenizer with INFS_TOKENIZE_* flags; *out is
 * released with free(). */
int infs__encode_tokenize(int32_t **out, uint32_t *n_out, const infs_model *model, const char *text,
                          unsigned flags);

/* Runs tokens[0..n) through the model into a fresh f32 cache at positions
 * 0.. (the shared encoding context). */
int infs__encode_context(infs__kvcache *c, const infs_model *model, const infs_geometry *g,
                         const int32_t *tokens, uint32_t n, infs__pool *pool);

/* The pre-RoPE K and V ([n_layers][n][n_kv_heads][head_dim], g->kv_dtype)
 * of tokens[0..n) run after the first n_ctx positions of ctx (NULL: none)
 * and then own_ctx[0..n_own). */
int infs__encode_kv(void *k, void *v, const infs_model *model, const infs_geometry *g,
                    const infs__kvcache *ctx, uint32_t n_ctx, const int32_t *own_ctx, uint32_t n_own,
                    const int32_t *tokens, uint32_t n, infs__pool *pool);

/* infs_fact_encode that may write into a reserved namespace (the engine's
 * segments); the public entry point refuses those. */
int infs__fact_encode(uint64_t *out_ids, infs_store *store, const char *ns, const infs_model *model,
                      const infs_fact_input *facts, size_t n_facts, const infs_encode_options *opts);

#endif

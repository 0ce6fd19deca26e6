/* inferscale — Chunked RoPE injection: stored pre-RoPE KV written into an
 * engine's paged KV cache with keys rotated to the positions they land at. */
#ifndef INFERSCALE_INJECT_H
#define INFERSCALE_INJECT_H

#include "inferscale/store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INFS_KV_LAYOUT_VERSION 1

/* A paged KV cache described by strides, so that any engine's layout fits:
 *   vLLM   (2, n_blocks, block_size, heads, dim): k = t[0], v = t[1]
 *   FlashInfer NHD (n_blocks, 2, block_size, heads, dim): v = k + block_size*heads*dim
 *   HND    (n_blocks, heads, block_size, dim): stride_head > stride_slot
 *   K|V packed in the last dim (..., 2*dim): v = k + dim
 * Element (block b, slot s, head h, dim d) of layer l's K is at
 *   k_layers[l] + b*stride_block + s*stride_slot + h*stride_head + d*stride_dim
 * elements (of dtype), and likewise for V. Strides are in elements. */
typedef struct infs_kv_layout {
	unsigned version;
	int device;            /* -1: host memory; >= 0: CUDA device ordinal */
	infs_dtype dtype;      /* may differ from the store's kv_dtype: converted */
	uint32_t n_layers;     /* must equal the store's */
	uint32_t n_kv_heads;   /* must equal the store's */
	uint32_t head_dim;     /* must equal the store's */
	uint32_t n_blocks;     /* physical blocks; block ids are checked against it */
	uint32_t block_size;   /* token slots per block */
	void *const *k_layers; /* n_layers pointers */
	void *const *v_layers; /* n_layers pointers */
	int64_t stride_block;
	int64_t stride_slot;
	int64_t stride_head;
	int64_t stride_dim;
} infs_kv_layout;

#define INFS_KV_LAYOUT_INIT { INFS_KV_LAYOUT_VERSION, -1, INFS_DTYPE_F16, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0, 1 }

INFS_API int infs_kv_layout_init(infs_kv_layout *layout, unsigned version);

#define INFS_INJECT_OPTIONS_VERSION 1

typedef struct infs_inject_options {
	unsigned version;
	void *stream; /* cudaStream_t for a device cache; NULL = the default stream */
} infs_inject_options;

#define INFS_INJECT_OPTIONS_INIT { INFS_INJECT_OPTIONS_VERSION, NULL }

INFS_API int infs_inject_options_init(infs_inject_options *opts, unsigned version);

/* Writes the KV of records ids[0..n_ids) of namespace ns, in that order, at
 * consecutive positions from start_pos: the token at position p goes to
 * block block_table[p / block_size], slot p % block_size, and its key is
 * rotated to position p. Every id, block id and position is checked before
 * anything is written; on error the cache is untouched. *out_next_pos is the
 * first position after the injected tokens. For a device cache the writes are
 * queued on opts->stream and complete asynchronously. */
INFS_API int infs_inject_into_blocks(uint32_t *out_next_pos, infs_store *store, const char *ns,
                                     const uint64_t *ids, size_t n_ids, uint32_t start_pos,
                                     const int32_t *block_table, size_t block_table_len,
                                     const infs_kv_layout *cache, const infs_inject_options *opts);

#define INFS_INJECTOR_OPTIONS_VERSION 1

typedef struct infs_injector_options {
	unsigned version;
	uint32_t max_ids;    /* facts per call: 1 .. INFS_RETRIEVE_K_MAX */
	uint32_t max_tokens; /* tokens per call, all its facts together: 1 .. INT32_MAX */
} infs_injector_options;

#define INFS_INJECTOR_OPTIONS_INIT { INFS_INJECTOR_OPTIONS_VERSION, 64, 4096 }

INFS_API int infs_injector_options_init(infs_injector_options *opts, unsigned version);

/* Injection from fact ids in device memory, for callers whose ids never
 * reach the host (infs_retrieve_device's hits). An injector is bound to one
 * store with a device copy and one device cache layout (on the copy's
 * device), whose pointers and strides it copies to the device when made;
 * it holds the device tables of one call at a time: one stream's, used by
 * one thread at a time. The store must outlive it. */
typedef struct infs_injector infs_injector;

INFS_API int infs_injector_create(infs_injector **out, infs_store *store, const infs_kv_layout *cache,
                                  const infs_injector_options *opts);

/* Waits for the work queued with the injector to be done with it, then
 * frees it. Accepts NULL. */
INFS_API void infs_injector_free(infs_injector *injector);

/* infs_inject_into_blocks with device pointers, queued on stream (a
 * cudaStream_t; NULL: the default stream), facts only (segments are
 * injected with infs_inject_into_blocks). ids: id i at (const char *)ids +
 * i * id_stride bytes (8 for a uint64_t array, sizeof(infs_hit) to read
 * infs_retrieve_device's hits), *n_ids of them (device uint32_t, e.g. its
 * counts), at most the injector's max_ids; block_table: device
 * int32_t[block_table_len]; each aligned to its elements. On the device, before anything is written,
 * every id is looked up in namespace ns and every limit checked; *status
 * (device int32_t, may be NULL) receives INFS_OK, or the code of a call
 * that wrote nothing: INFS_ENOTFOUND (an id that is not a live fact of
 * ns), INFS_ERANGE (more than max_ids ids or max_tokens tokens, a position
 * past the block table, a block id outside the layout's n_blocks),
 * INFS_ENOTRESIDENT (a fact whose KV only the store file holds: the call
 * queues its namespace's move up, as infs_prefetch does; facts in pinned
 * host memory are read there).
 * *next_pos (device uint32_t, may be NULL) receives the first position
 * after the injected tokens (start_pos when nothing was written). The
 * same bytes in the cache as infs_inject_into_blocks. Returns once the
 * work is queued: no allocation, no wait, so the call can be captured in
 * a CUDA graph. The namespace is read when the call is made: a graph that
 * captured it stays valid until infs_namespace_generation() of that
 * namespace changes (tier moves do not change it: each fact is read from
 * where it is when the graph runs). */
INFS_API int infs_inject_device(infs_injector *injector, const char *ns, const void *ids, size_t id_stride,
                                const uint32_t *n_ids, uint32_t start_pos, const int32_t *block_table,
                                size_t block_table_len, uint32_t *next_pos, int32_t *status, void *stream);

/* Rotates x in place, host memory laid out [n_tokens][n_heads][head_dim] in
 * dtype, token t to position positions[t], with g's rotary embedding. The
 * same arithmetic as injection: the reference for engines and tests. */
INFS_API int infs_rope_rotate(void *x, infs_dtype dtype, uint32_t n_tokens, uint32_t n_heads,
                              const int32_t *positions, const infs_geometry *g);

#ifdef __cplusplus
}
#endif
#endif

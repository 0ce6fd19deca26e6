/* A paged KV cache in host memory, as the reference engine and fact encoding
 * hold it: vLLM's layout per layer, K blocks then V blocks, and a block table
 * that maps logical blocks to physical ones in order. */
#ifndef INFS_KVCACHE_H
#define INFS_KVCACHE_H

#include "inferscale/inject.h"

typedef struct infs__kvcache {
	infs_kv_layout layout;
	void **k_layers, **v_layers;
	char *mem;
	int32_t *table;    /* n_blocks entries: logical block b is physical block table[b] */
	uint32_t capacity; /* tokens: n_blocks * block_size */
} infs__kvcache;

/* A cache for at least n_tokens tokens. The block table is a fixed
 * permutation (not the identity) so that code reading it by position rather
 * than through the table is caught by tests. */
int infs__kvcache_init(infs__kvcache *c, const infs_geometry *g, infs_dtype dtype, uint32_t n_tokens,
                       uint32_t block_size);
void infs__kvcache_free(infs__kvcache *c);

#endif

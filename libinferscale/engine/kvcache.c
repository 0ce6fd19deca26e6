/* Host paged KV cache. */
#include <stdlib.h>
#include <string.h>

#include "util/dtype.h"
#include "util/error.h"
#include "engine/kvcache.h"

int infs__kvcache_init(infs__kvcache *c, const infs_geometry *g, infs_dtype dtype, uint32_t n_tokens,
                       uint32_t block_size)
{
	memset(c, 0, sizeof *c);
	size_t es = infs__dtype_cache_ok(dtype) ? infs_dtype_size(dtype) : 0;
	if (!es || !block_size || !n_tokens)
		return infs__error(INFS_EINVAL, "KV cache: dtype %d, block_size %u, %u tokens", (int)dtype,
		                   block_size, n_tokens);
	uint32_t nb = (n_tokens + block_size - 1) / block_size;
	size_t row = (size_t)g->n_kv_heads * g->head_dim;
	size_t per = (size_t)nb * block_size * row; /* elements of K (or V) per layer */
	c->mem = calloc(2 * (size_t)g->n_layers * per, es);
	c->k_layers = calloc(g->n_layers, sizeof *c->k_layers);
	c->v_layers = calloc(g->n_layers, sizeof *c->v_layers);
	c->table = malloc(nb * sizeof *c->table);
	if (!c->mem || !c->k_layers || !c->v_layers || !c->table) {
		infs__kvcache_free(c);
		return infs__error(INFS_ENOMEM, "KV cache: out of memory for %u tokens", n_tokens);
	}
	for (uint32_t l = 0; l < g->n_layers; l++) {
		c->k_layers[l] = c->mem + 2 * l * per * es;
		c->v_layers[l] = c->mem + (2 * l + 1) * per * es;
	}
	/* Logical block b in physical block (b * 7 + 3) mod nb when 7 is coprime
	 * to nb, else reversed: any permutation serves. */
	for (uint32_t b = 0; b < nb; b++)
		c->table[b] = (int32_t)(nb % 7 ? (b * 7u + 3u) % nb : nb - 1 - b);
	infs_kv_layout l = INFS_KV_LAYOUT_INIT;
	l.dtype = dtype;
	l.n_layers = g->n_layers;
	l.n_kv_heads = g->n_kv_heads;
	l.head_dim = g->head_dim;
	l.n_blocks = nb;
	l.block_size = block_size;
	l.k_layers = c->k_layers;
	l.v_layers = c->v_layers;
	l.stride_block = (int64_t)block_size * (int64_t)row;
	l.stride_slot = (int64_t)row;
	l.stride_head = g->head_dim;
	l.stride_dim = 1;
	c->layout = l;
	c->capacity = nb * block_size;
	return INFS_OK;
}

void infs__kvcache_free(infs__kvcache *c)
{
	if (!c)
		return;
	free(c->mem);
	free(c->k_layers);
	free(c->v_layers);
	free(c->table);
	memset(c, 0, sizeof *c);
}

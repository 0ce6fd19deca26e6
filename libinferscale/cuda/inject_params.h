/* The injection kernel's parameters (infs_k_inject, kernels.h) filled in
 * one place for both paths of device injection (device_inject.c: ids on
 * the host; device_inject_ids.c: ids in device memory): the facts' tables
 * (src_k, src_v, fact_first), where they land (start_pos, blocks, a K and
 * a V pointer per layer), the RoPE they are turned by, and what the store's
 * geometry and the cache's layout say. */
#ifndef INFS_INJECT_PARAMS_H
#define INFS_INJECT_PARAMS_H

#include "inferscale/inject.h"
#include "inject_kernels.h"

static inline infs_k_inject_params infs__inject_params(const infs_geometry *g, const infs_kv_layout *l,
                                                       const void *const *src_k, const void *const *src_v,
                                                       const uint32_t *fact_first, uint32_t n_facts,
                                                       uint32_t n_tokens, uint32_t start_pos,
                                                       const int32_t *blocks, void *const *dst_k,
                                                       void *const *dst_v, float attn_scale,
                                                       const float *inv_freq, uintptr_t ptr_bits)
{
	return (infs_k_inject_params){
		.src_k = src_k, .src_v = src_v, .fact_first = fact_first, .n_facts = n_facts, .n_tokens = n_tokens,
		.start_pos = start_pos, .block_size = l->block_size, .blocks = blocks, .dst_k = dst_k, .dst_v = dst_v,
		.stride_block = l->stride_block, .stride_slot = l->stride_slot, .stride_head = l->stride_head,
		.stride_dim = l->stride_dim, .n_layers = g->n_layers, .n_heads = g->n_kv_heads, .head_dim = g->head_dim,
		.rotary_dim = g->rotary_dim, .style = g->rope_style, .attn_scale = attn_scale, .inv_freq = inv_freq,
		.src_dtype = g->kv_dtype, .dst_dtype = l->dtype, .ptr_bits = ptr_bits,
	};
}

#endif

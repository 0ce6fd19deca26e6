/* The injection launchers (kernels/inject.cu, kernels/inject_resolve.cu):
 * facts' pre-RoPE K and V rotated into a paged cache, from host-made
 * tables or from fact ids in device memory. Conventions: kernels.h. */
#ifndef INFS_INJECT_KERNELS_H
#define INFS_INJECT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One injection: the tokens of n_facts facts, laid end to end, land at
 * positions start_pos, start_pos + 1, ... of a paged cache.
 * Fact f's K (and V) is [n_layers][n][n_heads][head_dim] in src_dtype at
 * src_k[f] (src_v[f]), n = fact_first[f + 1] - fact_first[f]. The token at
 * position p goes to block blocks[p / block_size - start_pos / block_size],
 * slot p % block_size; element (b, s, h, d) of layer l's K is at
 * dst_k[l] + b*stride_block + s*stride_slot + h*stride_head + d*stride_dim
 * elements of dst_dtype. Keys are rotated to p with inv_freq (rotary_dim / 2
 * floats) and attn_scale, NeoX (style 0) or GPT-J (style 1) pairing; dims
 * from rotary_dim on pass through, and values are copied. An fp8 e4m3 source
 * (INFS_K_FP8_E4M3) is the store's blob: the codes in that layout, then an
 * f32 scale per [n_layers][n][n_heads] row, 4-byte aligned; each element is
 * e4m3 * scale in f32, as the CPU computes it. */
typedef struct infs_k_inject_params {
	const void *const *src_k;
	const void *const *src_v;
	const uint32_t *fact_first; /* n_facts + 1 token offsets, fact_first[0] = 0 */
	uint32_t n_facts;
	uint32_t n_tokens;          /* fact_first[n_facts] */
	uint32_t start_pos;
	uint32_t block_size;
	const int32_t *blocks;
	void *const *dst_k;         /* n_layers pointers */
	void *const *dst_v;
	int64_t stride_block, stride_slot, stride_head, stride_dim;
	uint32_t n_layers, n_heads, head_dim, rotary_dim;
	int style;
	float attn_scale;
	const float *inv_freq;
	int src_dtype, dst_dtype;
	/* Host-side facts the launcher needs to pick the vector path: every
	 * src_k/src_v/dst_k/dst_v pointer's address bits OR-ed together (with
	 * dev_counts, bits that every pointer the tables may hold can have). */
	uintptr_t ptr_bits;
	/* Optional (NULL: the fields above): the call's fact and token counts,
	 * two words in device memory that an earlier kernel on the stream
	 * wrote (infs_k_inject_resolve); n_facts and n_tokens are then their
	 * bounds, and the grid is sized for n_tokens tokens, blocks past the
	 * device count doing nothing. */
	const uint32_t *dev_counts;
} infs_k_inject_params;

/* The path p takes: 0 scalar accesses (any strides), 1 16-byte vectors
 * through registers, 2 16-byte vectors staged through shared memory. */
int infs_k_inject_path(const infs_k_inject_params *p);

cudaError_t infs_k_inject(const infs_k_inject_params *p, cudaStream_t stream);

/* The tables of an injection from fact ids in device memory, made by one
 * block (kernels/inject_resolve.cu). Id i (i < *n_ids) is the uint64 at
 * (const char *)ids + i * id_stride; it is looked up in the namespace's
 * n_rows sorted row_ids (a row flagged in dead is not found), and its row's
 * K pointer row_kv[r] and tokens row_ntok[r] give src_k[i], src_v[i] (K +
 * tokens * token_bytes) and fact_first[i + 1] (a prefix sum). status_code
 * is err_range when *n_ids > max_ids, the tokens exceed max_tokens, a
 * position from start_pos lies past block_table_len entries or uses a block
 * id outside [0, n_blocks); else err_notfound when an id is not found;
 * else err_notresident when a row's K pointer is NULL (its KV is in no
 * memory the device reads: the store file's tier); else 0. counts receives (n_facts, n_tokens), both 0 unless the status is
 * 0; *status (may be NULL) the status; *next_pos (may be NULL) start_pos
 * plus the tokens counted. start_pos + max_tokens must fit 32 bits. */
#define INFS_K_RESOLVE_MAX_IDS 4096u

typedef struct infs_k_resolve_params {
	const void *ids;
	size_t id_stride;
	const uint32_t *n_ids;
	const uint64_t *row_ids;    /* n_rows of them; all four may be NULL when n_rows is 0 */
	const char *const *row_kv;
	const uint32_t *row_ntok;
	const uint32_t *dead;
	uint32_t n_rows;
	uint64_t token_bytes;
	uint32_t max_ids;           /* at most INFS_K_RESOLVE_MAX_IDS */
	uint32_t max_tokens;
	uint32_t start_pos, block_size;
	const int32_t *block_table;
	size_t block_table_len;
	uint32_t n_blocks;
	const void **src_k;         /* max_ids each */
	const void **src_v;
	uint32_t *fact_first;       /* max_ids + 1 */
	uint32_t *counts;           /* 2 */
	uint32_t *next_pos;
	int32_t *status;
	int32_t err_notfound, err_range, err_notresident;
} infs_k_resolve_params;

cudaError_t infs_k_inject_resolve(const infs_k_resolve_params *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif

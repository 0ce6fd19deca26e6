/* The CUDA launchers as C sees them. Every launcher queues its work on the
 * given stream and returns the launch's cudaError_t; arguments have been
 * validated by the caller (libinferscale/device*.c), so a launcher trusts
 * every index it is given. All pointers are device pointers unless said. */
#ifndef INFS_KERNELS_H
#define INFS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, numbered as infs_dtype. */
enum { INFS_K_F32 = 0, INFS_K_F16 = 1, INFS_K_BF16 = 2, INFS_K_FP8_E4M3 = 3 /* sources only */ };

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

/* A tier move of the store's device copy (kernels/tier.cu): kv[rows[i]] =
 * vals[i] for i < n, each pointer written with one 8-byte store, so that a
 * resolve kernel running meanwhile reads the old pointer or the new one,
 * never a mix. rows and vals in device memory. */
cudaError_t infs_k_set_rows(const char **kv, const uint32_t *rows, const char *const *vals, uint32_t n,
                            cudaStream_t stream);

/* Top-k by score. scores is [n_queries][ld] floats, one column per row of
 * the matrix they were computed from; row i's score is multiplied by
 * row_scale[i] (row_scale NULL: by 1), its id is ids[i], and it is deleted,
 * never returned, when bit i of dead is set (dead NULL: none is). Rows are
 * in increasing id order, so equal scores are ordered by row. For each query
 * q, out_id/out_score[q * k ..] receive the best min(k, live rows) hits, best
 * first, and out_n[q] their count. */
#define INFS_K_TOPK_MAX 4096u

typedef struct infs_k_topk_params {
	const float *scores;
	size_t ld;
	uint32_t n_rows;
	uint32_t n_queries;
	uint32_t k;
	const float *row_scale;
	const uint32_t *dead;
	const uint64_t *ids;
	uint64_t *out_id;
	float *out_score;
	uint32_t *out_n;
	void *workspace;            /* infs_k_topk_workspace_bytes() bytes */
} infs_k_topk_params;

size_t infs_k_topk_workspace_bytes(uint32_t n_rows, uint32_t n_queries, uint32_t k);

cudaError_t infs_k_topk(const infs_k_topk_params *p, cudaStream_t stream);

/* Fused retrieval (kernels/retrieve*.cu): the scores of f16 rows against a
 * batch of f16 queries computed and selected in one pass over the rows
 * (small sets keep them in the workspace for the merge, larger ones never
 * store them). emb is
 * [n_rows][dim], queries [n_queries][dim]; row_scale, dead, ids, out_id,
 * out_score and out_n as for infs_k_topk, the scores being the
 * f32-accumulated dot products; exact, ties by row. Takes the shapes for
 * which infs_k_fused_supported() is true on the current device: dim a
 * multiple of 64 up to INFS_K_FUSED_MAX_DIM, up to INFS_K_FUSED_MAX_QUERIES
 * queries, k up to INFS_K_FUSED_MAX. */
#define INFS_K_FUSED_MAX 128u
#define INFS_K_FUSED_MAX_DIM 1024u
#define INFS_K_FUSED_MAX_QUERIES 32u

typedef struct infs_k_fused_params {
	const uint16_t *emb;
	const uint16_t *queries;
	uint32_t n_rows;
	uint32_t dim;
	uint32_t n_queries;
	uint32_t k;
	const float *row_scale;
	const uint32_t *dead;
	const uint64_t *ids;
	uint64_t *out_id;
	float *out_score;
	uint32_t *out_n;
	void *workspace;            /* infs_k_fused_workspace_bytes() bytes */
	/* Optional (NULL: none): INFS_K_FUSED_SEEDS words, zero before their
	 * first call, where the blocks share lower bounds of every query's k-th
	 * best score while they scan. seed_epoch tells this call's bounds from
	 * earlier calls': nonzero, and different from every earlier call's on
	 * the same seeds since they were zeroed. Concurrent calls need their
	 * own seeds, as they need their own workspace. */
	uint64_t *seeds;
	uint32_t seed_epoch;
} infs_k_fused_params;

#define INFS_K_FUSED_SEEDS (INFS_K_FUSED_MAX_QUERIES * 32u)

int infs_k_fused_supported(uint32_t dim, uint32_t n_queries, uint32_t k);

size_t infs_k_fused_workspace_bytes(uint32_t n_rows, uint32_t dim, uint32_t n_queries, uint32_t k);

/* The most infs_k_fused_workspace_bytes() asks for any n_rows up to max_rows. */
size_t infs_k_fused_workspace_max(uint32_t max_rows, uint32_t dim, uint32_t n_queries, uint32_t k);

cudaError_t infs_k_fused_topk(const infs_k_fused_params *p, cudaStream_t stream);

/* The ends of a device search (kernels/retrieve_exact.cu). query_prep: per
 * query (one block each), non-finite values and, with normalize, a zero
 * query flagged in bad[q] (1, else 0); exact = the query scaled to unit
 * length with the CPU path's arithmetic when normalize is set, else copied;
 * rank = exact made unit length, in f16, for the ranking kernels; the
 * n_seeds words of seeds (may be NULL) zeroed for a fused search. */
typedef struct infs_k_query_params {
	const float *queries;       /* [n_queries][dim] */
	uint32_t n_queries, dim;
	int normalize;
	float *exact;               /* [n_queries][dim] */
	uint16_t *rank;             /* [n_queries][dim] */
	uint32_t *bad;              /* [n_queries] */
	uint64_t *seeds;
	uint32_t n_seeds;
} infs_k_query_params;

cudaError_t infs_k_query_prep(const infs_k_query_params *p, cudaStream_t stream);

/* Sets up, once per device, what the two kernels' launches need (their
 * shared memory limits), so that a later launch makes no such call: one
 * captured into a graph in cudaStreamCaptureModeGlobal may not. */
void infs_k_exact_prepare(void);

/* The candidates cand_id[q * kk ..] (cand_n[q] of them, ids among the
 * sorted ids of the n_rows f32 rows) scored against exact query q as the
 * CPU does (double sums in order, times row_scale[row] when given, rounded
 * to float), the best k written to out_hits[q * k ..] as infs_hit (id at
 * byte 0, score at byte 8, 16 bytes), best first, equal scores by
 * increasing id, and their count to out_n[q]; 0 for a query flagged bad. */
typedef struct infs_k_rescore_params {
	const float *queries;
	const uint32_t *bad;
	uint32_t n_queries, dim;
	const uint64_t *cand_id;
	const uint32_t *cand_n;
	uint32_t kk;
	const uint64_t *ids;
	uint32_t n_rows;
	const float *rows;
	const float *row_scale;
	uint32_t k;
	void *out_hits;
	uint32_t *out_n;
} infs_k_rescore_params;

cudaError_t infs_k_rescore(const infs_k_rescore_params *p, cudaStream_t stream);

/* dst row i = src row keep[i], for n rows of row_bytes bytes. */
cudaError_t infs_k_gather_rows(void *dst, const void *src, size_t row_bytes, const uint32_t *keep, uint32_t n,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif

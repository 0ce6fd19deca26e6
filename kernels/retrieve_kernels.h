/* The retrieval launchers (kernels/topk.cu, kernels/retrieve*.cu): top-k
 * over a score matrix, fused scoring and top-k over f16 rows, and the
 * exact ends of a device search (query preparation, rescoring as the CPU
 * does). Conventions: kernels.h. */
#ifndef INFS_RETRIEVE_KERNELS_H
#define INFS_RETRIEVE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif

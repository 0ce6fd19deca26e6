/* Exact top-k over a dense matrix of embeddings: the CPU retrieval backend,
 * and the reference the FAISS and CUDA backends are checked against. */
#ifndef INFS_TOPK_H
#define INFS_TOPK_H

#include "inferscale/retrieve.h"

/* True when hit a ranks before hit b: higher score first, equal scores by
 * increasing id, NaN scores last. */
static inline int infs__hit_before(const infs_hit *a, const infs_hit *b)
{
	int an = a->score != a->score, bn = b->score != b->score;
	if (an != bn)
		return bn;
	if (!an && a->score != b->score)
		return a->score > b->score;
	return a->id < b->id;
}

/* For each of n_queries queries (dim floats each), the k best of the n rows
 * (dim floats each, ids[i] the id of row i): the score of row i is
 * dot(query, row i) * row_scale[i], or the plain dot product when row_scale
 * is NULL. out holds n_queries * k hits, best first; out_n[q] = min(k, n).
 * Rows are selected with float scores (BLAS when the library has it); the
 * scores of the hits kept are then recomputed by infs__hits_rescore, so a
 * query's result does not depend on the batch it came in. Callers have
 * checked the sizes (k >= 1). Fails only with INFS_ENOMEM. */
int infs__topk(infs_hit *out, size_t *out_n, const float *rows, const uint64_t *ids, const float *row_scale,
               size_t n, size_t dim, const float *queries, size_t n_queries, size_t k);

/* The canonical scores every backend reports: hits[i].id holds a row index
 * on entry and that row's id on return, with score dot(query, row) *
 * row_scale[row] (no scale when NULL) computed in double and rounded once;
 * then the hits are sorted best first. */
void infs__hits_rescore(infs_hit *hits, size_t m, const float *rows, const uint64_t *ids, const float *row_scale,
                        size_t dim, const float *query);

/* Sorts n hits best first (by infs__hit_before). */
void infs__hits_sort(infs_hit *hits, size_t n);

#endif

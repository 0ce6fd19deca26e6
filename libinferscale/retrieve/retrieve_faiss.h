/* The FAISS backend of retrieval, through FAISS's C API: one index per
 * namespace matrix, searched by inner product. */
#ifndef INFS_RETRIEVE_FAISS_H
#define INFS_RETRIEVE_FAISS_H

#include "inferscale/retrieve.h"

/* Builds an index of the n rows (dim floats each) from spec: a
 * faiss_index_factory string ("Flat", "HNSW32", "IVF256,Flat"), optionally
 * followed by a space and search parameters in FAISS's ParameterSpace
 * syntax ("HNSW32 efSearch=64", "IVF256,Flat nprobe=16"). The metric is
 * inner product; the index is trained on the rows when it needs training.
 * With inv_norms (1/||row||, 0 for a zero row) the rows are normalised first,
 * so that inner product is cosine. Row i gets FAISS label i. FAISS errors
 * come back with FAISS's message. */
int infs__faiss_build(void **out_index, const char *spec, const float *rows, const float *inv_norms, size_t n,
                      size_t dim);

/* Searches an index built from the n rows (ids ids[0..n), inv_norms as at
 * build time): for each query up to k hits, out laid out like
 * infs_retrieve's. FAISS picks the candidates; their scores and order are
 * redone by infs__hits_rescore, so that a Flat index reports exactly what
 * the exact search does. */
int infs__faiss_search(infs_hit *out, size_t *out_n, const void *index, const float *rows, const uint64_t *ids,
                       const float *inv_norms, size_t n, size_t dim, const float *queries, size_t n_queries,
                       size_t k);

void infs__faiss_index_free(void *index);

#endif

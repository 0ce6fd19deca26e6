/* Retrieval inside the library: the per-namespace cache of derived data
 * (row norms, FAISS indexes) and the backends' entry points. */
#ifndef INFS_RETRIEVE_INTERNAL_H
#define INFS_RETRIEVE_INTERNAL_H

#include <pthread.h>

#include "inferscale/retrieve.h"
#include "store/store.h"

/* What retrieval derives from one namespace's matrix, valid for the
 * namespace generation it was built from. Entries live as long as the store
 * (in its INFS_EXT_FAISS slot). A reader that holds the store's read lock
 * may use an entry's data after unlocking the entry: the generation cannot
 * change while any reader holds the store lock, so nobody rebuilds it. */
typedef struct infs__ns_cache {
	pthread_mutex_t lock;      /* held while building or rebuilding the fields below */
	char *ns;
	uint64_t generation;
	size_t n;                  /* rows of the matrix it was built from */
	float *inv_norms;          /* 1/||row|| (0 for a zero row); NULL until cosine needs it */
	void *faiss[2];            /* FaissIndex * per infs_metric; NULL until built */
	struct infs__ns_cache *next;
} infs__ns_cache;

/* The cache entry of namespace ns, locked, emptied first when it was built
 * from another generation or size. NULL (error set) when out of memory.
 * Requires the store's read lock; release with pthread_mutex_unlock. */
infs__ns_cache *infs__ns_cache_lock(infs_store *s, const char *ns, uint64_t generation, size_t n);

/* Fills e->inv_norms from the matrix if it is not there yet. Requires e
 * locked. */
int infs__ns_cache_norms(infs__ns_cache *e, const float *emb, size_t n, size_t dim);

/* Exact search on the store's device copy (its INFS_EXT_DEVICE slot), with
 * the contract of infs__topk but for the queries: checked (finite, and not
 * zero for cosine) and, for cosine, made unit length on the device as
 * infs_retrieve does on the CPU; scores dot(query, row), times 1/||row|| for cosine (0 for a
 * zero row), reported as infs__hits_rescore computes them; k best per
 * query, best first, ties by increasing id; out_n[q] = min(k, facts).
 * Implemented by the CUDA module; called with the store's read lock held. */
int infs__retrieve_device(infs_hit *out, size_t *out_n, infs_store *s, const char *ns, const float *queries,
                          size_t n_queries, size_t k, infs_metric metric);

/* The device-pointer path (cuda/device_retrieve.c), its arguments checked
 * by retrieve.c: o complete and valid, the store with a device copy. */
int infs__searcher_create(infs_searcher **out, infs_store *store, const infs_searcher_options *o);
void infs__searcher_free(infs_searcher *s);
int infs__retrieve_on_device(infs_searcher *s, const char *ns, const float *queries, size_t n_queries, size_t k,
                             infs_hit *hits, uint32_t *counts, void *stream);

#endif

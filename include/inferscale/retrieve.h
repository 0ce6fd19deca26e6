/* inferscale — top-k retrieval of facts by embedding within one namespace. */
#ifndef INFERSCALE_RETRIEVE_H
#define INFERSCALE_RETRIEVE_H

#include "inferscale/store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INFS_RETRIEVE_K_MAX 4096u

typedef enum infs_metric {
	INFS_METRIC_COSINE = 0,
	INFS_METRIC_IP = 1 /* inner product */
} infs_metric;

typedef enum infs_backend {
	INFS_BACKEND_AUTO = 0,  /* device if the store has a device copy, FAISS for large namespaces, else exact */
	INFS_BACKEND_EXACT = 1, /* exact search on the CPU */
	INFS_BACKEND_FAISS = 2, /* the store's FAISS index (needs the faiss feature and faiss_index) */
	INFS_BACKEND_CUDA = 3   /* exact search on the store's device copy */
} infs_backend;

#define INFS_RETRIEVE_OPTIONS_VERSION 1

typedef struct infs_retrieve_options {
	unsigned version;
	infs_metric metric;
	infs_backend backend;
} infs_retrieve_options;

#define INFS_RETRIEVE_OPTIONS_INIT { INFS_RETRIEVE_OPTIONS_VERSION, INFS_METRIC_COSINE, INFS_BACKEND_AUTO }

INFS_API int infs_retrieve_options_init(infs_retrieve_options *opts, unsigned version);

typedef struct infs_hit {
	uint64_t id;
	float score;
} infs_hit;

/* For each of n_queries query vectors (embed_dim floats each, row-major),
 * the k best facts of namespace ns, best first; equal scores are ordered by
 * increasing id. out holds n_queries * k hits (query q at out + q * k) and
 * out_n[q] how many were found (fewer than k when the namespace is smaller;
 * 0 for an empty or unknown namespace). Segments are never returned, nor is a
 * fact of another namespace. opts may be NULL for the defaults. */
INFS_API int infs_retrieve(infs_hit *out, size_t *out_n, infs_store *store, const char *ns,
                           const float *queries, size_t n_queries, size_t k,
                           const infs_retrieve_options *opts);

/* Retrieval for serving stacks: queries and hits in device memory, queued
 * on the caller's CUDA stream. A searcher is the device workspace of one
 * stream, sized when it is made, so that a search allocates nothing, never
 * waits for the device, and can be captured into a CUDA graph. Searchers
 * of one store run concurrently; one searcher is used by one thread at a
 * time. Needs a store opened with a device copy (options.device >= 0). */
#define INFS_SEARCHER_K_MAX 100u
#define INFS_SEARCHER_QUERIES_MAX 4096u

#define INFS_SEARCHER_OPTIONS_VERSION 1

typedef struct infs_searcher_options {
	unsigned version;
	infs_metric metric;
	uint32_t max_queries; /* per search: 1 .. INFS_SEARCHER_QUERIES_MAX */
	uint32_t max_k;       /* 1 .. INFS_SEARCHER_K_MAX */
	/* rows of the largest namespace it searches (deleted rows count until
	 * the device copy compacts them); 0: twice the store's largest
	 * namespace when the searcher is made, and at least 4096 */
	uint64_t max_facts;
} infs_searcher_options;

#define INFS_SEARCHER_OPTIONS_INIT { INFS_SEARCHER_OPTIONS_VERSION, INFS_METRIC_COSINE, 32, 50, 0 }

INFS_API int infs_searcher_options_init(infs_searcher_options *opts, unsigned version);

typedef struct infs_searcher infs_searcher;

INFS_API int infs_searcher_create(infs_searcher **out, infs_store *store, const infs_searcher_options *opts);

/* Waits for the searcher's queued work to be done with it, then frees it.
 * Accepts NULL. */
INFS_API void infs_searcher_free(infs_searcher *searcher);

/* infs_retrieve with device pointers, queued on stream (a cudaStream_t;
 * NULL: the default stream): queries is [n_queries][embed_dim] floats on
 * the store's device; hits receives n_queries * k infs_hit (query q at
 * hits + q * k) and counts[q] (uint32_t, device) how many it found: the
 * same hits, scores and order as infs_retrieve. A query with a non-finite
 * value, or a zero query under cosine, which infs_retrieve refuses, gets
 * 0 hits. Returns once the work is queued. The namespace is read when the
 * call is made: a graph that captured it stays valid until
 * infs_namespace_generation() of that namespace changes. */
INFS_API int infs_retrieve_device(infs_searcher *searcher, const char *ns, const float *queries, size_t n_queries,
                                  size_t k, infs_hit *hits, uint32_t *counts, void *stream);

#ifdef __cplusplus
}
#endif
#endif

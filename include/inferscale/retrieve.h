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

#ifdef __cplusplus
}
#endif
#endif

/* infs_retrieve: argument checks, the choice of backend, and the cache of
 * what each namespace's search derives from its matrix (row norms for
 * cosine, FAISS indexes), rebuilt whenever the namespace changes. */
#include "retrieve/retrieve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "util/error.h"
#include "util/options.h"
#include "retrieve/topk.h"
#ifdef INFS_HAVE_FAISS
#include "retrieve/retrieve_faiss.h"
#endif

INFS__DEFINE_INIT(infs_retrieve_options_init, infs_retrieve_options, infs__sizes_retrieve_options, INFS_RETRIEVE_OPTIONS_INIT)
INFS__DEFINE_INIT(infs_searcher_options_init, infs_searcher_options, infs__sizes_searcher_options,
                  INFS_SEARCHER_OPTIONS_INIT)

/* The store's cache: a hash table of namespace entries. */
typedef struct ns_table {
	pthread_mutex_t lock; /* guards buckets, not the entries' contents */
	infs__ns_cache **buckets;
	size_t n_buckets, n_entries;
} ns_table;

/* Serialises creating a store's table: readers share the store lock. */
static pthread_mutex_t table_create_lock = PTHREAD_MUTEX_INITIALIZER;

static void entry_clear(infs__ns_cache *e)
{
	free(e->inv_norms);
	e->inv_norms = NULL;
	for (int m = 0; m < 2; m++) {
#ifdef INFS_HAVE_FAISS
		if (e->faiss[m])
			infs__faiss_index_free(e->faiss[m]);
#endif
		e->faiss[m] = NULL;
	}
}

static void table_destroy(void *data)
{
	ns_table *t = data;
	for (size_t b = 0; b < t->n_buckets; b++) {
		for (infs__ns_cache *e = t->buckets[b], *next; e; e = next) {
			next = e->next;
			entry_clear(e);
			pthread_mutex_destroy(&e->lock);
			free(e->ns);
			free(e);
		}
	}
	pthread_mutex_destroy(&t->lock);
	free(t->buckets);
	free(t);
}

static ns_table *table_get(infs_store *s)
{
	struct infs__store_ext *ext = infs__store_ext(s, INFS_EXT_FAISS);
	pthread_mutex_lock(&table_create_lock);
	ns_table *t = ext->data;
	if (!t) {
		t = calloc(1, sizeof *t);
		if (t) {
			t->n_buckets = 64;
			t->buckets = calloc(t->n_buckets, sizeof *t->buckets);
			if (!t->buckets) {
				free(t);
				t = NULL;
			} else {
				pthread_mutex_init(&t->lock, NULL);
				ext->data = t;
				ext->destroy = table_destroy;
			}
		}
	}
	pthread_mutex_unlock(&table_create_lock);
	if (!t)
		infs__error(INFS_ENOMEM, "infs_retrieve: out of memory for the namespace cache");
	return t;
}

static size_t hash(const char *s)
{
	uint64_t h = 14695981039346656037u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return (size_t)h;
}

/* Doubles the table when it fills up; a failed allocation keeps it as is. */
static void table_grow(ns_table *t)
{
	size_t nb = t->n_buckets * 2;
	infs__ns_cache **b = calloc(nb, sizeof *b);
	if (!b)
		return;
	for (size_t i = 0; i < t->n_buckets; i++)
		for (infs__ns_cache *e = t->buckets[i], *next; e; e = next) {
			next = e->next;
			size_t j = hash(e->ns) & (nb - 1);
			e->next = b[j];
			b[j] = e;
		}
	free(t->buckets);
	t->buckets = b;
	t->n_buckets = nb;
}

infs__ns_cache *infs__ns_cache_lock(infs_store *s, const char *ns, uint64_t generation, size_t n)
{
	ns_table *t = table_get(s);
	if (!t)
		return NULL;
	pthread_mutex_lock(&t->lock);
	size_t b = hash(ns) & (t->n_buckets - 1);
	infs__ns_cache *e = t->buckets[b];
	while (e && strcmp(e->ns, ns) != 0)
		e = e->next;
	if (!e) {
		e = calloc(1, sizeof *e);
		char *name = strdup(ns);
		if (!e || !name) {
			free(e);
			free(name);
			pthread_mutex_unlock(&t->lock);
			infs__error(INFS_ENOMEM, "infs_retrieve: out of memory for the namespace cache");
			return NULL;
		}
		pthread_mutex_init(&e->lock, NULL);
		e->ns = name;
		e->generation = generation;
		e->n = n;
		e->next = t->buckets[b];
		t->buckets[b] = e;
		if (++t->n_entries > 2 * t->n_buckets)
			table_grow(t);
	}
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_lock(&e->lock);
	if (e->generation != generation || e->n != n) {
		entry_clear(e);
		e->generation = generation;
		e->n = n;
	}
	return e;
}

int infs__ns_cache_norms(infs__ns_cache *e, const float *emb, size_t n, size_t dim)
{
	if (e->inv_norms)
		return INFS_OK;
	float *inv = malloc(n * sizeof *inv);
	if (!inv)
		return infs__error(INFS_ENOMEM, "infs_retrieve: out of memory for %zu row norms", n);
	for (size_t i = 0; i < n; i++) {
		double ss = 0;
		for (size_t d = 0; d < dim; d++)
			ss += (double)emb[i * dim + d] * emb[i * dim + d];
		inv[i] = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
	}
	e->inv_norms = inv;
	return INFS_OK;
}

#ifdef INFS_HAVE_FAISS
/* The namespace's FAISS index for this metric, built on first use after
 * each change of the namespace, then searched. */
static int search_faiss(infs_hit *out, size_t *out_n, infs_store *store, const char *ns, const float *emb,
                        const uint64_t *ids, size_t n, uint64_t gen, const float *q, size_t nq, size_t k,
                        infs_metric metric, const char *fn)
{
	size_t dim = infs__store_geom(store)->embed_dim;
	infs__ns_cache *e = infs__ns_cache_lock(store, ns, gen, n);
	if (!e)
		return INFS_ENOMEM;
	int rc = INFS_OK;
	if (metric == INFS_METRIC_COSINE)
		rc = infs__ns_cache_norms(e, emb, n, dim);
	const float *inv = metric == INFS_METRIC_COSINE ? e->inv_norms : NULL;
	if (rc == INFS_OK && !e->faiss[metric])
		rc = infs__faiss_build(&e->faiss[metric], infs__store_opts(store)->faiss_index, emb, inv, n, dim);
	void *index = e->faiss[metric];
	pthread_mutex_unlock(&e->lock);
	if (rc)
		return infs__error_wrap(rc, "%s: namespace '%s'", fn, ns);
	/* FAISS searches are safe to run concurrently on one index */
	rc = infs__faiss_search(out, out_n, index, emb, ids, inv, n, dim, q, nq, k);
	return rc ? infs__error_wrap(rc, "%s", fn) : INFS_OK;
}
#endif

/* Whether the store's device copy can serve this search. */
static int device_ready(infs_store *s)
{
	return infs__cuda && infs__store_ext(s, INFS_EXT_DEVICE)->data;
}

/* Exact search of the namespace's rows, scaled by their inverse norms for
 * cosine (unit queries). */
static int search_exact(infs_hit *out, size_t *out_n, infs_store *store, const char *ns, const float *emb,
                        const uint64_t *ids, size_t n, uint64_t gen, const float *q, size_t nq, size_t k,
                        infs_metric metric)
{
	size_t dim = infs__store_geom(store)->embed_dim;
	const float *scale = NULL;
	if (metric == INFS_METRIC_COSINE) {
		infs__ns_cache *e = infs__ns_cache_lock(store, ns, gen, n);
		if (!e)
			return INFS_ENOMEM;
		int rc = infs__ns_cache_norms(e, emb, n, dim);
		scale = e->inv_norms;
		pthread_mutex_unlock(&e->lock);
		if (rc)
			return rc;
	}
	return infs__topk(out, out_n, emb, ids, scale, n, dim, q, nq, k);
}

/* Under the store's read lock: the namespace's matrix and the backend, for
 * checked queries (cosine queries made unit length here, with double
 * sums, or on the device with the same arithmetic). */
static int search(infs_hit *out, size_t *out_n, infs_store *store, const char *ns, const float *q, size_t nq,
                  size_t k, infs_metric metric, infs_backend backend, const char *fn)
{
	size_t dim = infs__store_geom(store)->embed_dim;
	const float *emb;
	const uint64_t *ids;
	size_t n;
	uint64_t gen;
	int rc = infs__store_ns_matrix(&emb, &ids, &n, &gen, store, ns);
	if (rc)
		return infs__error_wrap(rc, "%s", fn);
	if (n == 0) {
		for (size_t i = 0; i < nq; i++)
			out_n[i] = 0;
		return INFS_OK;
	}
	if (backend == INFS_BACKEND_AUTO) {
		const infs_store_options *so = infs__store_opts(store);
		backend = INFS_BACKEND_EXACT;
		if (device_ready(store))
			backend = INFS_BACKEND_CUDA;
#ifdef INFS_HAVE_FAISS
		else if (so->faiss_index && n >= so->faiss_min_facts)
			backend = INFS_BACKEND_FAISS;
#else
		(void)so;
#endif
	}
	if (backend == INFS_BACKEND_CUDA) {
		if (!device_ready(store))
			return infs__error(INFS_EUNSUPPORTED,
			                   "%s: the CUDA backend needs a store opened with a device copy (options.device >= 0)",
			                   fn);
		/* the device makes the queries unit length, as below */
		return infs__cuda->retrieve(out, out_n, store, ns, q, nq, k, metric);
	}
	float *unit = NULL;
	if (metric == INFS_METRIC_COSINE) {
		if (!(unit = malloc(nq * dim * sizeof *unit)))
			return infs__error(INFS_ENOMEM, "%s: out of memory for %zu queries", fn, nq);
		for (size_t i = 0; i < nq; i++) {
			const float *x = q + i * dim;
			double ss = 0;
			for (size_t d = 0; d < dim; d++)
				ss += (double)x[d] * x[d];
			const double scale = 1.0 / sqrt(ss);
			for (size_t d = 0; d < dim; d++)
				unit[i * dim + d] = (float)(x[d] * scale);
		}
		q = unit;
	}
#ifdef INFS_HAVE_FAISS
	if (backend == INFS_BACKEND_FAISS)
		rc = search_faiss(out, out_n, store, ns, emb, ids, n, gen, q, nq, k, metric, fn);
	else
#endif
		rc = search_exact(out, out_n, store, ns, emb, ids, n, gen, q, nq, k, metric);
	free(unit);
	return rc;
}

/* Refuses a query with a non-finite value, or a zero one under cosine (its
 * cosine is undefined): one pass over the values' bits that vectorises,
 * the position found only when there is an error to report. */
static int check_queries(const float *queries, size_t nq, size_t dim, infs_metric metric, const char *fn)
{
	for (size_t i = 0; i < nq; i++) {
		const float *x = queries + i * dim;
		uint32_t nonfinite = 0, nonzero = 0;
		for (size_t d = 0; d < dim; d++) {
			uint32_t b;
			memcpy(&b, x + d, sizeof b);
			nonfinite |= (b & 0x7f800000u) == 0x7f800000u;
			nonzero |= b & 0x7fffffffu;
		}
		if (nonfinite) {
			size_t d = 0;
			while (isfinite(x[d]))
				d++;
			return infs__error(INFS_EINVAL, "%s: query %zu has a non-finite value at %zu", fn, i, d);
		}
		if (metric == INFS_METRIC_COSINE && !nonzero)
			return infs__error(INFS_EINVAL, "%s: query %zu is zero: its cosine is undefined", fn, i);
	}
	return INFS_OK;
}

int infs_retrieve(infs_hit *out, size_t *out_n, infs_store *store, const char *ns, const float *queries,
                  size_t n_queries, size_t k, const infs_retrieve_options *opts)
{
	static const char fn[] = "infs_retrieve";
	if (!out || !out_n)
		return infs__error(INFS_EINVAL, "%s: %s is NULL", fn, !out ? "out" : "out_n");
	if (!store)
		return infs__error(INFS_EINVAL, "%s: store is NULL", fn);
	int rc = infs__check_namespace(ns);
	if (rc)
		return infs__error_wrap(rc, "%s", fn);
	if (!queries)
		return infs__error(INFS_EINVAL, "%s: queries is NULL", fn);
	if (n_queries == 0)
		return infs__error(INFS_EINVAL, "%s: n_queries is 0", fn);
	if (k == 0 || k > INFS_RETRIEVE_K_MAX)
		return infs__error(INFS_ERANGE, "%s: k %zu is not in 1..%u", fn, k, INFS_RETRIEVE_K_MAX);
	infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
	rc = INFS__TAKE(o, opts, infs__sizes_retrieve_options, fn, "options");
	if (rc)
		return rc;
	if (o.metric != INFS_METRIC_COSINE && o.metric != INFS_METRIC_IP)
		return infs__error(INFS_EINVAL, "%s: unknown metric %d", fn, (int)o.metric);
	if (o.backend < INFS_BACKEND_AUTO || o.backend > INFS_BACKEND_CUDA)
		return infs__error(INFS_EINVAL, "%s: unknown backend %d", fn, (int)o.backend);
	if (o.backend == INFS_BACKEND_CUDA && !infs__cuda)
		return infs__error(INFS_EUNSUPPORTED, "%s: the CUDA backend is not in this build", fn);
	if (o.backend == INFS_BACKEND_FAISS) {
#ifdef INFS_HAVE_FAISS
		if (!infs__store_opts(store)->faiss_index)
			return infs__error(INFS_EUNSUPPORTED,
			                   "%s: the FAISS backend needs a store opened with options.faiss_index set", fn);
#else
		return infs__error(INFS_EUNSUPPORTED, "%s: the FAISS backend is not in this build", fn);
#endif
	}
	size_t dim = infs__store_geom(store)->embed_dim;
	if (dim == 0)
		return infs__error(INFS_EUNSUPPORTED, "%s: the store has no embeddings (its embed_dim is 0)", fn);
	/* the largest batch whose hits, queries and BLAS sizes are all addressable */
	if (n_queries > INT32_MAX || n_queries > SIZE_MAX / (k * sizeof *out) ||
	    n_queries > SIZE_MAX / (dim * sizeof *queries))
		return infs__error(INFS_ERANGE, "%s: n_queries %zu is too large", fn, n_queries);

	if ((rc = check_queries(queries, n_queries, dim, o.metric, fn)))
		return rc;
	if ((rc = infs__store_use(store, ns))) /* a remote tier's namespace, on first use */
		return infs__error_wrap(rc, "%s", fn);
	infs__store_read_lock(store);
	rc = search(out, out_n, store, ns, queries, n_queries, k, o.metric, o.backend, fn);
	infs__store_read_unlock(store);
	if (rc)
		for (size_t i = 0; i < n_queries; i++)
			out_n[i] = 0;
	return rc;
}

int infs_searcher_create(infs_searcher **out, infs_store *store, const infs_searcher_options *opts)
{
	static const char fn[] = "infs_searcher_create";
	if (!out)
		return infs__error(INFS_EINVAL, "%s: out is NULL", fn);
	*out = NULL;
	if (!store)
		return infs__error(INFS_EINVAL, "%s: store is NULL", fn);
	infs_searcher_options o = INFS_SEARCHER_OPTIONS_INIT;
	int rc = INFS__TAKE(o, opts, infs__sizes_searcher_options, fn, "options");
	if (rc)
		return rc;
	if (o.metric != INFS_METRIC_COSINE && o.metric != INFS_METRIC_IP)
		return infs__error(INFS_EINVAL, "%s: unknown metric %d", fn, (int)o.metric);
	if (o.max_queries < 1 || o.max_queries > INFS_SEARCHER_QUERIES_MAX)
		return infs__error(INFS_ERANGE, "%s: max_queries %u is not in 1..%u", fn, o.max_queries,
		                   INFS_SEARCHER_QUERIES_MAX);
	if (o.max_k < 1 || o.max_k > INFS_SEARCHER_K_MAX)
		return infs__error(INFS_ERANGE, "%s: max_k %u is not in 1..%u", fn, o.max_k, INFS_SEARCHER_K_MAX);
	if (!infs__cuda)
		return infs__error(INFS_EUNSUPPORTED, "%s: CUDA is not in this build", fn);
	if (!device_ready(store))
		return infs__error(INFS_EUNSUPPORTED, "%s: the store has no device copy (open it with options.device >= 0)",
		                   fn);
	if (infs__store_geom(store)->embed_dim == 0)
		return infs__error(INFS_EUNSUPPORTED, "%s: the store has no embeddings (its embed_dim is 0)", fn);
	return infs__cuda->searcher_create(out, store, &o);
}

void infs_searcher_free(infs_searcher *searcher)
{
	if (searcher && infs__cuda)
		infs__cuda->searcher_free(searcher);
}

int infs_retrieve_device(infs_searcher *searcher, const char *ns, const float *queries, size_t n_queries, size_t k,
                         infs_hit *hits, uint32_t *counts, void *stream)
{
	static const char fn[] = "infs_retrieve_device";
	if (!searcher)
		return infs__error(INFS_EINVAL, "%s: searcher is NULL", fn);
	int rc = infs__check_namespace(ns);
	if (rc)
		return infs__error_wrap(rc, "%s", fn);
	if (!queries || !hits || !counts)
		return infs__error(INFS_EINVAL, "%s: %s is NULL", fn, !queries ? "queries" : !hits ? "hits" : "counts");
	return infs__cuda->retrieve_on_device(searcher, ns, queries, n_queries, k, hits, counts, stream);
}

/* Retrieval for serving stacks: infs_retrieve_device (queries and hits in
 * device memory, on the caller's stream) returns exactly the CPU's hits
 * (ids, scores, order) for both metrics, in one round and in several; a
 * non-finite or (cosine) zero query gets no hits; a search captured into a
 * CUDA graph and replayed with new queries gives their hits; searchers on
 * 8 threads, host-pointer searches beside them and a writer putting and
 * deleting in another namespace all get exact results; deleting half of a
 * namespace gives its device memory back and leaves results exact; bad
 * arguments are refused. */
#include <pthread.h>
#include <string.h>

#include "../scratch_util.h"
#include "gpu.h"

enum { EMB = 384, MAX_Q = 40, MAX_K = 100, THREADS = 8 };

static uint64_t rng = 7;
static uint32_t n_facts = 20000;

typedef struct fixture {
	infs_store *st;
	float *q;   /* MAX_Q queries, host */
	float *dq;  /* the same on the device */
	infs_hit *dhits;
	uint32_t *dcounts;
} fixture;

static void random_unit(float *x, int n)
{
	double ss = 0;
	for (int j = 0; j < n; j++) {
		x[j] = rng_float(&rng);
		ss += (double)x[j] * x[j];
	}
	for (int j = 0; j < n; j++)
		x[j] = (float)(x[j] / sqrt(ss));
}

static void put_facts(infs_store *st, const char *ns, uint32_t n, uint64_t *ids)
{
	float emb[EMB];
	uint16_t kv[2] = {0, 0};
	int32_t tok = 0;
	for (uint32_t i = 0; i < n; i++) {
		for (int j = 0; j < EMB; j++)
			emb[j] = rng_float(&rng);
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = 1, f.tokens = &tok, f.embedding = emb, f.k = kv, f.v = kv;
		uint64_t id;
		CHECK_OK(infs_fact_put(&id, st, ns, &f));
		if (ids)
			ids[i] = id;
	}
}

/* Hits of the exact CPU search, and whether got (device, nq queries of k)
 * equals them bit for bit. */
static int equal_to_exact(infs_store *st, const char *ns, const float *q, size_t nq, size_t k, infs_metric metric,
                          const infs_hit *got, const uint32_t *got_n)
{
	infs_hit *want = calloc(nq * k, sizeof *want);
	size_t want_n[MAX_Q];
	infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
	o.metric = metric;
	o.backend = INFS_BACKEND_EXACT;
	CHECK_OK(infs_retrieve(want, want_n, st, ns, q, nq, k, &o));
	int bad = 0;
	for (size_t i = 0; i < nq; i++) {
		if (got_n[i] != want_n[i] && bad++ < 5)
			fprintf(stderr, "metric %d k %zu query %zu: %u hits, exact %zu\n", (int)metric, k, i, got_n[i],
			        want_n[i]);
		for (size_t j = 0; j < want_n[i] && j < got_n[i]; j++) {
			const infs_hit *x = &got[i * k + j], *y = &want[i * k + j];
			if ((x->id != y->id || x->score != y->score) && bad++ < 5)
				fprintf(stderr, "metric %d k %zu query %zu hit %zu: device %llu %.9g, exact %llu %.9g\n",
				        (int)metric, k, i, j, (unsigned long long)x->id, x->score,
				        (unsigned long long)y->id, y->score);
		}
	}
	free(want);
	return bad == 0;
}

/* infs_retrieve_device of fx's queries (host copy q, for cosine made unit
 * on the device) against ns, checked against exact search. */
static void search_check(fixture *fx, infs_searcher *s, const char *ns, size_t nq, size_t k, infs_metric metric,
                         cudaStream_t stream)
{
	infs_hit *hits = malloc(nq * k * sizeof *hits);
	uint32_t counts[MAX_Q];
	CHECK_OK(infs_retrieve_device(s, ns, fx->dq, nq, k, fx->dhits, fx->dcounts, stream));
	CUDA_OK(cudaMemcpyAsync(hits, fx->dhits, nq * k * sizeof *hits, cudaMemcpyDeviceToHost, stream));
	CUDA_OK(cudaMemcpyAsync(counts, fx->dcounts, nq * 4, cudaMemcpyDeviceToHost, stream));
	CUDA_OK(cudaStreamSynchronize(stream));
	/* cosine's exact search takes the queries as the device made them:
	 * unit length by the CPU's arithmetic, which infs_retrieve applies too */
	CHECK(equal_to_exact(fx->st, ns, fx->q, nq, k, metric, hits, counts));
	free(hits);
}

static infs_searcher *make_searcher(infs_store *st, infs_metric metric)
{
	infs_searcher_options so = INFS_SEARCHER_OPTIONS_INIT;
	so.metric = metric;
	so.max_queries = MAX_Q;
	so.max_k = MAX_K;
	infs_searcher *s = NULL;
	CHECK_OK(infs_searcher_create(&s, st, &so));
	return s;
}

static void check_exactness(fixture *fx)
{
	cudaStream_t stream;
	CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	const size_t nqs[] = {1, 3, 32, MAX_Q}, ks[] = {1, 10, MAX_K};
	for (int m = 0; m < 2; m++) {
		infs_searcher *s = make_searcher(fx->st, (infs_metric)m);
		for (size_t a = 0; a < sizeof nqs / sizeof *nqs; a++)
			for (size_t b = 0; b < sizeof ks / sizeof *ks; b++)
				search_check(fx, s, "big", nqs[a], ks[b], (infs_metric)m, stream);
		/* an unknown namespace: no hits, counts written */
		CUDA_OK(cudaMemsetAsync(fx->dcounts, 0xff, MAX_Q * 4, stream));
		CHECK_OK(infs_retrieve_device(s, "nobody", fx->dq, 3, 5, fx->dhits, fx->dcounts, stream));
		uint32_t counts[3];
		CUDA_OK(cudaMemcpyAsync(counts, fx->dcounts, sizeof counts, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaStreamSynchronize(stream));
		CHECK(counts[0] == 0 && counts[1] == 0 && counts[2] == 0);
		infs_searcher_free(s);
	}

	/* query 1 non-finite, query 2 zero: no hits for them under cosine;
	 * under inner product the zero query's hits are all 0 */
	float bad[3 * EMB];
	memcpy(bad, fx->q, sizeof bad);
	bad[EMB + 7] = NAN;
	memset(bad + 2 * EMB, 0, EMB * sizeof *bad);
	CUDA_OK(cudaMemcpy(fx->dq, bad, sizeof bad, cudaMemcpyHostToDevice));
	for (int m = 0; m < 2; m++) {
		infs_searcher *s = make_searcher(fx->st, (infs_metric)m);
		uint32_t counts[3];
		CHECK_OK(infs_retrieve_device(s, "big", fx->dq, 3, 10, fx->dhits, fx->dcounts, stream));
		CUDA_OK(cudaMemcpyAsync(counts, fx->dcounts, sizeof counts, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaStreamSynchronize(stream));
		CHECK(counts[0] == 10 && counts[1] == 0);
		CHECK(counts[2] == (m == INFS_METRIC_COSINE ? 0u : 10u));
		infs_searcher_free(s);
	}
	CUDA_OK(cudaMemcpy(fx->dq, fx->q, MAX_Q * EMB * sizeof *fx->q, cudaMemcpyHostToDevice));
	CUDA_OK(cudaStreamDestroy(stream));
}

/* Captured once, replayed with other queries written into the same device
 * buffer: the replay searches them. */
static void check_graph(fixture *fx)
{
	cudaStream_t stream;
	CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	infs_searcher *s = make_searcher(fx->st, INFS_METRIC_COSINE);
	const size_t nq = 8, k = 20;
	/* a first call outside the capture sets the kernels' attributes */
	CHECK_OK(infs_retrieve_device(s, "big", fx->dq, nq, k, fx->dhits, fx->dcounts, stream));
	CUDA_OK(cudaStreamSynchronize(stream));
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
	CHECK_OK(infs_retrieve_device(s, "big", fx->dq, nq, k, fx->dhits, fx->dcounts, stream));
	CUDA_OK(cudaStreamEndCapture(stream, &graph));
	CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
	float *q2 = malloc(nq * EMB * sizeof *q2);
	infs_hit *hits = malloc(nq * k * sizeof *hits);
	uint32_t counts[MAX_Q];
	for (int rep = 0; rep < 3; rep++) {
		for (size_t i = 0; i < nq; i++)
			random_unit(q2 + i * EMB, EMB);
		CUDA_OK(cudaMemcpyAsync(fx->dq, q2, nq * EMB * sizeof *q2, cudaMemcpyHostToDevice, stream));
		CUDA_OK(cudaMemsetAsync(fx->dcounts, 0, MAX_Q * 4, stream));
		CUDA_OK(cudaGraphLaunch(exec, stream));
		CUDA_OK(cudaMemcpyAsync(hits, fx->dhits, nq * k * sizeof *hits, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaMemcpyAsync(counts, fx->dcounts, nq * 4, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaStreamSynchronize(stream));
		CHECK(equal_to_exact(fx->st, "big", q2, nq, k, INFS_METRIC_COSINE, hits, counts));
	}
	uint64_t g0, g1;
	CHECK_OK(infs_namespace_generation(&g0, fx->st, "big"));
	put_facts(fx->st, "big", 1, NULL);
	CHECK_OK(infs_namespace_generation(&g1, fx->st, "big"));
	CHECK(g1 != g0); /* the sign to capture again */
	CUDA_OK(cudaGraphExecDestroy(exec));
	CUDA_OK(cudaGraphDestroy(graph));
	CUDA_OK(cudaMemcpy(fx->dq, fx->q, MAX_Q * EMB * sizeof *fx->q, cudaMemcpyHostToDevice));
	infs_searcher_free(s);
	CUDA_OK(cudaStreamDestroy(stream));
	free(q2), free(hits);
}

typedef struct worker {
	fixture *fx;
	int nth, ok;
	const infs_hit *want;    /* [MAX_Q][10] exact hits of "big" */
	const size_t *want_n;
} worker;

static int same_hits(const infs_hit *a, const infs_hit *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].id != b[i].id || a[i].score != b[i].score)
			return 0;
	return 1;
}

/* Even threads search through their own searcher and stream, odd ones
 * through infs_retrieve's host pointers; both compare with the exact hits
 * found before the threads started. */
static void *search_worker(void *arg)
{
	worker *w = arg;
	const size_t k = 10, nq = 4;
	cudaStream_t stream;
	infs_searcher *s = NULL;
	float *dq = NULL;
	infs_hit *dh = NULL, hits[4 * 10];
	uint32_t *dc = NULL, counts[4];
	size_t hn[4];
	w->ok = cudaSetDevice(0) == cudaSuccess && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess;
	if (w->ok && w->nth % 2 == 0) {
		infs_searcher_options so = INFS_SEARCHER_OPTIONS_INIT;
		so.max_queries = nq, so.max_k = k;
		w->ok = infs_searcher_create(&s, w->fx->st, &so) == INFS_OK &&
		        cudaMalloc((void **)&dq, MAX_Q * EMB * 4) == cudaSuccess &&
		        cudaMalloc((void **)&dh, sizeof hits) == cudaSuccess &&
		        cudaMalloc((void **)&dc, sizeof counts) == cudaSuccess &&
		        cudaMemcpy(dq, w->fx->q, MAX_Q * EMB * 4, cudaMemcpyHostToDevice) == cudaSuccess;
	}
	for (int rep = 0; rep < 20 && w->ok; rep++) {
		const size_t q0 = (size_t)(rep + w->nth) % (MAX_Q - nq);
		if (s) {
			w->ok = infs_retrieve_device(s, "big", dq + q0 * EMB, nq, k, dh, dc, stream) == INFS_OK &&
			        cudaMemcpyAsync(hits, dh, sizeof hits, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
			        cudaMemcpyAsync(counts, dc, sizeof counts, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
			        cudaStreamSynchronize(stream) == cudaSuccess;
			for (size_t i = 0; i < nq; i++)
				hn[i] = counts[i];
		} else {
			infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
			o.backend = INFS_BACKEND_CUDA;
			w->ok = infs_retrieve(hits, hn, w->fx->st, "big", w->fx->q + q0 * EMB, nq, k, &o) == INFS_OK;
		}
		for (size_t i = 0; i < nq && w->ok; i++)
			w->ok = hn[i] == w->want_n[q0 + i] && same_hits(hits + i * k, w->want + (q0 + i) * k, k);
	}
	infs_searcher_free(s);
	cudaFree(dq), cudaFree(dh), cudaFree(dc);
	cudaStreamDestroy(stream);
	return NULL;
}

typedef struct writer {
	infs_store *st;
	volatile int stop;
	int ok;
} writer;

static void *write_worker(void *arg)
{
	writer *w = arg;
	float emb[EMB];
	uint16_t kv[2] = {0, 0};
	int32_t tok = 0;
	uint64_t prev = 0;
	w->ok = 1;
	for (uint32_t i = 0; !w->stop && w->ok; i++) {
		for (int j = 0; j < EMB; j++)
			emb[j] = (float)((i * 31 + j) % 17) - 8.0f;
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = 1, f.tokens = &tok, f.embedding = emb, f.k = kv, f.v = kv;
		uint64_t id;
		w->ok = infs_fact_put(&id, w->st, "other", &f) == INFS_OK;
		if (w->ok && prev && i % 2)
			w->ok = infs_fact_delete(w->st, "other", prev) == INFS_OK;
		prev = id;
	}
	return NULL;
}

static void check_threads(fixture *fx)
{
	const size_t k = 10;
	infs_hit *want = malloc(MAX_Q * k * sizeof *want);
	size_t want_n[MAX_Q];
	infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
	o.backend = INFS_BACKEND_EXACT;
	CHECK_OK(infs_retrieve(want, want_n, fx->st, "big", fx->q, MAX_Q, k, &o));
	pthread_t t[THREADS], wt;
	worker w[THREADS];
	writer wr = {fx->st, 0, 0};
	CHECK(pthread_create(&wt, NULL, write_worker, &wr) == 0);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (worker){fx, i, 0, want, want_n};
		CHECK(pthread_create(&t[i], NULL, search_worker, &w[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		if (!w[i].ok)
			fprintf(stderr, "thread %d: %s\n", i, infs_error_last());
		CHECK(w[i].ok);
	}
	wr.stop = 1;
	pthread_join(wt, NULL);
	CHECK(wr.ok);
	free(want);
}

/* Deleting every other fact of a namespace compacts its device rows: the
 * store's device memory shrinks and searches stay exact. */
static void check_compaction(fixture *fx)
{
	const uint32_t n = 4096;
	uint64_t *ids = malloc(n * sizeof *ids);
	put_facts(fx->st, "half", n, ids);
	infs_store_stats before, after;
	memset(&before, 0, sizeof before);
	before.version = INFS_STORE_STATS_VERSION;
	after = before;
	CHECK_OK(infs_store_stats_get(&before, fx->st));
	for (uint32_t i = 0; i < n; i += 2)
		CHECK_OK(infs_fact_delete(fx->st, "half", ids[i]));
	CHECK_OK(infs_store_stats_get(&after, fx->st));
	/* 2048 rows of 384 dimensions in f16 and f32 and more: over 4 MB back */
	CHECK(after.device_bytes + (4u << 20) < before.device_bytes);
	cudaStream_t stream;
	CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	for (int m = 0; m < 2; m++) {
		infs_searcher *s = make_searcher(fx->st, (infs_metric)m);
		search_check(fx, s, "half", 32, 50, (infs_metric)m, stream);
		infs_searcher_free(s);
	}
	/* and the host-pointer path */
	infs_hit *a = malloc(32 * 50 * sizeof *a);
	size_t an[32];
	uint32_t an32[32];
	infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
	o.backend = INFS_BACKEND_CUDA;
	CHECK_OK(infs_retrieve(a, an, fx->st, "half", fx->q, 32, 50, &o));
	for (int i = 0; i < 32; i++)
		an32[i] = (uint32_t)an[i];
	CHECK(equal_to_exact(fx->st, "half", fx->q, 32, 50, INFS_METRIC_COSINE, a, an32));
	for (uint32_t i = 0; i < 32; i++)
		for (uint32_t j = 0; j < an[i]; j++)
			CHECK(a[i * 50 + j].id % 2 == ids[1] % 2); /* only survivors */
	CUDA_OK(cudaStreamDestroy(stream));
	free(a), free(ids);
}

static void check_refusals(fixture *fx)
{
	infs_searcher *s = NULL;
	infs_searcher_options so = INFS_SEARCHER_OPTIONS_INIT;
	so.max_k = INFS_SEARCHER_K_MAX + 1;
	CHECK(infs_searcher_create(&s, fx->st, &so) == INFS_ERANGE && !s);
	so = (infs_searcher_options)INFS_SEARCHER_OPTIONS_INIT;
	so.max_queries = 0;
	CHECK(infs_searcher_create(&s, fx->st, &so) == INFS_ERANGE);
	so = (infs_searcher_options)INFS_SEARCHER_OPTIONS_INIT;
	so.max_facts = 100; /* smaller than "big" */
	CHECK_OK(infs_searcher_create(&s, fx->st, &so));
	CHECK(infs_retrieve_device(s, "big", fx->dq, 1, 5, fx->dhits, fx->dcounts, NULL) == INFS_ERANGE);
	CHECK(strstr(infs_error_last(), "max_facts"));
	CHECK(infs_retrieve_device(s, "big", fx->dq, 33, 5, fx->dhits, fx->dcounts, NULL) == INFS_ERANGE);
	CHECK(infs_retrieve_device(s, "big", fx->dq, 1, 51, fx->dhits, fx->dcounts, NULL) == INFS_ERANGE);
	CHECK(infs_retrieve_device(s, "big", NULL, 1, 5, fx->dhits, fx->dcounts, NULL) == INFS_EINVAL);
	CHECK(infs_retrieve_device(s, "", fx->dq, 1, 5, fx->dhits, fx->dcounts, NULL) == INFS_EINVAL);
	infs_searcher_free(s);

	/* a store without a device copy */
	char path[700];
	scratch_path(path, sizeof path, "host.infs");
	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = 1, g.n_kv_heads = 1, g.head_dim = 2, g.rotary_dim = 2, g.embed_dim = EMB;
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE, o.geometry = &g, o.identity = "gpu-test", o.sync = INFS_SYNC_OFF;
	infs_store *host;
	CHECK_OK(infs_store_open(&host, path, &o));
	CHECK(infs_searcher_create(&s, host, NULL) == INFS_EUNSUPPORTED);
	CHECK(strstr(infs_error_last(), "device copy"));
	infs_store_close(host);
}

int main(void)
{
	gpu_require();
	const char *small = getenv("INFS_TEST_SMALL");
	if (small && *small == '1')
		n_facts = 3000;
	char path[600];
	scratch_make("gpu-search", path, sizeof path, "store.infs");
	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = 1, g.n_kv_heads = 1, g.head_dim = 2, g.rotary_dim = 2, g.embed_dim = EMB;
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE, so.geometry = &g, so.identity = "gpu-test", so.sync = INFS_SYNC_OFF;
	so.device = 0;
	fixture fx;
	memset(&fx, 0, sizeof fx);
	CHECK_OK(infs_store_open(&fx.st, path, &so));
	put_facts(fx.st, "big", n_facts, NULL);
	fx.q = malloc(MAX_Q * EMB * sizeof *fx.q);
	for (int i = 0; i < MAX_Q; i++)
		random_unit(fx.q + i * EMB, EMB);
	CUDA_OK(cudaMalloc((void **)&fx.dq, MAX_Q * EMB * sizeof *fx.q));
	CUDA_OK(cudaMalloc((void **)&fx.dhits, MAX_Q * MAX_K * sizeof *fx.dhits));
	CUDA_OK(cudaMalloc((void **)&fx.dcounts, MAX_Q * 4));
	CUDA_OK(cudaMemcpy(fx.dq, fx.q, MAX_Q * EMB * sizeof *fx.q, cudaMemcpyHostToDevice));

	check_exactness(&fx);
	check_graph(&fx);
	check_threads(&fx);
	check_compaction(&fx);
	check_refusals(&fx);

	cudaFree(fx.dq), cudaFree(fx.dhits), cudaFree(fx.dcounts);
	infs_store_close(fx.st);
	free(fx.q);
	scratch_cleanup();
	printf("device-pointer retrieval exact over %u facts, in graphs, on %d threads, after compaction\n", n_facts,
	       THREADS);
	CHECK_DONE();
}

/* Retrieval as a serving stack calls it, on stores with a device copy of
 * 10K, 100K and 1M facts (384 dimensions, k = 10), 1 to 32 queries:
 *   kernel_us      the device time of one search: a CUDA graph of one
 *                  infs_retrieve_device call replayed back to back;
 *   api_device_us  infs_retrieve_device called back to back on one stream
 *                  (queued, no waits), per call: what the API costs a stack
 *                  that searches inside its step;
 *   api_device_sync_us  one call and a wait for it;
 *   copies_us      the queries up and the hits down between pinned host
 *                  memory and the device, and a wait: the copies the
 *                  host-pointer path cannot avoid;
 *   api_host_us    infs_retrieve (host pointers, CUDA backend), per call.
 * Then aggregate searches per second on 1, 2, 4 and 8 threads over 100K
 * facts, one query each, through each path (a searcher and a stream per
 * thread for the device path). Then injection at Llama-3-8B's geometry
 * (bf16, k = 50 facts of 24 tokens into a vLLM-layout cache):
 * infs_inject_into_blocks per call with a wait, infs_inject_device queued
 * back to back, a graph of one infs_inject_device, and a device-to-device
 * copy of the same bytes. Medians throughout. Writes JSON.
 * Usage: bench_serving [out.json] */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "inferscale/inferscale.h"

#include "bench_common.h"
#include "bench_gpu.h"
#include "bench_llama3.h"

enum { DIMS = 384, K = 10, MAX_Q = 32, REPS = 200 };

static uint64_t rng = 1;

static float rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * (1.0 / (1 << 24)) - 0.5);
}

/* A store of n facts written without a device copy (fast puts), then
 * opened with one, as a server opens it. */
static infs_store *make_store(const char *path, uint32_t n)
{
	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = 1, g.n_kv_heads = 1, g.head_dim = 2, g.rotary_dim = 2, g.embed_dim = DIMS;
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE, so.geometry = &g, so.identity = "bench", so.sync = INFS_SYNC_OFF;
	infs_store *st;
	if (infs_store_open(&st, path, &so))
		bench_die("infs_store_open");
	float emb[DIMS];
	uint16_t kv[2] = {0, 0};
	int32_t tok = 0;
	for (uint32_t i = 0; i < n; i++) {
		for (int j = 0; j < DIMS; j++)
			emb[j] = rnd();
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = 1, f.tokens = &tok, f.embedding = emb, f.k = kv, f.v = kv;
		uint64_t id;
		if (infs_fact_put(&id, st, "user", &f))
			bench_die("infs_fact_put");
	}
	infs_store_close(st);
	so.flags = 0;
	so.device = 0;
	if (infs_store_open(&st, path, &so))
		bench_die("infs_store_open with a device copy");
	return st;
}

typedef struct search {
	infs_store *st;
	infs_searcher *s;
	cudaStream_t stream;
	const float *q;  /* host */
	float *dq;
	infs_hit *dh;
	uint32_t *dc;
	uint32_t nq;
} search;

static void device_call(search *c)
{
	if (infs_retrieve_device(c->s, "user", c->dq, c->nq, K, c->dh, c->dc, c->stream))
		bench_die("infs_retrieve_device");
}

static void host_call(search *c)
{
	infs_hit hits[MAX_Q * K];
	size_t n[MAX_Q];
	infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
	o.backend = INFS_BACKEND_CUDA;
	if (infs_retrieve(hits, n, c->st, "user", c->q, c->nq, K, &o))
		bench_die("infs_retrieve");
}

/* The median of reps wall times of f(c) (with a wait when sync). */
static float wall_us(void (*f)(search *), search *c, int sync)
{
	float t[REPS];
	for (int r = 0; r < 20; r++)
		f(c);
	CUDA_OK(cudaStreamSynchronize(c->stream));
	for (int r = 0; r < REPS; r++) {
		double t0 = bench_now_us();
		f(c);
		if (sync)
			CUDA_OK(cudaStreamSynchronize(c->stream));
		t[r] = (float)(bench_now_us() - t0);
	}
	return median(t, REPS);
}

/* Per call, of reps calls queued back to back and one wait. */
static float queued_us(search *c)
{
	float t[9];
	for (int i = 0; i < 9; i++) {
		CUDA_OK(cudaStreamSynchronize(c->stream));
		double t0 = bench_now_us();
		for (int r = 0; r < REPS; r++)
			device_call(c);
		CUDA_OK(cudaStreamSynchronize(c->stream));
		t[i] = (float)((bench_now_us() - t0) / REPS);
	}
	return median(t, 9);
}

/* Per call, of a graph of one call(arg) on stream replayed reps times
 * back to back, by events. */
static float graph_us(void (*call)(void *), void *arg, cudaStream_t stream, int reps)
{
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
	call(arg);
	CUDA_OK(cudaStreamEndCapture(stream, &graph));
	CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
	cudaEvent_t a, b;
	CUDA_OK(cudaEventCreate(&a));
	CUDA_OK(cudaEventCreate(&b));
	float t[9];
	for (int i = 0; i < 9; i++) {
		CUDA_OK(cudaEventRecord(a, stream));
		for (int r = 0; r < reps; r++)
			CUDA_OK(cudaGraphLaunch(exec, stream));
		CUDA_OK(cudaEventRecord(b, stream));
		CUDA_OK(cudaEventSynchronize(b));
		CUDA_OK(cudaEventElapsedTime(&t[i], a, b));
		t[i] *= 1000.0f / reps;
	}
	cudaEventDestroy(a), cudaEventDestroy(b);
	cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
	return median(t, 9);
}

static void device_call_any(void *c)
{
	device_call(c);
}

static float copies_us(search *c, void *pinned)
{
	float t[REPS];
	const size_t up = (size_t)c->nq * DIMS * 4, down = (size_t)c->nq * (K * sizeof(infs_hit) + 4);
	for (int r = 0; r < REPS; r++) {
		double t0 = bench_now_us();
		CUDA_OK(cudaMemcpyAsync(c->dq, pinned, up, cudaMemcpyHostToDevice, c->stream));
		CUDA_OK(cudaMemcpyAsync(pinned, c->dh, down, cudaMemcpyDeviceToHost, c->stream));
		CUDA_OK(cudaStreamSynchronize(c->stream));
		t[r] = (float)(bench_now_us() - t0);
	}
	/* the queries back as they were */
	CUDA_OK(cudaMemcpy(c->dq, c->q, (size_t)MAX_Q * DIMS * 4, cudaMemcpyHostToDevice));
	return median(t, REPS);
}

static void search_init(search *c, infs_store *st, const float *q)
{
	memset(c, 0, sizeof *c);
	c->st = st;
	c->q = q;
	infs_searcher_options so = INFS_SEARCHER_OPTIONS_INIT;
	so.max_queries = MAX_Q, so.max_k = K;
	if (infs_searcher_create(&c->s, st, &so))
		bench_die("infs_searcher_create");
	CUDA_OK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
	CUDA_OK(cudaMalloc((void **)&c->dq, (size_t)MAX_Q * DIMS * 4));
	/* room for the counts beside the hits: copies_us moves both at once */
	CUDA_OK(cudaMalloc((void **)&c->dh, (size_t)MAX_Q * (K * sizeof(infs_hit) + 4)));
	CUDA_OK(cudaMalloc((void **)&c->dc, MAX_Q * 4));
	CUDA_OK(cudaMemcpy(c->dq, q, (size_t)MAX_Q * DIMS * 4, cudaMemcpyHostToDevice));
}

static void search_free(search *c)
{
	infs_searcher_free(c->s);
	cudaStreamDestroy(c->stream);
	cudaFree(c->dq), cudaFree(c->dh), cudaFree(c->dc);
}

typedef struct thread_arg {
	search c;
	int device;
	pthread_barrier_t *start;
} thread_arg;

static void *thread_run(void *arg)
{
	thread_arg *t = arg;
	CUDA_OK(cudaSetDevice(0));
	pthread_barrier_wait(t->start);
	for (int r = 0; r < REPS; r++) {
		if (t->device) {
			device_call(&t->c);
			CUDA_OK(cudaStreamSynchronize(t->c.stream));
		} else {
			host_call(&t->c);
		}
	}
	return NULL;
}

/* Searches per second of n threads, each running REPS searches. */
static double throughput(infs_store *st, const float *q, int n, int device)
{
	thread_arg t[8];
	pthread_t th[8];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		search_init(&t[i].c, st, q + (size_t)i * DIMS);
		t[i].c.nq = 1;
		t[i].device = device;
		t[i].start = &start;
		for (int r = 0; r < 10; r++) /* warm: the pool's searchers, the kernels */
			device ? device_call(&t[i].c) : host_call(&t[i].c);
		CUDA_OK(cudaStreamSynchronize(t[i].c.stream));
	}
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, thread_run, &t[i]);
	pthread_barrier_wait(&start);
	double t0 = bench_now_us();
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	double wall = bench_now_us() - t0;
	for (int i = 0; i < n; i++)
		search_free(&t[i].c);
	pthread_barrier_destroy(&start);
	return n * (double)REPS / (wall / 1e6);
}

enum { INJ_FACTS = 50, INJ_TOKENS = 24, BLOCK = 16 };

typedef struct inj {
	infs_store *st;
	infs_injector *in;
	cudaStream_t stream;
	infs_kv_layout layout;
	uint64_t ids[INJ_FACTS], *d_ids;
	uint32_t *d_n, *d_next;
	int32_t *d_table, *d_status, table[128];
} inj;

static void inject_host(inj *c)
{
	uint32_t next;
	infs_inject_options o = INFS_INJECT_OPTIONS_INIT;
	o.stream = c->stream;
	if (infs_inject_into_blocks(&next, c->st, "user", c->ids, INJ_FACTS, 0, c->table, 128, &c->layout, &o))
		bench_die("infs_inject_into_blocks");
}

static void inject_dev(inj *c)
{
	if (infs_inject_device(c->in, "user", c->d_ids, 8, c->d_n, 0, c->d_table, 128, c->d_next, c->d_status, c->stream))
		bench_die("infs_inject_device");
}

static float inj_wall(void (*f)(inj *), inj *c, int sync)
{
	float t[9];
	for (int i = 0; i < 9; i++) {
		CUDA_OK(cudaStreamSynchronize(c->stream));
		double t0 = bench_now_us();
		for (int r = 0; r < 20; r++) {
			f(c);
			if (sync)
				CUDA_OK(cudaStreamSynchronize(c->stream));
		}
		CUDA_OK(cudaStreamSynchronize(c->stream));
		t[i] = (float)((bench_now_us() - t0) / 20);
	}
	return median(t, 9);
}

static void inject_dev_any(void *c)
{
	inject_dev(c);
}

/* Injection of k = 50 facts at Llama-3-8B's geometry, both paths. */
static void bench_inject(FILE *out, const char *dir)
{
	infs__model_config cfg = llama3_8b();
	infs_geometry g = cfg.geom;
	g.kv_dtype = INFS_DTYPE_BF16;
	g.embed_dim = DIMS;
	char path[128];
	snprintf(path, sizeof path, "%s/inject.infs", dir);
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE, so.geometry = &g, so.identity = "bench", so.sync = INFS_SYNC_OFF;
	so.device = 0;
	inj c;
	memset(&c, 0, sizeof c);
	if (infs_store_open(&c.st, path, &so))
		bench_die("infs_store_open");
	const size_t half = (size_t)INJ_TOKENS * infs_geometry_kv_token_bytes(&g);
	uint16_t *kv = malloc(2 * half);
	for (size_t i = 0; i < half; i++) { /* K then V: bf16 values of magnitude in [0.5, 1) */
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		kv[i] = (uint16_t)(0x3f00 | (rng >> 33 & 0xff) | (rng >> 63) << 15);
	}
	int32_t tokens[INJ_TOKENS] = {0};
	float emb[DIMS];
	for (int f = 0; f < INJ_FACTS; f++) {
		for (int j = 0; j < DIMS; j++)
			emb[j] = rnd();
		infs_fact fact = INFS_FACT_INIT;
		fact.n_tokens = INJ_TOKENS, fact.tokens = tokens, fact.embedding = emb, fact.k = kv, fact.v = kv + half / 2;
		if (infs_fact_put(&c.ids[f], c.st, "user", &fact))
			bench_die("infs_fact_put");
	}
	free(kv);
	/* the cache: vLLM's (2, blocks, block, heads, dim) per layer */
	const uint32_t n_blocks = 128, L = g.n_layers;
	const size_t per_kv = (size_t)n_blocks * BLOCK * g.n_kv_heads * g.head_dim;
	void *cache, *k_layers[64], *v_layers[64];
	CUDA_OK(cudaMalloc(&cache, 2 * per_kv * 2 * L));
	for (uint32_t l = 0; l < L; l++) {
		k_layers[l] = (char *)cache + (size_t)l * 2 * per_kv * 2;
		v_layers[l] = (char *)k_layers[l] + per_kv * 2;
	}
	infs_kv_layout *lay = &c.layout;
	infs_kv_layout_init(lay, INFS_KV_LAYOUT_VERSION);
	lay->device = 0, lay->dtype = INFS_DTYPE_BF16, lay->n_layers = L, lay->n_kv_heads = g.n_kv_heads;
	lay->head_dim = g.head_dim, lay->n_blocks = n_blocks, lay->block_size = BLOCK;
	lay->k_layers = k_layers, lay->v_layers = v_layers;
	lay->stride_head = g.head_dim, lay->stride_slot = (int64_t)g.n_kv_heads * g.head_dim;
	lay->stride_block = BLOCK * lay->stride_slot, lay->stride_dim = 1;
	for (int i = 0; i < 128; i++)
		c.table[i] = i;
	infs_injector_options io = INFS_INJECTOR_OPTIONS_INIT;
	io.max_ids = INJ_FACTS, io.max_tokens = INJ_FACTS * INJ_TOKENS;
	if (infs_injector_create(&c.in, c.st, lay, &io))
		bench_die("infs_injector_create");
	CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
	uint32_t n = INJ_FACTS;
	CUDA_OK(cudaMalloc((void **)&c.d_ids, sizeof c.ids));
	CUDA_OK(cudaMalloc((void **)&c.d_n, 4));
	CUDA_OK(cudaMalloc((void **)&c.d_next, 4));
	CUDA_OK(cudaMalloc((void **)&c.d_status, 4));
	CUDA_OK(cudaMalloc((void **)&c.d_table, sizeof c.table));
	CUDA_OK(cudaMemcpy(c.d_ids, c.ids, sizeof c.ids, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(c.d_n, &n, 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(c.d_table, c.table, sizeof c.table, cudaMemcpyHostToDevice));
	inject_dev(&c);
	int32_t status = -1;
	CUDA_OK(cudaMemcpyAsync(&status, c.d_status, 4, cudaMemcpyDeviceToHost, c.stream));
	CUDA_OK(cudaStreamSynchronize(c.stream));
	if (status != INFS_OK) {
		fprintf(stderr, "infs_inject_device: status %d\n", status);
		exit(1);
	}
	const float host = inj_wall(inject_host, &c, 1), dev = inj_wall(inject_dev, &c, 0);
	const float kernel = graph_us(inject_dev_any, &c, c.stream, 20);
	const size_t bytes = 2 * half * INJ_FACTS;
	void *dst;
	CUDA_OK(cudaMalloc(&dst, bytes));
	struct copy_arg ca = {dst, cache, bytes, c.stream};
	const float copy = time_us(copy_run, &ca, 3, 20, c.stream);
	fprintf(out,
	        "  \"inject\": {\"facts\": %d, \"tokens\": %d, \"bytes\": %zu, \"api_host_us\": %.2f, "
	        "\"api_device_us\": %.2f, \"kernel_us\": %.2f, \"memcpy_us\": %.2f, \"device_vs_kernel\": %.3f, "
	        "\"kernel_vs_memcpy\": %.3f},\n",
	        INJ_FACTS, INJ_FACTS * INJ_TOKENS, bytes, host, dev, kernel, copy, dev / kernel, kernel / copy);
	fprintf(stderr,
	        "inject k=%d (%zu bytes): host path %.1f us with a wait, device path %.1f us queued (%.2fx of kernel "
	        "%.1f), memcpy %.1f us\n",
	        INJ_FACTS, bytes, host, dev, dev / kernel, kernel, copy);
	cudaFree(dst), cudaFree(cache), cudaFree(c.d_ids), cudaFree(c.d_n), cudaFree(c.d_next), cudaFree(c.d_status);
	cudaFree(c.d_table);
	infs_injector_free(c.in);
	cudaStreamDestroy(c.stream);
	infs_store_close(c.st);
	unlink(path);
}

int main(int argc, char **argv)
{
	FILE *out = bench_out(argc, argv);
	float *q = malloc((size_t)MAX_Q * DIMS * sizeof *q);
	for (int i = 0; i < MAX_Q; i++) { /* unit queries, as an embedder gives */
		double ss = 0;
		for (int j = 0; j < DIMS; j++) {
			q[i * DIMS + j] = rnd();
			ss += (double)q[i * DIMS + j] * q[i * DIMS + j];
		}
		for (int j = 0; j < DIMS; j++)
			q[i * DIMS + j] = (float)(q[i * DIMS + j] / sqrt(ss));
	}
	void *pinned;
	CUDA_OK(cudaHostAlloc(&pinned, (size_t)MAX_Q * DIMS * 4, cudaHostAllocDefault));
	memcpy(pinned, q, (size_t)MAX_Q * DIMS * 4);

	fprintf(out, "{\n  \"benchmark\": \"serving-api\",\n");
	print_device(out);
	fprintf(out, "  \"dim\": %d, \"k\": %d, \"statistic\": \"median\",\n", DIMS, K);
	char dir[] = "/tmp/infs-serving-XXXXXX", path[64];
	if (!mkdtemp(dir))
		return 1;
	bench_inject(out, dir);
	fprintf(out, "  \"results\": [\n");
	const uint32_t facts[] = {10000, 100000, 1000000}, nqs[] = {1, 4, 8, 32};
	infs_store *st100k = NULL;
	int first = 1;
	for (int a = 0; a < 3; a++) {
		snprintf(path, sizeof path, "%s/store%d.infs", dir, a);
		double t0 = bench_now_us();
		infs_store *st = make_store(path, facts[a]);
		fprintf(stderr, "store of %u facts made in %.1f s\n", facts[a], (bench_now_us() - t0) / 1e6);
		search c;
		search_init(&c, st, q);
		for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++) {
			c.nq = nqs[b];
			float kernel = graph_us(device_call_any, &c, c.stream, REPS), api_dev = queued_us(&c);
			float api_sync = wall_us(device_call, &c, 1);
			float copies = copies_us(&c, pinned), api_host = wall_us(host_call, &c, 0);
			fprintf(out,
			        "%s    {\"facts\": %u, \"queries\": %u, \"api_host_us\": %.2f, \"api_device_us\": %.2f, "
			        "\"kernel_us\": %.2f, \"copies_us\": %.2f, \"api_device_sync_us\": %.2f, "
			        "\"host_vs_bound\": %.3f, \"device_vs_kernel\": %.3f}",
			        first ? "" : ",\n", facts[a], nqs[b], api_host, api_dev, kernel, copies, api_sync,
			        api_host / (kernel + copies), api_dev / kernel);
			first = 0;
			fprintf(stderr,
			        "facts %u queries %u: host path %.1f us (%.2fx of kernel + copies %.1f + %.1f), "
			        "device path %.1f us queued (%.2fx of kernel), %.1f us with a wait\n",
			        facts[a], nqs[b], api_host, api_host / (kernel + copies), kernel, copies, api_dev,
			        api_dev / kernel, api_sync);
		}
		search_free(&c);
		if (facts[a] == 100000) {
			st100k = st;
		} else {
			infs_store_close(st);
			unlink(path);
		}
	}
	fprintf(out, "\n  ],\n  \"threads\": [\n");
	const int threads[] = {1, 2, 4, 8};
	first = 1;
	for (int dev = 0; dev < 2; dev++)
		for (int i = 0; i < 4; i++) {
			double qps = throughput(st100k, q, threads[i], dev);
			fprintf(out, "%s    {\"facts\": 100000, \"path\": \"%s\", \"threads\": %d, \"searches_per_s\": %.0f}",
			        first ? "" : ",\n", dev ? "device" : "host", threads[i], qps);
			first = 0;
			fprintf(stderr, "%s path, %d threads: %.0f searches/s\n", dev ? "device" : "host", threads[i], qps);
		}
	infs_store_close(st100k);
	snprintf(path, sizeof path, "%s/store1.infs", dir);
	unlink(path);
	rmdir(dir);
	fprintf(out, "\n  ]\n}\n");
	if (out != stdout)
		fclose(out);
	cudaFreeHost(pinned);
	free(q);
	return 0;
}

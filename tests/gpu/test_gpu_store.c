/* The store's device copy end to end, through the public API: retrieval on
 * the device equals exact search on the CPU (ids, order and scores), for
 * both metrics, single queries and batches, ties included, after deletes,
 * a namespace drop and a reopen; injection into a device cache equals the
 * CPU's into a host cache (V bit for bit, K within one ulp), from the
 * device copy and from a store without one; the device budget keeps the KV
 * that does not fit in the file's tier and refuses with INFS_EBUDGET only
 * a put whose rows do not fit, leaving the store as it was; and threads
 * retrieve and inject while another puts and deletes. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "../scratch_util.h"
#include "gpu.h"

enum { LAYERS = 4, HEADS = 2, DIM = 64, EMB = 48, BS = 16, BLOCKS = 64 };

static infs_geometry geom(void)
{
	infs_geometry g = test_geometry(LAYERS, HEADS, DIM, INFS_DTYPE_BF16);
	g.rope_theta = 500000.0, g.rope_scaling = INFS_ROPE_SCALING_LLAMA3, g.rope_factor = 8.0;
	g.embed_dim = EMB;
	return g;
}

static uint64_t rng = 12345;

static uint64_t put(infs_store *st, const char *ns, uint32_t n_tokens, int segment, const float *emb_in, int expect)
{
	size_t n = (size_t)LAYERS * n_tokens * HEADS * DIM;
	uint16_t *k = malloc(n * 2), *v = malloc(n * 2);
	int32_t *tokens = calloc(n_tokens, sizeof *tokens);
	float emb[EMB];
	for (size_t i = 0; i < n; i++) {
		k[i] = infs__f32_to_bf16(rng_float(&rng) * 3.0f);
		v[i] = infs__f32_to_bf16(rng_float(&rng) * 3.0f);
	}
	for (int i = 0; i < EMB; i++)
		emb[i] = emb_in ? emb_in[i] : rng_float(&rng);
	infs_fact f = INFS_FACT_INIT;
	f.flags = segment ? INFS_FACT_SEGMENT : 0;
	f.n_tokens = n_tokens, f.tokens = tokens, f.embedding = segment ? NULL : emb, f.k = k, f.v = v;
	uint64_t id = 0;
	int rc = infs_fact_put(&id, st, ns, &f);
	if (expect == INFS_OK)
		CHECK_OK(rc);
	else
		CHECK_ERR(rc, expect);
	free(k), free(v), free(tokens);
	return id;
}

static infs_store *open_store(const char *path, int device, uint64_t budget, int create, int expect)
{
	infs_geometry g = geom();
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = create ? INFS_OPEN_CREATE : 0;
	o.geometry = &g, o.identity = "gpu-test", o.sync = INFS_SYNC_OFF;
	o.device = device, o.device_budget_bytes = budget;
	infs_store *st = NULL;
	int rc = infs_store_open(&st, path, &o);
	if (expect == INFS_OK)
		CHECK_OK(rc);
	else
		CHECK_ERR(rc, expect);
	return st;
}

/* CUDA and exact search agree on every query. Returns the hits compared. */
static size_t compare_search(infs_store *st, const char *ns, size_t nq, size_t k, infs_metric metric)
{
	float *q = malloc(nq * EMB * sizeof *q);
	for (size_t i = 0; i < nq; i++) {
		double ss = 0;
		for (int j = 0; j < EMB; j++) {
			q[i * EMB + j] = rng_float(&rng);
			ss += (double)q[i * EMB + j] * q[i * EMB + j];
		}
		if (metric == INFS_METRIC_COSINE)
			for (int j = 0; j < EMB; j++)
				q[i * EMB + j] = (float)(q[i * EMB + j] / sqrt(ss));
	}
	infs_hit *a = calloc(nq * k, sizeof *a), *b = calloc(nq * k, sizeof *b);
	size_t *na = calloc(nq, sizeof *na), *nb = calloc(nq, sizeof *nb), hits = 0;
	infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
	o.metric = metric;
	o.backend = INFS_BACKEND_CUDA;
	CHECK_OK(infs_retrieve(a, na, st, ns, q, nq, k, &o));
	o.backend = INFS_BACKEND_EXACT;
	CHECK_OK(infs_retrieve(b, nb, st, ns, q, nq, k, &o));
	for (size_t i = 0; i < nq; i++) {
		CHECK(na[i] == nb[i]);
		for (size_t j = 0; j < na[i] && j < nb[i]; j++) {
			const infs_hit *x = &a[i * k + j], *y = &b[i * k + j];
			if (x->id != y->id || x->score != y->score) {
				fprintf(stderr, "%s k %zu query %zu hit %zu: cuda %llu %.9g, exact %llu %.9g\n", ns, k, i, j,
				        (unsigned long long)x->id, x->score, (unsigned long long)y->id, y->score);
				check_failures++;
				break;
			}
			hits++;
		}
	}
	free(q), free(a), free(b), free(na), free(nb);
	return hits;
}

/* A vLLM-layout cache, (2, blocks, BS, heads, dim) per layer, in host
 * memory or on the device, filled with the same random bytes. */
typedef struct cache {
	infs_kv_layout l;
	void *k[LAYERS], *v[LAYERS];
	void *mem;
	size_t bytes;
} cache;

static void cache_make(cache *c, int device, infs_dtype dt, uint64_t seed)
{
	size_t es = infs_dtype_size(dt), layer = 2ull * BLOCKS * BS * HEADS * DIM * es;
	c->bytes = layer * LAYERS;
	unsigned char *h = malloc(c->bytes);
	for (size_t i = 0; i < c->bytes; i++)
		h[i] = (unsigned char)(rng_next(&seed) >> 56);
	if (dt == INFS_DTYPE_F32) /* keep the filling finite */
		for (size_t i = 0; i < c->bytes / 4; i++)
			((float *)h)[i] = rng_float(&seed);
	if (device >= 0) {
		CUDA_OK(cudaMalloc(&c->mem, c->bytes));
		CUDA_OK(cudaMemcpy(c->mem, h, c->bytes, cudaMemcpyHostToDevice));
		free(h);
	} else {
		c->mem = h;
	}
	for (int i = 0; i < LAYERS; i++) {
		c->k[i] = (char *)c->mem + i * layer;
		c->v[i] = (char *)c->mem + i * layer + layer / 2;
	}
	infs_kv_layout l = INFS_KV_LAYOUT_INIT;
	l.device = device, l.dtype = dt, l.n_layers = LAYERS, l.n_kv_heads = HEADS, l.head_dim = DIM;
	l.n_blocks = BLOCKS, l.block_size = BS, l.k_layers = c->k, l.v_layers = c->v;
	l.stride_block = BS * HEADS * DIM, l.stride_slot = HEADS * DIM, l.stride_head = DIM, l.stride_dim = 1;
	c->l = l;
}

static void cache_free(cache *c)
{
	if (c->l.device >= 0)
		cudaFree(c->mem);
	else
		free(c->mem);
}

/* Injects ids on the device and on the host; the caches must agree. */
static void compare_inject(infs_store *st, const char *ns, const uint64_t *ids, size_t n, uint32_t start,
                           infs_dtype dt, cudaStream_t stream)
{
	int32_t table[BLOCKS];
	for (int i = 0; i < BLOCKS; i++)
		table[i] = (i * 37 + 11) % BLOCKS; /* scattered, distinct */
	cache dc, hc;
	cache_make(&dc, 0, dt, 99);
	cache_make(&hc, -1, dt, 99);
	uint32_t next_d = 0, next_h = 0;
	infs_inject_options o = INFS_INJECT_OPTIONS_INIT;
	o.stream = stream;
	CHECK_OK(infs_inject_into_blocks(&next_d, st, ns, ids, n, start, table, BLOCKS, &dc.l, &o));
	CHECK_OK(infs_inject_into_blocks(&next_h, st, ns, ids, n, start, table, BLOCKS, &hc.l, NULL));
	CHECK(next_d == next_h);
	unsigned char *got = malloc(dc.bytes);
	CUDA_OK(cudaStreamSynchronize(stream));
	CUDA_OK(cudaMemcpy(got, dc.mem, dc.bytes, cudaMemcpyDeviceToHost));
	size_t es = infs_dtype_size(dt), half = dc.bytes / LAYERS / 2 / es, bad = 0;
	for (size_t i = 0; i < dc.bytes / es; i++) {
		uint64_t u = ulp_diff(got, hc.mem, dt, i);
		int is_k = (i / half) % 2 == 0;
		if (u > (is_k ? 1u : 0u) && bad++ < 5)
			fprintf(stderr, "inject %s: element %zu (%s) differs by %llu ulp\n", ns, i, is_k ? "K" : "V",
			        (unsigned long long)u);
	}
	CHECK(bad == 0);
	free(got);
	cache_free(&dc);
	cache_free(&hc);
}

typedef struct shared {
	infs_store *st;
	uint64_t ids[8];
	infs_hit expect[10];
	size_t expect_n;
	float q[EMB];
	int stop, errors, rounds;
} shared;

static void *reader(void *arg)
{
	shared *sh = arg;
	infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
	o.backend = INFS_BACKEND_CUDA;
	for (int i = 0; i < sh->rounds; i++) {
		infs_hit h[10];
		size_t n;
		int bad = infs_retrieve(h, &n, sh->st, "alice", sh->q, 1, 10, &o) != INFS_OK || n != sh->expect_n;
		for (size_t j = 0; !bad && j < n; j++)
			bad = h[j].id != sh->expect[j].id || h[j].score != sh->expect[j].score;
		if (bad)
			__atomic_add_fetch(&sh->errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *injector(void *arg)
{
	shared *sh = arg;
	cudaStream_t s;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cache c;
	cache_make(&c, 0, INFS_DTYPE_BF16, 5);
	int32_t table[BLOCKS];
	for (int i = 0; i < BLOCKS; i++)
		table[i] = BLOCKS - 1 - i;
	infs_inject_options o = INFS_INJECT_OPTIONS_INIT;
	o.stream = s;
	for (int i = 0; i < sh->rounds; i++) {
		uint32_t next;
		if (infs_inject_into_blocks(&next, sh->st, "alice", sh->ids, 8, (uint32_t)i, table, BLOCKS, &c.l, &o))
			__atomic_add_fetch(&sh->errors, 1, __ATOMIC_RELAXED);
	}
	CUDA_OK(cudaStreamSynchronize(s));
	cache_free(&c);
	cudaStreamDestroy(s);
	return NULL;
}

static void *writer(void *arg)
{
	shared *sh = arg;
	for (int i = 0; i < sh->rounds; i++) {
		uint64_t id = put(sh->st, "churn", 1 + (uint32_t)(i % 7), i % 5 == 0, NULL, INFS_OK);
		if (i % 2 && infs_fact_delete(sh->st, "churn", id) != INFS_OK)
			__atomic_add_fetch(&sh->errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(void)
{
	gpu_require();
	char path[600], path2[600];
	scratch_make("gpu-store", path, sizeof path, "store.infs");
	snprintf(path2, sizeof path2, "%s/budget.infs", scratch_dir);
	infs_store *st = open_store(path, 0, 0, 1, INFS_OK);
	if (!st)
		CHECK_DONE();

	/* alice: facts with some repeated embeddings (exact ties), segments;
	 * bob: a few facts. */
	uint64_t alice[300], segs[3], bob[20];
	float same[EMB];
	for (int j = 0; j < EMB; j++)
		same[j] = rng_float(&rng);
	segs[0] = put(st, "alice", 5, 1, NULL, INFS_OK);
	for (int i = 0; i < 300; i++)
		alice[i] = put(st, "alice", 1 + (uint32_t)(i % 13), 0, i % 50 == 7 ? same : NULL, INFS_OK);
	segs[1] = put(st, "alice", 3, 1, NULL, INFS_OK);
	segs[2] = put(st, "alice", 2, 1, NULL, INFS_OK);
	for (int i = 0; i < 20; i++)
		bob[i] = put(st, "bob", 4, 0, NULL, INFS_OK);
	infs_store_stats stats;
	memset(&stats, 0, sizeof stats);
	stats.version = INFS_STORE_STATS_VERSION;
	CHECK_OK(infs_store_stats_get(&stats, st));
	CHECK(stats.device_bytes > 0);

	size_t hits = 0;
	for (int m = 0; m < 2; m++) {
		hits += compare_search(st, "alice", 1, 1, (infs_metric)m);
		hits += compare_search(st, "alice", 1, 10, (infs_metric)m);
		hits += compare_search(st, "alice", 7, 50, (infs_metric)m);
		hits += compare_search(st, "alice", 3, 400, (infs_metric)m);
		hits += compare_search(st, "bob", 2, 10, (infs_metric)m);
		hits += compare_search(st, "nobody", 2, 10, (infs_metric)m);
	}
	/* a query equal to the repeated embedding: its copies tie at the top */
	{
		double ss = 0;
		float q[EMB];
		for (int j = 0; j < EMB; j++)
			ss += (double)same[j] * same[j];
		for (int j = 0; j < EMB; j++)
			q[j] = (float)(same[j] / sqrt(ss));
		infs_hit a[8];
		size_t na;
		infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
		o.backend = INFS_BACKEND_CUDA;
		CHECK_OK(infs_retrieve(a, &na, st, "alice", q, 1, 8, &o));
		CHECK(na == 8);
		for (int i = 0; i < 6; i++)
			CHECK(a[i].id == alice[7 + 50 * i] && a[i].score == a[0].score);
	}

	cudaStream_t stream;
	CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	uint64_t order[8] = {segs[0], alice[3], alice[120], alice[299], alice[12], alice[7], segs[1], segs[2]};
	for (int dt = 0; dt < 3; dt++)
		compare_inject(st, "alice", order, 8, (uint32_t)(dt * 101), (infs_dtype)dt, stream);
	compare_inject(st, "bob", bob, 20, 3, INFS_DTYPE_BF16, 0);

	/* Deletes and a drop keep the copy in step. */
	for (int i = 0; i < 300; i += 3)
		CHECK_OK(infs_fact_delete(st, "alice", alice[i]));
	CHECK_OK(infs_namespace_drop(st, "bob"));
	for (int m = 0; m < 2; m++) {
		hits += compare_search(st, "alice", 5, 20, (infs_metric)m);
		hits += compare_search(st, "bob", 1, 10, (infs_metric)m);
	}
	uint32_t next;
	int32_t table[BLOCKS] = {0};
	cache dc;
	cache_make(&dc, 0, INFS_DTYPE_BF16, 1);
	CHECK_ERR(infs_inject_into_blocks(&next, st, "alice", &alice[0], 1, 0, table, BLOCKS, &dc.l, NULL),
	          INFS_ENOTFOUND);
	cache_free(&dc);
	uint64_t order2[4] = {alice[1], segs[0], alice[2], alice[298]};
	compare_inject(st, "alice", order2, 4, 17, INFS_DTYPE_F16, stream);

	/* Threads retrieve and inject while another puts and deletes. */
	shared sh;
	memset(&sh, 0, sizeof sh);
	sh.st = st;
	/* compute-sanitizer serialises every launch: fewer rounds there */
	const char *small = getenv("INFS_TEST_SMALL");
	sh.rounds = small && *small == '1' ? 4 : 60;
	uint64_t live[8] = {segs[0], alice[4], alice[121], alice[298], alice[13], alice[7], segs[1], segs[2]};
	memcpy(sh.ids, live, sizeof live);
	for (int j = 0; j < EMB; j++)
		sh.q[j] = same[j] / 4;
	{
		infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
		o.backend = INFS_BACKEND_EXACT;
		CHECK_OK(infs_retrieve(sh.expect, &sh.expect_n, st, "alice", sh.q, 1, 10, &o));
	}
	pthread_t th[5];
	pthread_create(&th[0], NULL, reader, &sh);
	pthread_create(&th[1], NULL, reader, &sh);
	pthread_create(&th[2], NULL, injector, &sh);
	pthread_create(&th[3], NULL, injector, &sh);
	pthread_create(&th[4], NULL, writer, &sh);
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	CHECK(sh.errors == 0);
	hits += compare_search(st, "churn", 2, 10, INFS_METRIC_COSINE);

	/* The copy is rebuilt from the file at open. */
	infs_store_close(st);
	st = open_store(path, 0, 0, 0, INFS_OK);
	for (int m = 0; m < 2; m++)
		hits += compare_search(st, "alice", 4, 30, (infs_metric)m);
	compare_inject(st, "alice", order2, 4, 1000, INFS_DTYPE_BF16, stream);
	infs_store_close(st);

	/* The same store without a device copy still injects into device
	 * caches (each call uploads the records). */
	st = open_store(path, -1, 0, 0, INFS_OK);
	compare_inject(st, "alice", order2, 4, 5, INFS_DTYPE_BF16, stream);
	infs_retrieve_options ro = INFS_RETRIEVE_OPTIONS_INIT;
	ro.backend = INFS_BACKEND_CUDA;
	infs_hit h1[1];
	size_t n1;
	CHECK_ERR(infs_retrieve(h1, &n1, st, "alice", sh.q, 1, 1, &ro), INFS_EUNSUPPORTED);
	infs_store_close(st);

	/* The budget: 200 KiB holds the rows of 40 facts and the KV of about
	 * ten 8-token facts (16 KiB each): every put is taken, the KV that does
	 * not fit stays in the file's tier (one namespace: nothing to evict).
	 * Only rows that do not fit are refused: at 8 KiB a put is, and it is
	 * withdrawn. */
	const uint64_t budgets[2] = { 200 << 10, 8 << 10 };
	int accepted = 0;
	uint64_t count = 0;
	for (int b = 0; b < 2; b++) {
		snprintf(path2, sizeof path2, "%s/budget%d.infs", scratch_dir, b);
		st = open_store(path2, 0, budgets[b], 1, INFS_OK);
		accepted = 0;
		for (int i = 0; i < 40; i++) {
			uint64_t id = 0;
			size_t n = (size_t)LAYERS * 8 * HEADS * DIM;
			uint16_t *kv = calloc(n, 2);
			int32_t tok[8] = {0};
			float emb[EMB] = {1.0f};
			infs_fact f = INFS_FACT_INIT;
			f.n_tokens = 8, f.tokens = tok, f.embedding = emb, f.k = kv, f.v = kv;
			int rc = infs_fact_put(&id, st, "x", &f);
			free(kv);
			if (rc == INFS_OK) {
				accepted++;
				continue;
			}
			CHECK(b == 1 && rc == INFS_EBUDGET);
			CHECK(strstr(infs_error_last(), "budget") != NULL);
			break;
		}
		CHECK(b == 0 ? accepted == 40 : accepted >= 5 && accepted < 40);
		CHECK_OK(infs_fact_count(&count, st, "x"));
		CHECK(count == (uint64_t)accepted);
		stats.version = INFS_STORE_STATS_VERSION;
		CHECK_OK(infs_store_stats_get(&stats, st));
		CHECK(stats.device_bytes <= budgets[b] && stats.kv_device_bytes <= stats.device_bytes);
		CHECK(b == 1 || (stats.kv_device_bytes >= 5 * 16384 && stats.kv_device_bytes < 40 * 16384));
		infs_tier tier;
		CHECK_OK(infs_namespace_tier(&tier, st, "x"));
		CHECK(tier == INFS_TIER_FILE);
		infs_store_close(st);
		st = open_store(path2, 0, budgets[b], 0, INFS_OK); /* a withdrawn put stays withdrawn */
		CHECK_OK(infs_fact_count(&count, st, "x"));
		CHECK(count == (uint64_t)accepted);
		infs_store_close(st);
	}
	open_store(path2, 0, 2 << 10, 0, INFS_EBUDGET); /* too small for the rows */

	printf("%zu hits equal to exact search; injections equal to the CPU's; budget refused put %d\n", hits,
	       accepted + 1);
	cudaStreamDestroy(stream);
	scratch_cleanup();
	CHECK_DONE();
}

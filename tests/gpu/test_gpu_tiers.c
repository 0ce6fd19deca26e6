/* The tiers of fact KV (docs/cuda.md, "Tiers"), through the public API:
 * (a) a store filled past its device budget evicts whole namespaces least
 * recently used first (puts and injections use them), reports their tiers
 * and keeps its device memory within the budget; an injection moves its
 * namespace back up; (b) injection from each tier (device, pinned host
 * memory, the file), by host ids and by device ids, bf16 and fp8, equals
 * the CPU's from a store without a device copy (V bit for bit, K within
 * one ulp), and device ids of a fact only in the file write nothing
 * (INFS_ENOTRESIDENT); (c) 8 threads inject from their own namespaces,
 * checking every cache against the CPU, while one prefetches and one puts
 * and deletes, with budgets so small that KV moves all the time.
 * INFS_TEST_SMALL=1 shortens (c) for compute-sanitizer. */
#include <pthread.h>
#include <string.h>

#include "../scratch_util.h"
#include "gpu.h"

enum { L = 4, H = 2, D = 64, EMB = 16, NB = 16, BS = 16, MAX_IDS = 8 };

static infs_geometry geom(infs_dtype dtype)
{
	infs_geometry g = test_geometry(L, H, D, dtype);
	g.embed_dim = EMB;
	return g;
}

static infs_store *open_store(const char *path, const infs_geometry *g, int device, uint64_t budget,
                              uint64_t host_budget)
{
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = g;
	o.identity = "tiers";
	o.sync = INFS_SYNC_OFF;
	o.device = device;
	o.device_budget_bytes = budget;
	o.host_budget_bytes = host_budget;
	infs_store *s = NULL;
	CHECK_OK(infs_store_open(&s, path, &o));
	return s;
}

/* Puts the same fact (n_tokens, from seed) into each store of st (n of
 * them, the same ids in each); returns the id. */
static uint64_t put_fact(infs_store **st, int n, const char *ns, const infs_geometry *g, uint32_t n_tokens,
                         uint64_t seed)
{
	infs_geometry gf = *g;
	gf.kv_dtype = INFS_DTYPE_F32;
	const size_t elems = (size_t)n_tokens * infs_geometry_kv_token_bytes(&gf) / 4;
	const size_t bytes = (size_t)n_tokens * infs_geometry_kv_token_bytes(g);
	float *x = malloc(elems * 4), emb[EMB];
	void *k = malloc(bytes), *v = malloc(bytes);
	int32_t tok[64] = { 0 };
	uint64_t rng = seed * 2654435761u + 1, id = 0, first = 0;
	for (size_t i = 0; i < elems; i++)
		x[i] = 2 * rng_float(&rng);
	CHECK_OK(infs_kv_convert(k, g->kv_dtype, x, INFS_DTYPE_F32, g, n_tokens));
	for (size_t i = 0; i < elems; i++)
		x[i] = rng_float(&rng);
	CHECK_OK(infs_kv_convert(v, g->kv_dtype, x, INFS_DTYPE_F32, g, n_tokens));
	for (int i = 0; i < EMB; i++)
		emb[i] = rng_float(&rng);
	infs_fact f = INFS_FACT_INIT;
	f.n_tokens = n_tokens, f.tokens = tok, f.embedding = emb, f.k = k, f.v = v;
	for (int i = 0; i < n; i++) {
		CHECK_OK(infs_fact_put(&id, st[i], ns, &f));
		if (i == 0)
			first = id;
		CHECK(id == first);
	}
	free(x), free(k), free(v);
	return id;
}

static infs_tier tier_of(infs_store *st, const char *ns)
{
	infs_tier t = INFS_TIER_FILE;
	CHECK_OK(infs_namespace_tier(&t, st, ns));
	return t;
}

static infs_store_stats stats_of(infs_store *st)
{
	infs_store_stats s = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&s, st));
	return s;
}

/* A bf16 cache on the device (vLLM's layout) and the same on the host, for
 * the CPU's reference; one injector (device ids) with its buffers. */
typedef struct cache {
	infs_kv_layout dl, hl;
	uint16_t *dmem, *hmem, *got;
	void *dk[L], *dv[L], *hk[L], *hv[L];
	size_t per_layer;
	cudaStream_t stream;
	infs_injector *inj;
	uint64_t *d_ids;
	uint32_t *d_n, *d_next;
	int32_t *d_table, *d_status;
} cache;

static const int32_t table[NB] = { 3, 9, 0, 14, 5, 11, 1, 7, 15, 2, 12, 4, 10, 6, 13, 8 };

static void cache_make(cache *c, infs_store *dev, const infs_geometry *g)
{
	memset(c, 0, sizeof *c);
	c->per_layer = gpu_vllm_cache(&c->dl, &c->dmem, c->dk, c->dv, g, NB, BS);
	const size_t all = L * c->per_layer;
	c->hmem = malloc(all * 2);
	c->got = malloc(all * 2);
	c->hl = c->dl;
	c->hl.device = -1;
	for (int l = 0; l < L; l++) {
		c->hk[l] = c->hmem + l * c->per_layer;
		c->hv[l] = c->hmem + l * c->per_layer + c->per_layer / 2;
	}
	c->hl.k_layers = c->hk, c->hl.v_layers = c->hv;
	c->dl.k_layers = c->dk, c->dl.v_layers = c->dv;
	CUDA_OK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
	infs_injector_options io = INFS_INJECTOR_OPTIONS_INIT;
	io.max_ids = MAX_IDS, io.max_tokens = NB * BS;
	CHECK_OK(infs_injector_create(&c->inj, dev, &c->dl, &io));
	CUDA_OK(cudaMalloc((void **)&c->d_ids, MAX_IDS * 8));
	CUDA_OK(cudaMalloc((void **)&c->d_n, 8));
	c->d_next = c->d_n + 1;
	CUDA_OK(cudaMalloc((void **)&c->d_table, NB * 4 + 4));
	c->d_status = c->d_table + NB;
	CUDA_OK(cudaMemcpy(c->d_table, table, NB * 4, cudaMemcpyHostToDevice));
}

static void cache_free(cache *c)
{
	infs_injector_free(c->inj);
	cudaFree(c->dmem), cudaFree(c->d_ids), cudaFree(c->d_n), cudaFree(c->d_table);
	cudaStreamDestroy(c->stream);
	free(c->hmem), free(c->got);
}

/* Injects ids[0..n) of ns from dev (by device ids when by_ids) and from
 * ref on the CPU, at start_pos 5, into zeroed caches, and compares them.
 * Returns the device call's status (its INFS_ENOTRESIDENT: the device
 * cache must be untouched); failures count as check failures. */
static int inject_compare(cache *c, infs_store *dev, infs_store *ref, const char *ns, const uint64_t *ids,
                          uint32_t n, int by_ids)
{
	const uint32_t start = 5;
	const size_t all = L * c->per_layer;
	uint32_t next_h = 0, next_d = 0;
	int32_t status = INFS_OK;
	memset(c->hmem, 0, all * 2);
	CHECK_OK(infs_inject_into_blocks(&next_h, ref, ns, ids, n, start, table, NB, &c->hl, NULL));
	CUDA_OK(cudaMemsetAsync(c->dmem, 0, all * 2, c->stream));
	if (by_ids) {
		CUDA_OK(cudaMemcpyAsync(c->d_ids, ids, n * 8, cudaMemcpyHostToDevice, c->stream));
		CUDA_OK(cudaMemcpyAsync(c->d_n, &n, 4, cudaMemcpyHostToDevice, c->stream));
		CHECK_OK(infs_inject_device(c->inj, ns, c->d_ids, 8, c->d_n, start, c->d_table, NB, c->d_next,
		                            c->d_status, c->stream));
		CUDA_OK(cudaMemcpyAsync(&status, c->d_status, 4, cudaMemcpyDeviceToHost, c->stream));
		CUDA_OK(cudaMemcpyAsync(&next_d, c->d_next, 4, cudaMemcpyDeviceToHost, c->stream));
	} else {
		infs_inject_options o = INFS_INJECT_OPTIONS_INIT;
		o.stream = c->stream;
		CHECK_OK(infs_inject_into_blocks(&next_d, dev, ns, ids, n, start, table, NB, &c->dl, &o));
	}
	CUDA_OK(cudaMemcpyAsync(c->got, c->dmem, all * 2, cudaMemcpyDeviceToHost, c->stream));
	CUDA_OK(cudaStreamSynchronize(c->stream));
	if (status == INFS_ENOTRESIDENT) {
		CHECK(next_d == start);
		for (size_t i = 0; i < all; i++)
			if (c->got[i]) {
				CHECK(!"a refused call wrote to the cache");
				break;
			}
		return status;
	}
	CHECK(status == INFS_OK && next_d == next_h);
	int bad = 0;
	for (size_t i = 0; i < all && bad < 5; i++) {
		const int is_v = i % c->per_layer >= c->per_layer / 2;
		if (c->got[i] != c->hmem[i] && (is_v || ulp_diff(c->got, c->hmem, INFS_DTYPE_BF16, i) > 1)) {
			fprintf(stderr, "%s: element %zu (%s) is %04x, the CPU's %04x\n", ns, i, is_v ? "V" : "K", c->got[i],
			        c->hmem[i]);
			bad++;
		}
	}
	__atomic_add_fetch(&check_failures, bad, __ATOMIC_RELAXED);
	return status;
}

/* The namespaces in order of use (oldest first): the device holds a
 * suffix of them, and the rest have left it. */
static void check_lru(infs_store *st, const char *const *order, int n)
{
	int on = 0;
	for (int i = 0; i < n; i++) {
		infs_tier t = tier_of(st, order[i]);
		if (on && t != INFS_TIER_DEVICE)
			fprintf(stderr, "%s (used after one on the device) is in tier %d\n", order[i], (int)t);
		CHECK(!on || t == INFS_TIER_DEVICE);
		on |= t == INFS_TIER_DEVICE;
	}
	CHECK(on);
}

/* (a) Five namespaces of 8 facts of 8 tokens (16 KiB of bf16 KV each),
 * about three namespaces' KV in the budget. */
static void lru(void)
{
	const infs_geometry g = geom(INFS_DTYPE_BF16);
	char pd[600], pr[600];
	scratch_path(pd, sizeof pd, "lru.infs");
	scratch_path(pr, sizeof pr, "lru-ref.infs");
	const uint64_t budget = 5 * 31744 + 3 * 8 * 16384 + 8192;
	infs_store *st[2] = { open_store(pd, &g, 0, budget, 0), open_store(pr, &g, -1, 0, 0) };
	const char *names[5] = { "a", "b", "c", "d", "e" };
	uint64_t ids[5][8];
	for (int n = 0; n < 5; n++)
		for (int i = 0; i < 8; i++)
			ids[n][i] = put_fact(st, 2, names[n], &g, 8, 100 * (uint64_t)n + (uint64_t)i);
	CHECK_OK(infs_tier_wait(st[0]));
	infs_store_stats s = stats_of(st[0]);
	int off = 0;
	for (int n = 0; n < 5; n++)
		off += tier_of(st[0], names[n]) != INFS_TIER_DEVICE;
	printf("lru: %d of 5 namespaces off the device, %llu evictions, %llu of %llu device bytes, %llu of KV\n", off,
	       (unsigned long long)s.device_evictions, (unsigned long long)s.device_bytes,
	       (unsigned long long)budget, (unsigned long long)s.kv_device_bytes);
	check_lru(st[0], names, 5);
	CHECK(off >= 1 && off <= 3 && s.device_evictions == (uint64_t)off);
	CHECK(tier_of(st[0], "a") == INFS_TIER_FILE && tier_of(st[0], "e") == INFS_TIER_DEVICE);
	CHECK(s.device_bytes <= budget && s.kv_device_bytes <= s.device_bytes && s.host_bytes == 0);

	/* injecting a (from the file) uses it and moves it up, evicting the
	 * least recently used of the others */
	cache c;
	cache_make(&c, st[0], &g);
	inject_compare(&c, st[0], st[1], "a", ids[0], 8, 0);
	CHECK_OK(infs_tier_wait(st[0]));
	const char *order[5] = { "b", "c", "d", "e", "a" };
	check_lru(st[0], order, 5);
	CHECK(tier_of(st[0], "a") == INFS_TIER_DEVICE);
	s = stats_of(st[0]);
	CHECK(s.promotions >= 1 && s.device_evictions > (uint64_t)off && s.device_bytes <= budget);
	inject_compare(&c, st[0], st[1], "a", ids[0], 8, 1); /* now from the device */
	cache_free(&c);
	infs_store_close(st[0]);
	infs_store_close(st[1]);
}

/* (b) Each tier in a store of its own, so that no move changes it while
 * it is tested: device (no budget), pinned (a device budget too small for
 * any fact's KV, prefetched to pinned memory), file (no pinned tier). */
static void from_each_tier(infs_dtype dtype)
{
	const infs_geometry g = geom(dtype);
	static const char *const tiers[3] = { "device", "pinned host memory", "file" };
	for (int t = 0; t < 3; t++) {
		char pd[600], pr[600];
		scratch_path(pd, sizeof pd, "tier.infs");
		scratch_path(pr, sizeof pr, "tier-ref.infs");
		remove(pd), remove(pr);
		/* the pinned budget makes chunks of 64 KiB: the facts span three */
		const uint64_t budget = t == 0 ? 0 : 8 << 10, host_budget = t == 1 ? 512 << 10 : 0;
		infs_store *st[2] = { open_store(pd, &g, 0, budget, host_budget), open_store(pr, &g, -1, 0, 0) };
		uint64_t ids[6];
		for (int i = 0; i < 6; i++)
			ids[i] = put_fact(st, 2, "u", &g, 9 + (uint32_t)i, 7 * (uint64_t)i + (uint64_t)dtype);
		CHECK_OK(infs_prefetch(st[0], "u"));
		CHECK_OK(infs_tier_wait(st[0]));
		CHECK(tier_of(st[0], "u") == (infs_tier)t);
		cache c;
		cache_make(&c, st[0], &g);
		const uint64_t pick[6] = { ids[4], ids[0], ids[5], ids[2], ids[1], ids[3] };
		for (int by_ids = 0; by_ids < 2; by_ids++) {
			int status = inject_compare(&c, st[0], st[1], "u", pick, 6, by_ids);
			CHECK(status == (t == 2 && by_ids ? INFS_ENOTRESIDENT : INFS_OK));
			printf("%s from the %s by %s ids: %s\n", dtype == INFS_DTYPE_BF16 ? "bf16" : "fp8", tiers[t],
			       by_ids ? "device" : "host", status ? "INFS_ENOTRESIDENT" : "equal to the CPU's");
		}
		CHECK_OK(infs_tier_wait(st[0]));
		CHECK(tier_of(st[0], "u") == (infs_tier)t); /* nothing fits higher */
		infs_store_stats s = stats_of(st[0]);
		CHECK(s.device_bytes <= (budget ? budget : UINT64_MAX) && s.host_bytes <= (host_budget ? host_budget : 0));
		CHECK(t != 1 || s.kv_host_bytes > 0);
		cache_free(&c);
		infs_store_close(st[0]);
		infs_store_close(st[1]);
	}
}

/* (c) Threads. */
enum { THREADS = 8, FACTS = 12 };

typedef struct shared {
	infs_store *dev, *ref;
	infs_geometry g;
	uint64_t ids[THREADS][FACTS];
	int rounds, stop;
	int notresident;
} shared;

typedef struct worker {
	shared *sh;
	int t;
} worker;

static void *inject_thread(void *arg)
{
	worker *w = arg;
	shared *sh = w->sh;
	char ns[16];
	snprintf(ns, sizeof ns, "user%d", w->t);
	cache c;
	cache_make(&c, sh->dev, &sh->g);
	uint64_t rng = 77 + (uint64_t)w->t;
	for (int r = 0; r < sh->rounds; r++) {
		uint64_t pick[4];
		for (int i = 0; i < 4; i++)
			pick[i] = sh->ids[w->t][rng_next(&rng) % FACTS];
		if (inject_compare(&c, sh->dev, sh->ref, ns, pick, 4, (w->t + r) % 2) == INFS_ENOTRESIDENT)
			__atomic_add_fetch(&sh->notresident, 1, __ATOMIC_RELAXED);
	}
	cache_free(&c);
	return NULL;
}

static void *prefetch_thread(void *arg)
{
	shared *sh = arg;
	uint64_t rng = 5;
	char ns[16];
	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED)) {
		snprintf(ns, sizeof ns, "user%d", (int)(rng_next(&rng) % THREADS));
		CHECK_OK(infs_prefetch(sh->dev, ns));
		if (rng_next(&rng) % 4 == 0)
			CHECK_OK(infs_tier_wait(sh->dev));
	}
	return NULL;
}

static void *writer_thread(void *arg)
{
	shared *sh = arg;
	uint64_t live[64];
	int n = 0;
	for (uint64_t i = 0; !__atomic_load_n(&sh->stop, __ATOMIC_RELAXED); i++) {
		live[n++] = put_fact(&sh->dev, 1, "churn", &sh->g, 8 + (uint32_t)(i % 8), 9000 + i);
		if (n == 64 || i % 3 == 2) {
			CHECK_OK(infs_fact_delete(sh->dev, "churn", live[0]));
			memmove(live, live + 1, --n * sizeof *live);
		}
	}
	return NULL;
}

static void threads(infs_dtype dtype, int small)
{
	shared sh = { .g = geom(dtype), .rounds = small ? 6 : 40 };
	char pd[600], pr[600];
	scratch_path(pd, sizeof pd, "threads.infs");
	scratch_path(pr, sizeof pr, "threads-ref.infs");
	remove(pd), remove(pr);
	/* room for the rows and about two namespaces' KV on the device, two
	 * more in pinned memory: every round moves something */
	const uint64_t fact = 2 * 12 * infs_geometry_kv_token_bytes(&sh.g);
	const uint64_t budget = 10 * 31744 + 2 * FACTS * fact, host_budget = 2 * FACTS * fact;
	sh.dev = open_store(pd, &sh.g, 0, budget, host_budget);
	sh.ref = open_store(pr, &sh.g, -1, 0, 0);
	infs_store *both[2] = { sh.dev, sh.ref };
	for (int t = 0; t < THREADS; t++) {
		char ns[16];
		snprintf(ns, sizeof ns, "user%d", t);
		for (int i = 0; i < FACTS; i++)
			sh.ids[t][i] = put_fact(both, 2, ns, &sh.g, 8 + (uint32_t)(i % 5), 1000 * (uint64_t)t + (uint64_t)i);
	}
	pthread_t th[THREADS], pf, wr;
	worker w[THREADS];
	CHECK(pthread_create(&pf, NULL, prefetch_thread, &sh) == 0);
	CHECK(pthread_create(&wr, NULL, writer_thread, &sh) == 0);
	for (int t = 0; t < THREADS; t++) {
		w[t] = (worker){ &sh, t };
		CHECK(pthread_create(&th[t], NULL, inject_thread, &w[t]) == 0);
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	__atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
	pthread_join(pf, NULL);
	pthread_join(wr, NULL);
	CHECK_OK(infs_tier_wait(sh.dev));
	infs_store_stats s = stats_of(sh.dev);
	printf("threads (%s): %d injections checked (%d refused: fact only in the file), %llu device and %llu host "
	       "evictions, %llu promotions; %llu of %llu device bytes, %llu of %llu pinned\n",
	       dtype == INFS_DTYPE_BF16 ? "bf16" : "fp8", THREADS * sh.rounds, sh.notresident,
	       (unsigned long long)s.device_evictions, (unsigned long long)s.host_evictions,
	       (unsigned long long)s.promotions, (unsigned long long)s.device_bytes, (unsigned long long)budget,
	       (unsigned long long)s.host_bytes, (unsigned long long)host_budget);
	CHECK(s.device_bytes <= budget && s.host_bytes <= host_budget);
	CHECK(s.device_evictions > 0 && s.promotions > 0);
	infs_store_close(sh.dev);
	infs_store_close(sh.ref);
}

int main(void)
{
	gpu_require();
	const char *small_env = getenv("INFS_TEST_SMALL");
	const int small = small_env && *small_env && strcmp(small_env, "0") != 0;
	char dir[600];
	scratch_make("gpu-tiers", dir, sizeof dir, "x");
	lru();
	from_each_tier(INFS_DTYPE_BF16);
	from_each_tier(INFS_DTYPE_FP8_E4M3);
	threads(INFS_DTYPE_BF16, small);
	threads(INFS_DTYPE_FP8_E4M3, small);
	scratch_cleanup();
	CHECK_DONE();
}

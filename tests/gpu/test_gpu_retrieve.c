/* Retrieval on the device through the public API at the benchmark's shape
 * (384 dimensions, tens of thousands of facts): the CUDA backend equals
 * exact search on the CPU (ids, order and scores) for both metrics, one
 * query and batches of 3 (the fused kernels) and 32 (the GEMM path), k from
 * 1 to 300 (past the fused kernels' largest), before and after deletes,
 * with facts of equal embeddings that must tie by increasing id.
 * INFS_TEST_SMALL=1 (under compute-sanitizer, where each put's device
 * copy takes milliseconds) keeps 6,000 facts and two values of k. */
#include <math.h>
#include <string.h>

#include "../scratch_util.h"
#include "gpu.h"

enum { EMB = 384, DUP_EVERY = 997 };

static uint32_t n_facts = 48000;

static uint64_t rng = 99;

static void compare(infs_store *st, const float *q, size_t nq, size_t k, infs_metric metric)
{
	infs_hit *a = calloc(nq * k, sizeof *a), *b = calloc(nq * k, sizeof *b);
	size_t na[32], nb[32];
	infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
	o.metric = metric;
	o.backend = INFS_BACKEND_CUDA;
	CHECK_OK(infs_retrieve(a, na, st, "big", q, nq, k, &o));
	o.backend = INFS_BACKEND_EXACT;
	CHECK_OK(infs_retrieve(b, nb, st, "big", q, nq, k, &o));
	int bad = 0;
	for (size_t i = 0; i < nq; i++) {
		CHECK(na[i] == nb[i]);
		for (size_t j = 0; j < na[i] && j < nb[i]; j++) {
			const infs_hit *x = &a[i * k + j], *y = &b[i * k + j];
			if ((x->id != y->id || x->score != y->score) && bad++ < 5)
				fprintf(stderr, "metric %d nq %zu k %zu query %zu hit %zu: cuda %llu %.9g, exact %llu %.9g\n",
				        (int)metric, nq, k, i, j, (unsigned long long)x->id, x->score,
				        (unsigned long long)y->id, y->score);
		}
	}
	CHECK(bad == 0);
	free(a), free(b);
}

int main(void)
{
	gpu_require();
	const char *small = getenv("INFS_TEST_SMALL");
	if (small && *small == '1')
		n_facts = 6000;
	char path[600];
	scratch_make("gpu-retrieve", path, sizeof path, "store.infs");
	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = 1, g.n_kv_heads = 1, g.head_dim = 2, g.rotary_dim = 2, g.embed_dim = EMB;
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE, so.geometry = &g, so.identity = "gpu-test", so.sync = INFS_SYNC_OFF;
	so.device = 0;
	infs_store *st;
	CHECK_OK(infs_store_open(&st, path, &so));

	/* Every DUP_EVERY-th fact repeats the embedding of the fact before,
	 * scaled by 2 (equal under cosine; under inner product the later one
	 * is ahead), and query 0 is that embedding: exact ties at the top. */
	float *emb = malloc(EMB * sizeof *emb), *dup = malloc(EMB * sizeof *dup);
	uint64_t *ids = malloc(n_facts * sizeof *ids);
	uint16_t kv[2] = {0, 0};
	int32_t tok = 0;
	for (uint32_t i = 0; i < n_facts; i++) {
		if (i % DUP_EVERY == 1 && i > 1)
			for (int j = 0; j < EMB; j++)
				emb[j] = 2 * dup[j];
		else
			for (int j = 0; j < EMB; j++)
				emb[j] = rng_float(&rng);
		if (i % DUP_EVERY == 0)
			memcpy(dup, emb, EMB * sizeof *emb);
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = 1, f.tokens = &tok, f.embedding = emb, f.k = kv, f.v = kv;
		CHECK_OK(infs_fact_put(&ids[i], st, "big", &f));
	}
	float *q = malloc(32 * EMB * sizeof *q);
	for (int i = 0; i < 32 * EMB; i++)
		q[i] = rng_float(&rng);
	memcpy(q, dup, EMB * sizeof *q);
	for (int i = 1; i < 32; i++) { /* unit queries, as an embedder gives */
		double ss = 0;
		for (int j = 0; j < EMB; j++)
			ss += (double)q[i * EMB + j] * q[i * EMB + j];
		for (int j = 0; j < EMB; j++)
			q[i * EMB + j] = (float)(q[i * EMB + j] / sqrt(ss));
	}

	const size_t ks[] = {10, 300, 1, 100, 256};
	const size_t n_ks = small && *small == '1' ? 2 : sizeof ks / sizeof ks[0];
	for (int round = 0; round < 2; round++) {
		for (int m = 0; m < 2; m++)
			for (size_t b = 0; b < n_ks; b++) {
				compare(st, q, 1, ks[b], (infs_metric)m);
				compare(st, q, 3, ks[b], (infs_metric)m);
				compare(st, q, 32, ks[b], (infs_metric)m);
			}
		/* then without every fifth fact, some of the tied ones among them */
		if (round == 0)
			for (uint32_t i = 0; i < n_facts; i += 5)
				CHECK_OK(infs_fact_delete(st, "big", ids[i]));
	}
	infs_store_close(st);
	free(emb), free(dup), free(ids), free(q);
	scratch_cleanup();
	printf("device retrieval over %u facts equal to exact search\n", n_facts);
	CHECK_DONE();
}

/* Helpers of the gpu suite: skip without a device, check CUDA calls,
 * random data and element comparisons in every KV dtype. */
#ifndef INFS_TEST_GPU_H
#define INFS_TEST_GPU_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../cache_path.h"
#include "../check.h"
#include "../test_util.h"
#include "cuda/cuda_ok.h"
#include "util/dtype.h"

/* Exits 77 (skipped) when no CUDA device can be used here. */
static inline void gpu_require(void)
{
	int n = 0;
	cudaError_t err = cudaGetDeviceCount(&n);
	if (err != cudaSuccess || n == 0) {
		printf("no CUDA device (%s): skipped\n", err != cudaSuccess ? cudaGetErrorString(err) : "count 0");
		exit(77);
	}
}

/* A device copy of bytes at p (uninitialised when p is NULL). */
static inline void *gpu_to_dev(const void *p, size_t bytes)
{
	void *d;
	CUDA_OK(cudaMalloc(&d, bytes ? bytes : 1));
	if (p)
		CUDA_OK(cudaMemcpy(d, p, bytes, cudaMemcpyHostToDevice));
	return d;
}

/* bytes of device memory d into p, once the device's work is done. */
static inline void gpu_from_dev(void *p, const void *d, size_t bytes)
{
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(p, d, bytes, cudaMemcpyDeviceToHost));
}

/* path loaded on the host (*mc, 2 threads) and on device 0 with
 * device_max_tokens max_t (*md); 0, both freed, when either fails. */
static inline int gpu_load_pair(infs_model **mc, infs_model **md, const char *path, uint32_t max_t)
{
	*mc = *md = NULL;
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.n_threads = 2;
	CHECK_OK(infs_model_load(mc, path, &mo));
	mo.device = 0;
	mo.device_max_tokens = max_t;
	CHECK_OK(infs_model_load(md, path, &mo));
	if (*mc && *md)
		return 1;
	infs_model_free(*mc);
	infs_model_free(*md);
	return 0;
}

/* check(path, name, nth) on each tiny model argv[2..] of the folder argv[1]
 * (nth = 0, 1, ...), then on SmolLM2 from $INFS_CACHE (nth = argc - 2) when it
 * is there; otherwise says that its `what` are left out. */
static inline void gpu_each_model(int argc, char **argv, const char *what,
                                  void (*check)(const char *path, const char *name, int nth))
{
	char path[1024];
	for (int i = 2; i < argc; i++) {
		snprintf(path, sizeof path, "%s/%s", argv[1], argv[i]);
		check(path, argv[i], i - 2);
	}
	cache_path(path, sizeof path, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	FILE *f = fopen(path, "rb");
	if (f) {
		fclose(f);
		check(path, "SmolLM2-135M-Instruct.Q4_1", argc - 2);
	} else {
		printf("SmolLM2 not found at %s: its %s left out\n", path, what);
	}
}

/* A zeroed bf16 paged cache in vLLM's layout, (2, n_blocks, block_size,
 * heads, dim) per layer, on device 0: *mem, k[l] and v[l] its layers
 * (g->n_layers <= 64 of each), *kl its description. Returns one layer's
 * elements (K and V). */
static inline size_t gpu_vllm_cache(infs_kv_layout *kl, uint16_t **mem, void **k, void **v, const infs_geometry *g,
                                    uint32_t n_blocks, uint32_t block_size)
{
	const size_t row = (size_t)g->n_kv_heads * g->head_dim, per_layer = 2 * (size_t)n_blocks * block_size * row;
	CHECK(g->n_layers <= 64);
	CUDA_OK(cudaMalloc((void **)mem, g->n_layers * per_layer * 2));
	CUDA_OK(cudaMemset(*mem, 0, g->n_layers * per_layer * 2));
	for (uint32_t l = 0; l < g->n_layers; l++) {
		k[l] = *mem + l * per_layer;
		v[l] = *mem + l * per_layer + per_layer / 2;
	}
	*kl = (infs_kv_layout)INFS_KV_LAYOUT_INIT;
	kl->device = 0;
	kl->dtype = INFS_DTYPE_BF16;
	kl->n_layers = g->n_layers;
	kl->n_kv_heads = g->n_kv_heads;
	kl->head_dim = g->head_dim;
	kl->n_blocks = n_blocks;
	kl->block_size = block_size;
	kl->k_layers = k;
	kl->v_layers = v;
	kl->stride_block = (int64_t)block_size * row;
	kl->stride_slot = (int64_t)row;
	kl->stride_head = g->head_dim;
	kl->stride_dim = 1;
	return per_layer;
}

/* The bound of docs/model-runtime.md on the device model's error: 8 u
 * sqrt(2 L + 1) (u = 2^-8, bf16's unit roundoff) relative to the largest
 * logit (K and V: of the largest value). */
static inline float bf16_bound(uint32_t n_layers, float scale)
{
	return 8 * (1.0f / 256) * sqrtf(2.0f * n_layers + 1) * (1 + scale);
}

/* A row's score, for CPU references of the top-k kernels: qsort with
 * row_hit_cmp puts the best first, equal scores by increasing row. */
typedef struct row_hit {
	float score;
	uint32_t row;
} row_hit;

static inline int row_hit_cmp(const void *a, const void *b)
{
	const row_hit *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->row < y->row ? -1 : x->row > y->row;
}

/* A top-k call's outputs for nq queries of up to k hits each: the device
 * buffers the call writes (ids preset to all ones, so that a hit left
 * unwritten shows), and their host copies after gpu_hits_fetch. */
typedef struct gpu_hits {
	uint32_t nq, k;
	uint64_t *d_id, *id;
	float *d_score, *score;
	uint32_t *d_n, *n;
} gpu_hits;

static inline void gpu_hits_alloc(gpu_hits *o, uint32_t nq, uint32_t k)
{
	const size_t hits = (size_t)nq * k;
	*o = (gpu_hits){ .nq = nq, .k = k };
	CUDA_OK(cudaMalloc((void **)&o->d_id, hits * sizeof *o->d_id));
	CUDA_OK(cudaMalloc((void **)&o->d_score, hits * sizeof *o->d_score));
	CUDA_OK(cudaMalloc((void **)&o->d_n, nq * sizeof *o->d_n));
	CUDA_OK(cudaMemset(o->d_id, 0xff, hits * sizeof *o->d_id));
}

static inline void gpu_hits_fetch(gpu_hits *o)
{
	const size_t hits = (size_t)o->nq * o->k;
	o->id = malloc(hits * sizeof *o->id);
	o->score = malloc(hits * sizeof *o->score);
	o->n = malloc(o->nq * sizeof *o->n);
	CUDA_OK(cudaMemcpy(o->id, o->d_id, hits * sizeof *o->id, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(o->score, o->d_score, hits * sizeof *o->score, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(o->n, o->d_n, o->nq * sizeof *o->n, cudaMemcpyDeviceToHost));
}

static inline void gpu_hits_free(gpu_hits *o)
{
	cudaFree(o->d_id), cudaFree(o->d_score), cudaFree(o->d_n);
	free(o->id), free(o->score), free(o->n);
}

/* How many of query q's hits in o differ from the best min(k, live) of h,
 * sorted by row_hit_cmp with rows mapped to ids; what (the case) heads the
 * first messages while bad, the differences found so far, is under 5. */
static inline int hits_differ(const char *what, uint32_t q, const row_hit *h, uint32_t live, const uint64_t *ids,
                              const gpu_hits *o, int bad)
{
	const uint32_t k = o->k, want = live < k ? live : k;
	if (o->n[q] != want) {
		if (bad < 5)
			fprintf(stderr, "%s q %u: %u hits, expected %u\n", what, q, o->n[q], want);
		return 1;
	}
	int n = 0;
	for (uint32_t j = 0; j < want; j++) {
		const size_t at = (size_t)q * k + j;
		if (o->id[at] != ids[h[j].row] || o->score[at] != h[j].score) {
			if (bad + n < 5)
				fprintf(stderr, "%s q %u hit %u: id %llu score %g, expected id %llu score %g\n", what, q, j,
				        (unsigned long long)o->id[at], o->score[at], (unsigned long long)ids[h[j].row],
				        h[j].score);
			n++;
		}
	}
	return n;
}

/* Distance in units in the last place between two elements of dtype. */
static inline uint64_t ulp_diff(const void *a, const void *b, infs_dtype dtype, size_t i)
{
	int64_t x, y;
	if (dtype == INFS_DTYPE_F32) {
		int32_t u, v;
		memcpy(&u, (const char *)a + 4 * i, 4);
		memcpy(&v, (const char *)b + 4 * i, 4);
		x = u < 0 ? INT32_MIN - (int64_t)u : u;
		y = v < 0 ? INT32_MIN - (int64_t)v : v;
	} else {
		int16_t u, v;
		memcpy(&u, (const char *)a + 2 * i, 2);
		memcpy(&v, (const char *)b + 2 * i, 2);
		x = u < 0 ? INT16_MIN - (int64_t)u : u;
		y = v < 0 ? INT16_MIN - (int64_t)v : v;
	}
	return (uint64_t)(x > y ? x - y : y - x);
}

/* Row metadata of a scored set, as the kernels take it: increasing ids with
 * gaps, scales in [0.5, 2.5), and, with with_dead, about one row in four
 * marked deleted in the bit set dead (zeroed by the caller). */
static inline void random_rows(uint64_t *ids, float *scale, uint32_t *dead, uint32_t n, int with_dead,
                               uint64_t *rng)
{
	uint64_t id = 0;
	for (uint32_t i = 0; i < n; i++) {
		id += 1 + rng_next(rng) % 3;
		ids[i] = id;
		scale[i] = 0.5f + (float)(rng_next(rng) % 1000) / 500.0f;
		if (with_dead && rng_next(rng) % 4 == 0)
			dead[i / 32] |= 1u << (i % 32);
	}
}

#endif

/* Helpers of the gpu suite: skip without a device, check CUDA calls,
 * random data and element comparisons in every KV dtype. */
#ifndef INFS_TEST_GPU_H
#define INFS_TEST_GPU_H

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../check.h"
#include "dtype.h"

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

#define CUDA_OK(expr)                                                                         \
	do {                                                                                  \
		cudaError_t cuda_err_ = (expr);                                               \
		if (cuda_err_ != cudaSuccess) {                                               \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,          \
			        cudaGetErrorString(cuda_err_));                               \
			exit(1);                                                              \
		}                                                                             \
	} while (0)

static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
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

/* Uniform in [-1, 1). */
static inline float rng_float(uint64_t *s)
{
	return (float)((rng_next(s) >> 40) * (1.0 / (1 << 23)) - 1.0);
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

#endif

/* Shared by the GPU benchmarks: CUDA checks, event timing, JSON output. */
#ifndef INFS_BENCH_GPU_H
#define INFS_BENCH_GPU_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_ok.h"

/* The random model's weights: fp8 when INFS_BENCH_WEIGHTS=fp8 is in the
 * environment (infs_model_options.device_weights), else bf16. */
static inline int bench_fp8_weights(void)
{
	const char *w = getenv("INFS_BENCH_WEIGHTS");
	return w && strcmp(w, "fp8") == 0;
}

static inline int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static inline float median(float *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_float);
	return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* The median over reps of the time in microseconds of run(arg, rep), each
 * rep timed with events on stream after warm-up calls. */
static inline float time_us(void (*run)(void *, int), void *arg, int warmup, int reps, cudaStream_t stream)
{
	cudaEvent_t a, b;
	float *t = malloc((size_t)reps * sizeof *t);
	CUDA_OK(cudaEventCreate(&a));
	CUDA_OK(cudaEventCreate(&b));
	for (int i = 0; i < warmup; i++)
		run(arg, i);
	CUDA_OK(cudaStreamSynchronize(stream));
	for (int i = 0; i < reps; i++) {
		CUDA_OK(cudaEventRecord(a, stream));
		run(arg, i);
		CUDA_OK(cudaEventRecord(b, stream));
		CUDA_OK(cudaEventSynchronize(b));
		CUDA_OK(cudaEventElapsedTime(&t[i], a, b));
		t[i] *= 1000.0f;
	}
	float m = median(t, reps);
	free(t);
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return m;
}

/* The output of a benchmark run as `bench [out.json]`: the file, or stdout;
 * exits 77 (skipped) without a CUDA device and 1 when the file can't be
 * opened. */
static inline FILE *bench_out(int argc, char **argv)
{
	int n_dev = 0;
	if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
		fprintf(stderr, "no CUDA device\n");
		exit(77);
	}
	FILE *out = argc > 1 ? fopen(argv[1], "w") : stdout;
	if (!out) {
		perror(argv[1]);
		exit(1);
	}
	return out;
}

static inline void print_device(FILE *f)
{
	struct cudaDeviceProp prop;
	int dev, drv = 0, rt = 0;
	CUDA_OK(cudaGetDevice(&dev));
	CUDA_OK(cudaGetDeviceProperties(&prop, dev));
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	fprintf(f, "  \"gpu\": \"%s\", \"sm\": \"%d.%d\", \"sms\": %d, \"memory_gib\": %.1f, \"driver\": %d, \"runtime\": %d,\n",
	        prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, drv, rt);
}

struct copy_arg {
	void *dst, *src;
	size_t bytes;
	cudaStream_t stream;
};

static inline void copy_run(void *arg, int rep)
{
	struct copy_arg *c = arg;
	(void)rep;
	CUDA_OK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->stream));
}

/* cudaMemcpy device to device of bytes, as bytes read + written per second. */
static inline double copy_bandwidth(size_t bytes, cudaStream_t stream, float *us_out)
{
	struct copy_arg c = {NULL, NULL, bytes, stream};
	CUDA_OK(cudaMalloc(&c.dst, bytes));
	CUDA_OK(cudaMalloc(&c.src, bytes));
	CUDA_OK(cudaMemset(c.src, 1, bytes));
	float us = time_us(copy_run, &c, 3, 30, stream);
	cudaFree(c.dst);
	cudaFree(c.src);
	if (us_out)
		*us_out = us;
	return 2.0 * (double)bytes / (us * 1e-6);
}

#endif

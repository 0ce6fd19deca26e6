/* Greedy sampling on the device: the argmax of each row of logits, so a
 * decode step sends the host one token per sequence instead of a row of
 * n_vocab floats. */
#include <math.h>

#include "model_kernels.h"

namespace {

const unsigned THREADS = 512;

/* The best (value, index) of two: the larger value, the lower index on a
 * tie; NaN loses to anything (a NaN row gives index 0). */
__device__ void better(float &v, int32_t &i, float ov, int32_t oi)
{
	if (ov > v || (ov == v && oi < i) || (v != v && ov == ov)) {
		v = ov;
		i = oi;
	}
}

__global__ void __launch_bounds__(THREADS) argmax_kernel(int32_t *out, const float *logits, uint32_t n_vocab)
{
	const float *row = logits + (size_t)blockIdx.x * n_vocab;
	float v = NAN;
	int32_t idx = 0;
	for (uint32_t j = threadIdx.x; j < n_vocab; j += THREADS)
		better(v, idx, row[j], (int32_t)j);
	for (int o = 16; o; o >>= 1)
		better(v, idx, __shfl_down_sync(0xffffffffu, v, o), __shfl_down_sync(0xffffffffu, idx, o));
	__shared__ float sv[THREADS / 32];
	__shared__ int32_t si[THREADS / 32];
	const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (!lane) {
		sv[w] = v;
		si[w] = idx;
	}
	__syncthreads();
	if (w)
		return;
	v = lane < THREADS / 32 ? sv[lane] : NAN;
	idx = lane < THREADS / 32 ? si[lane] : 0;
	for (int o = 16; o; o >>= 1)
		better(v, idx, __shfl_down_sync(0xffffffffu, v, o), __shfl_down_sync(0xffffffffu, idx, o));
	if (!lane)
		out[blockIdx.x] = idx;
}

} // namespace

cudaError_t infs_k_argmax(int32_t *out, const float *logits, uint32_t n_rows, uint32_t n_vocab, cudaStream_t stream)
{
	if (!n_rows)
		return cudaSuccess;
	argmax_kernel<<<n_rows, THREADS, 0, stream>>>(out, logits, n_vocab);
	return cudaGetLastError();
}

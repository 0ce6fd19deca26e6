/* The store's device copy moving a namespace's KV between tiers: the rows'
 * K pointers rewritten in place, so that the arrays a captured graph reads
 * stay where they are. */
#include "common.cuh"
#include "rows_kernels.h"

namespace {

__global__ void set_rows_kernel(const char **kv, const uint32_t *rows, const char *const *vals, uint32_t n)
{
	const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		*(const char *volatile *)&kv[rows[i]] = vals[i];
}

} /* namespace */

extern "C" cudaError_t infs_k_set_rows(const char **kv, const uint32_t *rows, const char *const *vals, uint32_t n,
                                       cudaStream_t stream)
{
	if (n == 0)
		return cudaSuccess;
	set_rows_kernel<<<(n + 255) / 256, 256, 0, stream>>>(kv, rows, vals, n);
	return cudaGetLastError();
}

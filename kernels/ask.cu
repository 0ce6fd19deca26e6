/* One question's device path: the hits put in injection order and the
 * step's position and calibration taken from what injection left, so that
 * retrieval, injection and the prefill follow one another on one stream. */
#include "ask_kernels.h"
#include "common.cuh"

namespace {

__global__ void order_kernel(uint64_t *ids, const char *hits, size_t hit_bytes, const uint32_t *count, uint32_t k)
{
	const uint32_t n = *count < k ? *count : k;
	for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
		ids[i] = *(const uint64_t *)(hits + (size_t)(n - 1 - i) * hit_bytes);
}

__global__ void past_kernel(int32_t *n_past, int32_t *calib, const uint32_t *next_pos, const uint32_t *count,
                            const int32_t *by_count, uint32_t k)
{
	const uint32_t end = *next_pos, c = *count < k ? *count : k;
	*n_past = (int32_t)end;
	if (!calib)
		return;
	const int32_t *e = by_count + 4 * (size_t)c;
	calib[0] = e[1] ? e[0] : 0;
	calib[1] = e[1] ? (int32_t)end : 0;
	calib[2] = e[2];
	calib[3] = e[3];
}

} /* namespace */

extern "C" cudaError_t infs_k_ask_order(uint64_t *ids, const void *hits, size_t hit_bytes, const uint32_t *count,
                                        uint32_t k, cudaStream_t stream)
{
	order_kernel<<<1, 128, 0, stream>>>(ids, (const char *)hits, hit_bytes, count, k);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_ask_past(int32_t *n_past, int32_t *calib, const uint32_t *next_pos,
                                       const uint32_t *count, const int32_t *by_count, uint32_t k,
                                       cudaStream_t stream)
{
	past_kernel<<<1, 1, 0, stream>>>(n_past, calib, next_pos, count, by_count, k);
	return cudaGetLastError();
}

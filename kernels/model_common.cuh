/* What the model kernels share: the paged cache's addressing with every
 * index checked, and block reductions. */
#ifndef INFS_KERNELS_MODEL_COMMON_CUH
#define INFS_KERNELS_MODEL_COMMON_CUH

#include "common.cuh"
#include "model_kernels.h"

namespace infs {

/* The element offset of (position pos, head h, dim 0) in the cache, or -1
 * when pos is negative or its block is outside the table or the cache. */
__device__ __forceinline__ int64_t cache_offset(const infs_k_cache_layer &c, int64_t pos, uint32_t h)
{
	if (pos < 0)
		return -1;
	uint64_t bi = (uint64_t)pos / c.block_size;
	if (bi >= c.n_table)
		return -1;
	int32_t b = c.blocks[bi];
	if (b < 0 || (uint32_t)b >= c.n_blocks)
		return -1;
	return b * c.stride_block + (int64_t)(pos % c.block_size) * c.stride_slot + (int64_t)h * c.stride_head;
}

__device__ __forceinline__ int64_t token_pos(const int32_t *positions, uint32_t n_past, uint32_t i)
{
	return positions ? (int64_t)positions[i] : (int64_t)n_past + i;
}

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ double warp_sum(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* The sum of v over the block (blockDim.x a multiple of 32, at most 1024),
 * returned to every thread; smem holds 32 values. */
template <typename T> __device__ T block_sum(T v, T *smem)
{
	const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
	v = warp_sum(v);
	__syncthreads(); /* smem may still be read by an earlier call */
	if (lane == 0)
		smem[warp] = v;
	__syncthreads();
	v = lane < warps ? smem[lane] : T(0);
	return warp_sum(v);
}

} /* namespace infs */

#endif

/* What the model kernels share: the paged cache's addressing with every
 * index checked, and block reductions. */
#ifndef INFS_KERNELS_MODEL_COMMON_CUH
#define INFS_KERNELS_MODEL_COMMON_CUH

#include "common.cuh"
#include "model_kernels.h"

namespace infs {

__device__ __forceinline__ uint32_t div_up_dev(uint32_t a, uint32_t b)
{
	return (a + b - 1) / b;
}

/* A sequence of a call: tokens [start, end), cache positions [0, n_past),
 * its block table at blocks + s * table_stride. */
struct seq_span {
	uint32_t start, end, n_past, index;
};

/* Sequence s (< seqs.n_seqs), its bounds clamped to [0, n_tokens]. */
__device__ __forceinline__ seq_span seq_get(const infs_k_seqs &q, uint32_t s)
{
	if (!q.starts)
		return { 0, q.n_tokens, q.n_past0, 0 };
	const int32_t a = q.starts[s], b = q.starts[s + 1];
	const uint32_t lo = a < 0 ? 0 : (uint32_t)a > q.n_tokens ? q.n_tokens : (uint32_t)a;
	const uint32_t hi = b < (int32_t)lo ? lo : (uint32_t)b > q.n_tokens ? q.n_tokens : (uint32_t)b;
	const int32_t np = q.n_past ? q.n_past[s] : (int32_t)q.n_past0;
	return { lo, hi, np < 0 ? 0u : (uint32_t)np, s };
}

/* The sequence holding token i; its index is n_seqs when there is none
 * (starts that are not sorted). */
__device__ __forceinline__ seq_span seq_of(const infs_k_seqs &q, uint32_t i)
{
	if (!q.starts)
		return seq_get(q, 0);
	uint32_t lo = 0, hi = q.n_seqs; /* the last s with starts[s] <= i lies in [lo, hi) */
	while (hi - lo > 1) {
		const uint32_t mid = (lo + hi) / 2;
		if (q.starts[mid] <= (int32_t)i)
			lo = mid;
		else
			hi = mid;
	}
	seq_span sp = seq_get(q, lo);
	if (i < sp.start || i >= sp.end)
		sp.index = q.n_seqs;
	return sp;
}

/* The position of token i of sequence sp. */
__device__ __forceinline__ int64_t token_pos(const infs_k_seqs &q, const seq_span &sp, uint32_t i)
{
	return q.positions ? (int64_t)q.positions[i] : (int64_t)sp.n_past + (i - sp.start);
}

/* The element offset of (position pos, head h, dim 0) in the cache for
 * sequence s, or -1 when pos is negative or its block is outside the table
 * or the cache. */
__device__ __forceinline__ int64_t cache_offset(const infs_k_cache_layer &c, uint32_t s, int64_t pos, uint32_t h)
{
	if (pos < 0)
		return -1;
	/* positions fit 32 bits: a 32-bit division, not the 64-bit routine */
	const uint64_t bi = pos <= UINT32_MAX ? (uint32_t)pos / c.block_size : (uint64_t)pos / c.block_size;
	if (bi >= c.n_table)
		return -1;
	int32_t b = c.blocks[s * c.table_stride + bi];
	if (b < 0 || (uint32_t)b >= c.n_blocks)
		return -1;
	return b * c.stride_block + (pos - (int64_t)(bi * c.block_size)) * c.stride_slot + (int64_t)h * c.stride_head;
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

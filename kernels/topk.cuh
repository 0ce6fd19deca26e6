/* Exact top-k over score rows.
 *
 * Every candidate is a 64-bit key: the score's bits mapped so that unsigned
 * order is float order, above the complement of its row index. Keys are
 * unique, larger is better, and equal scores rank by smaller row (= smaller
 * id, since rows are in id order); 0 marks a deleted row. One block finds the
 * k-th largest key of a set by radix selection (one byte per pass, from the
 * top, stopping as soon as the boundary digit holds exactly the elements
 * still needed), gathers the keys at or above it and sorts them.
 *
 * A large set is first cut down: one block per query selects a threshold
 * from a strided sample, and a wide filter pass keeps the keys at or above
 * it, so the per-query block only reads a few thousand candidates. When the
 * sample misjudged (too few or too many candidates) that block falls back
 * to the whole row, so the result is exact in every case. */
#ifndef INFS_KERNELS_TOPK_CUH
#define INFS_KERNELS_TOPK_CUH

#include "common.cuh"
#include "retrieve_kernels.h"

namespace infs {

#define INFS_K_TOPK_THREADS 1024
#define INFS_K_RADIX 256

__device__ __forceinline__ uint32_t order_bits(float f)
{
	uint32_t u = __float_as_uint(f);
	return u ^ ((u >> 31) ? 0xffffffffu : 0x80000000u);
}

__device__ __forceinline__ float order_float(uint32_t o)
{
	return __uint_as_float(o ^ ((o >> 31) ? 0x80000000u : 0xffffffffu));
}

/* The keys of one query's score row, every stride-th row. */
struct row_keys {
	const float *scores;
	const float *scale;
	const uint32_t *dead;
	uint32_t stride;
	__device__ uint64_t operator()(uint32_t j) const
	{
		uint32_t i = j * stride;
		if (dead && (dead[i / 32] >> (i % 32) & 1))
			return 0;
		float s = scale ? scores[i] * scale[i] : scores[i];
		return (uint64_t)order_bits(s) << 32 | (uint32_t)~i;
	}
};

struct list_keys {
	const uint64_t *keys;
	__device__ uint64_t operator()(uint32_t j) const { return keys[j]; }
};

/* The smallest key T such that exactly min(k, live keys) of the n keys are
 * >= T (1 when all live keys qualify). With fewer than 8 passes, T only
 * resolves the top 8 * passes bits: at least min(k, live keys) keys are
 * >= T, the others sharing T's bucket. All threads of the block call it. */
template <typename Src> __device__ uint64_t select_threshold(const Src &src, uint32_t n, uint32_t k, int passes = 8)
{
	__shared__ uint32_t hist[INFS_K_RADIX];
	__shared__ uint32_t result[4];
	uint64_t prefix = 0, mask = 0;
	uint32_t need = k;
	for (int shift = 56; shift >= 64 - 8 * passes; shift -= 8) {
		for (uint32_t b = threadIdx.x; b < INFS_K_RADIX; b += blockDim.x)
			hist[b] = 0;
		__syncthreads();
		for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
			uint64_t key = src(i);
			if (key && (key & mask) == prefix)
				atomicAdd(&hist[(key >> shift) & 0xff], 1u);
		}
		__syncthreads();
		if (threadIdx.x < 32) {
			/* Lane l holds digits 255-8l down to 248-8l: find the digit at
			 * which the count from the top reaches need. */
			const uint32_t lane = threadIdx.x, top = 255 - 8 * lane;
			uint32_t sum = 0;
			for (int b = 0; b < 8; b++)
				sum += hist[top - b];
			uint32_t incl = sum;
			for (int o = 1; o < 32; o <<= 1) {
				uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
				if (lane >= (uint32_t)o)
					incl += v;
			}
			uint32_t total = __shfl_sync(0xffffffffu, incl, 31), above = incl - sum;
			if (lane == 0)
				result[2] = total;
			if (above < need && need <= incl) {
				for (int b = 0; b < 8; b++) {
					uint32_t c = hist[top - b];
					if (above + c >= need) {
						result[0] = top - b;
						result[1] = above;
						result[3] = c;
						break;
					}
					above += c;
				}
			}
		}
		__syncthreads();
		uint32_t total = result[2];
		if (shift == 56 && total <= k)
			return 1;
		uint32_t digit = result[0], above = result[1], at = result[3];
		__syncthreads(); /* hist[] and result[] are rewritten by the next pass */
		need -= above;
		prefix |= (uint64_t)digit << shift;
		mask |= 0xffull << shift;
		if (at == need)
			break;
	}
	return prefix;
}

/* Sorts n keys of buf (n <= cap, cap a power of two) in decreasing order,
 * padding with zeros. */
__device__ inline void sort_desc(uint64_t *buf, uint32_t n, uint32_t cap)
{
	uint32_t len = 1;
	while (len < n)
		len <<= 1;
	for (uint32_t i = n + threadIdx.x; i < len; i += blockDim.x)
		buf[i] = 0;
	__syncthreads();
	for (uint32_t size = 2; size <= len; size <<= 1) {
		for (uint32_t stride = size / 2; stride > 0; stride >>= 1) {
			for (uint32_t i = threadIdx.x; i < len / 2; i += blockDim.x) {
				uint32_t a = 2 * i - (i & (stride - 1)), b = a + stride;
				uint64_t x = buf[a], y = buf[b];
				if ((x < y) == ((a & size) == 0)) {
					buf[a] = y;
					buf[b] = x;
				}
			}
			__syncthreads();
		}
	}
}

} /* namespace infs */

#endif

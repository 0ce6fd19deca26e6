/* The scan's cuts of a block's list of one query (see retrieve_fused.cuh):
 * sorted down to its best kk keys (cut), or its threshold raised to the
 * kk-th best score without a sort (raise). One warp calls each. */
#ifndef INFS_KERNELS_RETRIEVE_CUT_CUH
#define INFS_KERNELS_RETRIEVE_CUT_CUH

#include "retrieve_fused.cuh"

namespace infs::fused {

/* Sorts the warp's 32 M keys, element lane * M + j in v[j], in decreasing
 * order (bitonic): exchanges across lanes by shuffles, within a lane in
 * registers. Loops stay rolled where they can, to keep the code small. */
template <int M> static __device__ __forceinline__ void warp_sort_desc(uint64_t (&v)[M], uint32_t lane)
{
#pragma unroll(M <= 4 ? 16 : 1)
	for (uint32_t size = 2; size <= 32 * M; size <<= 1) {
		const uint32_t first = lane * M;
#pragma unroll(M <= 4 ? 16 : 1)
		for (uint32_t s = size / 2; s >= M; s >>= 1) {
			const uint32_t other = s / M;
			const bool keep_max = ((lane & other) == 0) == ((first & size) == 0);
#pragma unroll
			for (int j = 0; j < M; j++) {
				const uint64_t o = __shfl_xor_sync(0xffffffffu, v[j], other);
				v[j] = keep_max ? max(v[j], o) : min(v[j], o);
			}
		}
#pragma unroll
		for (int s = M / 2; s > 0; s >>= 1) {
			if ((uint32_t)s >= size)
				continue;
#pragma unroll
			for (int j = 0; j < M; j++) {
				if (j & s)
					continue;
				const bool desc = ((first + j) & size) == 0;
				const uint64_t a = v[j], b = v[j + s];
				if ((a < b) == desc) {
					v[j] = b;
					v[j + s] = a;
				}
			}
		}
	}
}

/* Cuts the n keys of a list (n <= 32 M) down to its best kk at or above
 * floor, sorted and padded with zeros to kk; the whole warp calls it.
 * Returns the list's kk-th key, or 0 when it holds fewer. */
template <int M>
static __device__ __noinline__ uint64_t cut_list(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor, uint32_t lane)
{
	uint64_t v[M];
#pragma unroll
	for (int j = 0; j < M; j++) {
		uint32_t i = lane * M + j;
		v[j] = i < n && list[i] >= floor ? list[i] : 0;
	}
	__syncwarp();
	warp_sort_desc<M>(v, lane);
	uint64_t kth = 0;
#pragma unroll
	for (int j = 0; j < M; j++) {
		uint32_t i = lane * M + j;
		if (i < kk)
			list[i] = v[j];
		if (i == kk - 1)
			kth = v[j];
	}
	for (uint32_t i = 32 * M + lane; i < kk; i += 32)
		list[i] = 0;
	__syncwarp();
	return kk <= 32 * M ? __shfl_sync(0xffffffffu, kth, (kk - 1) / M) : 0;
}

/* cut_list for n <= few_max keys, as seeded lists mostly are at the end, lane
 * holding key lane (0 when dropped) in v: each key's place is the count of
 * larger ones. */
static __device__ __noinline__ uint64_t place_few(uint64_t *list, uint64_t v, uint32_t n, uint32_t kk, uint32_t lane)
{
	__syncwarp();
	uint32_t place = 0;
	for (uint32_t j = 0; j < n; j++)
		place += __shfl_sync(0xffffffffu, v, j) > v;
	const uint32_t live = __popc(__ballot_sync(0xffffffffu, v != 0));
	if (v && place < kk)
		list[place] = v;
	for (uint32_t i = min(live, kk) + lane; i < kk; i += 32)
		list[i] = 0;
	__syncwarp();
	const uint32_t at = __ballot_sync(0xffffffffu, v && place == kk - 1);
	return at ? __shfl_sync(0xffffffffu, v, __ffs(at) - 1) : 0;
}

static __device__ __forceinline__ uint64_t cut_few(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor,
                                                   uint32_t lane)
{
	return place_few(list, lane < n && list[lane] >= floor ? list[lane] : 0, n, kk, lane);
}

/* cut_list with the fewest registers that hold n keys: sorting costs
 * grow with the size sorted, and most lists are short. */
static __device__ __noinline__ uint64_t cut(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor, uint32_t lane)
{
	if (n <= few_max)
		return cut_few(list, n, kk, floor, lane);
	if (n <= 32)
		return cut_list<1>(list, n, kk, floor, lane);
	if (n <= 64)
		return cut_list<2>(list, n, kk, floor, lane);
	if (n <= 128)
		return cut_list<4>(list, n, kk, floor, lane);
	return cut_list<8>(list, n, kk, floor, lane);
}

/* Raises a list's threshold without sorting it. Its keys below floor (at
 * most the query's kk-th best key) go first; when at most early are left,
 * they stay, in place, and T is 0. Else T, the kk-th largest score of the n
 * keys (n <= 32 M), comes from kk rounds of a warp maximum over the heads of
 * the lanes' sorted scores; the keys scoring T or more stay, in place,
 * unsorted. Returns how many stay, and T; or n when more than limit would
 * (many equal scores), leaving the list as it was. */
template <int M>
static __device__ __noinline__ uint32_t raise_list(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor,
                                                   uint32_t early, uint32_t limit, uint32_t lane, uint32_t *t_out)
{
	uint64_t v[M];
	uint32_t h[M], live = 0;
#pragma unroll
	for (int j = 0; j < M; j++) {
		const uint32_t i = j * 32 + lane;
		v[j] = i < n && list[i] >= floor ? list[i] : 0;
		h[j] = (uint32_t)(v[j] >> 32);
		live += __popc(__ballot_sync(0xffffffffu, v[j] != 0));
	}
	__syncwarp();
	uint32_t t = 0;
	if (live > early) {
#pragma unroll
		for (int a = 0; a < M; a++)
#pragma unroll
			for (int b = 0; b + 1 < M - a; b++) {
				const uint32_t hi = max(h[b], h[b + 1]), lo = min(h[b], h[b + 1]);
				h[b] = hi;
				h[b + 1] = lo;
			}
		for (uint32_t r = 0; r < kk; r++) {
			t = __reduce_max_sync(0xffffffffu, h[0]);
			if (lane == __ffs(__ballot_sync(0xffffffffu, h[0] == t)) - 1) {
#pragma unroll
				for (int j = 0; j + 1 < M; j++)
					h[j] = h[j + 1];
				h[M - 1] = 0;
			}
		}
	}
	uint32_t kept = 0;
#pragma unroll
	for (int j = 0; j < M; j++)
		kept += __popc(__ballot_sync(0xffffffffu, v[j] && (uint32_t)(v[j] >> 32) >= t));
	if (kept > limit)
		return n;
	uint32_t at = 0;
#pragma unroll
	for (int j = 0; j < M; j++) {
		const bool keep = v[j] && (uint32_t)(v[j] >> 32) >= t;
		const uint32_t b = __ballot_sync(0xffffffffu, keep);
		if (keep)
			list[at + __popc(b & ((1u << lane) - 1))] = v[j];
		at += __popc(b);
	}
	__syncwarp();
	*t_out = t;
	return kept;
}

/* raise_list with the fewest registers that hold n keys. */
static __device__ __noinline__ uint32_t raise(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor,
                                              uint32_t early, uint32_t limit, uint32_t lane, uint32_t *t)
{
	if (n <= 32)
		return raise_list<1>(list, n, kk, floor, early, limit, lane, t);
	if (n <= 64)
		return raise_list<2>(list, n, kk, floor, early, limit, lane, t);
	if (n <= 128)
		return raise_list<4>(list, n, kk, floor, early, limit, lane, t);
	return raise_list<8>(list, n, kk, floor, early, limit, lane, t);
}

} /* namespace infs::fused */

#endif

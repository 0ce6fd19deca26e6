/* The fused retrieval's merges (see retrieve_fused.cuh), one block per
 * query or per share of a query's rows: of the scan's lists, or of the
 * scores it kept; both end by placing the best kk keys in the output. */
#include "retrieve_fused.cuh"

namespace infs::fused {

namespace {

/* The keys of one query's kept scores. */
struct score_keys {
	const uint32_t *bits;
	__device__ uint64_t operator()(uint32_t i) const
	{
		const uint32_t b = bits[i];
		return b ? (uint64_t)b << 32 | (uint32_t)~i : 0;
	}
};

/* The merge's end, once the keys that can be in query q's top kk are in
 * buf (n of them, more than merge_cap when they overflowed it): a radix
 * selection over all total keys of src when they did, the sort, and the
 * output. */
template <typename Src>
__device__ void finish(const infs_k_fused_params &p, uint32_t q, uint64_t *buf, uint32_t &n, const Src &src,
                       uint32_t total)
{
	const uint32_t kk = p.k;
	__syncthreads();
	uint32_t found = n;
	if (found > merge_cap) {
		const uint64_t t2 = select_threshold(src, total, kk);
		__syncthreads();
		if (threadIdx.x == 0)
			n = 0;
		__syncthreads();
		for (uint32_t i = threadIdx.x; i < total; i += blockDim.x) {
			uint64_t key = src(i);
			if (key && key >= t2) /* min(kk, live keys) of them */
				buf[atomicAdd(&n, 1u)] = key;
		}
		__syncthreads();
		found = n;
	}
	/* Up to list_cap keys are placed by counting, one a thread; more are
	 * sorted. */
	uint64_t key = 0;
	uint32_t place = 0;
	if (found <= list_cap) {
		if (threadIdx.x < found) {
			key = buf[threadIdx.x];
			for (uint32_t j = 0; j < found; j++)
				place += buf[j] > key;
		}
	} else {
		sort_desc(buf, found, merge_cap);
		if (threadIdx.x < found) {
			key = buf[threadIdx.x];
			place = threadIdx.x;
		}
	}
	if (key && place < kk) {
		p.out_id[(size_t)q * kk + place] = p.ids[~(uint32_t)key];
		p.out_score[(size_t)q * kk + place] = order_float((uint32_t)(key >> 32));
	}
	found = min(found, kk);
	if (threadIdx.x == 0)
		p.out_n[q] = found;
}

/* Key i of the concatenated lists of one query, kk keys per block. */
struct block_lists {
	lists ls;
	uint32_t q, kk;
	__device__ uint64_t operator()(uint32_t i) const { return ls.of(i / kk, q)[i % kk]; }
};

} /* namespace */

__global__ void __launch_bounds__(merge_threads) merge_kernel(const infs_k_fused_params p, lists ls, uint32_t blocks)
{
	__shared__ uint64_t buf[merge_cap];
	__shared__ uint64_t bound;
	__shared__ uint32_t n, live;
	const uint32_t q = blockIdx.x, kk = p.k, lane = threadIdx.x % 32;
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* the scan's lists are complete */
#endif
	if (threadIdx.x == 0) {
		bound = 0;
		n = 0;
		live = 0;
	}
	/* Two lower bounds of the query's kk-th best key: any list's kk-th key,
	 * and (with kk lists or more) the kk-th largest of the lists' first
	 * keys; only the keys at or above the larger are gathered. The first
	 * merge_regs keys of each thread are loaded at once and the bounds
	 * taken from them: one L2 round trip for most shapes. */
	const block_lists src = {ls, q, kk};
	const uint32_t total = blocks * kk, held = merge_regs * merge_threads;
	const bool heads = kk <= blocks && blocks <= merge_cap;
	uint64_t v[merge_regs], b = 0;
#pragma unroll
	for (int j = 0; j < merge_regs; j++) {
		const uint32_t i = j * merge_threads + threadIdx.x;
		v[j] = i < total ? src(i) : 0;
		if (i < total && i % kk == kk - 1)
			b = max(b, v[j]);
		if (heads && i < total && i % kk == 0)
			buf[i / kk] = v[j];
	}
	for (uint32_t blk = held / kk + threadIdx.x; blk < blocks; blk += merge_threads) {
		b = max(b, ls.of(blk, q)[kk - 1]);
		if (heads && blk * kk >= held)
			buf[blk] = ls.of(blk, q)[0];
	}
	__syncthreads(); /* bound, n, live and the heads are set */
	/* When every key is loaded and the live ones are few, as after complete
	 * seeds, they are all gathered and sorted, no bound taken. Ranking the
	 * heads costs more than sorting all_max keys, and less than sorting
	 * 256 (on an H200, one query over 100K rows took 3 us longer). */
	uint32_t mine = 0;
#pragma unroll
	for (int j = 0; j < merge_regs; j++)
		mine += __popc(__ballot_sync(0xffffffffu, v[j] != 0));
	if (lane == 0 && mine)
		atomicAdd(&live, mine);
	__syncthreads();
	const bool all = total <= held && live <= all_max;
	if (!all) {
		if (heads) {
			for (uint32_t blk = threadIdx.x; blk < blocks; blk += merge_threads) {
				const uint64_t h = buf[blk];
				uint32_t above = 0;
#pragma unroll 8
				for (uint32_t j = 0; j < blocks; j++)
					above += buf[j] > h;
				if (above == kk - 1)
					b = max(b, h);
			}
		}
		for (int o = 16; o > 0; o >>= 1)
			b = max(b, __shfl_xor_sync(0xffffffffu, b, o));
		if (lane == 0)
			atomicMax((unsigned long long *)&bound, (unsigned long long)b);
		__syncthreads();
	}
	/* bound is 0 when no list holds kk keys: then every key is gathered. */
	const uint64_t t = all ? 0 : bound;
	auto gather = [&](uint64_t key) {
		if (key && key >= t) {
			const uint32_t slot = atomicAdd(&n, 1u);
			if (slot < merge_cap)
				buf[slot] = key;
		}
	};
#pragma unroll
	for (int j = 0; j < merge_regs; j++)
		gather(v[j]);
	for (uint32_t i = held + threadIdx.x; i < total; i += merge_threads)
		gather(src(i));
	finish(p, q, buf, n, src, total);
}

/* The merge after a scan that kept the scores: block (s, q) reads share s
 * of query q's scores, and bounds the query's kk-th best score from its
 * first loads alone. Each thread's best of the scores it holds is a score
 * of rows no other thread holds; a warp whose per-th best thread scores w,
 * per = ceil(kk / 32), has per rows at w or above; the need-th largest w
 * of the warps, need = ceil(kk / per), is then the score of at least kk
 * different rows. Only the keys at or above it are gathered. */
__global__ void __launch_bounds__(merge_threads) merge_scores_kernel(const infs_k_fused_params p, scores sc)
{
	__shared__ uint64_t buf[merge_cap];
	__shared__ uint32_t warp_best[merge_threads / 32];
	__shared__ uint32_t bound, n;
	__shared__ bool last;
	const uint32_t q = blockIdx.y, kk = p.k, rows = sc.n_rows, lane = threadIdx.x % 32;
	const uint32_t share = (sc.stride / 4 + gridDim.x - 1) / gridDim.x;
	const uint32_t from = blockIdx.x * share, to = min(from + share, sc.stride / 4); /* in pieces of 4 */
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* the scan's scores are complete */
#endif
	if (threadIdx.x == 0) {
		bound = 0;
		n = 0;
	}
	const uint4 *const bits = (const uint4 *)(sc.bits + (size_t)q * sc.stride);
	uint4 v[scores_regs];
	auto load = [&](uint32_t base) {
#pragma unroll
		for (int j = 0; j < scores_regs; j++) {
			const uint32_t i = base + j * merge_threads + threadIdx.x;
			v[j] = i < to ? bits[i] : make_uint4(0, 0, 0, 0);
		}
	};
	load(from);
	uint32_t mine = 0; /* this thread's best score; the padding past the rows is none */
#pragma unroll
	for (int j = 0; j < scores_regs; j++) {
		const uint32_t i = 4 * (from + j * merge_threads + threadIdx.x);
		mine = max(mine, i < rows ? v[j].x : 0);
		mine = max(mine, i + 1 < rows ? v[j].y : 0);
		mine = max(mine, i + 2 < rows ? v[j].z : 0);
		mine = max(mine, i + 3 < rows ? v[j].w : 0);
	}
	const uint32_t per = (kk + 31) / 32, need = (kk + per - 1) / per;
	uint32_t w = 0;
	for (uint32_t r = 0; r < per; r++) {
		w = __reduce_max_sync(0xffffffffu, mine);
		if (lane == __ffs(__ballot_sync(0xffffffffu, mine == w)) - 1)
			mine = 0;
	}
	if (lane == 0)
		warp_best[threadIdx.x / 32] = w;
	__syncthreads();
	if (threadIdx.x < merge_threads / 32) {
		w = warp_best[threadIdx.x];
		uint32_t above = 0, at_least = 0;
		for (uint32_t j = 0; j < merge_threads / 32; j++) {
			above += warp_best[j] > w;
			at_least += warp_best[j] >= w;
		}
		if (w && above < need && need <= at_least)
			bound = w;
	}
	__syncthreads();
	const uint32_t t = bound; /* 0 when fewer than need warps have a w: every key */
	/* Alone, the block gathers in shared memory; split, in the query's
	 * candidates. */
	const bool alone = gridDim.x == 1;
	uint64_t *const to_buf = alone ? buf : sc.cand + (size_t)q * merge_cap;
	uint32_t *const to_n = alone ? &n : sc.count + q;
	auto gather = [&](uint32_t b, uint32_t i) {
		if (b && b >= t && i < rows) {
			const uint32_t slot = atomicAdd(to_n, 1u);
			if (slot < merge_cap)
				to_buf[slot] = (uint64_t)b << 32 | (uint32_t)~i;
		}
	};
	for (uint32_t base = from;;) {
#pragma unroll
		for (int j = 0; j < scores_regs; j++) {
			const uint32_t i = 4 * (base + j * merge_threads + threadIdx.x);
			gather(v[j].x, i);
			gather(v[j].y, i + 1);
			gather(v[j].z, i + 2);
			gather(v[j].w, i + 3);
		}
		base += scores_regs * merge_threads;
		if (base >= to)
			break;
		load(base);
	}
	if (!alone) {
		/* the last block of the query takes over the candidates */
		__threadfence();
		__syncthreads();
		if (threadIdx.x == 0)
			last = atomicAdd(sc.ticket + q, 1u) == gridDim.x - 1;
		__syncthreads();
		if (!last)
			return;
		__threadfence();
		const uint32_t found = *(volatile uint32_t *)(sc.count + q);
		for (uint32_t j = threadIdx.x; j < min(found, merge_cap); j += merge_threads)
			buf[j] = __ldcg(sc.cand + (size_t)q * merge_cap + j);
		if (threadIdx.x == 0)
			n = found;
	}
	finish(p, q, buf, n, score_keys{sc.bits + (size_t)q * sc.stride}, rows);
}

} /* namespace infs::fused */

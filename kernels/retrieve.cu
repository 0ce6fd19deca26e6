/* Fused retrieval: scores and top-k in one pass over the rows, no score
 * matrix in memory.
 *
 * scan: the block's warps work in rounds. In each, every warp scores its own
 *   tile of 16 rows (streamed into shared memory with cp.async, the next two
 *   tiles in flight) against up to 32 queries on tensor cores (mma
 *   m16n8k16, f16 in, f32 accumulate) and appends the keys (see topk.cuh)
 *   above the block's threshold of each query to the block's list of that
 *   query. The barrier after the appends tells whether any list could
 *   overflow in the next round (or a query still lacks its seed): only
 *   then do the warps cut, behind a second barrier. Warp q % warps cuts
 *   query q's list, which raises the threshold: for kk up to
 *   raise_max it finds the kk-th best score (kk rounds of a warp maximum)
 *   and keeps the keys at or above it, unsorted; for larger kk it sorts the
 *   list (bitonic, in registers) down to its best kk keys. Sharing one list
 *   per query across the block's warps makes the threshold rise eight times
 *   as fast as per-warp lists would. At the end each list is cut to the
 *   block's top kk of its query, sorted. The tiles' 16-byte pieces are copied
 *   by the lanes in turn (coalesced), each lane's destinations found once:
 *   they repeat from tile to tile.
 * seeds: the blocks also share lower bounds of each query's kk-th best
 *   score. Each publishes its best score of round 0 into one of kk groups;
 *   the least of the groups' maxima, the scores of kk different rows, bounds
 *   the kk-th best from below. Round 0's keys wait in registers until round
 *   1, when the seeds are read: from then on the thresholds start where a
 *   block's own rows would take thousands of rows to raise them, the lists
 *   stay short and are rarely cut, and a batch's rounds are mostly scoring.
 * merge: per query, the best kk keys of the blocks' lists. Any block's kk-th
 *   key, and the kk-th largest of the blocks' first keys, are lower bounds
 *   of the query's kk-th best key: only the keys at or above the larger are
 *   gathered and sorted; when too many are, a radix selection over all.
 *   When the lists hold few live keys, all of them are gathered, no bound
 *   taken.
 * kept scores: sets of up to keep_max rows take neither lists nor seeds,
 *   whose bookkeeping costs a batch more per round than writing its scores
 *   does. The scan writes every score (into the L2, where the rows, read
 *   once, go first), with no barrier in its rounds; a query's rows are
 *   split between merge blocks, each of which bounds the kk-th best score
 *   by the best scores of kk different rows among its own loads, gathers
 *   the scores at or above that, and hands them to the last of them.
 *
 * Every step keeps every key that can be in the top kk, so the result is
 * exact, ties included (keys are unique: a score, then the smaller row).
 *
 * The tensor-core operands come from ldmatrix, which hands each lane its
 * fragment registers in the order the mma takes them (plain 16-byte loads
 * left the A fragment, two rows' halves, to be assembled by register moves
 * on the way to every mma). Rows and queries are read the same way, so the
 * k order is the same for both. */
#include <atomic>

#include "topk.cuh"

using namespace infs;

namespace {

constexpr uint32_t sub_rows = 16;  /* rows a warp scores at once: its tile */
constexpr uint32_t max_warps = 8;  /* per block */
constexpr uint32_t stages = 2;     /* tiles per warp in shared memory */
/* A list holds 32 list_m keys: kk kept and a round's appends, for kk up to
 * INFS_K_FUSED_MAX. */
constexpr int list_m = 8;
constexpr uint32_t list_cap = 32 * list_m;
/* Lists of up to this kk are cut by a selection (raise), larger ones by a
 * sort: the selection takes kk dependent rounds, the sort a fixed number of
 * stages, and on an H200 the selection was the faster up to kk = 16. */
constexpr uint32_t raise_max = 16;
/* Lists of up to this many keys are cut by counting, one key a lane. */
constexpr uint32_t few_max = 8;
constexpr uint32_t merge_cap = 4096;          /* keys the merge sorts in shared memory */
constexpr uint32_t merge_threads = 1024;
constexpr int merge_regs = 4;                 /* keys each merge thread loads at once */
constexpr uint32_t all_max = 64;              /* live keys the merge sorts without a bound */
/* Sets of up to this many rows keep their scores (see scores). */
constexpr uint32_t keep_max = 1u << 17;
constexpr int scores_regs = 8;                /* 16-byte pieces of scores each merge thread loads at once */
/* Rows a merge block reads when a query's scores are split between blocks. */
constexpr uint32_t split_rows = scores_regs * 4 * merge_threads;

struct config {
	uint32_t nt;     /* tiles of 8 queries */
	uint32_t warps;  /* per block */
	size_t smem;     /* dynamic shared memory per block */
	uint32_t blocks;
	uint32_t groups;  /* seed groups (see scan_kernel), 0 when the blocks share none */
	bool keep_scores; /* the scan keeps every score, not lists (see scores) */
	uint32_t splits;  /* merge blocks per query when it does */
	bool early_merge; /* Hopper or later: the merge may launch while the scan runs */
};

/* Every block's list of every query. */
struct lists {
	uint64_t *keys; /* [blocks][nt * 8][list_cap] */
	uint32_t qp;
	__device__ uint64_t *of(uint32_t block, uint32_t q) const { return keys + ((size_t)block * qp + q) * list_cap; }
};

/* What the scan of a set of up to keep_max rows leaves: the order bits of
 * every score (0 for rows deleted), [n_queries][stride] with stride the
 * rows rounded up to a multiple of 4. Where the merge splits a query
 * between blocks, they gather its candidates in cand (merge_cap a query),
 * counted in count, and the last of them (ticket) places them; the scan
 * zeroes both counters. */
struct scores {
	uint32_t *bits, *count, *ticket;
	uint64_t *cand;
	uint32_t n_rows, stride;
};

/* The keys of one query's kept scores. */
struct score_keys {
	const uint32_t *bits;
	__device__ uint64_t operator()(uint32_t i) const
	{
		const uint32_t b = bits[i];
		return b ? (uint64_t)b << 32 | (uint32_t)~i : 0;
	}
};

/* smem: a shared-memory address. */
__device__ __forceinline__ void cp_async16(uint32_t smem, const void *gmem, uint32_t src_bytes)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(src_bytes));
}

/* cp_async16 of data read once: the L2 evicts it first. */
__device__ __forceinline__ void cp_async16_once(uint32_t smem, const void *gmem, uint32_t src_bytes, uint64_t policy)
{
	asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem), "l"(gmem),
	             "r"(src_bytes), "l"(policy));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/* Waits until at most n groups of this thread are pending. */
__device__ __forceinline__ void cp_async_wait(uint32_t n)
{
	switch (n) {
	case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
	case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
	case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
	default: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
	}
}

/* Four 8x8 f16 matrices from shared memory, lanes 8 j .. 8 j + 7 giving
 * the addresses of matrix j's rows; r[j] holds this lane's pair of it.
 * Volatile: kept after the waits for the copies it reads. */
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], uint32_t smem)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem));
}

__device__ __forceinline__ void mma(float *d, const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
	    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Sorts the warp's 32 M keys, element lane * M + j in v[j], in decreasing
 * order (bitonic): exchanges across lanes by shuffles, within a lane in
 * registers. Loops stay rolled where they can, to keep the code small. */
template <int M> __device__ __forceinline__ void warp_sort_desc(uint64_t (&v)[M], uint32_t lane)
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
__device__ __noinline__ uint64_t cut_list(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor, uint32_t lane)
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
__device__ __noinline__ uint64_t place_few(uint64_t *list, uint64_t v, uint32_t n, uint32_t kk, uint32_t lane)
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

__device__ __forceinline__ uint64_t cut_few(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor, uint32_t lane)
{
	return place_few(list, lane < n && list[lane] >= floor ? list[lane] : 0, n, kk, lane);
}

/* cut_list with the fewest registers that hold n keys: sorting costs
 * grow with the size sorted, and most lists are short. */
__device__ __noinline__ uint64_t cut(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor, uint32_t lane)
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
__device__ __noinline__ uint32_t raise_list(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor, uint32_t early,
                                            uint32_t limit, uint32_t lane, uint32_t *t_out)
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
__device__ __noinline__ uint32_t raise(uint64_t *list, uint32_t n, uint32_t kk, uint64_t floor, uint32_t early,
                                       uint32_t limit, uint32_t lane, uint32_t *t)
{
	if (n <= 32)
		return raise_list<1>(list, n, kk, floor, early, limit, lane, t);
	if (n <= 64)
		return raise_list<2>(list, n, kk, floor, early, limit, lane, t);
	if (n <= 128)
		return raise_list<4>(list, n, kk, floor, early, limit, lane, t);
	return raise_list<8>(list, n, kk, floor, early, limit, lane, t);
}

/* A query's seed: the least of its groups' maxima when every group has
 * published one in this call (see scan_kernel), else 0. The whole warp
 * calls it; groups <= 32. */
__device__ __forceinline__ uint32_t seed_of(uint64_t v, uint32_t groups, uint32_t epoch, uint32_t lane)
{
	const bool ok = lane >= groups || (uint32_t)(v >> 32) == epoch;
	if (!__all_sync(0xffffffffu, ok))
		return 0;
	return __reduce_min_sync(0xffffffffu, lane < groups ? (uint32_t)v : 0xffffffffu);
}

template <int NT>
__global__ void __launch_bounds__(32 * max_warps, 1) scan_kernel(const infs_k_fused_params p, config cf, lists ls, scores sc)
{
#if __CUDA_ARCH__ >= 900
	/* The merge kernel may be scheduled now: it waits for this grid. */
	asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
	extern __shared__ uint4 smem[];
	__shared__ uint32_t count[NT * 8];
	__shared__ uint64_t thresh[NT * 8];
	__shared__ uint32_t best[NT * 8]; /* each query's best score in round 0 */
	const uint32_t row_bytes = p.dim * 2, pieces = p.dim / 8, tile_bytes = sub_rows * row_bytes;
	const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
	const uint32_t first = blockIdx.x * cf.warps, n_warps = gridDim.x * cf.warps;
	const uint32_t n_tiles = (p.n_rows + sub_rows - 1) / sub_rows, kk = p.k;
	char *qs = (char *)smem;
	auto stage = [&](uint32_t w, uint32_t s) { return qs + NT * 8 * row_bytes + (w * stages + s) * tile_bytes; };
	/* Up to 8 queries' lists fit in shared memory beside the stages; more
	 * stay in the workspace (through L1). */
	uint64_t *const local = (uint64_t *)stage(cf.warps, 0);
	auto list_of = [&](uint32_t q) { return NT == 1 ? local + q * list_cap : ls.of(blockIdx.x, q); };

	/* The queries, zero beyond n_queries, swizzled as the rows are: the
	 * first group of copies, ahead of the tiles'. */
	const uint32_t qs_at = (uint32_t)__cvta_generic_to_shared(qs);
	if (cf.keep_scores && blockIdx.x == 0)
		for (uint32_t q = threadIdx.x; q < p.n_queries; q += blockDim.x)
			sc.count[q] = sc.ticket[q] = 0;
	for (uint32_t c = threadIdx.x; c < NT * 8 * pieces; c += blockDim.x) {
		const uint32_t q = c / pieces, j = c % pieces, live = q < p.n_queries;
		cp_async16(qs_at + q * row_bytes + (j ^ (q & 7)) * 16,
		           (const uint4 *)p.queries + (live ? (size_t)q * pieces + j : 0), live ? 16 : 0);
	}
	cp_async_commit();
	for (uint32_t q = threadIdx.x; q < NT * 8; q += blockDim.x) {
		count[q] = 0;
		thresh[q] = 0;
		best[q] = 0;
	}

	/* Round i: warp w scores tile first + w + i n_warps. Its tile of round
	 * i into stage s, rows past the end as zeros. The lane copies the
	 * tile's 16-byte pieces lane + 32 m (coalesced); piece j of row r lands
	 * at piece j ^ (r & 7), so that the same piece of eight rows, which an
	 * ldmatrix reads at once, meets no bank conflict. A piece's row is a
	 * multiply-high by inv, the reciprocal of pieces rounded up (exact for
	 * the few pieces of a tile). */
	const uint32_t per_lane = pieces / 2, inv = (uint32_t)((0x100000000ull + pieces - 1) / pieces);
	const uint32_t stages_at = (uint32_t)__cvta_generic_to_shared(stage(0, 0));
	/* The rows go through the L2 first to be evicted, so that the scores
	 * kept there stay. */
	uint64_t once;
	asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(once));
	auto tile_of = [&](uint32_t w, uint32_t i) { return first + w + i * n_warps; };
	auto issue = [&](uint32_t i, uint32_t s) {
		const uint32_t tile = tile_of(warp, i);
		if (tile < n_tiles) {
			const uint32_t dst = stages_at + (warp * stages + s) * tile_bytes;
			const char *src = (const char *)p.emb + (size_t)tile * tile_bytes;
			const uint32_t live = min(p.n_rows - tile * sub_rows, sub_rows) * row_bytes;
#pragma unroll 4
			for (uint32_t m = 0, j = lane; m < per_lane; m++, j += 32) {
				const uint32_t c = j * 16, ok = c < live;
				cp_async16_once(dst + (c ^ (__umulhi(j, inv) & 7) << 4), src + (ok ? c : 0), ok ? 16 : 0, once);
			}
		}
		cp_async_commit();
	};
	const uint32_t rounds = (n_tiles - first + n_warps - 1) / n_warps;
	for (uint32_t s = 0; s < stages; s++)
		issue(s, s);
	cp_async_wait(stages); /* the queries */
	__syncthreads();

	/* Without seeds a list is cut back to kk keys once it holds more than
	 * cut_at and another round follows: the first cut comes early, which
	 * raises the threshold while the sorts are small, and a round (warps *
	 * 16 keys) always fits after one. */
	const uint32_t cut_at = min(list_cap - cf.warps * sub_rows, max(2 * kk, 64u));
	/* Seeds. The blocks fall into groups (block % groups; groups = kk when
	 * kk <= 32 and there are that many blocks, else there are no seeds);
	 * each publishes its best score of round 0 for every query, and
	 * seeds[q * groups + g] keeps the highest of group g's. Those are
	 * scores of groups distinct rows, so their least, the seed, is a lower
	 * bound of query q's kk-th best score over all the rows. A warp tracks
	 * its queries' seeds in seeded: bit j for query warp + j warps. */
	const uint32_t groups = p.seeds ? cf.groups : 0;
	uint32_t seeded = 0;
	/* seeded's value once every query of this warp has its seed */
	const uint32_t mine = warp < p.n_queries ? (p.n_queries - warp + cf.warps - 1) / cf.warps : 0;
	const uint32_t all_seeded = mine >= 32 ? ~0u : (1u << mine) - 1;
	/* A list is cut when it holds more than full_at keys and another round
	 * follows: cut_at without seeds, and with them only when the next round
	 * could overflow it. */
	const uint32_t full_at = groups ? list_cap - cf.warps * sub_rows : cut_at;
	auto take_seeds = [&]() {
		for (uint32_t q0 = warp, j0 = 0; q0 < p.n_queries; q0 += 4 * cf.warps, j0 += 4) {
			uint64_t v[4]; /* loaded first, in flight together */
#pragma unroll
			for (uint32_t u = 0; u < 4; u++) {
				const uint32_t q = q0 + u * cf.warps;
				v[u] = lane < groups && q < p.n_queries && !(seeded >> (j0 + u) & 1)
				           ? __ldcg((const unsigned long long *)p.seeds + q * groups + lane)
				           : 0;
			}
#pragma unroll
			for (uint32_t u = 0; u < 4; u++) {
				const uint32_t q = q0 + u * cf.warps;
				if (q >= p.n_queries || seeded >> (j0 + u) & 1)
					continue;
				const uint32_t sd = seed_of(v[u], groups, p.seed_epoch, lane);
				if (!sd)
					continue;
				seeded |= 1u << (j0 + u);
				if (lane == 0 && (uint64_t)sd << 32 > thresh[q])
					thresh[q] = (uint64_t)sd << 32;
			}
		}
	};
	/* The scores of this lane's queries' thresholds, kept in registers: a
	 * score below its floor cannot make a key above the threshold. Queries
	 * past n_queries get +inf, which no score reaches. */
	float floor[NT][2];
	auto load_floor = [&]() {
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int c = 0; c < 2; c++) {
				const uint32_t q = nt * 8 + 2 * t + c;
				const uint64_t th = thresh[q];
				floor[nt][c] = q >= p.n_queries ? INFINITY : th ? order_float((uint32_t)(th >> 32)) : -INFINITY;
			}
	};
	load_floor();
	/* Appends the keys of a round's scores a (rows rr) above the block's
	 * thresholds to the lists; true when one took a list past full_at, the
	 * most a list may hold when a round begins. Most rounds hold no
	 * candidate once the floors have risen. */
	auto append = [&](const float (&a)[NT][4], const uint32_t (&rr)[2]) {
		bool any = false, over = false;
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++)
				any |= a[nt][c] >= floor[nt][c % 2];
		if (!__any_sync(0xffffffffu, any))
			return false;
#pragma unroll
		for (int nt = 0; nt < NT; nt++) {
#pragma unroll
			for (int c = 0; c < 4; c++) {
				const uint32_t q = nt * 8 + 2 * t + c % 2;
				if (!(a[nt][c] >= floor[nt][c % 2]))
					continue;
				const uint64_t key = (uint64_t)order_bits(a[nt][c]) << 32 | (uint32_t)~rr[c / 2];
				if (key > thresh[q]) {
					const uint32_t at = atomicAdd(&count[q], 1u);
					list_of(q)[at] = key;
					over |= at >= full_at;
				}
			}
		}
		return over;
	};
	auto publish = [&]() {
		for (uint32_t q = threadIdx.x; q < p.n_queries; q += blockDim.x)
			if (best[q])
				atomicMax((unsigned long long *)p.seeds + q * groups + blockIdx.x % groups,
				          (unsigned long long)p.seed_epoch << 32 | best[q]);
	};
	/* With seeds, round 0's scores wait here for them, to be appended with
	 * round 1's (or, in a single round, after the block has published). */
	float held[NT][4];
	uint32_t held_rows[2];
	const uint32_t seed_round = rounds > 1 ? 1 : 0;

	/* The ldmatrix rows of this lane: of the tile, row (lane & 7) + 8
	 * ((lane >> 3) & 1) at piece 2 s + (lane >> 4) for the A fragment of
	 * the 128-byte span's k-step s; of the queries, query nt * 8 + (lane &
	 * 7) at piece 4 u + (lane >> 3), the B fragments of k-steps 2 u and
	 * 2 u + 1. Offsets within a span, swizzled as the copies are. */
	uint32_t a_off[4], b_off[2];
#pragma unroll
	for (uint32_t s = 0; s < 4; s++)
		a_off[s] = ((lane & 7) + (lane >> 3 & 1) * 8) * row_bytes + ((2 * s + (lane >> 4)) ^ (lane & 7)) * 16;
#pragma unroll
	for (uint32_t u = 0; u < 2; u++)
		b_off[u] = qs_at + (lane & 7) * row_bytes + ((4 * u + (lane >> 3)) ^ (lane & 7)) * 16;
	for (uint32_t i = 0; i < rounds; i++) {
		const uint32_t tile = tile_of(warp, i);
		cp_async_wait(stages - 1);
		__syncwarp();

		const uint32_t x = stages_at + (warp * stages + i % stages) * tile_bytes;
		/* Two accumulators per query tile, for even and odd k-steps:
		 * chains of dependent mma half as long. */
		float acc[NT][4], acc2[NT][4];
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++)
				acc[nt][c] = acc2[nt][c] = 0;
#pragma unroll 2
		for (uint32_t span = 0; span < row_bytes; span += 128) {
			uint32_t a[4][4], b[NT][2][4];
#pragma unroll
			for (int s = 0; s < 4; s++)
				ldsm4(a[s], x + span + a_off[s]);
#pragma unroll
			for (int nt = 0; nt < NT; nt++)
#pragma unroll
				for (int u = 0; u < 2; u++)
					ldsm4(b[nt][u], b_off[u] + nt * 8 * row_bytes + span);
#pragma unroll
			for (int s = 0; s < 4; s++)
#pragma unroll
				for (int nt = 0; nt < NT; nt++)
					mma(s % 2 ? acc2[nt] : acc[nt], a[s], b[nt][s / 2][s % 2 * 2], b[nt][s / 2][s % 2 * 2 + 1]);
		}
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++)
				acc[nt][c] += acc2[nt][c];
		__syncwarp(); /* the stage is read: the tile after next goes there */
		issue(i + stages, i % stages);

		/* acc[nt][c]: row r[c / 2], query nt * 8 + 2 t + c % 2. Rows past
		 * the end or deleted score NaN, which passes no floor. */
		const uint32_t r[2] = {tile * sub_rows + g, tile * sub_rows + g + 8};
		float scale[2];
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const bool live = r[h] < p.n_rows && !(p.dead && (p.dead[r[h] / 32] >> (r[h] % 32) & 1));
			scale[h] = !live ? __int_as_float(0x7fffffff) : p.row_scale ? p.row_scale[r[h]] : 1.0f;
		}
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++)
				acc[nt][c] *= scale[c / 2];
		if (cf.keep_scores) {
			/* NaN (dead) as 0 */
#pragma unroll
			for (int nt = 0; nt < NT; nt++)
#pragma unroll
				for (int c = 0; c < 4; c++) {
					const uint32_t q = nt * 8 + 2 * t + c % 2, row = r[c / 2];
					if (q < p.n_queries && row < p.n_rows)
						sc.bits[(size_t)q * sc.stride + row] = acc[nt][c] == acc[nt][c] ? order_bits(acc[nt][c]) : 0;
				}
			continue;
		}
		if (groups && i == 0) {
			/* the warp's best live score of each query (NaN, dead, is
			 * never the larger of fmaxf) */
#pragma unroll
			for (int nt = 0; nt < NT; nt++)
#pragma unroll
				for (int c = 0; c < 2; c++) {
					float m = fmaxf(fmaxf(-INFINITY, acc[nt][c]), acc[nt][c + 2]);
					for (int o = 4; o < 32; o <<= 1)
						m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
					const uint32_t q = nt * 8 + 2 * t + c;
					if (g == 0 && m > -INFINITY && q < p.n_queries)
						atomicMax(&best[q], order_bits(m));
				}
		}
		bool over = false;
		if (groups && i == seed_round) {
			if (i == 0) {
				__syncthreads(); /* best[] is complete */
				publish();
			}
			take_seeds();
			__syncthreads();
			load_floor();
			if (i > 0)
				over = append(held, held_rows);
		}
		if (groups && i == 0 && rounds > 1) {
#pragma unroll
			for (int nt = 0; nt < NT; nt++)
#pragma unroll
				for (int c = 0; c < 4; c++)
					held[nt][c] = acc[nt][c];
			held_rows[0] = r[0];
			held_rows[1] = r[1];
		} else {
			over |= append(acc, r);
		}
		/* The cuts, and the barrier after them, only in rounds that need
		 * them: when a list may overflow in the next, or a query of the
		 * block still waits for its seed. */
		const bool cut_round =
			__syncthreads_or(i + 1 < rounds && (over || (groups && i > seed_round && seeded != all_seeded)));
		if (groups && i == 0 && rounds > 1)
			publish();
		if (!cut_round)
			continue;

		/* Warp q % warps cuts query q's list when another round could
		 * overflow it. With seeds, only when it must: a seed leaves few
		 * appends, and a list without one yet waits for it; the keys below
		 * the threshold that a seed raised go first. */
		const uint32_t before = seeded;
		if (groups && i > seed_round)
			take_seeds();
		bool cuts = seeded != before;
		for (uint32_t q = warp; q < p.n_queries; q += cf.warps) {
			const uint32_t n = count[q];
			if (n <= full_at)
				continue;
			const uint64_t fl = thresh[q];
			uint32_t t = 0, left = kk <= raise_max ? raise(list_of(q), n, kk, fl, cut_at, cut_at, lane, &t) : n;
			uint64_t th = (uint64_t)t << 32;
			if (left == n) {
				th = cut(list_of(q), n, kk, fl, lane);
				left = min(n, kk);
			}
			if (lane == 0) {
				count[q] = left;
				if (th > thresh[q])
					thresh[q] = th;
			}
			cuts = true;
		}
		if (__syncthreads_or(cuts))
			load_floor();
	}
	cp_async_wait(0);
	if (cf.keep_scores)
		return;
	/* Every list sorted and cut to kk keys above its threshold, zeros after
	 * the last: the block's share of each query's top kk. */
	if (groups)
		take_seeds();
	/* The keys of lists of up to few_max (most, with seeds) are loaded for four
	 * of the warp's queries at once and placed by counting: lists in the
	 * workspace would cost a round trip each, one after another. */
	for (uint32_t q0 = warp; q0 < p.n_queries; q0 += 4 * cf.warps) {
		uint64_t v[4];
		uint32_t n[4];
		__syncwarp(); /* lane 0's thresholds (take_seeds) are written */
#pragma unroll
		for (uint32_t u = 0; u < 4; u++) {
			const uint32_t q = q0 + u * cf.warps;
			n[u] = q < p.n_queries ? count[q] : 0;
			v[u] = lane < n[u] && n[u] <= few_max ? list_of(q)[lane] : 0;
		}
#pragma unroll
		for (uint32_t u = 0; u < 4; u++) {
			const uint32_t q = q0 + u * cf.warps;
			if (q >= p.n_queries)
				break;
			const uint64_t fl = thresh[q];
			uint32_t m = n[u], t;
			if (m <= few_max) {
				place_few(list_of(q), v[u] >= fl ? v[u] : 0, m, kk, lane);
			} else {
				__syncwarp();
				if (m > kk && kk <= raise_max) /* then at most about 32 keys are sorted */
					m = raise(list_of(q), m, kk, fl, 32, m, lane, &t);
				cut(list_of(q), m, kk, fl, lane);
			}
			if (NT == 1)
				for (uint32_t j = lane; j < kk; j += 32)
					ls.of(blockIdx.x, q)[j] = local[q * list_cap + j];
		}
	}
}

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

const void *scan_for(uint32_t nt)
{
	switch (nt) {
	case 1: return (const void *)scan_kernel<1>;
	case 2: return (const void *)scan_kernel<2>;
	case 3: return (const void *)scan_kernel<3>;
	default: return (const void *)scan_kernel<4>;
	}
}

/* What the launches need to know of a device: its attributes, and the
 * scan kernels' shared memory limit raised to its opt-in maximum. Found
 * once per device, since a call of a few microseconds would otherwise pay
 * for the queries on its critical path. Threads that race to find them
 * make the same idempotent calls and store the same value. */
struct device_facts {
	int sms, optin, major;
};

bool find_facts(int dev, device_facts *f)
{
	if (cudaDeviceGetAttribute(&f->sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&f->optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&f->major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
		return false;
	for (uint32_t nt = 1; nt <= 4; nt++) {
		cudaFuncAttributes fa;
		const void *fn = scan_for(nt);
		if (cudaFuncGetAttributes(&fa, fn) != cudaSuccess ||
		    cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
		                         f->optin - (int)fa.sharedSizeBytes) != cudaSuccess)
			return false;
	}
	return true;
}

/* Per device: 0 while unknown, else 1 | major << 8 | sms << 16 | optin << 32. */
constexpr int cached_devices = 64;
std::atomic<uint64_t> known[cached_devices];

bool facts_of(int dev, device_facts *f)
{
	uint64_t v = dev < cached_devices ? known[dev].load(std::memory_order_acquire) : 0;
	if (!v) {
		if (!find_facts(dev, f))
			return false;
		v = 1 | (uint64_t)(f->major & 0xff) << 8 | (uint64_t)(f->sms & 0xffff) << 16 | (uint64_t)f->optin << 32;
		if (dev < cached_devices)
			known[dev].store(v, std::memory_order_release);
	}
	*f = {(int)(v >> 16 & 0xffff), (int)(v >> 32), (int)(v >> 8 & 0xff)};
	return true;
}

/* The launch for these shapes on the current device; false when the fused
 * path does not take them. */
bool make_config(config *cf, uint32_t n_rows, uint32_t dim, uint32_t n_queries, uint32_t k)
{
	if (dim == 0 || dim % 64 || dim > INFS_K_FUSED_MAX_DIM || n_queries == 0 ||
	    n_queries > INFS_K_FUSED_MAX_QUERIES || k == 0 || k > INFS_K_FUSED_MAX)
		return false;
	int dev;
	device_facts f;
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || !facts_of(dev, &f))
		return false;
	cf->early_merge = f.major >= 9;
	cf->nt = (n_queries + 7) / 8;
	/* the queries, and the lists when they are in shared memory */
	const size_t fixed = (size_t)cf->nt * 8 * dim * 2 + (cf->nt == 1 ? 8 * list_cap * 8 : 0);
	const size_t stage = (size_t)sub_rows * dim * 2;
	const size_t statics = cf->nt * 8 * 16 + 1024; /* count[], thresh[], best[], the runtime's share */
	if ((size_t)f.optin < fixed + statics + stages * stage)
		return false;
	const size_t fit = (f.optin - fixed - statics) / (stages * stage);
	cf->warps = fit < max_warps ? (uint32_t)fit : max_warps;
	cf->smem = fixed + cf->warps * stages * stage;
	const uint32_t tiles = (n_rows + sub_rows - 1) / sub_rows, busy = (tiles + cf->warps - 1) / cf->warps;
	cf->blocks = busy < (uint32_t)f.sms ? busy : (uint32_t)f.sms;
	cf->blocks = cf->blocks ? cf->blocks : 1;
	cf->keep_scores = n_rows <= keep_max;
	/* enough merge blocks to keep the SMs busy, each reading up to split_rows */
	const uint32_t per_query = cf->blocks / n_queries ? cf->blocks / n_queries : 1;
	cf->splits = min((n_rows + split_rows - 1) / split_rows, per_query);
	cf->groups = !cf->keep_scores && k <= 32 && cf->blocks >= k ? k : 0;
	return true;
}

} /* namespace */

extern "C" int infs_k_fused_supported(uint32_t dim, uint32_t n_queries, uint32_t k)
{
	config cf;
	return make_config(&cf, 1, dim, n_queries, k);
}

extern "C" size_t infs_k_fused_workspace_bytes(uint32_t n_rows, uint32_t dim, uint32_t n_queries, uint32_t k)
{
	config cf;
	if (!make_config(&cf, n_rows, dim, n_queries, k))
		return 0;
	if (cf.keep_scores)
		return 8ull * n_queries * merge_cap + 4ull * n_queries * ((n_rows + 3) / 4 * 4 + 2);
	return 8ull * cf.blocks * cf.nt * 8 * list_cap;
}

extern "C" cudaError_t infs_k_fused_topk(const infs_k_fused_params *p, cudaStream_t stream)
{
	config cf;
	if (!make_config(&cf, p->n_rows, p->dim, p->n_queries, p->k) || p->n_rows == 0)
		return cudaErrorInvalidValue;
	const void *fn = scan_for(cf.nt);
	lists ls = {(uint64_t *)p->workspace, cf.nt * 8};
	/* the scores' workspace, as infs_k_fused_workspace_bytes counts it */
	const uint32_t stride = (p->n_rows + 3) / 4 * 4, nq = p->n_queries;
	uint64_t *const cand = (uint64_t *)p->workspace;
	uint32_t *const bits = (uint32_t *)(cand + (size_t)nq * merge_cap), *const count = bits + (size_t)nq * stride;
	scores sc = {bits, count, count + nq, cand, p->n_rows, stride};
	void *args[] = {(void *)p, &cf, &ls, &sc};
	cudaError_t err = cudaLaunchKernel(fn, cf.blocks, 32 * cf.warps, args, cf.smem, stream);
	if (err != cudaSuccess)
		return err;
	/* On Hopper and later the merge is launched while the scan runs
	 * (programmatic dependent launch) and waits for it on the device, which
	 * hides a launch latency. */
	cudaLaunchAttribute attr;
	attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
	attr.val.programmaticStreamSerializationAllowed = 1;
	cudaLaunchConfig_t lc = {};
	lc.gridDim = dim3(p->n_queries);
	lc.blockDim = dim3(merge_threads);
	lc.stream = stream;
	lc.attrs = &attr;
	lc.numAttrs = cf.early_merge ? 1 : 0;
	if (cf.keep_scores) {
		lc.gridDim = dim3(cf.splits, p->n_queries);
		return cudaLaunchKernelEx(&lc, merge_scores_kernel, *p, sc);
	}
	return cudaLaunchKernelEx(&lc, merge_kernel, *p, ls, cf.blocks);
}

/* The fused retrieval's scan (see retrieve_fused.cuh): a block's rounds of
 * scoring tiles of rows against the queries on tensor cores, appending the
 * keys above its thresholds to its lists (or, for small sets, writing every
 * score), the cuts that raise the thresholds, and the seeds the blocks
 * share. */
#include "retrieve_cut.cuh"

namespace infs::fused {

namespace {

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

/* A set that keeps its scores: the order bits of the scores of rows r, NaN
 * (dead) as 0, into bits ([n_queries][stride]). */
template <int NT>
__device__ __forceinline__ void keep_scores(const float (&acc)[NT][4], const uint32_t (&r)[2], uint32_t t,
                                            uint32_t n_queries, uint32_t n_rows, uint32_t *bits, uint32_t stride)
{
#pragma unroll
	for (int nt = 0; nt < NT; nt++)
#pragma unroll
		for (int c = 0; c < 4; c++) {
			const uint32_t q = nt * 8 + 2 * t + c % 2, row = r[c / 2];
			if (q < n_queries && row < n_rows)
				bits[(size_t)q * stride + row] = acc[nt][c] == acc[nt][c] ? order_bits(acc[nt][c]) : 0;
		}
}

/* Round 0: the warp's best live score of each query into the block's best
 * (NaN, dead, is never the larger of fmaxf). */
template <int NT>
__device__ __forceinline__ void note_best(uint32_t *best, const float (&acc)[NT][4], uint32_t g, uint32_t t,
                                          uint32_t n_queries)
{
#pragma unroll
	for (int nt = 0; nt < NT; nt++)
#pragma unroll
		for (int c = 0; c < 2; c++) {
			float m = fmaxf(fmaxf(-INFINITY, acc[nt][c]), acc[nt][c + 2]);
			for (int o = 4; o < 32; o <<= 1)
				m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
			const uint32_t q = nt * 8 + 2 * t + c;
			if (g == 0 && m > -INFINITY && q < n_queries)
				atomicMax(&best[q], order_bits(m));
		}
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

	/* Phase 1, setup: the queries, zero beyond n_queries, swizzled as the
	 * rows are (the first group of copies, ahead of the tiles'), and the
	 * block's counters. */
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

	/* Phase 2, the tiles' copies: issued two rounds ahead. */
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

	/* Phase 3, what a round does with its scores: the cut points, the
	 * seeds, the floors, the appends. */
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

	/* Phase 4, the rounds: scoring on tensor cores, then the scores
	 * kept, or appended (seeds taken in round 1), and the lists cut when
	 * they must be. */
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

		/* Scoring: the warp's tile against every query. */
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
		/* The round's scores, by row scale, are final: kept, or appended. */
		if (cf.keep_scores) {
			keep_scores<NT>(acc, r, t, p.n_queries, p.n_rows, sc.bits, sc.stride);
			continue;
		}
		if (groups && i == 0)
			note_best<NT>(best, acc, g, t, p.n_queries);
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
	/* Phase 5, the end: every list sorted and cut to kk keys above its
	 * threshold, zeros after the last: the block's share of each query's
	 * top kk. */
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

} /* namespace */

const void *scan_for(uint32_t nt)
{
	switch (nt) {
	case 1: return (const void *)scan_kernel<1>;
	case 2: return (const void *)scan_kernel<2>;
	case 3: return (const void *)scan_kernel<3>;
	default: return (const void *)scan_kernel<4>;
	}
}

} /* namespace infs::fused */

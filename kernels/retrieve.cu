/* Fused retrieval: scores and top-k in one pass over the rows, no score
 * matrix in memory.
 *
 * scan: every warp streams its own tiles of 16 rows into shared memory with
 *   cp.async (the next tile in flight while it scores the last), scores them
 *   against up to 32 queries on tensor cores (mma m16n8k16, f16 in, f32
 *   accumulate) and appends the keys (see topk.cuh) above its running
 *   threshold of each query to its list of that query. A list that another
 *   tile could overflow is cut back to its best kk keys (a bitonic sort in
 *   registers), which raises the threshold. At the end the block merges its
 *   warps' lists: one list per block and query, its exact top kk, sorted.
 * merge: per query, the best kk keys of the blocks' lists. Any block's kk-th
 *   key, and the kk-th largest of the blocks' first keys, are lower bounds
 *   of the query's kk-th best key: only the keys at or above the larger are
 *   gathered and sorted; when too many are, a radix selection over all.
 *
 * Every step keeps every key that can be in the top kk, so the result is
 * exact, ties included (keys are unique: a score, then the smaller row).
 *
 * The tensor-core operands are plain 16-byte shared-memory loads: a dot
 * product does not depend on the order of its terms as long as both
 * operands use the same one, so lane (g, t) takes elements 32 kb + 8 t .. + 7
 * of rows g and g + 8 of a tile and of query g as the fragments of k-steps
 * 2 kb and 2 kb + 1, in the positions the mma expects for that lane. */
#include "topk.cuh"

using namespace infs;

namespace {

constexpr uint32_t sub_rows = 16;  /* rows a warp scores at once: its tile */
constexpr uint32_t max_warps = 8;  /* per block */
constexpr uint32_t stages = 2;     /* tiles per warp in shared memory */
/* A list holds 32 list_m keys: kk kept, a tile's appends and room to spare,
 * for kk up to INFS_K_FUSED_MAX. */
constexpr int list_m = 8;
constexpr uint32_t list_cap = 32 * list_m;
constexpr uint32_t merge_cap = 4096;          /* keys the merge sorts in shared memory */
constexpr uint32_t merge_threads = 256;

struct config {
	uint32_t nt;     /* tiles of 8 queries */
	uint32_t warps;  /* per block */
	size_t smem;     /* dynamic shared memory per block */
	uint32_t blocks;
	bool early_merge; /* Hopper or later: the merge may launch while the scan runs */
};

/* Every warp's list of every query; warp 0's becomes its block's. */
struct lists {
	uint64_t *keys; /* [blocks][warps][nt * 8][list_cap] */
	uint32_t warps, qp;
	__device__ uint64_t *of(uint32_t block, uint32_t warp, uint32_t q) const
	{
		return keys + (((size_t)block * warps + warp) * qp + q) * list_cap;
	}
};

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, uint32_t src_bytes)
{
	unsigned s = (unsigned)__cvta_generic_to_shared(smem);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
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

__device__ __forceinline__ uint4 lds128(const char *p) { return *(const uint4 *)p; }

__device__ __forceinline__ void mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
	             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Sorts the warp's 32 M keys, element lane * M + j in v[j], in decreasing
 * order (bitonic): exchanges across lanes by shuffles, within a lane in
 * registers. Loops stay rolled where they can, to keep the code small. */
template <int M> __device__ __forceinline__ void warp_sort_desc(uint64_t (&v)[M], uint32_t lane)
{
#pragma unroll 1
	for (uint32_t size = 2; size <= 32 * M; size <<= 1) {
		const uint32_t first = lane * M;
#pragma unroll 1
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

/* Cuts the n keys of a list (n <= 32 M) down to its best kk, sorted and
 * padded with zeros to kk; the whole warp calls it. Returns the list's kk-th
 * key, or 0 when it holds fewer. */
template <int M> __device__ __noinline__ uint64_t cut_list(uint64_t *list, uint32_t n, uint32_t kk, uint32_t lane)
{
	uint64_t v[M];
#pragma unroll
	for (int j = 0; j < M; j++) {
		uint32_t i = lane * M + j;
		v[j] = i < n ? list[i] : 0;
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

/* cut_list with the fewest registers that hold n keys: sorting costs
 * grow with the size sorted, and most lists are short. */
__device__ __noinline__ uint64_t cut(uint64_t *list, uint32_t n, uint32_t kk, uint32_t lane)
{
	if (n <= 32)
		return cut_list<1>(list, n, kk, lane);
	if (n <= 64)
		return cut_list<2>(list, n, kk, lane);
	if (n <= 128)
		return cut_list<4>(list, n, kk, lane);
	return cut_list<8>(list, n, kk, lane);
}

/* Merges the sorted lists of query q of the block's warps into warp 0's:
 * as many lists as fit are appended after its kk keys, then cut back. The
 * whole warp calls it. */
__device__ void merge_warp_lists(const lists &ls, uint32_t q, uint32_t kk, uint32_t lane)
{
	uint64_t *dst = ls.of(blockIdx.x, 0, q);
	const uint32_t per = (list_cap - kk) / kk;
	for (uint32_t w0 = 1; w0 < ls.warps; w0 += per) {
		const uint32_t wn = min(per, ls.warps - w0);
		for (uint32_t i = lane; i < wn * kk; i += 32)
			dst[kk + i] = ls.of(blockIdx.x, w0 + i / kk, q)[i % kk];
		__syncwarp();
		cut(dst, kk + wn * kk, kk, lane);
	}
}

template <int NT>
__global__ void __launch_bounds__(32 * max_warps, 1) scan_kernel(const infs_k_fused_params p, config cf, lists ls)
{
#if __CUDA_ARCH__ >= 900
	/* The merge kernel may be scheduled now: it waits for this grid. */
	asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
	extern __shared__ uint4 smem[];
	__shared__ uint32_t count[max_warps][NT * 8];
	__shared__ uint64_t thresh[max_warps][NT * 8];
	const uint32_t row_bytes = p.dim * 2, pieces = p.dim / 8, tile_bytes = sub_rows * row_bytes;
	const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
	const uint32_t gw = blockIdx.x * cf.warps + warp, n_warps = gridDim.x * cf.warps;
	const uint32_t n_tiles = (p.n_rows + sub_rows - 1) / sub_rows, kk = p.k;
	char *qs = (char *)smem, *stage0 = qs + NT * 8 * row_bytes + warp * stages * tile_bytes;

	/* The queries, zero beyond n_queries, swizzled as the rows are. */
	for (uint32_t c = threadIdx.x; c < NT * 8 * pieces; c += blockDim.x) {
		const uint32_t q = c / pieces, j = c % pieces;
		uint4 v = q < p.n_queries ? ((const uint4 *)p.queries)[(size_t)q * pieces + j] : make_uint4(0, 0, 0, 0);
		*(uint4 *)(qs + q * row_bytes + (j ^ (q & 1) << 2) * 16) = v;
	}
	for (uint32_t q = lane; q < NT * 8; q += 32) {
		count[warp][q] = 0;
		thresh[warp][q] = 0;
	}
	__syncthreads();

	/* The warp's tile i into stage s, rows past the end as zeros. Piece j
	 * of row r lands at piece j ^ 4 (r & 1): the 16-byte loads of the
	 * fragments below then meet no bank conflict. */
	auto issue = [&](uint32_t i, uint32_t s) {
		const uint32_t tile = gw + i * n_warps;
		if (tile < n_tiles) {
			char *dst = stage0 + s * tile_bytes;
			for (uint32_t row = 0; row < sub_rows; row++) {
				const uint32_t r = tile * sub_rows + row, live = r < p.n_rows;
				const char *src = (const char *)p.emb + (size_t)(live ? r : 0) * row_bytes;
				for (uint32_t j = lane; j < pieces; j += 32)
					cp_async16(dst + row * row_bytes + (j ^ (row & 1) << 2) * 16, src + j * 16, live ? 16 : 0);
			}
		}
		cp_async_commit();
	};
	for (uint32_t s = 0; s + 1 < stages; s++)
		issue(s, s);

	/* Lists are cut once another tile could take them past the smallest
	 * sort size that holds kk keys and a tile: small sorts, often. */
	uint32_t cut_at = 64;
	while (cut_at < kk + 2 * sub_rows)
		cut_at *= 2;
	cut_at -= sub_rows;
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
				const uint64_t th = thresh[warp][q];
				floor[nt][c] = q >= p.n_queries ? INFINITY : th ? order_float((uint32_t)(th >> 32)) : -INFINITY;
			}
	};
	load_floor();
	const uint32_t sw = (g & 1) << 6;
	for (uint32_t i = 0; gw + i * n_warps < n_tiles; i++) {
		const uint32_t tile = gw + i * n_warps;
		issue(i + stages - 1, (i + stages - 1) % stages);
		cp_async_wait(stages - 1);
		__syncwarp();

		const char *x = stage0 + (i % stages) * tile_bytes + g * row_bytes + t * 16;
		const char *y = qs + g * row_bytes + t * 16;
		float acc[NT][4];
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
			acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0;
#pragma unroll 4
		for (uint32_t off = 0; off < row_bytes; off += 64) {
			const uint32_t o = off ^ sw;
			const uint4 a0 = lds128(x + o), a1 = lds128(x + 8 * row_bytes + o);
#pragma unroll
			for (int nt = 0; nt < NT; nt++) {
				const uint4 b = lds128(y + nt * 8 * row_bytes + o);
				mma(acc[nt], a0.x, a1.x, a0.y, a1.y, b.x, b.y);
				mma(acc[nt], a0.z, a1.z, a0.w, a1.w, b.z, b.w);
			}
		}
		__syncwarp(); /* the stage is read: the next issue may refill it */

		/* acc[nt][c]: row r[c / 2], query nt * 8 + 2 t + c % 2. Rows past
		 * the end or deleted score NaN, which passes no floor. */
		const uint32_t r[2] = {tile * sub_rows + g, tile * sub_rows + g + 8};
		bool live[2];
		float scale[2];
#pragma unroll
		for (int h = 0; h < 2; h++) {
			live[h] = r[h] < p.n_rows && !(p.dead && (p.dead[r[h] / 32] >> (r[h] % 32) & 1));
			scale[h] = live[h] && p.row_scale ? p.row_scale[r[h]] : 1.0f;
		}
		bool any = false;
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++) {
				acc[nt][c] = !live[c / 2] ? __int_as_float(0x7fffffff) : acc[nt][c] * scale[c / 2];
				any |= acc[nt][c] >= floor[nt][c % 2];
			}
		/* Most tiles hold no candidate once the floors have risen. */
		if (__any_sync(0xffffffffu, any)) {
#pragma unroll
			for (int nt = 0; nt < NT; nt++) {
#pragma unroll
				for (int c = 0; c < 4; c++) {
					const uint32_t q = nt * 8 + 2 * t + c % 2;
					if (!(acc[nt][c] >= floor[nt][c % 2]))
						continue;
					const uint64_t key = (uint64_t)order_bits(acc[nt][c]) << 32 | (uint32_t)~r[c / 2];
					if (key > thresh[warp][q]) {
						uint32_t slot = atomicAdd(&count[warp][q], 1u);
						ls.of(blockIdx.x, warp, q)[slot] = key;
					}
				}
			}
		}
		__syncwarp();
		/* Lists that the next tile could overflow are cut back. */
		const bool full = lane < p.n_queries && count[warp][lane] > cut_at;
		const uint32_t cuts = __ballot_sync(0xffffffffu, full);
		for (uint32_t todo = cuts; todo; todo &= todo - 1) {
			const uint32_t q = __ffs(todo) - 1;
			const uint64_t kth = cut(ls.of(blockIdx.x, warp, q), count[warp][q], kk, lane);
			if (lane == 0) {
				count[warp][q] = min(count[warp][q], kk);
				if (kth)
					thresh[warp][q] = kth;
			}
			__syncwarp();
		}
		if (cuts)
			load_floor();
	}
	cp_async_wait(0);
	/* Every list sorted and cut to kk keys, zeros after the last; then the
	 * block's lists into one. */
	for (uint32_t q = 0; q < p.n_queries; q++)
		cut(ls.of(blockIdx.x, warp, q), count[warp][q], kk, lane);
	__syncthreads();
	for (uint32_t q = warp; q < p.n_queries; q += cf.warps)
		merge_warp_lists(ls, q, kk, lane);
}

/* Key i of the concatenated lists of one query, kk keys per block. */
struct block_lists {
	lists ls;
	uint32_t q, kk;
	__device__ uint64_t operator()(uint32_t i) const { return ls.of(i / kk, 0, q)[i % kk]; }
};

__global__ void __launch_bounds__(merge_threads) merge_kernel(const infs_k_fused_params p, lists ls, uint32_t blocks)
{
	__shared__ uint64_t buf[merge_cap];
	__shared__ uint64_t bound;
	__shared__ uint32_t n;
	const uint32_t q = blockIdx.x, kk = p.k, lane = threadIdx.x % 32;
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* the scan's lists are complete */
#endif
	if (threadIdx.x == 0) {
		bound = 0;
		n = 0;
	}
	/* Two lower bounds of the kk-th best key: the largest kk-th key of a
	 * list, and (with kk lists or more) the kk-th largest first key. */
	uint64_t b = 0;
	for (uint32_t blk = threadIdx.x; blk < blocks; blk += blockDim.x) {
		b = max(b, ls.of(blk, 0, q)[kk - 1]);
		if (blocks <= merge_cap)
			buf[blk] = ls.of(blk, 0, q)[0];
	}
	__syncthreads();
	if (kk <= blocks && blocks <= merge_cap) {
		for (uint32_t blk = threadIdx.x; blk < blocks; blk += blockDim.x) {
			const uint64_t h = buf[blk];
			uint32_t above = 0;
#pragma unroll 8
			for (uint32_t j = 0; j < blocks; j++)
				above += buf[j] > h;
			if (above == kk - 1)
				b = max(b, h);
		}
	}
	atomicMax((unsigned long long *)&bound, (unsigned long long)b);
	__syncthreads();
	/* bound is 0 when no list holds kk keys: then every key is gathered. */
	const uint64_t t = bound;
	for (uint32_t blk = threadIdx.x; blk < blocks; blk += blockDim.x) {
		const uint64_t *list = ls.of(blk, 0, q);
		for (uint32_t j = 0; j < kk; j++) {
			uint64_t key = list[j];
			if (!key || key < t)
				break;
			uint32_t slot = atomicAdd(&n, 1u);
			if (slot < merge_cap)
				buf[slot] = key;
		}
	}
	__syncthreads();
	uint32_t found = n;
	if (found > merge_cap) {
		block_lists src = {ls, q, kk};
		const uint64_t t2 = select_threshold(src, blocks * kk, kk);
		__syncthreads();
		if (threadIdx.x == 0)
			n = 0;
		__syncthreads();
		for (uint32_t i = threadIdx.x; i < blocks * kk; i += blockDim.x) {
			uint64_t key = src(i);
			if (key && key >= t2) /* min(kk, live keys) of them */
				buf[atomicAdd(&n, 1u)] = key;
		}
		__syncthreads();
		found = n;
	}
	if (found <= list_cap) {
		/* one warp sorts, no barriers */
		if (threadIdx.x < 32)
			cut(buf, found, found, lane);
		__syncthreads();
	} else {
		sort_desc(buf, found, merge_cap);
	}
	found = min(found, kk);
	for (uint32_t j = threadIdx.x; j < found; j += blockDim.x) {
		uint64_t key = buf[j];
		p.out_id[(size_t)q * kk + j] = p.ids[~(uint32_t)key];
		p.out_score[(size_t)q * kk + j] = order_float((uint32_t)(key >> 32));
	}
	if (threadIdx.x == 0)
		p.out_n[q] = found;
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

/* The launch for these shapes on the current device; false when the fused
 * path does not take them. */
bool make_config(config *cf, uint32_t n_rows, uint32_t dim, uint32_t n_queries, uint32_t k)
{
	if (dim == 0 || dim % 64 || n_queries == 0 || n_queries > INFS_K_FUSED_MAX_QUERIES || k == 0 ||
	    k > INFS_K_FUSED_MAX)
		return false;
	int dev, sms, optin, major;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
		return false;
	cf->early_merge = major >= 9;
	cf->nt = (n_queries + 7) / 8;
	const size_t q_bytes = (size_t)cf->nt * 8 * dim * 2, tile = (size_t)sub_rows * dim * 2;
	const size_t statics = max_warps * cf->nt * 8 * 12 + 1024; /* count[], thresh[], the runtime's share */
	if ((size_t)optin < q_bytes + statics + stages * tile)
		return false;
	const size_t fit = (optin - q_bytes - statics) / (stages * tile);
	cf->warps = fit < max_warps ? (uint32_t)fit : max_warps;
	cf->smem = q_bytes + cf->warps * stages * tile;
	const uint32_t tiles = (n_rows + sub_rows - 1) / sub_rows, busy = (tiles + cf->warps - 1) / cf->warps;
	cf->blocks = busy < (uint32_t)sms ? busy : (uint32_t)sms;
	cf->blocks = cf->blocks ? cf->blocks : 1;
	return true;
}

} /* namespace */

extern "C" int infs_k_fused_supported(uint32_t dim, uint32_t n_queries, uint32_t k)
{
	config cf;
	return make_config(&cf, 1, dim, n_queries, k);
}

extern "C" int infs_k_fused_preferred(uint32_t n_rows, uint32_t n_queries)
{
	return n_queries <= 4 && n_rows < 500000;
}

extern "C" size_t infs_k_fused_workspace_bytes(uint32_t n_rows, uint32_t dim, uint32_t n_queries, uint32_t k)
{
	config cf;
	if (!make_config(&cf, n_rows, dim, n_queries, k))
		return 0;
	return 8ull * cf.blocks * cf.warps * cf.nt * 8 * list_cap;
}

extern "C" cudaError_t infs_k_fused_topk(const infs_k_fused_params *p, cudaStream_t stream)
{
	config cf;
	if (!make_config(&cf, p->n_rows, p->dim, p->n_queries, p->k) || p->n_rows == 0)
		return cudaErrorInvalidValue;
	const void *fn = scan_for(cf.nt);
	cudaError_t err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cf.smem);
	if (err != cudaSuccess)
		return err;
	lists ls = {(uint64_t *)p->workspace, cf.warps, cf.nt * 8};
	void *args[] = {(void *)p, &cf, &ls};
	err = cudaLaunchKernel(fn, cf.blocks, 32 * cf.warps, args, cf.smem, stream);
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
	return cudaLaunchKernelEx(&lc, merge_kernel, *p, ls, cf.blocks);
}

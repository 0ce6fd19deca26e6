/* Fused retrieval: scores and selection without a score matrix in memory.
 *
 * 1. sample: the keys (see topk.cuh) of every stride-th row, each row
 *    scored by one warp against all queries.
 * 2. threshold: per query, the rank-th best sampled key, by radix selection.
 * 3. filter: the whole matrix streamed once with tensor-core dot products
 *    (mma m16n8k16, f16 in, f32 accumulate) against all queries of the
 *    batch at once, so that 32 queries cost the HBM traffic of one; keys at
 *    or above their query's threshold are appended to its candidate list.
 * 4. select: per query, the exact top k of its candidates.
 *
 * Every row at or above the threshold is a candidate, so when a query has
 * at least k candidates and none was dropped for want of room, its top k
 * is exact. Otherwise (a misjudged sample, masses of equal scores, fewer
 * live rows than k) out_n is INFS_K_FUSED_RETRY and the caller takes the
 * GEMM path.
 *
 * The tensor-core operands come straight from 16-byte loads: a dot product
 * does not depend on the order of its terms as long as both operands use
 * the same one, so lane (g, t) takes elements 32 kb + 8 t .. + 7 of rows g
 * and g + 8 of a 16-row tile and of query g as the fragments of k-steps
 * 2 kb and 2 kb + 1, in the positions the mma expects for that lane. */
#include "topk.cuh"

using namespace infs;

namespace {

constexpr uint32_t warps = 8;

struct fplan {
	uint32_t samples; /* rows sampled: every stride-th */
	uint32_t stride;
	uint32_t rank;    /* the threshold is the rank-th best sample */
	uint32_t cap;     /* candidates kept per query */
};

fplan make_fplan(uint32_t n, uint32_t k)
{
	fplan pl;
	pl.samples = n / 16 < 8192 ? n / 16 : 8192;
	pl.stride = n / pl.samples;
	/* As in topk.cu: about twice k rows expected at or above the
	 * threshold, never fewer than 16 samples' worth, and room for four
	 * times that expectation. */
	uint32_t rank = 2 * k / pl.stride + 16;
	pl.rank = rank > pl.samples ? pl.samples : rank;
	pl.cap = 4 * pl.rank * pl.stride + 4096;
	return pl;
}

struct fws {
	uint64_t *thresholds;
	uint32_t *counts;
	uint64_t *samples; /* [n_queries][pl.samples] */
	uint64_t *cand;    /* [n_queries][pl.cap] */
};

fws carve(void *ws, uint32_t nq, const fplan &pl)
{
	fws w;
	w.thresholds = (uint64_t *)ws;
	w.counts = (uint32_t *)(w.thresholds + nq);
	w.samples = w.thresholds + nq + (nq + 1) / 2;
	w.cand = w.samples + (size_t)nq * pl.samples;
	return w;
}

__device__ __forceinline__ uint64_t make_key(const infs_k_fused_params &p, uint32_t row, float s)
{
	if (p.dead && (p.dead[row / 32] >> (row % 32) & 1))
		return 0;
	if (p.row_scale)
		s *= p.row_scale[row];
	return (uint64_t)order_bits(s) << 32 | (uint32_t)~row;
}

__device__ __forceinline__ float dot8(uint4 a, uint4 b)
{
	const __half2 *x = (const __half2 *)&a, *y = (const __half2 *)&b;
	float s = 0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float2 u = __half22float2(x[i]), v = __half22float2(y[i]);
		s = fmaf(u.x, v.x, s);
		s = fmaf(u.y, v.y, s);
	}
	return s;
}

/* One warp per sampled row; lane l holds the row's 16-byte pieces l,
 * l + 32, ... and reduces each query's partial sums across the warp. */
__global__ void __launch_bounds__(32 * warps) sample_kernel(const infs_k_fused_params p, fplan pl, fws w)
{
	const uint32_t j = blockIdx.x * warps + threadIdx.x / 32, lane = threadIdx.x % 32;
	if (j >= pl.samples)
		return;
	const uint32_t row = j * pl.stride, pieces = p.dim / 8;
	const uint4 *x = (const uint4 *)(p.emb + (size_t)row * p.dim);
	for (uint32_t q = 0; q < p.n_queries; q++) {
		const uint4 *y = (const uint4 *)(p.queries + (size_t)q * p.dim);
		float s = 0;
		for (uint32_t c = lane; c < pieces; c += 32)
			s += dot8(__ldg(x + c), __ldg(y + c));
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, o);
		if (lane == 0)
			w.samples[(size_t)q * pl.samples + j] = make_key(p, row, s);
	}
}

__global__ void __launch_bounds__(INFS_K_TOPK_THREADS) threshold_kernel(const infs_k_fused_params p, fplan pl, fws w)
{
	const uint32_t q = blockIdx.x;
	list_keys src = {w.samples + (size_t)q * pl.samples};
	/* 24 bits (sign, exponent, 15 of mantissa) are threshold enough. */
	uint64_t t = select_threshold(src, pl.samples, pl.rank, 3);
	if (threadIdx.x == 0) {
		w.thresholds[q] = t;
		w.counts[q] = 0;
	}
}

__device__ __forceinline__ void mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
	             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Pieces of 32 elements loaded ahead of their use, per row. */
constexpr uint32_t ahead = 4;

/* NT tiles of 8 queries. Each warp scores 16-row tiles in turn. */
template <int NT>
__global__ void __launch_bounds__(32 * warps) filter_kernel(const infs_k_fused_params p, fplan pl, fws w)
{
	const uint32_t lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	const uint32_t n_tiles = (p.n_rows + 15) / 16, dim = p.dim;
	uint64_t thr[NT][2];
	const uint4 *qp[NT];
#pragma unroll
	for (int nt = 0; nt < NT; nt++) {
#pragma unroll
		for (int c = 0; c < 2; c++) {
			uint32_t q = nt * 8 + 2 * t + c;
			thr[nt][c] = q < p.n_queries ? w.thresholds[q] : ~0ull;
		}
		uint32_t q = nt * 8 + g;
		qp[nt] = q < p.n_queries ? (const uint4 *)(p.queries + (size_t)q * dim) + t : nullptr;
	}
	const uint4 zero = make_uint4(0, 0, 0, 0);
	for (uint32_t tile = blockIdx.x * warps + threadIdx.x / 32; tile < n_tiles; tile += gridDim.x * warps) {
		const uint32_t r0 = tile * 16 + g, r1 = r0 + 8;
		const uint4 *x0 = r0 < p.n_rows ? (const uint4 *)(p.emb + (size_t)r0 * dim) + t : nullptr;
		const uint4 *x1 = r1 < p.n_rows ? (const uint4 *)(p.emb + (size_t)r1 * dim) + t : nullptr;
		float acc[NT][4];
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
			acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0;
		for (uint32_t kb0 = 0; kb0 < dim / 32; kb0 += ahead) {
			uint4 a[ahead][2];
#pragma unroll
			for (uint32_t i = 0; i < ahead; i++) {
				/* piece kb is 4 uint4 wide: lane t's part is at 4 kb + t */
				a[i][0] = x0 ? __ldcs(x0 + 4 * (kb0 + i)) : zero;
				a[i][1] = x1 ? __ldcs(x1 + 4 * (kb0 + i)) : zero;
			}
#pragma unroll
			for (uint32_t i = 0; i < ahead; i++) {
#pragma unroll
				for (int nt = 0; nt < NT; nt++) {
					uint4 b = qp[nt] ? __ldg(qp[nt] + 4 * (kb0 + i)) : zero;
					mma(acc[nt], a[i][0].x, a[i][1].x, a[i][0].y, a[i][1].y, b.x, b.y);
					mma(acc[nt], a[i][0].z, a[i][1].z, a[i][0].w, a[i][1].w, b.z, b.w);
				}
			}
		}
		/* acc[nt][c]: row c < 2 ? r0 : r1, query nt * 8 + 2 t + c % 2 */
#pragma unroll
		for (int nt = 0; nt < NT; nt++) {
#pragma unroll
			for (int c = 0; c < 4; c++) {
				const uint32_t row = c < 2 ? r0 : r1, q = nt * 8 + 2 * t + c % 2;
				if (row >= p.n_rows || q >= p.n_queries)
					continue;
				uint64_t key = make_key(p, row, acc[nt][c]);
				if (key && key >= thr[nt][c % 2]) {
					uint32_t slot = atomicAdd(&w.counts[q], 1u);
					if (slot < pl.cap)
						w.cand[(size_t)q * pl.cap + slot] = key;
				}
			}
		}
	}
}

__global__ void __launch_bounds__(INFS_K_TOPK_THREADS) select_kernel(const infs_k_fused_params p, fplan pl, fws w)
{
	__shared__ uint64_t best[INFS_K_FUSED_MAX];
	__shared__ uint32_t n_best;
	const uint32_t q = blockIdx.x, n_cand = w.counts[q];
	if (n_cand < p.k || n_cand > pl.cap) {
		if (threadIdx.x == 0)
			p.out_n[q] = INFS_K_FUSED_RETRY;
		return;
	}
	list_keys list = {w.cand + (size_t)q * pl.cap};
	uint64_t t = select_threshold(list, n_cand, p.k);
	if (threadIdx.x == 0)
		n_best = 0;
	__syncthreads();
	for (uint32_t i = threadIdx.x; i < n_cand; i += blockDim.x) {
		uint64_t key = list(i);
		if (key >= t) { /* exactly k keys, all live */
			uint32_t slot = atomicAdd(&n_best, 1u);
			if (slot < INFS_K_FUSED_MAX)
				best[slot] = key;
		}
	}
	__syncthreads();
	const uint32_t found = min(n_best, p.k);
	sort_desc(best, found, INFS_K_FUSED_MAX);
	for (uint32_t j = threadIdx.x; j < found; j += blockDim.x) {
		uint64_t key = best[j];
		p.out_id[(size_t)q * p.k + j] = p.ids[~(uint32_t)key];
		p.out_score[(size_t)q * p.k + j] = order_float((uint32_t)(key >> 32));
	}
	if (threadIdx.x == 0)
		p.out_n[q] = found;
}

template <int NT> cudaError_t launch_filter(const infs_k_fused_params *p, const fplan &pl, const fws &w,
                                            cudaStream_t stream)
{
	/* A grid of exactly the blocks that fit at once, so that the tiles
	 * split evenly over a single wave. */
	int dev, sms, fit;
	cudaError_t err = cudaGetDevice(&dev);
	if (err == cudaSuccess)
		err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (err == cudaSuccess)
		err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, filter_kernel<NT>, 32 * warps, 0);
	if (err != cudaSuccess)
		return err;
	uint32_t tiles = (p->n_rows + 15) / 16, blocks = (uint32_t)(sms * (fit > 0 ? fit : 1));
	if (blocks > div_up(tiles, warps))
		blocks = div_up(tiles, warps);
	filter_kernel<NT><<<blocks, 32 * warps, 0, stream>>>(*p, pl, w);
	return cudaSuccess;
}

} /* namespace */

extern "C" int infs_k_fused_supported(uint32_t n_rows, uint32_t dim, uint32_t n_queries, uint32_t k)
{
	return n_rows >= INFS_K_FUSED_MIN_ROWS && dim % (32 * ahead) == 0 && n_queries >= 1 &&
	       n_queries <= INFS_K_FUSED_MAX_QUERIES && k >= 1 && k <= INFS_K_FUSED_MAX;
}

extern "C" size_t infs_k_fused_workspace_bytes(uint32_t n_rows, uint32_t n_queries, uint32_t k)
{
	fplan pl = make_fplan(n_rows, k);
	return 8ull * (n_queries + (n_queries + 1) / 2) + 8ull * n_queries * (pl.samples + pl.cap);
}

extern "C" cudaError_t infs_k_fused_topk(const infs_k_fused_params *p, cudaStream_t stream)
{
	if (!infs_k_fused_supported(p->n_rows, p->dim, p->n_queries, p->k))
		return cudaErrorInvalidValue;
	fplan pl = make_fplan(p->n_rows, p->k);
	fws w = carve(p->workspace, p->n_queries, pl);
	sample_kernel<<<div_up(pl.samples, warps), 32 * warps, 0, stream>>>(*p, pl, w);
	threshold_kernel<<<p->n_queries, INFS_K_TOPK_THREADS, 0, stream>>>(*p, pl, w);
	cudaError_t err;
	switch ((p->n_queries + 7) / 8) {
	case 1: err = launch_filter<1>(p, pl, w, stream); break;
	case 2: err = launch_filter<2>(p, pl, w, stream); break;
	case 3: err = launch_filter<3>(p, pl, w, stream); break;
	default: err = launch_filter<4>(p, pl, w, stream); break;
	}
	if (err != cudaSuccess)
		return err;
	select_kernel<<<p->n_queries, INFS_K_TOPK_THREADS, 0, stream>>>(*p, pl, w);
	return cudaGetLastError();
}

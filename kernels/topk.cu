/* Launcher of the top-k selection: sample, filter, select (see topk.cuh). */
#include "topk.cuh"

using namespace infs;

namespace {

/* Rows from which a query's row is first cut down by a sampled threshold. */
constexpr uint32_t direct_max = 32768;
constexpr uint32_t samples = 8192;

struct plan {
	uint32_t stride; /* sample every stride-th row */
	uint32_t rank;   /* the threshold is the rank-th best sample */
	uint32_t cap;    /* candidates kept per query */
};

plan make_plan(uint32_t n, uint32_t k)
{
	plan pl = {0, 0, 0};
	if (n <= direct_max)
		return pl;
	pl.stride = n / samples;
	/* Expect about twice k rows at or above the threshold, and never fewer
	 * than 16 samples' worth, so that falling short of k is very unlikely;
	 * room for four times the expectation keeps overflow unlikely too. */
	uint64_t rank = 2ull * k / pl.stride + 16;
	pl.rank = rank > samples ? samples : (uint32_t)rank;
	pl.cap = 4 * pl.rank * pl.stride + 4096;
	return pl;
}

struct workspace {
	uint64_t *thresholds;
	uint32_t *counts;
	uint64_t *cand;
};

workspace carve(void *ws, uint32_t n_queries)
{
	workspace w;
	w.thresholds = (uint64_t *)ws;
	w.counts = (uint32_t *)(w.thresholds + n_queries);
	w.cand = w.thresholds + n_queries + (n_queries + 1) / 2;
	return w;
}

__global__ void __launch_bounds__(INFS_K_TOPK_THREADS)
sample_kernel(const infs_k_topk_params p, plan pl, workspace w)
{
	const uint32_t q = blockIdx.x;
	row_keys src = {p.scores + q * p.ld, p.row_scale, p.dead, pl.stride};
	/* The top 24 bits of the keys (sign, exponent, 15 bits of mantissa)
	 * are threshold enough: the bucket adds few rows. */
	uint64_t t = select_threshold(src, p.n_rows / pl.stride, pl.rank, 3);
	if (threadIdx.x == 0) {
		w.thresholds[q] = t;
		w.counts[q] = 0;
	}
}

#define FILTER_ROWS 4

__global__ void __launch_bounds__(256) filter_kernel(const infs_k_topk_params p, plan pl, workspace w)
{
	const uint32_t q = blockIdx.y;
	const uint64_t t = w.thresholds[q];
	row_keys src = {p.scores + q * p.ld, p.row_scale, p.dead, 1};
	uint64_t *out = w.cand + (size_t)q * pl.cap;
	const uint32_t lane = threadIdx.x % 32;
	const uint32_t first = blockIdx.x * 256 * FILTER_ROWS + threadIdx.x;
#pragma unroll
	for (int r = 0; r < FILTER_ROWS; r++) {
		uint32_t i = first + r * 256;
		uint64_t key = i < p.n_rows ? src(i) : 0;
		bool take = key && key >= t;
		uint32_t m = __ballot_sync(0xffffffffu, take);
		if (!m)
			continue;
		uint32_t leader = __ffs(m) - 1, slot = 0;
		if (lane == leader)
			slot = atomicAdd(&w.counts[q], (uint32_t)__popc(m));
		slot = __shfl_sync(0xffffffffu, slot, leader) + __popc(m & ((1u << lane) - 1));
		if (take && slot < pl.cap)
			out[slot] = key;
	}
}

__global__ void __launch_bounds__(INFS_K_TOPK_THREADS)
select_kernel(const infs_k_topk_params p, plan pl, workspace w)
{
	__shared__ uint64_t best[INFS_K_TOPK_MAX];
	__shared__ uint32_t n_best;
	const uint32_t q = blockIdx.x;
	row_keys row = {p.scores + q * p.ld, p.row_scale, p.dead, 1};
	uint32_t n_cand = pl.cap ? w.counts[q] : 0;
	bool from_list = pl.cap && n_cand >= p.k && n_cand <= pl.cap;
	list_keys list = {w.cand + (size_t)q * pl.cap};

	uint64_t t = from_list ? select_threshold(list, n_cand, p.k) : select_threshold(row, p.n_rows, p.k);
	if (threadIdx.x == 0)
		n_best = 0;
	__syncthreads();
	uint32_t n = from_list ? n_cand : p.n_rows;
	for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
		uint64_t key = from_list ? list(i) : row(i);
		if (key && key >= t) {
			uint32_t slot = atomicAdd(&n_best, 1u);
			if (slot < INFS_K_TOPK_MAX) /* min(k, live) by construction */
				best[slot] = key;
		}
	}
	__syncthreads();
	const uint32_t found = min(n_best, p.k);
	sort_desc(best, found, INFS_K_TOPK_MAX);
	for (uint32_t j = threadIdx.x; j < found; j += blockDim.x) {
		uint64_t key = best[j];
		uint32_t i = ~(uint32_t)key;
		p.out_id[(size_t)q * p.k + j] = p.ids[i];
		p.out_score[(size_t)q * p.k + j] = order_float((uint32_t)(key >> 32));
	}
	if (threadIdx.x == 0)
		p.out_n[q] = found;
}

} /* namespace */

extern "C" size_t infs_k_topk_workspace_bytes(uint32_t n_rows, uint32_t n_queries, uint32_t k)
{
	plan pl = make_plan(n_rows, k);
	if (!pl.cap)
		return 0;
	return 8ull * (n_queries + (n_queries + 1) / 2) + 8ull * n_queries * pl.cap;
}

extern "C" cudaError_t infs_k_topk(const infs_k_topk_params *p, cudaStream_t stream)
{
	if (p->k == 0 || p->k > INFS_K_TOPK_MAX)
		return cudaErrorInvalidValue;
	if (p->n_queries == 0)
		return cudaSuccess;
	plan pl = make_plan(p->n_rows, p->k);
	workspace w = {nullptr, nullptr, nullptr};
	if (pl.cap) {
		w = carve(p->workspace, p->n_queries);
		sample_kernel<<<p->n_queries, INFS_K_TOPK_THREADS, 0, stream>>>(*p, pl, w);
		dim3 grid(div_up(p->n_rows, 256 * FILTER_ROWS), p->n_queries);
		filter_kernel<<<grid, 256, 0, stream>>>(*p, pl, w);
	}
	select_kernel<<<p->n_queries, INFS_K_TOPK_THREADS, 0, stream>>>(*p, pl, w);
	return cudaGetLastError();
}

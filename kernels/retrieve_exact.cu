/* The ends of a device search: the queries made ready (made unit length
 * exactly as the CPU path does, converted to f16 for ranking, checked),
 * and the candidates the ranking kept scored exactly as the CPU scores
 * them (double sums in the same order, so the same bits) and ordered as
 * the CPU orders them (best first, equal scores by increasing id). With
 * both, a device search returns the CPU's hits without the host. */
#include <atomic>

#include "common.cuh"
#include "retrieve_kernels.h"
#include "rows_kernels.h"

namespace {

constexpr uint32_t prep_threads = 128;
constexpr int prep_loads = 4;
constexpr uint32_t rescore_threads = 256;

/* The query staged in shared memory (dim floats, then the squares' double
 * sum's terms), so that the one thread that must add them in the CPU's
 * order reads no global memory. */
__global__ void __launch_bounds__(prep_threads) prep_kernel(const infs_k_query_params p)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const uint32_t q = blockIdx.x, dim = p.dim;
	const float *x = p.queries + (size_t)q * dim;
	double *sq = (double *)smem;
	float *xs = (float *)(sq + dim);
	__shared__ double scale_s;
	__shared__ float len_s;
	__shared__ int bad_s;
	if (threadIdx.x == 0)
		bad_s = 0;
	if (q == 0 && p.seeds)
		for (uint32_t i = threadIdx.x; i < p.n_seeds; i += blockDim.x)
			p.seeds[i] = 0;
	__syncthreads();
	/* several loads in flight before any store: the queries may be in
	 * mapped host memory, a bus round trip away */
	for (uint32_t d0 = threadIdx.x; d0 < dim; d0 += prep_loads * blockDim.x) {
		float v[prep_loads];
#pragma unroll
		for (int u = 0; u < prep_loads; u++) {
			const uint32_t d = d0 + u * blockDim.x;
			v[u] = d < dim ? x[d] : 0.0f;
		}
#pragma unroll
		for (int u = 0; u < prep_loads; u++) {
			const uint32_t d = d0 + u * blockDim.x;
			if (d < dim) {
				xs[d] = v[u];
				sq[d] = __dmul_rn((double)v[u], (double)v[u]); /* exact: 48 bits of 53 */
				if (!isfinite(v[u]))
					bad_s = 1;
			}
		}
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		double scale = 1.0;
		if (p.normalize) {
			double ss = 0;
			for (uint32_t d = 0; d < dim; d++)
				ss = __dadd_rn(ss, sq[d]);
			if (ss == 0)
				bad_s = 1;
			else
				scale = 1.0 / sqrt(ss);
		}
		scale_s = scale;
	}
	__syncthreads();
	const double scale = scale_s;
	float part = 0;
	for (uint32_t d = threadIdx.x; d < dim; d += blockDim.x) {
		const float v = p.normalize ? __double2float_rn(__dmul_rn((double)xs[d], scale)) : xs[d];
		xs[d] = v;
		p.exact[(size_t)q * dim + d] = v;
		part += v * v;
	}
	/* the ranking's unit vector: any rounding does, the margin absorbs it */
	for (int o = 16; o; o >>= 1)
		part += __shfl_xor_sync(0xffffffffu, part, o);
	__shared__ float warp_sum[prep_threads / 32];
	if (threadIdx.x % 32 == 0)
		warp_sum[threadIdx.x / 32] = part;
	__syncthreads();
	if (threadIdx.x == 0) {
		float ss = 0;
		for (uint32_t w = 0; w < blockDim.x / 32; w++)
			ss += warp_sum[w];
		len_s = ss > 0 ? sqrtf(ss) : 0.0f;
	}
	__syncthreads();
	const float len = len_s;
	for (uint32_t d = threadIdx.x; d < dim; d += blockDim.x)
		p.rank[(size_t)q * dim + d] = __half_as_ushort(__float2half_rn(len > 0 ? xs[d] / len : 0.0f));
	if (threadIdx.x == 0)
		p.bad[q] = bad_s;
}

/* Shared memory of a rescore block: the query, the candidates' scores,
 * ids and rows, then a tile of `tile` candidate rows (a row's stride dim + 1
 * floats, so that the lanes reading their own rows at the same dimension
 * hit distinct banks). */
struct rescore_smem {
	size_t score, id, row, tile, bytes;
};

__host__ __device__ inline rescore_smem rescore_layout(uint32_t dim, uint32_t kk, uint32_t tile)
{
	rescore_smem l;
	l.score = (size_t)dim * 4;
	l.row = l.score + (size_t)kk * 4;
	l.id = (l.row + (size_t)kk * 4 + 7) / 8 * 8;
	l.tile = l.id + (size_t)kk * 8;
	l.bytes = l.tile + (size_t)tile * (dim + 1) * 4;
	return l;
}

/* Rows row[0 .. n) of p.rows into tile (stride floats a row), read by the
 * whole block: each thread has UNROLL loads in flight before it stores, so
 * the tile arrives in a few memory latencies, not one per element. */
constexpr int unroll = 4;

__device__ void load_rows(float *tile, const infs_k_rescore_params &p, const uint32_t *row, uint32_t n,
                          uint32_t stride)
{
	const uint32_t dim = p.dim;
	if (dim % 4 == 0) {
		const uint32_t per = dim / 4, total = n * per;
		for (uint32_t i0 = threadIdx.x; i0 < total; i0 += unroll * blockDim.x) {
			float4 v[unroll];
#pragma unroll
			for (int u = 0; u < unroll; u++) {
				const uint32_t i = i0 + u * blockDim.x, r = i < total ? row[i / per] : p.n_rows;
				v[u] = r < p.n_rows ? ((const float4 *)(p.rows + (size_t)r * dim))[i % per] : make_float4(0, 0, 0, 0);
			}
#pragma unroll
			for (int u = 0; u < unroll; u++) {
				const uint32_t i = i0 + u * blockDim.x;
				if (i < total) {
					float *t = tile + (i / per) * stride + (i % per) * 4;
					t[0] = v[u].x, t[1] = v[u].y, t[2] = v[u].z, t[3] = v[u].w;
				}
			}
		}
		return;
	}
	for (uint32_t i0 = threadIdx.x; i0 < n * dim; i0 += unroll * blockDim.x) {
		float v[unroll];
#pragma unroll
		for (int u = 0; u < unroll; u++) {
			const uint32_t i = i0 + u * blockDim.x, r = i < n * dim ? row[i / dim] : p.n_rows;
			v[u] = r < p.n_rows ? p.rows[(size_t)r * dim + i % dim] : 0.0f;
		}
#pragma unroll
		for (int u = 0; u < unroll; u++) {
			const uint32_t i = i0 + u * blockDim.x;
			if (i < n * dim)
				tile[(i / dim) * stride + i % dim] = v[u];
		}
	}
}

/* The candidates' rows come into shared memory a tile at a time, read
 * coalesced by the whole block; then each thread adds its candidate's
 * products in the CPU's order from there. */
__global__ void __launch_bounds__(rescore_threads) rescore_kernel(const infs_k_rescore_params p, uint32_t tile)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const uint32_t q = blockIdx.x, dim = p.dim, kk = p.kk, stride = dim + 1;
	const rescore_smem l = rescore_layout(dim, kk, tile);
	float *query = (float *)smem, *score = (float *)(smem + l.score), *rows = (float *)(smem + l.tile);
	uint32_t *row = (uint32_t *)(smem + l.row);
	uint64_t *id = (uint64_t *)(smem + l.id);
	const uint32_t m = p.bad[q] ? 0 : min(p.cand_n[q], kk);
	for (uint32_t d = threadIdx.x; d < dim; d += blockDim.x)
		query[d] = p.queries[(size_t)q * dim + d];
	for (uint32_t j = threadIdx.x; j < m; j += blockDim.x) {
		const uint64_t c = p.cand_id[(size_t)q * kk + j];
		id[j] = c;
		row[j] = infs::row_of(p.ids, p.n_rows, c);
	}
	__syncthreads();
	for (uint32_t j0 = 0; j0 < m; j0 += tile) {
		const uint32_t n = min(tile, m - j0);
		load_rows(rows, p, row + j0, n, stride);
		__syncthreads();
		for (uint32_t j = threadIdx.x; j < n; j += blockDim.x) {
			const uint32_t r = row[j0 + j];
			const float *x = rows + j * stride;
			/* the CPU's sum, term by term: no fused multiply-add */
			double s = 0;
			for (uint32_t d = 0; d < dim; d++)
				s = __dadd_rn(s, __dmul_rn((double)query[d], (double)x[d]));
			if (p.row_scale && r < p.n_rows)
				s = __dmul_rn(s, (double)p.row_scale[r]);
			score[j0 + j] = r < p.n_rows ? __double2float_rn(s) : -INFINITY;
		}
		__syncthreads();
	}
	for (uint32_t j = threadIdx.x; j < m; j += blockDim.x) {
		const float s = score[j];
		const uint64_t c = id[j];
		uint32_t rank = 0;
		for (uint32_t i = 0; i < m; i++)
			rank += score[i] > s || (score[i] == s && id[i] < c);
		if (rank < p.k) {
			unsigned char *hit = (unsigned char *)p.out_hits + ((size_t)q * p.k + rank) * 16;
			*(uint64_t *)hit = c;
			*(float *)(hit + 8) = s;
		}
	}
	if (threadIdx.x == 0)
		p.out_n[q] = min(m, p.k);
}

template <typename T> __global__ void gather_kernel(T *dst, const T *src, uint32_t row_elems, const uint32_t *keep,
                                                    uint64_t total)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		const uint64_t j = i / row_elems, e = i % row_elems;
		dst[i] = src[(uint64_t)keep[j] * row_elems + e];
	}
}

template <typename T>
cudaError_t gather(void *dst, const void *src, size_t row_bytes, const uint32_t *keep, uint32_t n,
                   cudaStream_t stream)
{
	const uint32_t row_elems = (uint32_t)(row_bytes / sizeof(T));
	const uint64_t total = (uint64_t)n * row_elems;
	const uint64_t blocks = (total + 255) / 256;
	gather_kernel<T><<<blocks > 4096 ? 4096 : (unsigned)blocks, 256, 0, stream>>>((T *)dst, (const T *)src, row_elems,
	                                                                              keep, total);
	return cudaGetLastError();
}

} /* namespace */

/* Per device, once: the dynamic shared memory each kernel may take, raised
 * to the opt-in limit less its static shared memory (0 while unknown).
 * Threads racing here make the same idempotent calls. A failed call's
 * error is cleared, so that a launch's check does not report it. */
constexpr int cached_devices = 64;
std::atomic<uint64_t> limits_of[cached_devices];

struct smem_limits {
	uint32_t prep, rescore;
};

static bool raise_limit(const void *fn, int optin, uint32_t *out)
{
	cudaFuncAttributes fa;
	if (cudaFuncGetAttributes(&fa, fn) != cudaSuccess ||
	    cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - (int)fa.sharedSizeBytes) !=
	        cudaSuccess) {
		cudaGetLastError();
		return false;
	}
	*out = (uint32_t)(optin - (int)fa.sharedSizeBytes);
	return true;
}

static smem_limits smem_limit(void)
{
	int dev, optin = 0;
	smem_limits l = {48u << 10, 48u << 10};
	if (cudaGetDevice(&dev) != cudaSuccess) {
		cudaGetLastError();
		return l;
	}
	uint64_t v = dev < cached_devices ? limits_of[dev].load(std::memory_order_acquire) : 0;
	if (v)
		return {(uint32_t)(v >> 32), (uint32_t)v};
	if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
		cudaGetLastError();
		return l;
	}
	smem_limits raised;
	if (!raise_limit((const void *)prep_kernel, optin, &raised.prep) ||
	    !raise_limit((const void *)rescore_kernel, optin, &raised.rescore))
		return l;
	if (dev < cached_devices)
		limits_of[dev].store((uint64_t)raised.prep << 32 | raised.rescore, std::memory_order_release);
	return raised;
}

extern "C" void infs_k_exact_prepare(void)
{
	smem_limit();
}

extern "C" cudaError_t infs_k_query_prep(const infs_k_query_params *p, cudaStream_t stream)
{
	if (p->n_queries == 0)
		return cudaSuccess;
	const size_t smem = (size_t)p->dim * 12;
	if (smem > 48u << 10 && smem_limit().prep < smem)
		return cudaErrorInvalidValue;
	prep_kernel<<<p->n_queries, prep_threads, smem, stream>>>(*p);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_rescore(const infs_k_rescore_params *p, cudaStream_t stream)
{
	if (p->n_queries == 0)
		return cudaSuccess;
	/* a tile of every candidate when they fit, else as many as fit */
	const size_t limit = smem_limit().rescore;
	const size_t fixed = rescore_layout(p->dim, p->kk, 0).bytes, per_row = ((size_t)p->dim + 1) * 4;
	const size_t fit = limit > fixed ? (limit - fixed) / per_row : 0;
	const uint32_t tile = fit >= p->kk ? p->kk : fit ? (uint32_t)fit : 1;
	rescore_kernel<<<p->n_queries, rescore_threads, rescore_layout(p->dim, p->kk, tile).bytes, stream>>>(*p, tile);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_gather_rows(void *dst, const void *src, size_t row_bytes, const uint32_t *keep,
                                          uint32_t n, cudaStream_t stream)
{
	if (n == 0 || row_bytes == 0)
		return cudaSuccess;
	if (row_bytes % 8 == 0)
		return gather<uint64_t>(dst, src, row_bytes, keep, n, stream);
	if (row_bytes % 4 == 0)
		return gather<uint32_t>(dst, src, row_bytes, keep, n, stream);
	if (row_bytes % 2 == 0)
		return gather<uint16_t>(dst, src, row_bytes, keep, n, stream);
	return gather<uint8_t>(dst, src, row_bytes, keep, n, stream);
}

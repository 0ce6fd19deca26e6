/* Accuracy recovery's own kernel (the layers are the forward's, the
 * gather of the rows that go on retrieval's): the attention mass the
 * question's tokens give each recomputed row at the check layer. It takes two
 * passes: each (question token, head) finds its softmax's max and sum over
 * every visible key, then each row sums its own key's probability over
 * the question's tokens and heads; no buffer of the context's length. */
#include <math.h>

#include "model_common.cuh"

using namespace infs;

namespace {

const unsigned THREADS = 128;

template <typename D>
__device__ float key_dot(const infs_k_mass_params &p, const float *q, int64_t off)
{
	const typename D::bits *k = (const typename D::bits *)p.cache.k + off;
	float s = 0;
	for (uint32_t e = 0; e < p.head_dim; e++)
		s += q[e] * to_float(D{}, k[e * p.cache.stride_dim]);
	return s * p.scale;
}

/* The keys question row r sees: [lo, hi). */
__device__ void visible(const infs_k_mass_params &p, int64_t pos, int64_t &lo, int64_t &hi)
{
	lo = p.sliding_window && pos >= (int64_t)p.sliding_window ? pos - p.sliding_window + 1 : 0;
	hi = pos < (int64_t)p.n_ctx ? pos + 1 : (int64_t)p.n_ctx;
}

/* Block (question token t, head h): norm[(t * n_heads + h) * 2] = the max
 * score, [+ 1] the sum of exp(score - max) in double. */
template <typename D> __global__ void __launch_bounds__(THREADS) norm_kernel(const infs_k_mass_params p)
{
	__shared__ float red_f[32];
	__shared__ double red_d[32];
	const uint32_t t = blockIdx.x, h = blockIdx.y, kvh = h / (p.n_heads / p.n_kv_heads), row = p.n_rows + t;
	const float *q = p.q + ((size_t)row * p.n_heads + h) * p.head_dim;
	int64_t lo, hi;
	visible(p, p.positions[row], lo, hi);
	float mx = -INFINITY;
	int bad = 0;
	for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
		const int64_t off = cache_offset(p.cache, 0, j, kvh);
		if (off < 0)
			bad = 1;
		else
			mx = fmaxf(mx, key_dot<D>(p, q, off));
	}
	/* the block's max: a sum of the warps' maxima would not do */
	for (int o = 16; o > 0; o >>= 1)
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	if (lane == 0)
		red_f[warp] = mx;
	__syncthreads();
	mx = -INFINITY;
	for (unsigned w = 0; w < blockDim.x / 32; w++)
		mx = fmaxf(mx, red_f[w]);
	bad = __syncthreads_or(bad);
	double z = 0;
	for (int64_t j = lo + threadIdx.x; !bad && j < hi; j += blockDim.x)
		z += exp((double)key_dot<D>(p, q, cache_offset(p.cache, 0, j, kvh)) - mx);
	z = block_sum(z, red_d);
	if (threadIdx.x == 0) {
		p.norm[((size_t)t * p.n_heads + h) * 2] = bad ? NAN : mx;
		p.norm[((size_t)t * p.n_heads + h) * 2 + 1] = bad ? NAN : z;
	}
}

/* Block i: mass[i] over the question's tokens and heads. */
template <typename D> __global__ void __launch_bounds__(THREADS) rows_kernel(const infs_k_mass_params p)
{
	__shared__ double red[32];
	const uint32_t i = blockIdx.x, group = p.n_heads / p.n_kv_heads;
	const int64_t pos = p.positions[i];
	double sum = 0;
	for (uint32_t th = threadIdx.x; th < p.n_query * p.n_heads; th += blockDim.x) {
		const uint32_t t = th / p.n_heads, h = th % p.n_heads, row = p.n_rows + t;
		int64_t lo, hi;
		visible(p, p.positions[row], lo, hi);
		if (pos < lo || pos >= hi)
			continue;
		const int64_t off = cache_offset(p.cache, 0, pos, h / group);
		const double mx = p.norm[(size_t)th * 2], z = p.norm[(size_t)th * 2 + 1];
		if (off < 0) {
			sum = NAN;
			continue;
		}
		const float *q = p.q + ((size_t)row * p.n_heads + h) * p.head_dim;
		sum += exp((double)key_dot<D>(p, q, off) - mx) / z;
	}
	sum = block_sum(sum, red);
	if (threadIdx.x == 0)
		p.mass[i] = sum;
}

} /* namespace */

extern "C" cudaError_t infs_k_query_mass(const infs_k_mass_params *p, cudaStream_t stream)
{
	if (p->n_kv_heads == 0 || p->n_heads % p->n_kv_heads || p->head_dim > INFS_K_MODEL_MAX_HEAD_DIM)
		return cudaErrorInvalidValue;
	if (p->n_rows == 0 || p->n_query == 0)
		return cudaSuccess;
	return dispatch_dtype(p->cache.dtype, [&](auto d) {
		norm_kernel<decltype(d)><<<dim3(p->n_query, p->n_heads), THREADS, 0, stream>>>(*p);
		cudaError_t err = cudaGetLastError();
		if (err == cudaSuccess) {
			rows_kernel<decltype(d)><<<p->n_rows, THREADS, 0, stream>>>(*p);
			err = cudaGetLastError();
		}
		return err;
	});
}

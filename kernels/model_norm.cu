/* The model's element-wise kernels: embedding lookup, RMSNorm, bias,
 * SwiGLU, and the fills of a benchmark's random model (a step of few
 * tokens has RMSNorm and SwiGLU inside its products: model_gemv.cu). */
#include <math.h>

#include "model_common.cuh"

using namespace infs;

namespace {

const unsigned THREADS = 256;

__global__ void embed_kernel(float *x, const uint16_t *emb, const int32_t *tokens, uint32_t d, uint32_t n_vocab)
{
	const uint32_t i = blockIdx.x;
	const int32_t t = tokens[i];
	const bool ok = t >= 0 && (uint32_t)t < n_vocab;
	for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
		x[(size_t)i * d + e] = ok ? to_float(bf16{}, emb[(size_t)t * d + e]) : NAN;
}

/* Row r of x into row blockIdx.x of out; r < 0: NaN. Rows whose width is a
 * multiple of 4 go 16 bytes at a time. */
__device__ void rmsnorm_row(uint16_t *out, const float *x, int64_t r, const float *w, uint32_t d, float eps)
{
	__shared__ double red[32];
	uint16_t *o = out + (size_t)blockIdx.x * d;
	if (r < 0) {
		for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
			o[e] = from_float(bf16{}, NAN);
		return;
	}
	const float *row = x + (size_t)r * d;
	const bool wide = d % 4 == 0;
	double ss = 0;
	if (wide)
		for (uint32_t e = threadIdx.x * 4; e < d; e += blockDim.x * 4) {
			const float4 v = *reinterpret_cast<const float4 *>(row + e);
			ss += (double)v.x * v.x + (double)v.y * v.y + (double)v.z * v.z + (double)v.w * v.w;
		}
	else
		for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
			ss += (double)row[e] * row[e];
	ss = block_sum(ss, red);
	const float inv = 1.0f / sqrtf((float)(ss / d) + eps);
	if (wide)
		for (uint32_t e = threadIdx.x * 4; e < d; e += blockDim.x * 4) {
			const float4 v = *reinterpret_cast<const float4 *>(row + e);
			const float4 g = *reinterpret_cast<const float4 *>(w + e);
			const uint2 b = make_uint2((uint32_t)from_float(bf16{}, g.x * (v.x * inv)) |
			                                   (uint32_t)from_float(bf16{}, g.y * (v.y * inv)) << 16,
			                           (uint32_t)from_float(bf16{}, g.z * (v.z * inv)) |
			                                   (uint32_t)from_float(bf16{}, g.w * (v.w * inv)) << 16);
			*reinterpret_cast<uint2 *>(o + e) = b;
		}
	else
		for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
			o[e] = from_float(bf16{}, w[e] * (row[e] * inv));
}

__global__ void rmsnorm_kernel(uint16_t *out, const float *x, const float *w, uint32_t d, float eps)
{
	rmsnorm_row(out, x, blockIdx.x, w, d, eps);
}

__global__ void rmsnorm_last_kernel(uint16_t *out, const float *x, const float *w, const infs_k_seqs seqs, uint32_t d,
                                    float eps)
{
	const seq_span sp = seq_get(seqs, blockIdx.x);
	rmsnorm_row(out, x, sp.end > sp.start ? (int64_t)sp.end - 1 : -1, w, d, eps);
}

__global__ void add_bias_kernel(float *y, const float *b, uint32_t d, size_t total)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
		y[i] += b[i % d];
}

/* Four outputs per thread: ff is a multiple of 4 (checked by the launcher). */
__global__ void swiglu_kernel(uint16_t *out, const float *gu, uint32_t ff, size_t total)
{
	for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4; i < total;
	     i += (size_t)gridDim.x * blockDim.x * 4) {
		const size_t row = i / ff, j = i % ff;
		const float4 g = *reinterpret_cast<const float4 *>(gu + row * 2 * ff + j);
		const float4 u = *reinterpret_cast<const float4 *>(gu + row * 2 * ff + ff + j);
		const uint2 b = make_uint2((uint32_t)from_float(bf16{}, g.x / (1.0f + expf(-g.x)) * u.x) |
		                                   (uint32_t)from_float(bf16{}, g.y / (1.0f + expf(-g.y)) * u.y) << 16,
		                           (uint32_t)from_float(bf16{}, g.z / (1.0f + expf(-g.z)) * u.z) |
		                                   (uint32_t)from_float(bf16{}, g.w / (1.0f + expf(-g.w)) * u.w) << 16);
		*reinterpret_cast<uint2 *>(out + i) = b;
	}
}

/* bf16 of ~N(0, std): the sum of the four 16-bit quarters of a splitmix64
 * hash of (seed, i) (mean 2, variance 1/3), centred and scaled. */
__global__ void fill_random_kernel(uint16_t *dst, size_t n, uint64_t seed, float std)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		const float s = (float)(z & 0xffff) + (float)((z >> 16) & 0xffff) + (float)((z >> 32) & 0xffff) +
		                (float)(z >> 48);
		dst[i] = from_float(bf16{}, (s * (1.0f / 65536.0f) - 2.0f) * 1.7320508f * std);
	}
}

__global__ void fill_kernel(float *dst, size_t n, float v)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		dst[i] = v;
}

unsigned grid_for(size_t total)
{
	size_t g = (total + THREADS - 1) / THREADS;
	return (unsigned)(g > 65535 ? 65535 : g ? g : 1);
}

} /* namespace */

extern "C" cudaError_t infs_k_embed(float *x, const uint16_t *emb, const int32_t *tokens, uint32_t n, uint32_t d,
                                    uint32_t n_vocab, cudaStream_t stream)
{
	embed_kernel<<<n, THREADS, 0, stream>>>(x, emb, tokens, d, n_vocab);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_rmsnorm(uint16_t *out, const float *x, const float *w, uint32_t n, uint32_t d,
                                      float eps, cudaStream_t stream)
{
	rmsnorm_kernel<<<n, THREADS, 0, stream>>>(out, x, w, d, eps);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_rmsnorm_last(uint16_t *out, const float *x, const float *w, const infs_k_seqs *seqs,
                                           uint32_t d, float eps, cudaStream_t stream)
{
	rmsnorm_last_kernel<<<seqs->n_seqs, THREADS, 0, stream>>>(out, x, w, *seqs, d, eps);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_add_bias(float *y, const float *b, uint32_t n, uint32_t d, cudaStream_t stream)
{
	const size_t total = (size_t)n * d;
	add_bias_kernel<<<grid_for(total), THREADS, 0, stream>>>(y, b, d, total);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_swiglu(uint16_t *out, const float *gu, uint32_t n, uint32_t ff, cudaStream_t stream)
{
	if (ff % 4)
		return cudaErrorInvalidValue;
	const size_t total = (size_t)n * ff;
	swiglu_kernel<<<grid_for(total / 4), THREADS, 0, stream>>>(out, gu, ff, total);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_fill_random_bf16(uint16_t *dst, size_t n, uint64_t seed, float std, cudaStream_t stream)
{
	fill_random_kernel<<<grid_for(n), THREADS, 0, stream>>>(dst, n, seed, std);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_fill_f32(float *dst, size_t n, float v, cudaStream_t stream)
{
	fill_kernel<<<grid_for(n), THREADS, 0, stream>>>(dst, n, v);
	return cudaGetLastError();
}

/* The embedder's BERT encoder on the device, between cuBLAS SGEMMs
 * (libinferscale/cuda/device_embed.c): f32 throughout, LayerNorm and
 * normalisation statistics in double as on the CPU (embed/bert.c), one
 * plain kernel per step. */
#include <math.h>
#include <string.h>

#include "embed_kernels.h"
#include "model_common.cuh"

using namespace infs;

namespace {

const unsigned THREADS = 256;

/* Attention: one warp per query row, ROWS rows per block; keys and values
 * go through shared memory KEYS at a time, with an online softmax. */
const unsigned ROWS = THREADS / 32;
const unsigned KEYS = 32;
const unsigned MAX_HD = INFS_K_BERT_MAX_HEAD_DIM;
const unsigned PUT_WORDS = 960; /* kernel arguments stay under 4 KiB */

struct words {
	uint32_t v[PUT_WORDS];
};

__global__ void put_kernel(uint32_t *dst, const words w, uint32_t n)
{
	for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
		dst[i] = w.v[i];
}

/* row[0..d) = (row - mean) / sqrt(var + eps) * g + b. Each thread touches
 * the same elements in every pass, so it reads back only what it wrote. */
__device__ void layer_norm_row(float *row, const float *g, const float *b, uint32_t d, float eps, double *red)
{
	double s = 0;
	for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
		s += row[e];
	const double mean = block_sum(s, red) / d;
	double v = 0;
	for (uint32_t e = threadIdx.x; e < d; e += blockDim.x) {
		const double c = row[e] - mean;
		v += c * c;
	}
	const float inv = (float)(1.0 / sqrt(block_sum(v, red) / d + (double)eps));
	for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
		row[e] = (float)(row[e] - mean) * inv * g[e] + b[e];
}

/* The sequence holding token t: the last s with offsets[s] <= t. */
__device__ uint32_t seq_of_token(const uint32_t *offsets, uint32_t n_seq, uint32_t t)
{
	uint32_t lo = 0, hi = n_seq;
	while (hi - lo > 1) {
		const uint32_t mid = (lo + hi) / 2;
		if (offsets[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

__global__ void embed_kernel(float *h, const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
                             const float *word, const float *pos, const float *type, const float *ln_w,
                             const float *ln_b, uint32_t d, uint32_t n_vocab, float eps)
{
	__shared__ double red[32];
	const uint32_t t = blockIdx.x;
	const uint32_t p = t - offsets[seq_of_token(offsets, n_seq, t)];
	const int32_t id = ids[t];
	float *row = h + (size_t)t * d;
	if (id < 0 || (uint32_t)id >= n_vocab) {
		for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
			row[e] = NAN;
		return; /* uniform over the block: no barrier is skipped */
	}
	const float *we = word + (size_t)id * d, *pe = pos + (size_t)p * d;
	for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
		row[e] = we[e] + pe[e] + type[e];
	layer_norm_row(row, ln_w, ln_b, d, eps, red);
}

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Block (s, h, tile): query rows tile * ROWS .. of sequence s, head h; warp
 * w takes row tile * ROWS + w (a row past the sequence computes on zeros
 * and writes nothing). Lane j scores key j of each tile; then each lane
 * accumulates head dims j, j + 32, ... */
__global__ void __launch_bounds__(THREADS) attention_kernel(float *ctx, const float *qkv, const float *bqkv,
                                                            const uint32_t *offsets, uint32_t dim, uint32_t hd,
                                                            float scale)
{
	__shared__ float qs[ROWS][MAX_HD];
	__shared__ float ks[KEYS][MAX_HD + 1]; /* + 1: lanes reading key rows hit distinct banks */
	__shared__ float vs[KEYS][MAX_HD];
	const uint32_t s = blockIdx.x, col = blockIdx.y * hd, q0 = blockIdx.z * ROWS;
	const uint32_t first = offsets[s], len = offsets[s + 1] - first;
	if (q0 >= len)
		return; /* the whole block: its sequence is shorter than this tile */
	const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const size_t stride = 3 * (size_t)dim;
	for (uint32_t i = threadIdx.x; i < ROWS * hd; i += blockDim.x) {
		const uint32_t r = i / hd, e = i % hd;
		qs[r][e] = q0 + r < len ? qkv[(first + q0 + r) * stride + col + e] + bqkv[col + e] : 0.0f;
	}
	float m = -INFINITY, l = 0, acc[MAX_HD / 32];
	for (uint32_t j = 0; j < MAX_HD / 32; j++)
		acc[j] = 0;
	for (uint32_t k0 = 0; k0 < len; k0 += KEYS) {
		const uint32_t nk = len - k0 < KEYS ? len - k0 : KEYS;
		__syncthreads(); /* q is loaded; the previous tile is no longer read */
		for (uint32_t i = threadIdx.x; i < nk * hd; i += blockDim.x) {
			const uint32_t kk = i / hd, e = i % hd;
			const float *row = qkv + (first + k0 + kk) * stride;
			ks[kk][e] = row[dim + col + e] + bqkv[dim + col + e];
			vs[kk][e] = row[2 * dim + col + e] + bqkv[2 * dim + col + e];
		}
		__syncthreads();
		float sc = -INFINITY;
		if (lane < nk) {
			float dot = 0;
			for (uint32_t e = 0; e < hd; e++)
				dot += qs[warp][e] * ks[lane][e];
			sc = dot * scale;
		}
		const float mn = fmaxf(m, warp_max(sc)); /* finite: nk >= 1 */
		const float corr = expf(m - mn);         /* 0 on the first tile */
		const float p = lane < nk ? expf(sc - mn) : 0.0f;
		l = l * corr + warp_sum(p);
		for (uint32_t j = 0; j < MAX_HD / 32; j++)
			acc[j] *= corr;
		for (uint32_t kk = 0; kk < nk; kk++) {
			const float pk = __shfl_sync(0xffffffffu, p, kk);
			for (uint32_t j = 0; j < MAX_HD / 32; j++)
				if (lane + 32 * j < hd)
					acc[j] += pk * vs[kk][lane + 32 * j];
		}
		m = mn;
	}
	const uint32_t r = q0 + warp;
	if (r < len)
		for (uint32_t j = 0; j < MAX_HD / 32; j++)
			if (lane + 32 * j < hd)
				ctx[(size_t)(first + r) * dim + col + lane + 32 * j] = acc[j] / l;
}

__global__ void residual_norm_kernel(float *h, const float *x, const float *bias, const float *g, const float *b,
                                     uint32_t d, float eps)
{
	__shared__ double red[32];
	float *row = h + (size_t)blockIdx.x * d;
	const float *xr = x + (size_t)blockIdx.x * d;
	for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
		row[e] += xr[e] + bias[e];
	layer_norm_row(row, g, b, d, eps, red);
}

__global__ void gelu_kernel(float *x, const float *bias, uint32_t f, size_t total)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		const float v = x[i] + bias[i % f];
		x[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
	}
}

/* Block s: sequence s's pooled row, summed over tokens in order as on the
 * CPU. Each thread writes its elements of out, then scales the same ones. */
__global__ void pool_kernel(float *out, const float *h, const uint32_t *offsets, uint32_t d, int mode, int normalize)
{
	__shared__ double red[32];
	const uint32_t first = offsets[blockIdx.x], len = offsets[blockIdx.x + 1] - first;
	const float *rows = h + (size_t)first * d;
	float *o = out + (size_t)blockIdx.x * d;
	double n2 = 0;
	for (uint32_t e = threadIdx.x; e < d; e += blockDim.x) {
		float v = rows[e];
		if (mode == INFS_K_POOL_MAX) {
			for (uint32_t t = 1; t < len; t++)
				v = fmaxf(v, rows[(size_t)t * d + e]);
		} else if (mode != INFS_K_POOL_CLS) {
			for (uint32_t t = 1; t < len; t++)
				v += rows[(size_t)t * d + e];
			v = mode == INFS_K_POOL_MEAN ? v / (float)len : v / sqrtf((float)len);
		}
		o[e] = v;
		n2 += (double)v * v;
	}
	if (!normalize)
		return; /* uniform over the grid */
	const float inv = (float)(1.0 / fmax(sqrt(block_sum(n2, red)), 1e-12));
	for (uint32_t e = threadIdx.x; e < d; e += blockDim.x)
		o[e] *= inv;
}

unsigned grid_for(size_t total)
{
	size_t g = (total + THREADS - 1) / THREADS;
	return (unsigned)(g > 65535 ? 65535 : g ? g : 1);
}

} /* namespace */

extern "C" cudaError_t infs_k_bert_put(void *dst, const void *src_host, size_t n, cudaStream_t stream)
{
	for (size_t at = 0; at < n; at += PUT_WORDS) {
		const size_t k = n - at < PUT_WORDS ? n - at : PUT_WORDS;
		words w = {};
		memcpy(w.v, (const uint32_t *)src_host + at, k * sizeof(uint32_t));
		put_kernel<<<1, THREADS, 0, stream>>>((uint32_t *)dst + at, w, (uint32_t)k);
		const cudaError_t err = cudaGetLastError();
		if (err != cudaSuccess)
			return err;
	}
	return cudaSuccess;
}

extern "C" cudaError_t infs_k_bert_embed(float *h, const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
                                         uint32_t n_tokens, const float *word, const float *pos, const float *type,
                                         const float *ln_w, const float *ln_b, uint32_t dim, uint32_t n_vocab,
                                         float eps, cudaStream_t stream)
{
	if (!n_tokens)
		return cudaSuccess;
	embed_kernel<<<n_tokens, THREADS, 0, stream>>>(h, ids, offsets, n_seq, word, pos, type, ln_w, ln_b, dim,
	                                               n_vocab, eps);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_bert_attention(float *ctx, const float *qkv, const float *bqkv, const uint32_t *offsets,
                                             uint32_t n_seq, uint32_t max_len, uint32_t dim, uint32_t n_heads,
                                             cudaStream_t stream)
{
	if (!n_seq || !max_len)
		return cudaSuccess;
	const uint32_t hd = dim / n_heads, tiles = (max_len + ROWS - 1) / ROWS;
	if (hd == 0 || hd > MAX_HD || dim % n_heads || n_heads > 65535 || tiles > 65535)
		return cudaErrorInvalidValue;
	const dim3 grid(n_seq, n_heads, tiles);
	attention_kernel<<<grid, THREADS, 0, stream>>>(ctx, qkv, bqkv, offsets, dim, hd, 1.0f / sqrtf((float)hd));
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_bert_residual_norm(float *h, const float *x, const float *bias, const float *g,
                                                 const float *b, uint32_t n, uint32_t dim, float eps,
                                                 cudaStream_t stream)
{
	if (!n)
		return cudaSuccess;
	residual_norm_kernel<<<n, THREADS, 0, stream>>>(h, x, bias, g, b, dim, eps);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_bert_gelu(float *x, const float *bias, uint32_t n, uint32_t f, cudaStream_t stream)
{
	const size_t total = (size_t)n * f;
	if (!total)
		return cudaSuccess;
	gelu_kernel<<<grid_for(total), THREADS, 0, stream>>>(x, bias, f, total);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_bert_pool(float *out, const float *h, const uint32_t *offsets, uint32_t n_seq,
                                        uint32_t dim, int mode, int normalize, cudaStream_t stream)
{
	if (!n_seq)
		return cudaSuccess;
	if (mode < INFS_K_POOL_MEAN || mode > INFS_K_POOL_MEAN_SQRT_LEN)
		return cudaErrorInvalidValue;
	pool_kernel<<<n_seq, THREADS, 0, stream>>>(out, h, offsets, dim, mode, normalize);
	return cudaGetLastError();
}

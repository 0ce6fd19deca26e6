/* The fused q|k|v projection's epilogue: bias, Qwen3's per-head norms,
 * RoPE of q and k at each token's position, and the new K and V into the
 * paged cache. One block per (token, head of q, k or v). */
#include <math.h>

#include "model_common.cuh"

using namespace infs;

namespace {

const unsigned THREADS = 128;

template <typename D> __global__ void qkv_kernel(const infs_k_qkv_params p)
{
	__shared__ float h[INFS_K_MODEL_MAX_HEAD_DIM];
	__shared__ double red[32];
	const uint32_t i = blockIdx.x, slot = blockIdx.y, hd = p.head_dim;
	const uint32_t nq = p.n_heads, nkv = p.n_kv_heads;
	const int kind = slot < nq ? 0 : slot < nq + nkv ? 1 : 2; /* q, k, v */
	const float *src = p.qkv + (size_t)i * (nq + 2 * nkv) * hd + (size_t)slot * hd;
	for (uint32_t e = threadIdx.x; e < hd; e += blockDim.x)
		h[e] = src[e] + (p.bias ? p.bias[(size_t)slot * hd + e] : 0.0f);
	const float *norm = kind == 0 ? p.q_norm : kind == 1 ? p.k_norm : NULL;
	if (norm) { /* the same in every block of a launch: the branch is uniform */
		double ss = 0;
		for (uint32_t e = threadIdx.x; e < hd; e += blockDim.x)
			ss += (double)h[e] * h[e];
		ss = block_sum(ss, red);
		const float r = 1.0f / sqrtf((float)(ss / hd) + p.eps);
		for (uint32_t e = threadIdx.x; e < hd; e += blockDim.x)
			h[e] = norm[e] * (h[e] * r);
	}
	__syncthreads();
	const seq_span sp = seq_of(p.seqs, i);
	const bool lost = sp.index >= p.seqs.n_seqs; /* outside every sequence */
	const int64_t pos = lost ? -1 : token_pos(p.seqs, sp, i);
	if (kind < 2) {
		/* As infs__rope_cos_sin and infs__rope_apply: the angle in double;
		 * each pair belongs to one thread. */
		const uint32_t np = p.rotary_dim / 2;
		for (uint32_t t = threadIdx.x; t < np; t += blockDim.x) {
			const uint32_t a = p.style == 0 ? t : 2 * t, b = p.style == 0 ? t + np : 2 * t + 1;
			const double ang = (double)pos * (double)p.inv_freq[t];
			const float c = (float)cos(ang) * p.attn_scale, s = (float)sin(ang) * p.attn_scale;
			const float x0 = h[a], x1 = h[b];
			h[a] = x0 * c - x1 * s;
			h[b] = x1 * c + x0 * s;
		}
		__syncthreads();
	}
	const uint32_t head = kind == 0 ? slot : kind == 1 ? slot - nq : slot - nq - nkv;
	if (kind == 0) {
		float *dst = p.q + ((size_t)i * nq + head) * hd;
		for (uint32_t e = threadIdx.x; e < hd; e += blockDim.x)
			dst[e] = lost ? NAN : h[e];
		return;
	}
	uint16_t *dst = (kind == 1 ? p.k : p.v) + ((size_t)i * nkv + head) * hd;
	for (uint32_t e = threadIdx.x; e < hd; e += blockDim.x)
		dst[e] = from_float(bf16{}, lost ? NAN : h[e]);
	const int64_t off = p.write_cache && !lost ? cache_offset(p.cache, sp.index, pos, head) : -1;
	if (off < 0)
		return; /* the attention kernel turns this token's output into NaN */
	typename D::bits *c = (typename D::bits *)(kind == 1 ? p.cache.k : p.cache.v) + off;
	for (uint32_t e = threadIdx.x; e < hd; e += blockDim.x)
		c[e * p.cache.stride_dim] = from_float(D{}, h[e]);
}

} /* namespace */

extern "C" cudaError_t infs_k_qkv(const infs_k_qkv_params *p, cudaStream_t stream)
{
	if (p->head_dim > INFS_K_MODEL_MAX_HEAD_DIM || p->rotary_dim > p->head_dim)
		return cudaErrorInvalidValue;
	const dim3 grid(p->seqs.n_tokens, p->n_heads + 2 * p->n_kv_heads);
	return dispatch_dtype(p->cache.dtype, [&](auto d) {
		qkv_kernel<decltype(d)><<<grid, THREADS, 0, stream>>>(*p);
		return cudaGetLastError();
	});
}

/* The fused q|k|v projection's epilogue: bias, Qwen3's per-head norms,
 * RoPE of q and k at each token's position, and the new K and V into the
 * paged cache. A block per token (or, for few tokens, per token and group
 * of heads): its cos/sin computed once, then a warp per head. */
#include <math.h>

#include "model_common.cuh"

using namespace infs;

namespace {

const unsigned WARPS = 8;
const unsigned MAX_HD = INFS_K_MODEL_MAX_HEAD_DIM;

template <typename D> __global__ void __launch_bounds__(WARPS * 32) qkv_kernel(const infs_k_qkv_params p)
{
	__shared__ float cs[MAX_HD / 2], sn[MAX_HD / 2], heads[WARPS][MAX_HD];
	const uint32_t i = blockIdx.x, hd = p.head_dim, nq = p.n_heads, nkv = p.n_kv_heads;
	const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, np = p.rotary_dim / 2;
	const seq_span sp = seq_of(p.seqs, i);
	const bool lost = sp.index >= p.seqs.n_seqs; /* outside every sequence */
	const int64_t pos = lost ? -1 : token_pos(p.seqs, sp, i);
	/* As infs__rope_cos_sin: the angle in double. */
	for (uint32_t t = threadIdx.x; t < np; t += blockDim.x) {
		const double ang = (double)pos * (double)p.inv_freq[t];
		cs[t] = (float)cos(ang) * p.attn_scale;
		sn[t] = (float)sin(ang) * p.attn_scale;
	}
	__syncthreads();
	float *h = heads[warp];
	for (uint32_t slot = blockIdx.y * WARPS + warp; slot < nq + 2 * nkv; slot += gridDim.y * WARPS) {
		const int kind = slot < nq ? 0 : slot < nq + nkv ? 1 : 2; /* q, k, v */
		const float *src = p.qkv + (size_t)i * (nq + 2 * nkv) * hd + (size_t)slot * hd;
		for (uint32_t e = lane; e < hd; e += 32)
			h[e] = src[e] + (p.bias ? p.bias[(size_t)slot * hd + e] : 0.0f);
		const float *norm = kind == 0 ? p.q_norm : kind == 1 ? p.k_norm : NULL;
		if (norm) { /* each lane reads back only what it wrote */
			double ss = 0;
			for (uint32_t e = lane; e < hd; e += 32)
				ss += (double)h[e] * h[e];
			ss = warp_sum(ss);
			const float r = 1.0f / sqrtf((float)(ss / hd) + p.eps);
			for (uint32_t e = lane; e < hd; e += 32)
				h[e] = norm[e] * (h[e] * r);
		}
		void *pre = kind == 0 || lost ? NULL : kind == 1 ? p.k_pre : p.v_pre;
		if (pre) {
			/* Each sequence's rows [layer][its token][head][dim] from row
			 * n_layers * its start: a fact's K and V in the store's layout. */
			const size_t len = sp.end - sp.start, row = (size_t)nkv * hd;
			const size_t at = ((size_t)sp.start * p.pre_layers + (size_t)p.pre_layer * len + (i - sp.start)) * row +
			                  (size_t)(slot - nq - (kind == 2 ? nkv : 0)) * hd;
			for (uint32_t e = lane; e < hd; e += 32) {
				const float x = h[e];
				if (p.pre_dtype == INFS_K_F32)
					((float *)pre)[at + e] = x;
				else if (p.pre_dtype == INFS_K_F16)
					((uint16_t *)pre)[at + e] = from_float(f16{}, x);
				else
					((uint16_t *)pre)[at + e] = from_float(bf16{}, x);
			}
		}
		__syncwarp();
		if (kind < 2) { /* as infs__rope_apply: each pair belongs to one lane */
			for (uint32_t t = lane; t < np; t += 32) {
				const uint32_t a = p.style == 0 ? t : 2 * t, b = p.style == 0 ? t + np : 2 * t + 1;
				const float x0 = h[a], x1 = h[b];
				h[a] = x0 * cs[t] - x1 * sn[t];
				h[b] = x1 * cs[t] + x0 * sn[t];
			}
			__syncwarp();
		}
		const uint32_t head = kind == 0 ? slot : kind == 1 ? slot - nq : slot - nq - nkv;
		if (kind == 0) {
			float *dst = p.q + ((size_t)i * nq + head) * hd;
			for (uint32_t e = lane; e < hd; e += 32)
				dst[e] = lost ? NAN : h[e];
		} else {
			uint16_t *dst = (kind == 1 ? p.k : p.v) + ((size_t)i * nkv + head) * hd;
			for (uint32_t e = lane; e < hd; e += 32)
				dst[e] = from_float(bf16{}, lost ? NAN : h[e]);
			if (kind == 1 && p.dev) { /* each lane reads its elements before it writes them */
				const int64_t at = lost ? -1 : cache_offset(p.cache, sp.index, pos, head);
				const typename D::bits *old = (const typename D::bits *)p.cache.k + (at < 0 ? 0 : at);
				double ss = 0;
				for (uint32_t e = lane; at >= 0 && e < hd; e += 32) {
					const double t = (double)h[e] - to_float(D{}, old[e * p.cache.stride_dim]);
					ss += t * t;
				}
				ss = warp_sum(ss);
				if (lane == 0)
					p.dev[(size_t)i * nkv + head] = at < 0 ? NAN : (float)ss;
			}
			/* A bad block: the attention kernel turns this token's output into NaN. */
			const int64_t off = p.write_cache && !lost ? cache_offset(p.cache, sp.index, pos, head) : -1;
			typename D::bits *c = (typename D::bits *)(kind == 1 ? p.cache.k : p.cache.v) + (off < 0 ? 0 : off);
			for (uint32_t e = lane; off >= 0 && e < hd; e += 32)
				c[e * p.cache.stride_dim] = from_float(D{}, h[e]);
		}
		__syncwarp(); /* h is the next head's */
	}
}

/* A thread a (token, pair). */
__global__ void rope_table_kernel(float *cs, const infs_k_seqs seqs, const float *inv_freq, uint32_t np,
                                  float attn_scale)
{
	const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x, i = k / np, t = k % np;
	if (i >= seqs.n_tokens)
		return;
	const seq_span sp = seq_of(seqs, i);
	const int64_t pos = sp.index >= seqs.n_seqs ? -1 : token_pos(seqs, sp, i);
	const double ang = (double)pos * (double)inv_freq[t];
	cs[2 * (size_t)k] = (float)cos(ang) * attn_scale;
	cs[2 * (size_t)k + 1] = (float)sin(ang) * attn_scale;
}

} /* namespace */

extern "C" cudaError_t infs_k_rope_table(float *cs, const infs_k_seqs *seqs, const float *inv_freq, uint32_t n_pairs,
                                         float attn_scale, cudaStream_t stream)
{
	const uint64_t n = (uint64_t)seqs->n_tokens * n_pairs;
	if (n == 0)
		return cudaSuccess;
	if (n > UINT32_MAX)
		return cudaErrorInvalidValue;
	rope_table_kernel<<<(unsigned)((n + 127) / 128), 128, 0, stream>>>(cs, *seqs, inv_freq, n_pairs, attn_scale);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_qkv(const infs_k_qkv_params *p, cudaStream_t stream)
{
	if (p->head_dim > INFS_K_MODEL_MAX_HEAD_DIM || p->rotary_dim > p->head_dim ||
	    ((p->k_pre || p->v_pre) && (p->pre_layer >= p->pre_layers || (p->pre_dtype != INFS_K_F32 &&
	                                                                   p->pre_dtype != INFS_K_F16 &&
	                                                                   p->pre_dtype != INFS_K_BF16))))
		return cudaErrorInvalidValue;
	/* Few tokens: spread each token's heads over several blocks. */
	const unsigned slots = p->n_heads + 2 * p->n_kv_heads;
	const dim3 grid(p->seqs.n_tokens, p->seqs.n_tokens < 64 ? div_up(slots, WARPS) : 1);
	return dispatch_dtype(p->cache.dtype, [&](auto d) {
		qkv_kernel<decltype(d)><<<grid, WARPS * 32, 0, stream>>>(*p);
		return cudaGetLastError();
	});
}

/* Causal grouped-query attention over a paged cache and the new tokens:
 * one block per (token, query head), each warp a share of the keys with
 * an online softmax in f32, the warps' partial results merged at the end.
 * Straightforward and exact; the fast kernels come with the speed work. */
#include <math.h>

#include "model_common.cuh"

using namespace infs;

namespace {

const unsigned WARPS = 4;
const unsigned PER_LANE = INFS_K_MODEL_MAX_HEAD_DIM / 32;

template <typename D> __global__ void attn_kernel(const infs_k_attn_params p)
{
	__shared__ float s_m[WARPS], s_l[WARPS], s_acc[WARPS][INFS_K_MODEL_MAX_HEAD_DIM];
	using bits = typename D::bits;
	const uint32_t i = blockIdx.x, h = blockIdx.y, hd = p.head_dim;
	const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	const uint32_t g = h / (p.n_heads / p.n_kv_heads);
	const int64_t pos = token_pos(p.positions, p.n_past, i);
	/* The token's own K and V went nowhere when its block is not valid. */
	int bad = cache_offset(p.cache, pos, g) < 0;
	float q[PER_LANE], acc[PER_LANE];
	const float *qp = p.q + ((size_t)i * p.n_heads + h) * hd;
	for (uint32_t t = 0; t < PER_LANE; t++) {
		const uint32_t e = lane + 32 * t;
		q[t] = e < hd ? qp[e] : 0.0f;
		acc[t] = 0.0f;
	}
	float m = -INFINITY, l = 0.0f;
	const bits *ck = (const bits *)p.cache.k, *cv = (const bits *)p.cache.v;
	for (uint32_t j = warp; j < p.n_past + p.n_tokens; j += WARPS) {
		const bool cached = j < p.n_past;
		const int64_t pj = cached ? (int64_t)j : token_pos(p.positions, p.n_past, j - p.n_past);
		if (pj > pos || (p.sliding_window && pos - pj >= (int64_t)p.sliding_window))
			continue;
		float kv[PER_LANE], vv[PER_LANE];
		if (cached) {
			const int64_t off = cache_offset(p.cache, pj, g);
			if (off < 0) {
				bad = 1;
				continue;
			}
			for (uint32_t t = 0; t < PER_LANE; t++) {
				const uint32_t e = lane + 32 * t;
				kv[t] = e < hd ? to_float(D{}, ck[off + e * p.cache.stride_dim]) : 0.0f;
				vv[t] = e < hd ? to_float(D{}, cv[off + e * p.cache.stride_dim]) : 0.0f;
			}
		} else {
			const size_t row = ((size_t)(j - p.n_past) * p.n_kv_heads + g) * hd;
			for (uint32_t t = 0; t < PER_LANE; t++) {
				const uint32_t e = lane + 32 * t;
				kv[t] = e < hd ? p.k[row + e] : 0.0f;
				vv[t] = e < hd ? p.v[row + e] : 0.0f;
			}
		}
		float dot = 0.0f;
		for (uint32_t t = 0; t < PER_LANE; t++)
			dot += q[t] * kv[t];
		const float s = warp_sum(dot) * p.scale;
		const float m_new = fmaxf(m, s), corr = expf(m - m_new), w = expf(s - m_new);
		l = l * corr + w;
		for (uint32_t t = 0; t < PER_LANE; t++)
			acc[t] = acc[t] * corr + w * vv[t];
		m = m_new;
	}
	if (lane == 0) {
		s_m[warp] = m;
		s_l[warp] = l;
	}
	for (uint32_t t = 0; t < PER_LANE; t++)
		if (lane + 32 * t < hd)
			s_acc[warp][lane + 32 * t] = acc[t];
	bad = __syncthreads_or(bad);
	float mx = -INFINITY;
	for (uint32_t w = 0; w < WARPS; w++)
		mx = fmaxf(mx, s_m[w]);
	float sum = 0.0f, scale[WARPS];
	for (uint32_t w = 0; w < WARPS; w++) {
		scale[w] = s_m[w] == -INFINITY ? 0.0f : expf(s_m[w] - mx);
		sum += s_l[w] * scale[w];
	}
	uint16_t *out = p.out + ((size_t)i * p.n_heads + h) * hd;
	for (uint32_t e = threadIdx.x; e < hd; e += blockDim.x) {
		float o = 0.0f;
		for (uint32_t w = 0; w < WARPS; w++)
			o += s_acc[w][e] * scale[w];
		out[e] = from_float(bf16{}, bad ? NAN : o / sum);
	}
}

} /* namespace */

extern "C" cudaError_t infs_k_attention(const infs_k_attn_params *p, cudaStream_t stream)
{
	if (p->head_dim > INFS_K_MODEL_MAX_HEAD_DIM || p->n_kv_heads == 0 || p->n_heads % p->n_kv_heads)
		return cudaErrorInvalidValue;
	const dim3 grid(p->n_tokens, p->n_heads);
	return dispatch_dtype(p->cache.dtype, [&](auto d) {
		attn_kernel<decltype(d)><<<grid, WARPS * 32, 0, stream>>>(*p);
		return cudaGetLastError();
	});
}

/* Chunked RoPE injection: one kernel reads the pre-RoPE K and the V of every
 * token of every fact of a call, rotates the keys to the positions they land
 * at, and writes K and V of all layers into the paged cache.
 *
 * Grid: x = the call's tokens, y = groups of layers, so that a few tokens
 * still fill the GPU and many tokens need no loop over launches. A block
 * first computes cos and sin of its token's position once, in double
 * precision (the angle of a large position loses nothing), rounded to float
 * and scaled exactly as infs__rope_cos_sin does on the CPU; the rotation
 * uses unfused multiplies and adds as the CPU does, so keys match the CPU
 * path bit for bit but for a rare last-bit difference of cos or sin. Then its
 * threads sweep (layer, K|V, head, vector) with W elements per access: 16
 * bytes when the layout allows it (VEC), single elements otherwise. */
#ifndef INFS_KERNELS_INJECT_CUH
#define INFS_KERNELS_INJECT_CUH

#include "common.cuh"

namespace infs {

#define INFS_K_INJECT_THREADS 256
#define INFS_K_MAX_PAIRS 512
/* Independent accesses each thread has in flight before it first waits. */
#define INFS_K_INJECT_UNROLL 4

template <typename S, typename D> struct inject_width {
	static constexpr int bytes = sizeof(typename S::bits) > sizeof(typename D::bits) ? sizeof(typename S::bits)
	                                                                                : sizeof(typename D::bits);
	static constexpr int vec = 16 / bytes;
};

template <typename S, typename D, int W>
__global__ void __launch_bounds__(INFS_K_INJECT_THREADS)
inject_kernel(const infs_k_inject_params p, uint32_t layers_per_block)
{
	using SB = typename S::bits;
	using DB = typename D::bits;
	using SV = vec<S, W>;
	using DV = vec<D, W>;
	__shared__ float cs[INFS_K_MAX_PAIRS], sn[INFS_K_MAX_PAIRS];
	__shared__ const SB *src_k, *src_v;
	__shared__ uint32_t fact_tokens, tok;
	__shared__ int64_t dst_off;

	const uint32_t t = blockIdx.x;
	const uint32_t pos = p.start_pos + t;
	const uint32_t n_pairs = p.rotary_dim / 2;
	if (threadIdx.x == 0) {
		uint32_t lo = 0, hi = p.n_facts - 1; /* last f with fact_first[f] <= t */
		while (lo < hi) {
			uint32_t mid = (lo + hi + 1) / 2;
			if (p.fact_first[mid] <= t)
				lo = mid;
			else
				hi = mid - 1;
		}
		src_k = (const SB *)p.src_k[lo];
		src_v = (const SB *)p.src_v[lo];
		fact_tokens = p.fact_first[lo + 1] - p.fact_first[lo];
		tok = t - p.fact_first[lo];
		int64_t block = p.blocks[pos / p.block_size - p.start_pos / p.block_size];
		dst_off = block * p.stride_block + (int64_t)(pos % p.block_size) * p.stride_slot;
	}
	for (uint32_t i = threadIdx.x; i < n_pairs; i += blockDim.x) {
		double s, c;
		sincos((double)pos * (double)p.inv_freq[i], &s, &c);
		cs[i] = __fmul_rn((float)c, p.attn_scale);
		sn[i] = __fmul_rn((float)s, p.attn_scale);
	}
	__syncthreads();

	const uint32_t H = p.n_heads, Dm = p.head_dim, nv = Dm / W;
	const uint32_t per_kv = H * nv, per_layer = 2 * per_kv;
	const uint32_t l0 = blockIdx.y * layers_per_block;
	const uint32_t l1 = min(l0 + layers_per_block, p.n_layers);
	const uint32_t total = (l1 - l0) * per_layer;
	const bool neox = p.style == 0;

	for (uint32_t base = threadIdx.x; base < total; base += INFS_K_INJECT_THREADS * INFS_K_INJECT_UNROLL) {
		SV x[INFS_K_INJECT_UNROLL], y[INFS_K_INJECT_UNROLL];
		DB *dst[INFS_K_INJECT_UNROLL];
		uint32_t dim[INFS_K_INJECT_UNROLL];
		bool rot[INFS_K_INJECT_UNROLL];
#pragma unroll
		for (int u = 0; u < INFS_K_INJECT_UNROLL; u++) {
			uint32_t i = base + u * INFS_K_INJECT_THREADS;
			dst[u] = nullptr;
			rot[u] = false;
			if (i >= total)
				continue;
			uint32_t l = l0 + i / per_layer, r = i % per_layer;
			uint32_t kv = r / per_kv, h = (r % per_kv) / nv, d = (r % nv) * W;
			const SB *src = (kv ? src_v : src_k) + ((size_t)(l * fact_tokens + tok) * H + h) * Dm;
			dst[u] = (DB *)(kv ? p.dst_v[l] : p.dst_k[l]) + dst_off + h * p.stride_head + d * p.stride_dim;
			dim[u] = d;
			x[u] = *(const SV *)(src + d);
			rot[u] = !kv && d < p.rotary_dim;
			/* The partner half of each pair: another vector for NeoX, the
			 * neighbour element when a scalar access holds one GPT-J dim. */
			if (rot[u] && (neox || W == 1)) {
				uint32_t pd = neox ? (d < n_pairs ? d + n_pairs : d - n_pairs) : (d ^ 1);
				y[u] = *(const SV *)(src + pd);
			}
		}
#pragma unroll
		for (int u = 0; u < INFS_K_INJECT_UNROLL; u++) {
			if (!dst[u])
				continue;
			DV o;
			uint32_t d = dim[u];
#pragma unroll
			for (int e = 0; e < W; e++) {
				float v = to_float(S{}, x[u].v[e]);
				if (rot[u]) {
					uint32_t dd = d + e;
					float w, c, s;
					bool first; /* the pair's first member: a = x0 c - x1 s, else b = x1 c + x0 s */
					if (neox) {
						first = dd < n_pairs;
						c = cs[first ? dd : dd - n_pairs];
						s = sn[first ? dd : dd - n_pairs];
						w = to_float(S{}, y[u].v[e]);
					} else {
						first = !(dd & 1);
						c = cs[dd / 2];
						s = sn[dd / 2];
						w = to_float(S{}, W == 1 ? y[u].v[0] : x[u].v[e ^ 1]);
					}
					v = first ? __fsub_rn(__fmul_rn(v, c), __fmul_rn(w, s))
					          : __fadd_rn(__fmul_rn(v, c), __fmul_rn(w, s));
				}
				o.v[e] = from_float(D{}, v);
			}
			if (W > 1) {
				*(DV *)dst[u] = o;
			} else {
				*dst[u] = o.v[0];
			}
		}
	}
}

} /* namespace infs */

#endif

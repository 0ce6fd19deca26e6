/* Chunked RoPE injection: one kernel reads the pre-RoPE K and the V of every
 * token of every fact of a call, rotates the keys to the positions they land
 * at, and writes K and V of all layers into the paged cache.
 *
 * Grid: x = the call's tokens, y = groups of layers, so that a few tokens
 * still fill the GPU and many tokens need no loop over launches. With
 * counts from the device (dev_counts), x is their bound and the blocks
 * past the count return at once. A block
 * first computes cos and sin of its token's position once, in double
 * precision (the angle of a large position loses nothing), rounded to float
 * and scaled exactly as infs__rope_cos_sin does on the CPU; the rotation
 * uses unfused multiplies and adds as the CPU does, so keys match the CPU
 * path bit for bit but for a rare last-bit difference of cos or sin. Then its
 * threads sweep (K|V, head, vector) x layers with W elements per access: 16
 * bytes when the layout allows it, single elements otherwise (W = 1). */
#ifndef INFS_KERNELS_INJECT_CUH
#define INFS_KERNELS_INJECT_CUH

#include <type_traits>

#include <cuda_fp8.h>

#include "common.cuh"
#include "inject_kernels.h"

namespace infs {

#define INFS_K_INJECT_THREADS 256
#define INFS_K_MAX_PAIRS 512
/* Tuning, measured on an H200 (docs/cuda.md): layers each thread loads
 * before it first waits, blocks resident per SM (which caps registers), and
 * blocks per SM the grid aims for. */
#ifndef INFS_K_INJECT_UNROLL
#define INFS_K_INJECT_UNROLL 4
#endif
#ifndef INFS_K_INJECT_MIN_BLOCKS
#define INFS_K_INJECT_MIN_BLOCKS 2
#endif
#ifndef INFS_K_INJECT_WAVES
#define INFS_K_INJECT_WAVES 8
#endif

template <typename S, typename D> struct inject_width {
	static constexpr int bytes = sizeof(typename S::bits) > sizeof(typename D::bits) ? sizeof(typename S::bits)
	                                                                                : sizeof(typename D::bits);
	static constexpr int vec = 16 / bytes;
};

/* Shared memory a staged block may use for its layers' K and V. */
#ifndef INFS_K_STAGE_BYTES
#define INFS_K_STAGE_BYTES (32u << 10)
#endif

/* cos and sin of pos * inv_freq rounded to float and scaled, as the CPU
 * computes them. Not inlined: the double-precision reduction of large
 * angles needs registers that the copy loop should not have to give up. */
__device__ __noinline__ void rope_cos_sin(float *c, float *s, uint32_t pos, float inv_freq, float attn_scale)
{
	double sd, cd;
	sincos((double)pos * (double)inv_freq, &sd, &cd);
	*c = __fmul_rn((float)cd, attn_scale);
	*s = __fmul_rn((float)sd, attn_scale);
}

/* An asynchronous copy of N bytes (4, 8 or 16) from global to shared
 * memory that holds no register while in flight (sm_80 and later). */
template <int N> __device__ __forceinline__ void cp_async(void *smem, const void *gmem)
{
	unsigned s = (unsigned)__cvta_generic_to_shared(smem);
	if (N == 16)
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
	else
		asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(N));
}

__device__ __forceinline__ void cp_async_wait_all()
{
	asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}

/* What the block's threads share about its token. */
template <typename SB> struct token_info {
	float cs[INFS_K_MAX_PAIRS], sn[INFS_K_MAX_PAIRS];
	const SB *src_k, *src_v;
	uint32_t fact_tokens, tok;
	int64_t dst_off;
};

/* Which of the call's n_facts facts and which slot token t is, and its cos
 * and sin: the lookups run in parallel, each in its own threads. Ends with
 * a barrier. */
template <typename SB>
__device__ void token_setup(token_info<SB> &ti, const infs_k_inject_params &p, uint32_t n_facts, uint32_t t)
{
	const uint32_t tid = threadIdx.x, pos = p.start_pos + t;
	for (uint32_t f = tid; f < n_facts; f += blockDim.x) {
		uint32_t a = p.fact_first[f], b = p.fact_first[f + 1];
		if (a <= t && t < b) {
			ti.src_k = (const SB *)p.src_k[f];
			ti.src_v = (const SB *)p.src_v[f];
			ti.fact_tokens = b - a;
			ti.tok = t - a;
		}
	}
	if (tid == blockDim.x - 1) {
		int64_t block = p.blocks[pos / p.block_size - p.start_pos / p.block_size];
		ti.dst_off = block * p.stride_block + (int64_t)(pos % p.block_size) * p.stride_slot;
	}
	for (uint32_t i = tid; i < p.rotary_dim / 2; i += blockDim.x)
		rope_cos_sin(&ti.cs[i], &ti.sn[i], pos, p.inv_freq[i], p.attn_scale);
	__syncthreads();
}

/* Two values narrowed as from_float_sat narrows each, in one conversion:
 * cvt's .satfinite (PTX 8.1, sm_80 and later) rounds, then clamps to the
 * largest finite value, which is what clamping first and rounding then
 * gives; NaN, which it would keep, is made 0 first. lo in the low half. */
__device__ __forceinline__ uint32_t from_float_sat2(bf16, float lo, float hi)
{
	uint32_t r;
	asm("cvt.rn.satfinite.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi == hi ? hi : 0.0f), "f"(lo == lo ? lo : 0.0f));
	return r;
}

__device__ __forceinline__ uint32_t from_float_sat2(f16, float lo, float hi)
{
	uint32_t r;
	asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi == hi ? hi : 0.0f), "f"(lo == lo ? lo : 0.0f));
	return r;
}

/* W values stored as D at dst, each clamped first (from_float_sat): 16-bit
 * types a pair a conversion. */
template <typename D, int W> __device__ __forceinline__ void store_sat(typename D::bits *dst, const float *o)
{
	if constexpr (W % 2 == 0 && !std::is_same<D, f32>::value) {
		vec<D, W> out;
		uint32_t *pairs = reinterpret_cast<uint32_t *>(out.v);
#pragma unroll
		for (int e = 0; e < W / 2; e++)
			pairs[e] = from_float_sat2(D{}, o[2 * e], o[2 * e + 1]);
		*(vec<D, W> *)dst = out;
	} else if (W > 1) {
		vec<D, W> out;
#pragma unroll
		for (int e = 0; e < W; e++)
			out.v[e] = from_float_sat(D{}, o[e]);
		*(vec<D, W> *)dst = out;
	} else {
		*dst = from_float_sat(D{}, o[0]);
	}
}

/* One vector of W elements at dim d of a K (rot) or V row: x itself, y its
 * partner (NeoX, or the neighbour for scalar GPT-J), converted, rotated
 * with the CPU's exact arithmetic, stored. */
template <typename S, typename D, int W>
__device__ __forceinline__ void finish(typename D::bits *dst, const vec<S, W> &x, const vec<S, W> &y, bool rot,
                                       bool partner, bool neox, uint32_t d, uint32_t n_pairs, const float *cs,
                                       const float *sn)
{
	if (std::is_same<S, D>::value && !rot) {
		if (W > 1)
			*(vec<D, W> *)dst = *(const vec<D, W> *)&x;
		else
			*dst = *(const typename D::bits *)&x.v[0];
		return;
	}
	const uint32_t pair0 = neox ? (d < n_pairs ? d : d - n_pairs) : d / 2;
	float o[W];
#pragma unroll
	for (int e = 0; e < W; e++) {
		float v = to_float(S{}, x.v[e]);
		if (rot) {
			/* the pair's first member: a = x0 c - x1 s, else b = x1 c + x0 s */
			bool first = neox ? d + e < n_pairs : !((d + e) & 1);
			uint32_t i = pair0 + (neox ? e : e / 2);
			float w = to_float(S{}, partner ? y.v[e] : x.v[e ^ 1]);
			float c = cs[i], sv = sn[i];
			v = first ? __fsub_rn(__fmul_rn(v, c), __fmul_rn(w, sv)) : __fadd_rn(__fmul_rn(v, c), __fmul_rn(w, sv));
		}
		o[e] = v;
	}
	store_sat<D, W>(dst, o);
}

/* Thread (rx, ly) of the block handles vectors rx, rx + nx, ... of a
 * layer's K and V rows in layers l0 + ly, l0 + ly + ny, ...: the index
 * arithmetic is done once per vector, not once per layer.
 *
 * STAGED: the block first copies its layers' K and V rows into shared
 * memory with cp.async, so that every byte it needs is in flight at once
 * without holding registers, then rotates and stores from there. Used with
 * 16-byte vectors when a block's layers fit INFS_K_STAGE_BYTES. Otherwise
 * each thread loads U layers into registers before it stores them. */
template <typename S, typename D, int W, bool STAGED>
__global__ void __launch_bounds__(INFS_K_INJECT_THREADS, STAGED ? 4 : INFS_K_INJECT_MIN_BLOCKS)
inject_kernel(const infs_k_inject_params p, uint32_t layers_per_block)
{
	using SB = typename S::bits;
	using DB = typename D::bits;
	using SV = vec<S, W>;
	constexpr int U = STAGED ? 1 : INFS_K_INJECT_UNROLL;
	extern __shared__ __align__(16) unsigned char stage_raw[];
	__shared__ token_info<SB> ti;
	/* counts from the device: every thread of a block reads the same
	 * words, so a block past the call's tokens leaves before any barrier */
	uint32_t n_facts = p.n_facts;
	if (p.dev_counts) {
		if (blockIdx.x >= p.dev_counts[1])
			return;
		n_facts = p.dev_counts[0];
	}
	token_setup(ti, p, n_facts, blockIdx.x);

	const uint32_t H = p.n_heads, Dm = p.head_dim, nv = Dm / W;
	const uint32_t per_kv = H * nv, per_layer = 2 * per_kv;
	const uint32_t nx = min(per_layer, (uint32_t)blockDim.x), ny = blockDim.x / nx;
	const uint32_t rx = threadIdx.x % nx, ly = threadIdx.x / nx;
	const uint32_t l0 = blockIdx.y * layers_per_block;
	const uint32_t l1 = min(l0 + layers_per_block, p.n_layers);
	const size_t src_layer = (size_t)ti.fact_tokens * H * Dm;
	const uint32_t n_pairs = p.rotary_dim / 2;
	const bool neox = p.style == 0;
	SB *stage = (SB *)stage_raw; /* [layer - l0][K|V][head][dim] */

	if (STAGED) {
		const size_t row = (size_t)H * Dm;
		for (uint32_t l = l0; l < l1; l++)
			for (uint32_t i = threadIdx.x; i < per_layer; i += blockDim.x) {
				uint32_t kv = i / per_kv, j = (i % per_kv) * W;
				const SB *src = (kv ? ti.src_v : ti.src_k) + (size_t)ti.tok * row + l * src_layer + j;
				cp_async<W * sizeof(SB)>(stage + ((size_t)(l - l0) * 2 + kv) * row + j, src);
			}
		cp_async_wait_all();
		__syncthreads();
	}
	if (ly >= ny)
		return;

	for (uint32_t r = rx; r < per_layer; r += nx) {
		const uint32_t kv = r / per_kv, h = (r % per_kv) / nv, d = (r % nv) * W;
		const size_t off = ((size_t)ti.tok * H + h) * Dm + d;
		const SB *src = (kv ? ti.src_v : ti.src_k) + off;
		void *const *dst_layers = kv ? p.dst_v : p.dst_k;
		const int64_t doff = ti.dst_off + h * p.stride_head + d * p.stride_dim;
		const bool rot = !kv && d < p.rotary_dim;
		/* The partner half of each pair: another vector for NeoX, the
		 * neighbour element when a scalar access holds one GPT-J dim. */
		const bool partner = rot && (neox || W == 1);
		const int64_t poff = neox ? (d < n_pairs ? (int64_t)n_pairs : -(int64_t)n_pairs) : (int64_t)(d ^ 1) - d;
		const SB *stage_row = stage + (size_t)kv * H * Dm + (size_t)h * Dm + d;
		for (uint32_t l = l0 + ly; l < l1; l += ny * U) {
			SV x[U], y[U];
			DB *dst[U];
#pragma unroll
			for (int u = 0; u < U; u++) {
				uint32_t lu = l + u * ny;
				dst[u] = nullptr;
				if (lu >= l1)
					continue;
				const SB *sp = STAGED ? stage_row + (size_t)(lu - l0) * 2 * H * Dm : src + lu * src_layer;
				x[u] = *(const SV *)sp;
				if (partner)
					y[u] = *(const SV *)(sp + poff);
				dst[u] = (DB *)dst_layers[lu] + doff;
			}
#pragma unroll
			for (int u = 0; u < U; u++)
				if (dst[u])
					finish<S, D, W>(dst[u], x[u], y[u], rot, partner, neox, d, n_pairs, ti.cs, ti.sn);
		}
	}
}

/* Two fp8 e4m3 codes (the low byte first) as floats: through f16, which
 * holds every e4m3 value exactly, by the conversion instruction of sm_89
 * and later (docs/store-format.md: the CPU's decoding gives the same
 * values; a NaN code, which no quantizer writes, stays NaN). */
__device__ __forceinline__ float2 e4m3x2_to_float2(uint32_t c2)
{
	const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)c2, __NV_E4M3);
	return __half22float2(*(const __half2 *)&h);
}

/* W codes of a row from x, dequantized with one f32 multiply each, as the
 * CPU does (libinferscale/inject/inject.c). */
template <int W> __device__ __forceinline__ void load_e4m3(float *v, const uint8_t *x, float scale)
{
	uint32_t w[W < 4 ? 1 : W / 4];
	if (W == 8)
		*(uint2 *)w = *(const uint2 *)x;
	else if (W == 4)
		w[0] = *(const uint32_t *)x;
	else
		w[0] = W == 2 ? *(const uint16_t *)x : x[0];
#pragma unroll
	for (int e = 0; e < W; e += 2) {
		const float2 f = e4m3x2_to_float2(w[e / 4] >> (8 * (e % 4)));
		v[e] = __fmul_rn(f.x, scale);
		if (e + 1 < W)
			v[e + 1] = __fmul_rn(f.y, scale);
	}
}

/* W dims at d of a (K|V, head) row: codes x (W of them, and for NeoX keys
 * the partner's at x + poff) dequantized with scale, keys rotated with the
 * CPU's arithmetic, stored as W elements of D at dst. */
template <typename D, int W>
__device__ __forceinline__ void fp8_finish(typename D::bits *dst, const uint8_t *x, int64_t poff, float scale,
                                           bool rot, bool neox, uint32_t d, uint32_t n_pairs, const float *cs,
                                           const float *sn)
{
	float v[W], o[W];
	load_e4m3<W>(v, x, scale);
	if (rot) {
		float w[W];
		if (neox || W == 1)
			load_e4m3<W>(w, x + poff, scale);
#pragma unroll
		for (int e = 0; e < W; e++) {
			const uint32_t de = d + e;
			const bool first = neox ? de < n_pairs : !(de & 1);
			const uint32_t pi = neox ? (de < n_pairs ? de : de - n_pairs) : de / 2;
			const float y = neox || W == 1 ? w[e] : v[e ^ 1];
			o[e] = first ? __fsub_rn(__fmul_rn(v[e], cs[pi]), __fmul_rn(y, sn[pi]))
			             : __fadd_rn(__fmul_rn(v[e], cs[pi]), __fmul_rn(y, sn[pi]));
		}
	} else {
#pragma unroll
		for (int e = 0; e < W; e++)
			o[e] = v[e];
	}
	store_sat<D, W>(dst, o);
}

/* Both halves of W NeoX pairs of a key row: codes x (dims d..) and x +
 * n_pairs (their partners), each converted once, rotated with the CPU's
 * arithmetic, stored at dst and dst + half. */
template <typename D, int W>
__device__ __forceinline__ void fp8_pair(typename D::bits *dst, int64_t half, const uint8_t *x, uint32_t n_pairs,
                                         float scale, uint32_t d, const float *cs, const float *sn)
{
	float v[W], w[W], a[W], b[W];
	load_e4m3<W>(v, x, scale);
	load_e4m3<W>(w, x + n_pairs, scale);
#pragma unroll
	for (int e = 0; e < W; e++) {
		const float c = cs[d + e], sv = sn[d + e];
		a[e] = __fsub_rn(__fmul_rn(v[e], c), __fmul_rn(w[e], sv));
		b[e] = __fadd_rn(__fmul_rn(w[e], c), __fmul_rn(v[e], sv));
	}
	store_sat<D, W>(dst, a);
	store_sat<D, W>(dst + half, b);
}

/* Injection from an fp8 store: the grid and token setup of inject_kernel;
 * each thread takes W consecutive dims of one (layer, K|V, head) row.
 *
 * STAGED (W = 8, rows of 16-byte multiples, every pointer 16-aligned): the
 * block first copies its layers' code rows (a token's H heads are one
 * contiguous row per layer) and their scales into shared memory with
 * cp.async, every byte in flight at once, then dequantizes from there;
 * otherwise each thread loads its codes and scale from global memory. */
template <typename D, int W, bool STAGED>
__global__ void __launch_bounds__(INFS_K_INJECT_THREADS)
inject_fp8_kernel(const infs_k_inject_params p, uint32_t layers_per_block)
{
	using DB = typename D::bits;
	extern __shared__ __align__(16) unsigned char stage_raw[];
	__shared__ token_info<uint8_t> ti;
	uint32_t n_facts = p.n_facts;
	if (p.dev_counts) {
		if (blockIdx.x >= p.dev_counts[1])
			return;
		n_facts = p.dev_counts[0];
	}
	token_setup(ti, p, n_facts, blockIdx.x);

	const uint32_t H = p.n_heads, Dm = p.head_dim, nv = Dm / W, row = H * Dm;
	const uint32_t per_kv = H * nv;
	const uint32_t l0 = blockIdx.y * layers_per_block;
	const uint32_t l1 = min(l0 + layers_per_block, p.n_layers);
	const size_t T = ti.fact_tokens, codes = (size_t)p.n_layers * T * row;
	const uint32_t n_pairs = p.rotary_dim / 2;
	const bool neox = p.style == 0;
	/* the stage: codes [layer - l0][K|V][head][dim], then scales
	 * [layer - l0][K|V][head] */
	uint8_t *stage = stage_raw;
	float *stage_scale = (float *)(stage_raw + (size_t)(l1 - l0) * 2 * row);

	if (STAGED) {
		const uint32_t chunks = row / 16, per = 2 * (chunks + H);
		for (uint32_t i = threadIdx.x; i < (l1 - l0) * per; i += blockDim.x) {
			const uint32_t ll = i / per, j = i % per, l = l0 + ll;
			const size_t at = ((size_t)l * T + ti.tok) * H; /* the row's first (token, head) */
			if (j < 2 * chunks) {
				const uint32_t kv = j / chunks, c = j % chunks;
				cp_async<16>(stage + ((size_t)ll * 2 + kv) * row + 16 * c,
				             (kv ? ti.src_v : ti.src_k) + at * Dm + 16 * c);
			} else {
				const uint32_t kv = (j - 2 * chunks) / H, h = (j - 2 * chunks) % H;
				cp_async<4>(stage_scale + ((size_t)ll * 2 + kv) * H + h,
				            (const float *)((kv ? ti.src_v : ti.src_k) + codes) + at + h);
			}
		}
		cp_async_wait_all();
		__syncthreads();
	}

	/* Tasks of a layer: for NeoX keys, pv pair tasks a head (a thread takes
	 * both halves of W pairs, each code converted once), then the key's
	 * dims past the rotary ones a vector each; values (and GPT-J keys,
	 * whose pairs are neighbours within a vector) a vector each. Thread
	 * (rx, ly): tasks rx, rx + nx, ... of layers l0 + ly, l0 + ly + ny, ...:
	 * the index arithmetic once per task. */
	const uint32_t pv = neox ? n_pairs / W : 0, kper = neox ? pv + (Dm - 2 * n_pairs) / W : nv;
	const uint32_t k_tasks = H * kper, tasks = k_tasks + per_kv;
	const uint32_t nx = min(tasks, (uint32_t)blockDim.x), ny = blockDim.x / nx;
	const uint32_t rx = threadIdx.x % nx, ly = threadIdx.x / nx;
	if (ly >= ny)
		return;
	for (uint32_t r = rx; r < tasks; r += nx) {
		const uint32_t kv = r >= k_tasks, rr = kv ? r - k_tasks : r;
		const uint32_t h = kv ? rr / nv : rr / kper, q = kv ? rr % nv : rr % kper;
		const bool pair = !kv && q < pv;
		const uint32_t d = !kv && neox && !pair ? 2 * n_pairs + (q - pv) * W : q * W;
		const uint8_t *src = kv ? ti.src_v : ti.src_k;
		const int64_t poff = neox ? (int64_t)n_pairs : (int64_t)(d ^ 1) - d;
		void *const *dst_layers = kv ? p.dst_v : p.dst_k;
		const int64_t doff = ti.dst_off + h * p.stride_head + d * p.stride_dim;
		const bool rot = !kv && d < p.rotary_dim; /* NeoX: pairs only */
		for (uint32_t l = l0 + ly; l < l1; l += ny) {
			const uint8_t *x;
			float scale;
			if (STAGED) {
				const size_t at = ((size_t)(l - l0) * 2 + kv) * H + h;
				x = stage + at * Dm + d;
				scale = stage_scale[at];
			} else {
				const size_t at = ((size_t)l * T + ti.tok) * H + h;
				x = src + at * Dm + d;
				scale = ((const float *)(src + codes))[at];
			}
			DB *dst = (DB *)dst_layers[l] + doff;
			if (pair)
				fp8_pair<D, W>(dst, (int64_t)n_pairs * p.stride_dim, x, n_pairs, scale, d, ti.cs, ti.sn);
			else
				fp8_finish<D, W>(dst, x, poff, scale, rot, neox, d, n_pairs, ti.cs, ti.sn);
		}
	}
}

} /* namespace infs */

#endif

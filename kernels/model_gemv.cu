/* Products of a step of at most INFS_K_GEMV_MAX_TOKENS tokens (a decoding
 * step) by a layer's matrices, bf16 or fp8 codes with a scale per row: the
 * step reads every weight once, so it runs at the speed of the weights'
 * bytes, and what the layer does around the product rides along instead of
 * taking kernels of its own: the RMSNorm before q|k|v and gate|up, RoPE
 * and the cache write after q|k|v, SwiGLU after gate|up, the residual
 * addition after the output and down projections.
 *
 * A warp takes one output row at a time (a gate row and its up row for
 * SwiGLU, the two dims of a RoPE pair for q|k|v) and streams it in 16-byte
 * chunks, UNROLL chunks a lane in flight,
 * with the tokens' inputs from shared memory (normalised there by the
 * block) or from L1; the lanes' f32 sums meet by shuffles. The grid is as
 * many warps as the device holds at once, each with the same number of
 * rows; a warp asks for its first row's leading chunks into L2 before the
 * block normalises its inputs, so that the weights flow meanwhile. */
#include <cuda_fp8.h>

#include "model_common.cuh"

using namespace infs;

namespace {

constexpr int THREADS = 256, WARPS = THREADS / 32, UNROLL = 4, BLOCKS_PER_SM = 4;

/* Weights as 16-byte chunks of PER values. */
struct w_bf16 {
	static constexpr int PER = 8;
};
struct w_fp8 {
	static constexpr int PER = 16;
};

/* bf16 bits to f32: the upper half of the word. */
__device__ __forceinline__ void widen2_bf16(uint32_t v, float &lo, float &hi)
{
	lo = __uint_as_float(v << 16);
	hi = __uint_as_float(v & 0xffff0000u);
}

__device__ __forceinline__ void widen(w_bf16, const uint4 &q, float (&f)[8])
{
	widen2_bf16(q.x, f[0], f[1]);
	widen2_bf16(q.y, f[2], f[3]);
	widen2_bf16(q.z, f[4], f[5]);
	widen2_bf16(q.w, f[6], f[7]);
}

/* Four e4m3 codes (the low byte first) to f32, exactly. */
__device__ __forceinline__ void widen4_e4m3(uint32_t v, float *f)
{
	const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(v & 0xffff), __NV_E4M3);
	const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(v >> 16), __NV_E4M3);
	const float2 a = __half22float2(*(const __half2 *)&lo), b = __half22float2(*(const __half2 *)&hi);
	f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
}

__device__ __forceinline__ void widen(w_fp8, const uint4 &q, float (&f)[16])
{
	widen4_e4m3(q.x, f);
	widen4_e4m3(q.y, f + 4);
	widen4_e4m3(q.z, f + 8);
	widen4_e4m3(q.w, f + 12);
}

/* PER bf16 inputs from x (shared or global memory, 16-byte aligned). */
template <int PER> __device__ __forceinline__ void inputs(const uint16_t *x, float (&f)[PER])
{
#pragma unroll
	for (int i = 0; i < PER / 8; i++) {
		const uint4 v = *reinterpret_cast<const uint4 *>(x + 8 * i);
		widen2_bf16(v.x, f[8 * i], f[8 * i + 1]);
		widen2_bf16(v.y, f[8 * i + 2], f[8 * i + 3]);
		widen2_bf16(v.z, f[8 * i + 4], f[8 * i + 5]);
		widen2_bf16(v.w, f[8 * i + 6], f[8 * i + 7]);
	}
}

__device__ __forceinline__ void prefetch_l2(const void *p)
{
	asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

/* The block's copy of the NT tokens' inputs normalised as infs_k_rmsnorm
 * does (the sum of squares in double, bf16 values), into sx. A thread
 * loads its first HELD vectors of a row at once and keeps them for the
 * scaling: one wait for memory, not one a vector, and none for the row
 * again. */
template <int NT> __device__ void stage_normed(uint16_t *sx, const infs_k_gemv_params &p)
{
	constexpr int HELD = 4; /* rows of up to 4,096 from registers */
	__shared__ double red[32];
	const uint32_t d = p.in;
	const auto sq = [](const float4 &v) {
		return (double)v.x * v.x + (double)v.y * v.y + (double)v.z * v.z + (double)v.w * v.w;
	};
	const auto put = [&](uint16_t *o, const float4 &v, const float4 &g, float inv) {
		*reinterpret_cast<uint2 *>(o) = make_uint2((uint32_t)from_float(bf16{}, g.x * (v.x * inv)) |
		                                                   (uint32_t)from_float(bf16{}, g.y * (v.y * inv)) << 16,
		                                           (uint32_t)from_float(bf16{}, g.z * (v.z * inv)) |
		                                                   (uint32_t)from_float(bf16{}, g.w * (v.w * inv)) << 16);
	};
	for (int t = 0; t < NT; t++) {
		const float *row = p.x + (size_t)t * d;
		float4 v[HELD];
#pragma unroll
		for (int i = 0; i < HELD; i++) {
			const uint32_t e = (threadIdx.x + i * THREADS) * 4;
			if (e < d)
				v[i] = *reinterpret_cast<const float4 *>(row + e);
		}
		double ss = 0;
#pragma unroll
		for (int i = 0; i < HELD; i++)
			if ((threadIdx.x + i * THREADS) * 4 < d)
				ss += sq(v[i]);
		for (uint32_t e = (threadIdx.x + HELD * THREADS) * 4; e < d; e += THREADS * 4)
			ss += sq(*reinterpret_cast<const float4 *>(row + e));
		ss = block_sum(ss, red);
		const float inv = 1.0f / sqrtf((float)(ss / d) + p.eps);
#pragma unroll
		for (int i = 0; i < HELD; i++) {
			const uint32_t e = (threadIdx.x + i * THREADS) * 4;
			if (e < d)
				put(sx + (size_t)t * d + e, v[i], *reinterpret_cast<const float4 *>(p.norm + e), inv);
		}
		for (uint32_t e = (threadIdx.x + HELD * THREADS) * 4; e < d; e += THREADS * 4)
			put(sx + (size_t)t * d + e, *reinterpret_cast<const float4 *>(row + e),
			    *reinterpret_cast<const float4 *>(p.norm + e), inv);
	}
	__syncthreads();
}

/* The q|k|v epilogue. Unit u is the pair j of head slot u / (head_dim / 2)
 * (q heads, then k, then v): dims j and j + n_pairs (NeoX) or 2j and 2j + 1
 * (GPT-J) of a rotated pair, and past the rotary dims two neighbours. */
__device__ __forceinline__ uint32_t qkv_dim(const infs_k_qkv_params &q, uint32_t j, int r)
{
	const uint32_t np = q.rotary_dim / 2;
	return q.style == 0 ? (j < np ? j + r * np : 2 * j + r) : 2 * j + r;
}

__device__ __forceinline__ void store_as(void *base, int64_t at, int dtype, float v)
{
	if (dtype == INFS_K_F32)
		static_cast<float *>(base)[at] = v;
	else if (dtype == INFS_K_F16)
		static_cast<uint16_t *>(base)[at] = from_float(f16{}, v);
	else
		static_cast<uint16_t *>(base)[at] = from_float(bf16{}, v);
}

/* What the lane of token t needs for its writes, looked up before the
 * products run: whether the token is in a sequence, and the offset of its
 * position's head 0 in the cache (-1: no write). */
struct qkv_token {
	bool lost;
	int64_t cache_at;
};

__device__ qkv_token qkv_token_of(const infs_k_qkv_params &q, uint32_t t)
{
	const seq_span sp = seq_of(q.seqs, t);
	const bool lost = sp.index >= q.seqs.n_seqs;
	return { lost, q.write_cache && !lost ? cache_offset(q.cache, sp.index, token_pos(q.seqs, sp, t), 0) : -1 };
}

/* Token t's values x0, x1 of unit u (dims d0, d1 of its head) rotated and
 * written as infs_k_qkv writes them. */
__device__ void qkv_write(const infs_k_gemv_params &p, const qkv_token &tk, uint32_t t, uint32_t u, float x0,
                          float x1)
{
	const infs_k_qkv_params &q = p.qkv;
	const uint32_t hd = q.head_dim, slot = u / (hd / 2), j = u % (hd / 2), nq = q.n_heads, nkv = q.n_kv_heads;
	const int kind = slot < nq ? 0 : slot < nq + nkv ? 1 : 2;
	const uint32_t head = kind == 0 ? slot : kind == 1 ? slot - nq : slot - nq - nkv;
	const uint32_t d0 = qkv_dim(q, j, 0), d1 = qkv_dim(q, j, 1), np = q.rotary_dim / 2;
	if (kind < 2 && j < np) { /* as infs__rope_apply */
		const float2 cs = *reinterpret_cast<const float2 *>(p.rope + ((size_t)t * np + j) * 2);
		const float a = x0 * cs.x - x1 * cs.y, b = x1 * cs.x + x0 * cs.y;
		x0 = a, x1 = b;
	}
	if (tk.lost)
		x0 = x1 = NAN;
	if (kind == 0) {
		float *dst = q.q + ((size_t)t * nq + head) * hd;
		dst[d0] = x0, dst[d1] = x1;
		return;
	}
	uint16_t *dst = (kind == 1 ? q.k : q.v) + ((size_t)t * nkv + head) * hd;
	dst[d0] = from_float(bf16{}, x0), dst[d1] = from_float(bf16{}, x1);
	if (tk.cache_at >= 0) {
		void *c = kind == 1 ? q.cache.k : q.cache.v;
		const int64_t at = tk.cache_at + (int64_t)head * q.cache.stride_head;
		store_as(c, at + (int64_t)d0 * q.cache.stride_dim, q.cache.dtype, x0);
		store_as(c, at + (int64_t)d1 * q.cache.stride_dim, q.cache.dtype, x1);
	}
}

/* R rows a unit of work: 2 for SwiGLU (gate row u, up row ff + u) and for
 * q|k|v (a pair, qkv_dim). */
template <typename W, int NT, int EPI> __global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
gemv_kernel(const infs_k_gemv_params p)
{
	constexpr bool QKV = EPI == INFS_K_GEMV_QKV;
	constexpr int R = EPI == INFS_K_GEMV_SWIGLU || QKV ? 2 : 1, PER = W::PER, U = UNROLL / R;
	extern __shared__ __align__(16) uint16_t sx[];
	const uint32_t lane = threadIdx.x % 32, total = gridDim.x * WARPS;
	const uint32_t gw = blockIdx.x * WARPS + threadIdx.x / 32;
	const uint32_t units = R == 2 ? p.out / 2 : p.out, chunks = p.in / PER, half = p.qkv.head_dim / 2;
	const uint4 *w = static_cast<const uint4 *>(p.w);
	const auto row_index = [&](uint32_t u, int r) {
		return QKV ? u / half * 2 * half + qkv_dim(p.qkv, u % half, r) : u + r * units;
	};
	const auto row_of = [&](uint32_t u, int r) { return w + (size_t)row_index(u, r) * chunks; };
	qkv_token tk = {};
	if (QKV && lane < NT)
		tk = qkv_token_of(p.qkv, lane);

	if (gw < units)
#pragma unroll
		for (int r = 0; r < R; r++)
#pragma unroll
			for (int i = 0; i < U; i++)
				if (lane + 32 * i < chunks)
					prefetch_l2(row_of(gw, r) + lane + 32 * i);
	const uint16_t *x = p.a;
	if (p.norm) {
		stage_normed<NT>(sx, p);
		x = sx;
	}
	for (uint32_t u = gw; u < units; u += total) {
		float acc[R][NT] = {};
		for (uint32_t c0 = lane; c0 < chunks; c0 += 32 * U) {
			uint4 q[R][U];
#pragma unroll
			for (int r = 0; r < R; r++)
#pragma unroll
				for (int i = 0; i < U; i++)
					q[r][i] = c0 + 32 * i < chunks ? __ldcs(row_of(u, r) + c0 + 32 * i) : make_uint4(0, 0, 0, 0);
#pragma unroll
			for (int i = 0; i < U; i++) {
				const uint32_t c = c0 + 32 * i;
				if (c >= chunks)
					break;
#pragma unroll
				for (int t = 0; t < NT; t++) {
					float xf[PER];
					inputs<PER>(x + (size_t)t * p.in + (size_t)c * PER, xf);
#pragma unroll
					for (int r = 0; r < R; r++) {
						float wf[PER];
						widen(W{}, q[r][i], wf);
#pragma unroll
						for (int e = 0; e < PER; e++)
							acc[r][t] = fmaf(wf[e], xf[e], acc[r][t]);
					}
				}
			}
		}
#pragma unroll
		for (int r = 0; r < R; r++)
#pragma unroll
			for (int t = 0; t < NT; t++)
				acc[r][t] = warp_sum(acc[r][t]);
		if (lane >= NT)
			continue;
		/* lane t writes token t's outputs: acc[.][lane] without dynamic
		 * indexing, which would put acc in local memory */
		float v[R];
#pragma unroll
		for (int r = 0; r < R; r++) {
			v[r] = acc[r][0];
#pragma unroll
			for (int t = 1; t < NT; t++)
				v[r] = lane == (uint32_t)t ? acc[r][t] : v[r];
			if (p.scale)
				v[r] *= p.scale[row_index(u, r)];
		}
		const size_t at = (size_t)lane * units + u;
		if (QKV)
			qkv_write(p, tk, lane, u, v[0], v[R - 1]);
		else if (EPI == INFS_K_GEMV_STORE)
			p.y[at] = v[0];
		else if (EPI == INFS_K_GEMV_ADD)
			p.y[at] += v[0];
		else
			p.act[at] = from_float(bf16{}, v[0] / (1.0f + expf(-v[0])) * v[R - 1]);
	}
}

template <typename W, int NT, int EPI> cudaError_t launch(const infs_k_gemv_params &p, cudaStream_t stream)
{
	const auto kernel = gemv_kernel<W, NT, EPI>;
	const size_t smem = p.norm ? (size_t)NT * p.in * 2 : 0;
	static size_t sized; /* the dynamic shared memory the kernel was allowed */
	cudaError_t err = cudaSuccess;
	if (smem > 48 * 1024 && smem > sized) {
		err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (err != cudaSuccess)
			return err;
		sized = smem;
	}
	const uint32_t units = EPI == INFS_K_GEMV_SWIGLU || EPI == INFS_K_GEMV_QKV ? p.out / 2 : p.out;
	const uint32_t most = p.n_sm * BLOCKS_PER_SM * WARPS, per = (units + most - 1) / most;
	const uint32_t warps = (units + per - 1) / per;
	kernel<<<(warps + WARPS - 1) / WARPS, THREADS, smem, stream>>>(p);
	return cudaGetLastError();
}

template <typename W, int NT> cudaError_t launch_epi(const infs_k_gemv_params &p, cudaStream_t stream)
{
	switch (p.epilogue) {
	case INFS_K_GEMV_STORE: return launch<W, NT, INFS_K_GEMV_STORE>(p, stream);
	case INFS_K_GEMV_ADD: return launch<W, NT, INFS_K_GEMV_ADD>(p, stream);
	case INFS_K_GEMV_SWIGLU: return launch<W, NT, INFS_K_GEMV_SWIGLU>(p, stream);
	case INFS_K_GEMV_QKV: return launch<W, NT, INFS_K_GEMV_QKV>(p, stream);
	default: return cudaErrorInvalidValue;
	}
}

template <typename W> cudaError_t launch_nt(const infs_k_gemv_params &p, cudaStream_t stream)
{
	switch (p.n) {
	case 1: return launch_epi<W, 1>(p, stream);
	case 2: return launch_epi<W, 2>(p, stream);
	case 3: return launch_epi<W, 3>(p, stream);
	case 4: return launch_epi<W, 4>(p, stream);
	default: return cudaErrorInvalidValue;
	}
}

} /* namespace */

/* The q|k|v epilogue's parameters: what it supports, outputs for every
 * kind of head, the step's tokens. */
static bool qkv_ok(const infs_k_gemv_params *p)
{
	const infs_k_qkv_params *q = &p->qkv;
	const uint64_t slots = (uint64_t)q->n_heads + 2ull * q->n_kv_heads;
	return INFS_K_GEMV_QKV_OK(q) && q->head_dim > 0 && q->head_dim <= INFS_K_MODEL_MAX_HEAD_DIM &&
	       q->n_kv_heads > 0 && q->seqs.n_seqs > 0 && slots * q->head_dim == p->out && q->seqs.n_tokens == p->n && q->q && q->k &&
	       q->v && (q->rotary_dim == 0 || p->rope) &&
	       (!q->write_cache ||
	        (q->cache.k && q->cache.v &&
	         (q->cache.dtype == INFS_K_F32 || q->cache.dtype == INFS_K_F16 || q->cache.dtype == INFS_K_BF16)));
}

extern "C" cudaError_t infs_k_gemv(const infs_k_gemv_params *p, cudaStream_t stream)
{
	if (!INFS_K_GEMV_OK(p->n, p->in, p->out) || !p->w || p->n_sm == 0 || (p->norm ? !p->x : !p->a) ||
	    (p->epilogue == INFS_K_GEMV_SWIGLU   ? !p->act || p->out % 2
	     : p->epilogue == INFS_K_GEMV_QKV ? !qkv_ok(p)
	                                          : !p->y))
		return cudaErrorInvalidValue;
	return p->scale ? launch_nt<w_fp8>(*p, stream) : launch_nt<w_bf16>(*p, stream);
}

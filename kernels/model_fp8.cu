/* fp8 weights (infs_model_options.device_weights): e4m3 codes with an f32
 * scale per output row. Rows are quantized on the device at load; a
 * product of few tokens streams the codes through tensor cores (each code
 * widened to bf16, which holds every e4m3 value exactly, the row's scale
 * applied to the f32 sums), so that a step reads half the bytes of bf16
 * weights; a product of many tokens widens the matrix to bf16 first and
 * goes to cuBLAS (device_model.c). */
#include <cuda_fp8.h>

#include "model_common.cuh"

using namespace infs;

namespace {

const unsigned QUANT_THREADS = 256;

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Row blockIdx.x: scale = its largest magnitude / 448 (1 for a row of
 * zeros), codes = e4m3(x / scale), rounded to nearest even and saturated
 * as the CPU's infs__f32_to_e4m3. */
__global__ void quant_kernel(uint8_t *codes, float *scales, const uint16_t *src, uint32_t cols)
{
	__shared__ float red[32];
	const uint16_t *row = src + (size_t)blockIdx.x * cols;
	float m = 0.0f;
	for (uint32_t e = threadIdx.x; e < cols; e += blockDim.x)
		m = fmaxf(m, fabsf(to_float(bf16{}, row[e])));
	m = warp_max(m);
	if (threadIdx.x % 32 == 0)
		red[threadIdx.x / 32] = m;
	__syncthreads();
	m = threadIdx.x % 32 < blockDim.x / 32 ? red[threadIdx.x % 32] : 0.0f;
	m = warp_max(m); /* in every warp */
	const float s = m > 0.0f ? m / 448.0f : 1.0f;
	if (threadIdx.x == 0)
		scales[blockIdx.x] = s;
	uint8_t *out = codes + (size_t)blockIdx.x * cols;
	for (uint32_t e = threadIdx.x; e < cols; e += blockDim.x)
		out[e] = (uint8_t)__nv_cvt_float_to_fp8(__fdiv_rn(to_float(bf16{}, row[e]), s), __NV_SATFINITE, __NV_E4M3);
}

/* dst = bf16(code * scale), one multiply as the CPU does. */
__global__ void widen_kernel(uint16_t *dst, const uint8_t *codes, const float *scales, uint32_t cols)
{
	const size_t r = blockIdx.y;
	const uint32_t e = (blockIdx.x * blockDim.x + threadIdx.x) * 2;
	if (e >= cols)
		return;
	const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(*(const __nv_fp8x2_storage_t *)(codes + r * cols + e), __NV_E4M3);
	const float2 f = __half22float2(*(const __half2 *)&h);
	const float s = scales[r];
	*(uint32_t *)(dst + r * cols + e) = (uint32_t)from_float(bf16{}, __fmul_rn(f.x, s)) |
	                                    (uint32_t)from_float(bf16{}, __fmul_rn(f.y, s)) << 16;
}

/* Four e4m3 codes (the low byte first) as two bf16 pairs, exactly. */
__device__ __forceinline__ uint2 e4m3x4_to_bf16x4(uint32_t w)
{
	const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffff), __NV_E4M3);
	const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
	const __nv_bfloat162 a = __float22bfloat162_rn(__half22float2(*(const __half2 *)&lo));
	const __nv_bfloat162 b = __float22bfloat162_rn(__half22float2(*(const __half2 *)&hi));
	return make_uint2(*(const uint32_t *)&a, *(const uint32_t *)&b);
}

__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
	             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
	             : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]),
	               "f"(c[3]));
}

/* y[n][out] (+)= x[n][in] (W[out][in] * scale[out])^T for n <= 8 NF tokens.
 * A block of 8 warps takes 64 rows (two groups of 32, each warp two tiles
 * of 16) over one slice of the inner dimension (blockIdx.y), which its four
 * K groups of warps share chunk by chunk; the K groups' sums meet in shared
 * memory, and the block adds them to y: atomically when the inner dimension
 * has several slices, else with plain loads and stores (the same sums
 * every call). The inner dimension goes in chunks of 64: a thread loads 16
 * codes of a row at 16 t (t its place in its quad), and the k index of the
 * tensor-core fragments is permuted to match (any permutation of k, applied
 * to both operands, leaves the sums as they are): step j of a chunk takes
 * codes 4 j .. 4 j + 3 of each thread's 16, and x at the same places. */
template <int NF>
__global__ void __launch_bounds__(256, 2) gemm_kernel(float *y, const uint16_t *x, const uint8_t *w, const float *scale,
                                                  uint32_t n, uint32_t in, uint32_t out, uint32_t chunks_per_slice,
                                                  int atomic, int accumulate)
{
	__shared__ float red[3 * 2 * 32 * 2 * NF * 4];
	const uint32_t lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, warp = threadIdx.x / 32;
	const uint32_t rg = warp % 2, kg = warp / 2;
	const uint32_t row0 = blockIdx.x * 64 + rg * 32;
	const uint32_t n_chunks = in / 64, c0 = blockIdx.y * chunks_per_slice;
	const uint32_t c1 = min(n_chunks, c0 + chunks_per_slice);
	const bool tile_ok[2] = { row0 < out, row0 + 16 < out };
	float acc[2][NF][4] = {};
	/* the rows this thread loads: g and g + 8 of each tile */
	const uint8_t *wr[2][2];
#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int h = 0; h < 2; h++)
			wr[mt][h] = w + (size_t)(tile_ok[mt] ? row0 + 16 * mt + g + 8 * h : g) * in + 16 * t;
	/* the tokens this thread reads: 8 f + g (zeros past n) */
	const uint16_t *xr[NF];
	bool x_ok[NF];
#pragma unroll
	for (int f = 0; f < NF; f++) {
		x_ok[f] = 8 * f + g < n;
		xr[f] = x + (size_t)(x_ok[f] ? 8 * f + g : 0) * in + 16 * t;
	}
	/* chunk c's codes of this thread's four rows; the next chunk's are in
	 * flight while this one's products run */
	uint4 a[2][2], next[2][2];
	const auto load = [&](uint4 (&q)[2][2], uint32_t c) {
#pragma unroll
		for (int mt = 0; mt < 2; mt++)
#pragma unroll
			for (int h = 0; h < 2; h++)
				q[mt][h] = c < c1 && tile_ok[mt] ? __ldcs((const uint4 *)(wr[mt][h] + (size_t)c * 64))
				                                 : make_uint4(0, 0, 0, 0);
	};
	if (tile_ok[0])
		load(a, c0 + kg);
	for (uint32_t c = c0 + kg; tile_ok[0] && c < c1; c += 4) {
		load(next, c + 4);
#pragma unroll
		for (int j = 0; j < 4; j++) {
			uint2 b[NF];
#pragma unroll
			for (int f = 0; f < NF; f++)
				b[f] = x_ok[f] ? __ldg((const uint2 *)(xr[f] + (size_t)c * 64 + 4 * j)) : make_uint2(0, 0);
#pragma unroll
			for (int mt = 0; mt < 2; mt++) {
				const uint4 &q0 = a[mt][0], &q1 = a[mt][1];
				const uint32_t w0 = j == 0 ? q0.x : j == 1 ? q0.y : j == 2 ? q0.z : q0.w;
				const uint32_t w1 = j == 0 ? q1.x : j == 1 ? q1.y : j == 2 ? q1.z : q1.w;
				const uint2 r0 = e4m3x4_to_bf16x4(w0), r1 = e4m3x4_to_bf16x4(w1);
				const uint32_t af[4] = { r0.x, r1.x, r0.y, r1.y };
#pragma unroll
				for (int f = 0; f < NF; f++)
					mma_bf16(acc[mt][f], af, b[f].x, b[f].y);
			}
		}
#pragma unroll
		for (int mt = 0; mt < 2; mt++)
			a[mt][0] = next[mt][0], a[mt][1] = next[mt][1];
	}
	/* K groups 1-3 hand their sums to group 0 */
	float *mine = red + ((size_t)((kg ? kg - 1 : 0) * 2 + rg) * 32 + lane) * (2 * NF * 4);
	float *sums = &acc[0][0][0];
	if (kg)
#pragma unroll
		for (int e = 0; e < 2 * NF * 4; e++)
			mine[e] = sums[e];
	__syncthreads();
	if (kg)
		return;
#pragma unroll
	for (int k = 0; k < 3; k++)
#pragma unroll
		for (int e = 0; e < 2 * NF * 4; e++)
			sums[e] += mine[k * 2 * 32 * 2 * NF * 4 + e];
	/* c0, c1: row g, tokens 8 f + 2 t, + 1; c2, c3: row g + 8 */
#pragma unroll
	for (int mt = 0; mt < 2; mt++) {
		if (!tile_ok[mt])
			continue;
		const uint32_t r = row0 + 16 * mt + g;
		const float s[2] = { scale[r], scale[r + 8] };
#pragma unroll
		for (int f = 0; f < NF; f++)
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const uint32_t tok = 8 * f + 2 * t + i % 2;
				float *at = y + (size_t)tok * out + r + 8 * (i / 2);
				const float v = acc[mt][f][i] * s[i / 2];
				if (tok >= n)
					continue;
				if (atomic)
					atomicAdd(at, v);
				else
					*at = accumulate ? *at + v : v;
			}
	}
}

/* Slices of the inner dimension: for a step of a few tokens, enough for
 * two blocks a multiprocessor; with more tokens at most two, as every
 * slice beyond the first adds n x out atomic additions to the output.
 * Each slice has at least eight chunks, two a K group. */
uint32_t gemm_slices(uint32_t n, uint32_t in, uint32_t out, uint32_t n_sm)
{
	const uint32_t blocks = (out + 63) / 64, n_chunks = in / 64, most = n_chunks / 8 ? n_chunks / 8 : 1;
	uint32_t s = (2 * n_sm + blocks - 1) / blocks;
	if (n > 8 && s > 2)
		s = 2;
	return s < most ? s : most;
}

template <int NF>
cudaError_t gemm_launch(float *y, const uint16_t *x, const uint8_t *w, const float *scale, uint32_t n, uint32_t in,
                        uint32_t out, int accumulate, uint32_t n_sm, cudaStream_t stream)
{
	const uint32_t n_chunks = in / 64, slices = gemm_slices(n, in, out, n_sm);
	const uint32_t per = (n_chunks + slices - 1) / slices;
	const uint32_t used = (n_chunks + per - 1) / per;
	if (used > 1 && !accumulate) {
		const cudaError_t err = cudaMemsetAsync(y, 0, (size_t)n * out * sizeof *y, stream);
		if (err != cudaSuccess)
			return err;
	}
	gemm_kernel<NF><<<dim3((out + 63) / 64, used), 256, 0, stream>>>(y, x, w, scale, n, in, out, per, used > 1,
	                                                                accumulate || used > 1);
	return cudaGetLastError();
}

} /* namespace */

extern "C" cudaError_t infs_k_fp8_quant_rows(uint8_t *codes, float *scales, const uint16_t *src, uint32_t rows,
                                             uint32_t cols, cudaStream_t stream)
{
	if (rows == 0)
		return cudaSuccess;
	quant_kernel<<<rows, QUANT_THREADS, 0, stream>>>(codes, scales, src, cols);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_fp8_widen_rows(uint16_t *dst, const uint8_t *codes, const float *scales, uint32_t rows,
                                             uint32_t cols, cudaStream_t stream)
{
	if (rows == 0)
		return cudaSuccess;
	widen_kernel<<<dim3((cols / 2 + 255) / 256, rows), 256, 0, stream>>>(dst, codes, scales, cols);
	return cudaGetLastError();
}

extern "C" cudaError_t infs_k_fp8_gemm(float *y, const uint16_t *x, const uint8_t *w, const float *scale, uint32_t n,
                                       uint32_t in, uint32_t out, int accumulate, uint32_t n_sm, cudaStream_t stream)
{
	switch ((n + 7) / 8) {
	case 1: return gemm_launch<1>(y, x, w, scale, n, in, out, accumulate, n_sm, stream);
	case 2: return gemm_launch<2>(y, x, w, scale, n, in, out, accumulate, n_sm, stream);
	case 3: return gemm_launch<3>(y, x, w, scale, n, in, out, accumulate, n_sm, stream);
	case 4: return gemm_launch<4>(y, x, w, scale, n, in, out, accumulate, n_sm, stream);
	case 5: return gemm_launch<5>(y, x, w, scale, n, in, out, accumulate, n_sm, stream);
	case 6: return gemm_launch<6>(y, x, w, scale, n, in, out, accumulate, n_sm, stream);
	case 7: return gemm_launch<7>(y, x, w, scale, n, in, out, accumulate, n_sm, stream);
	case 8: return gemm_launch<8>(y, x, w, scale, n, in, out, accumulate, n_sm, stream);
	default: return cudaErrorInvalidValue;
	}
}

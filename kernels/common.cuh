/* Helpers shared by the kernels: element types and their conversions. */
#ifndef INFS_KERNELS_COMMON_CUH
#define INFS_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels.h"

namespace infs {

/* Storage types by bit pattern: conversions go through float and round to
 * nearest even, exactly as libinferscale/util/dtype.h does on the CPU. */
struct f32 {
	using bits = float;
};
struct f16 {
	using bits = uint16_t;
};
struct bf16 {
	using bits = uint16_t;
};

__device__ __forceinline__ float to_float(f32, float x) { return x; }
__device__ __forceinline__ float to_float(f16, uint16_t x) { return __half2float(__ushort_as_half(x)); }
__device__ __forceinline__ float to_float(bf16, uint16_t x) { return __bfloat162float(__ushort_as_bfloat16(x)); }

__device__ __forceinline__ float from_float(f32, float x) { return x; }
__device__ __forceinline__ uint16_t from_float(f16, float x) { return __half_as_ushort(__float2half_rn(x)); }
__device__ __forceinline__ uint16_t from_float(bf16, float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }

/* A cache write: x clamped to the type's largest finite value (NaN: 0)
 * first, as infs__saturate does on the CPU (libinferscale/util/dtype.h), so
 * that a value that overflowed on the way (rotated, or narrowed) never
 * lands in a cache as an infinity or NaN that no store held. */
__device__ __forceinline__ float max_of(f32) { return 3.40282347e+38f; }
__device__ __forceinline__ float max_of(f16) { return 65504.0f; }
__device__ __forceinline__ float max_of(bf16) { return 3.38953139e+38f; }
template <typename T> __device__ __forceinline__ typename T::bits from_float_sat(T t, float x)
{
	const float m = max_of(t);
	return from_float(t, x >= -m && x <= m ? x : x > 0 ? m : x < 0 ? -m : 0.0f);
}

/* N elements of T loaded or stored with one access of N * sizeof(bits)
 * bytes (16, 8, 4 or 2), the address aligned to that size. */
template <typename T, int N> struct alignas(N * sizeof(typename T::bits)) vec {
	typename T::bits v[N];
};

/* Calls f with the tag types of a runtime (src, dst) dtype pair. */
template <typename F> inline cudaError_t dispatch_dtype(int dtype, F &&f)
{
	switch (dtype) {
	case INFS_K_F32: return f(f32{});
	case INFS_K_F16: return f(f16{});
	case INFS_K_BF16: return f(bf16{});
	default: return cudaErrorInvalidValue;
	}
}

/* The row of id in n ids sorted increasing (a namespace's device rows), or
 * n when it is not there. */
__device__ __forceinline__ uint32_t row_of(const uint64_t *ids, uint32_t n, uint64_t id)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		const uint32_t mid = lo + (hi - lo) / 2;
		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ids[lo] == id ? lo : n;
}

inline unsigned div_up(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

} /* namespace infs */

#endif

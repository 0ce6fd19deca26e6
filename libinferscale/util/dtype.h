/* Conversions between the KV element types, shared by the CPU paths. */
#ifndef INFS_DTYPE_H
#define INFS_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "inferscale/common.h"

static inline float infs__f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
	if (exp == 0) {
		if (mant == 0) {
			bits = sign;
		} else { /* subnormal: renormalise */
			exp = 127 - 15 + 1;
			while (!(mant & 0x400)) {
				mant <<= 1;
				exp--;
			}
			bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
		}
	} else if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (mant << 13);
	} else {
		bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* Round to nearest even, as CUDA's __float2half_rn and torch do. */
static inline uint16_t infs__f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000;
	uint32_t absx = x & 0x7fffffffu;
	if (absx >= 0x7f800000u) /* inf or nan */
		return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
	if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow */
		return (uint16_t)(sign | 0x7c00);
	if (absx < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
		if (absx < 0x33000000u)
			return (uint16_t)sign;
		uint32_t e = absx >> 23, m = (absx & 0x7fffff) | 0x800000;
		uint32_t shift = 126 - e; /* 14..24 */
		uint32_t half = m >> shift, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	uint32_t e = (absx >> 23) - 127 + 15, m = absx & 0x7fffff;
	uint32_t half = (e << 10) | (m >> 13), rem = m & 0x1fff;
	/* Branchless: this conversion dominates CPU injection into f16 caches.
	 * A carry into the exponent is correct rounding. */
	half += (rem > 0x1000) | ((rem == 0x1000) & (half & 1));
	return (uint16_t)(sign | half);
}

static inline float infs__bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static inline uint16_t infs__f32_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* fp8 e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent
 * 0 is subnormal (m * 2^-9); 0x7f and 0xff are NaN; no infinities. */
static inline float infs__e4m3_to_f32(uint8_t c)
{
	uint32_t sign = (uint32_t)(c & 0x80) << 24, e = (c >> 3) & 15, m = c & 7, bits;
	if (e == 0) {
		float f = (float)m * 0x1p-9f; /* exact */
		return sign ? -f : f;
	}
	bits = e == 15 && m == 7 ? sign | 0x7fc00000u : sign | ((e + 127 - 7) << 23) | (m << 20);
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* Round to nearest even, saturating at +-448 (0x7e): a finite f never
 * becomes NaN. Callers refuse NaN and infinities before. */
static inline uint8_t infs__f32_to_e4m3(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint8_t sign = (uint8_t)((x >> 24) & 0x80);
	uint32_t a = x & 0x7fffffffu, code;
	if (a >= 0x43e00000u) /* 448 and above */
		return sign | 0x7e;
	if (a >= 0x3c800000u) { /* from 2^-6: normal; a carry into the exponent is correct rounding */
		code = (((a >> 23) - 127 + 7) << 3) | ((a >> 20) & 7);
		uint32_t rem = a & 0xfffff;
		code += (rem > 0x80000) | ((rem == 0x80000) & (code & 1));
		return (uint8_t)(sign | code);
	}
	if (a <= 0x3a800000u) /* up to 2^-10, half the smallest subnormal: ties to 0 */
		return sign;
	/* subnormal: steps of 2^-9; 8 steps round up to the smallest normal */
	uint32_t e = a >> 23, mf = (a & 0x7fffff) | 0x800000, shift = 127 + 23 - 9 - e; /* 21..24 */
	uint32_t rem = mf & ((1u << shift) - 1), mid = 1u << (shift - 1);
	code = mf >> shift;
	code += (rem > mid) | ((rem == mid) & (code & 1));
	return (uint8_t)(sign | code);
}

/* The largest magnitude of e4m3. */
#define INFS__E4M3_MAX 448.0f

/* Whether a cache (or model output) may hold dtype: fp8 is storage only. */
#define INFS__FP8_CACHE_MSG "fp8_e4m3 is a store kv_dtype only (caches and model outputs are f32, f16 or bf16)"
static inline int infs__dtype_cache_ok(infs_dtype dtype)
{
	return dtype == INFS_DTYPE_F32 || dtype == INFS_DTYPE_F16 || dtype == INFS_DTYPE_BF16;
}

/* The largest finite value of a dtype; fp8 is dequantized into f32. */
static inline float infs__dtype_max(infs_dtype dtype)
{
	switch (dtype) {
	case INFS_DTYPE_F16: return 65504.0f;
	case INFS_DTYPE_BF16: return 0x1.fep127f;
	default: return 0x1.fffffep127f; /* FLT_MAX */
	}
}

/* v within [-max, max]: what a cache write does with a value that
 * overflowed on the way (rotated, or converted to a narrower dtype), so
 * that no cache ever holds an infinity or NaN that no store held. A NaN
 * (infinity minus infinity in a rotation) becomes 0. The kernels do the
 * same (kernels/common.cuh). */
static inline float infs__saturate(float v, float max)
{
	return v >= -max && v <= max ? v : v > 0 ? max : v < 0 ? -max : 0.0f;
}

/* Element i of a buffer of dtype (not fp8), as float. */
static inline float infs__load(const void *p, infs_dtype dtype, size_t i)
{
	switch (dtype) {
	case INFS_DTYPE_F16: return infs__f16_to_f32(((const uint16_t *)p)[i]);
	case INFS_DTYPE_BF16: return infs__bf16_to_f32(((const uint16_t *)p)[i]);
	default: return ((const float *)p)[i];
	}
}

static inline void infs__store(void *p, infs_dtype dtype, size_t i, float v)
{
	switch (dtype) {
	case INFS_DTYPE_F16: ((uint16_t *)p)[i] = infs__f32_to_f16(v); break;
	case INFS_DTYPE_BF16: ((uint16_t *)p)[i] = infs__f32_to_bf16(v); break;
	default: ((float *)p)[i] = v; break;
	}
}

#endif

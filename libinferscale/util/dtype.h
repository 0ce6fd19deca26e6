/* Conversions between the KV element types, shared by the CPU paths. */
#ifndef INFS_DTYPE_H
#define INFS_DTYPE_H

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

/* Element i of a buffer of dtype, as float. */
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

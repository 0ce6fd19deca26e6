#include "model/quant.h"

#include <stdio.h>
#include <string.h>

#include "util/dtype.h"
#include "util/error.h"

/* Block layouts of ggml (QK = 32 for the classic types, 256 for K-quants).
 * Blocks are packed without padding, so scales are read byte-wise. */
#define QK 32
#define QK_K 256

static float half_at(const uint8_t *p)
{
	return infs__f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

const char *infs__ggml_type_name(uint32_t type, char buf[24])
{
	const char *name = infs__gguf_type_name(type);
	if (name)
		return name;
	snprintf(buf, 24, "ggml type %u", type);
	return buf;
}

uint32_t infs__ggml_block_elems(uint32_t type)
{
	switch (type) {
	case INFS_GGML_F32:
	case INFS_GGML_F16:
	case INFS_GGML_BF16: return 1;
	case INFS_GGML_Q4_0:
	case INFS_GGML_Q4_1:
	case INFS_GGML_Q5_0:
	case INFS_GGML_Q5_1:
	case INFS_GGML_Q8_0: return QK;
	case INFS_GGML_Q4_K:
	case INFS_GGML_Q5_K:
	case INFS_GGML_Q6_K: return QK_K;
	default: return 0;
	}
}

uint32_t infs__ggml_block_bytes(uint32_t type)
{
	switch (type) {
	case INFS_GGML_F32: return 4;
	case INFS_GGML_F16:
	case INFS_GGML_BF16: return 2;
	case INFS_GGML_Q4_0: return 2 + QK / 2;
	case INFS_GGML_Q4_1: return 4 + QK / 2;
	case INFS_GGML_Q5_0: return 2 + 4 + QK / 2;
	case INFS_GGML_Q5_1: return 4 + 4 + QK / 2;
	case INFS_GGML_Q8_0: return 2 + QK;
	case INFS_GGML_Q4_K: return 4 + 12 + QK_K / 2;
	case INFS_GGML_Q5_K: return 4 + 12 + QK_K / 8 + QK_K / 2;
	case INFS_GGML_Q6_K: return QK_K / 2 + QK_K / 4 + QK_K / 16 + 2;
	default: return 0;
	}
}

int infs__ggml_nbytes(size_t *out, uint32_t type, uint64_t n)
{
	char name[24];
	uint32_t be = infs__ggml_block_elems(type), bb = infs__ggml_block_bytes(type);
	if (!be)
		return infs__error(INFS_EUNSUPPORTED, "tensor type %s is not supported",
		                   infs__ggml_type_name(type, name));
	if (n % be)
		return infs__error(INFS_EFORMAT, "%llu elements of %s are not a whole number of %u-element blocks",
		                   (unsigned long long)n, infs__ggml_type_name(type, name), be);
	uint64_t blocks = n / be;
	if (blocks > SIZE_MAX / bb)
		return infs__error(INFS_EFORMAT, "%llu elements of %s overflow the address space",
		                   (unsigned long long)n, infs__ggml_type_name(type, name));
	*out = (size_t)(blocks * bb);
	return INFS_OK;
}

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K super-block: the
 * first four are stored plainly, the last four split across the high bits. */
static void k_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
		*m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
	}
}

static void deq_q4_0(float *y, const uint8_t *b)
{
	float d = half_at(b);
	const uint8_t *qs = b + 2;
	for (int j = 0; j < QK / 2; j++) {
		y[j] = (float)((qs[j] & 0x0f) - 8) * d;
		y[j + QK / 2] = (float)((qs[j] >> 4) - 8) * d;
	}
}

static void deq_q4_1(float *y, const uint8_t *b)
{
	float d = half_at(b), m = half_at(b + 2);
	const uint8_t *qs = b + 4;
	for (int j = 0; j < QK / 2; j++) {
		y[j] = (float)(qs[j] & 0x0f) * d + m;
		y[j + QK / 2] = (float)(qs[j] >> 4) * d + m;
	}
}

/* Q5_0 / Q5_1: the fifth bit of element j is bit j of the 32-bit qh. */
static void deq_q5(float *y, const uint8_t *qh_p, const uint8_t *qs, float d, float m, int offset)
{
	uint32_t qh = (uint32_t)qh_p[0] | (uint32_t)qh_p[1] << 8 | (uint32_t)qh_p[2] << 16 |
	              (uint32_t)qh_p[3] << 24;
	for (int j = 0; j < QK / 2; j++) {
		int lo = (int)((qs[j] & 0x0f) | (((qh >> j) & 1) << 4));
		int hi = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
		y[j] = (float)(lo - offset) * d + m;
		y[j + QK / 2] = (float)(hi - offset) * d + m;
	}
}

static void deq_q8_0(float *y, const uint8_t *b)
{
	float d = half_at(b);
	const int8_t *qs = (const int8_t *)(b + 2);
	for (int j = 0; j < QK; j++)
		y[j] = (float)qs[j] * d;
}

static void deq_q4_k(float *y, const uint8_t *b)
{
	float d = half_at(b), dmin = half_at(b + 2);
	const uint8_t *scales = b + 4, *q = b + 16;
	for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
		uint8_t sc, m;
		k_scale_min(is, scales, &sc, &m);
		float d1 = d * sc, m1 = dmin * m;
		k_scale_min(is + 1, scales, &sc, &m);
		float d2 = d * sc, m2 = dmin * m;
		for (int l = 0; l < 32; l++)
			*y++ = d1 * (float)(q[l] & 0x0f) - m1;
		for (int l = 0; l < 32; l++)
			*y++ = d2 * (float)(q[l] >> 4) - m2;
	}
}

static void deq_q5_k(float *y, const uint8_t *b)
{
	float d = half_at(b), dmin = half_at(b + 2);
	const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
	unsigned u1 = 1, u2 = 2;
	for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
		uint8_t sc, m;
		k_scale_min(is, scales, &sc, &m);
		float d1 = d * sc, m1 = dmin * m;
		k_scale_min(is + 1, scales, &sc, &m);
		float d2 = d * sc, m2 = dmin * m;
		for (int l = 0; l < 32; l++)
			*y++ = d1 * (float)((ql[l] & 0x0f) + (qh[l] & u1 ? 16 : 0)) - m1;
		for (int l = 0; l < 32; l++)
			*y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
	}
}

static void deq_q6_k(float *y, const uint8_t *b)
{
	const uint8_t *ql = b, *qh = b + QK_K / 2;
	const int8_t *sc = (const int8_t *)(b + QK_K / 2 + QK_K / 4);
	float d = half_at(b + QK_K / 2 + QK_K / 4 + QK_K / 16);
	for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
		for (int l = 0; l < 32; l++) {
			int is = l / 16;
			int q1 = (int)((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32;
			int q2 = (int)((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
			int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
			int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
			y[l] = d * (float)sc[is] * (float)q1;
			y[l + 32] = d * (float)sc[is + 2] * (float)q2;
			y[l + 64] = d * (float)sc[is + 4] * (float)q3;
			y[l + 96] = d * (float)sc[is + 6] * (float)q4;
		}
	}
}

void infs__dequantize(float *dst, const void *src, uint32_t type, size_t n)
{
	const uint8_t *b = src;
	size_t be = infs__ggml_block_elems(type), bb = infs__ggml_block_bytes(type);
	switch (type) {
	case INFS_GGML_F32:
		memcpy(dst, src, n * 4);
		return;
	case INFS_GGML_F16:
		for (size_t i = 0; i < n; i++)
			dst[i] = half_at(b + 2 * i);
		return;
	case INFS_GGML_BF16:
		for (size_t i = 0; i < n; i++)
			dst[i] = infs__bf16_to_f32((uint16_t)(b[2 * i] | (b[2 * i + 1] << 8)));
		return;
	default:
		break;
	}
	for (size_t i = 0; i < n / be; i++, b += bb, dst += be) {
		switch (type) {
		case INFS_GGML_Q4_0: deq_q4_0(dst, b); break;
		case INFS_GGML_Q4_1: deq_q4_1(dst, b); break;
		case INFS_GGML_Q5_0: deq_q5(dst, b + 2, b + 6, half_at(b), 0.0f, 16); break;
		case INFS_GGML_Q5_1: deq_q5(dst, b + 4, b + 8, half_at(b), half_at(b + 2), 0); break;
		case INFS_GGML_Q8_0: deq_q8_0(dst, b); break;
		case INFS_GGML_Q4_K: deq_q4_k(dst, b); break;
		case INFS_GGML_Q5_K: deq_q5_k(dst, b); break;
		case INFS_GGML_Q6_K: deq_q6_k(dst, b); break;
		default: break;
		}
	}
}

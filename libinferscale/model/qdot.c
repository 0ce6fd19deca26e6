#include "model/qdot.h"

#include <math.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/cpu.h"
#include "util/dtype.h"

/* Tokens per pass over a row: each row block is unpacked once for them. */
#define TB 4

int infs__qdot_type(uint32_t type)
{
	return type == INFS_GGML_Q4_0 || type == INFS_GGML_Q4_1 || type == INFS_GGML_Q8_0;
}

static float half_at(const uint8_t *p)
{
	return infs__f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static size_t block_bytes(uint32_t type)
{
	return type == INFS_GGML_Q8_0 ? 34 : type == INFS_GGML_Q4_1 ? 20 : 18;
}

/* The scale of a block from its largest magnitude: NaN when the block has
 * a NaN, so that it reaches the outputs as in the f32 product. lrintf rounds
 * half to even, as the AVX2 conversion does; a NaN gives an unspecified
 * value, not undefined behaviour. */
static void quantize_block(infs__q8 *b, const float *x)
{
	float amax = 0;
	int nan = 0;
	for (int i = 0; i < 32; i++) {
		const float a = fabsf(x[i]);
		amax = a > amax ? a : amax;
		nan |= x[i] != x[i];
	}
	const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	int sum = 0;
	for (int i = 0; i < 32; i++) {
		const int q = (int)lrintf(x[i] * id);
		b->q[i] = (int8_t)q;
		sum += b->q[i];
	}
	b->d = d;
	b->s = d * (float)sum;
}

static void rows_portable(float *y, size_t ys, const infs__q8 *xq, uint32_t n, const infs__wmat *w, uint32_t r0,
                          uint32_t r1, const float *bias)
{
	const size_t nb = w->cols / 32, bb = block_bytes(w->type);
	for (uint32_t r = r0; r < r1; r++) {
		const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
		for (uint32_t t = 0; t < n; t++) {
			float acc = 0, off = 0;
			const uint8_t *b = row;
			for (size_t i = 0; i < nb; i++, b += bb) {
				const infs__q8 *x = xq + (size_t)t * nb + i;
				const float dw = half_at(b);
				int32_t s = 0;
				if (w->type == INFS_GGML_Q8_0) {
					for (int j = 0; j < 32; j++)
						s += (int8_t)b[2 + j] * x->q[j];
				} else {
					const uint8_t *qs = b + (w->type == INFS_GGML_Q4_1 ? 4 : 2);
					for (int j = 0; j < 16; j++)
						s += (qs[j] & 0x0f) * x->q[j] + (qs[j] >> 4) * x->q[j + 16];
					off += (w->type == INFS_GGML_Q4_1 ? half_at(b + 2) : -8.0f * dw) * x->s;
				}
				acc += dw * x->d * (float)s;
			}
			y[(size_t)t * ys + r] = acc + off + (bias ? bias[r] : 0.0f);
		}
	}
}

#if HAVE_X86
INLINE_AVX2 float half_avx2(const uint8_t *p)
{
	return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8));
}

INLINE_AVX2 float hsum_avx2(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
	return _mm_cvtss_f32(s);
}

TARGET_AVX2 static void quantize_avx2(infs__q8 *dst, const float *x, size_t nb)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (size_t b = 0; b < nb; b++, x += 32) {
		const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
		const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
		__m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
		m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
		__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		h = _mm_max_ps(h, _mm_movehl_ps(h, h));
		h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
		const __m256 un = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q),
		                                            _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q)),
		                               _mm256_or_ps(_mm256_cmp_ps(v2, v2, _CMP_UNORD_Q),
		                                            _mm256_cmp_ps(v3, v3, _CMP_UNORD_Q)));
		if (_mm256_movemask_ps(un)) {
			quantize_block(dst + b, x);
			continue;
		}
		const float d = _mm_cvtss_f32(h) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
		const __m256 vid = _mm256_set1_ps(id);
		const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
		const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
		__m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
		__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
		s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
		s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
		/* packs interleaves the 128-bit lanes; the permutation restores the order. */
		__m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
		_mm256_storeu_si256((__m256i *)dst[b].q, _mm256_permutevar8x32_epi32(p, order));
		dst[b].d = d;
		dst[b].s = d * (float)_mm_cvtsi128_si32(s4);
	}
}

/* A block's 32 weights as bytes: Q4's nibbles unsigned (0..15, low halves
 * first as the format orders them), Q8_0's signed. */
INLINE_AVX2 __m256i weights_avx2(const uint8_t *b, uint32_t type)
{
	if (type == INFS_GGML_Q8_0)
		return _mm256_loadu_si256((const __m256i *)(b + 2));
	const __m128i q = _mm_loadu_si128((const __m128i *)(b + (type == INFS_GGML_Q4_1 ? 4 : 2)));
	const __m128i m = _mm_set1_epi8(0x0f);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

/* The kernels over AVX2 (maddubs + madd: 32 products in two instructions)
 * and over AVX-512 VNNI (vpdpbusd: the same sums in one), the same code. */
#define QDOT(name) name##_avx2
#define QDOT_INLINE INLINE_AVX2
#define QDOT_TARGET TARGET_AVX2
#define QDOT_DOT(w, x) _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1))
#include "model/qdot_rows.inc"
#undef QDOT
#undef QDOT_INLINE
#undef QDOT_TARGET
#undef QDOT_DOT

#define QDOT(name) name##_vnni
#define QDOT_INLINE INLINE_VNNI
#define QDOT_TARGET TARGET_VNNI
#define QDOT_DOT(w, x) _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x)
#include "model/qdot_rows.inc"
#undef QDOT
#undef QDOT_INLINE
#undef QDOT_TARGET
#undef QDOT_DOT
#endif

void infs__q8_quantize(infs__q8 *dst, const float *x, size_t n, int avx2)
{
#if HAVE_X86
	if (avx2) {
		quantize_avx2(dst, x, n / 32);
		return;
	}
#endif
	(void)avx2;
	for (size_t b = 0; b < n / 32; b++)
		quantize_block(dst + b, x + 32 * b);
}

void infs__qdot_rows(float *y, size_t y_stride, const infs__q8 *xq, uint32_t n, const infs__wmat *w,
                     uint32_t r0, uint32_t r1, const float *bias, int level)
{
#if HAVE_X86
	if (level == INFS__QDOT_VNNI) {
		rows_vnni(y, y_stride, xq, n, w, r0, r1, bias);
		return;
	}
	if (level == INFS__QDOT_AVX2) {
		rows_avx2(y, y_stride, xq, n, w, r0, r1, bias);
		return;
	}
#endif
	(void)level;
	rows_portable(y, y_stride, xq, n, w, r0, r1, bias);
}

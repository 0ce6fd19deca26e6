/* The attention's inner loops, portable and AVX2 (model/attention_kernels.h).
 * Each is written once over the row type: f16 set at compile time. */
#include <math.h>
#include <string.h>

#include "util/cpu.h"
#include "util/dtype.h"
#include "model/attention_kernels.h"

/* Portable: 4-float SIMD steps (vector extensions), tail scalar. */
typedef float vf4 __attribute__((vector_size(16)));

static inline vf4 load4(const void *p, size_t i, int f16)
{
	vf4 x;
	if (f16) {
		const uint16_t *h = (const uint16_t *)p + i;
		x = (vf4){ infs__f16_to_f32(h[0]), infs__f16_to_f32(h[1]), infs__f16_to_f32(h[2]),
			   infs__f16_to_f32(h[3]) };
	} else {
		memcpy(&x, (const float *)p + i, sizeof x);
	}
	return x;
}

static inline float load1(const void *p, size_t i, int f16)
{
	return f16 ? infs__f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void scores_portable(float *s, const float *q, const void *k, size_t ks, uint32_t nk, uint32_t hd,
                                   float scale, int f16)
{
	for (uint32_t j = 0; j < nk; j++) {
		const size_t row = (size_t)j * ks;
		vf4 acc = { 0, 0, 0, 0 };
		uint32_t e = 0;
		for (; e + 4 <= hd; e += 4) {
			vf4 x;
			memcpy(&x, q + e, sizeof x);
			acc += x * load4(k, row + e, f16);
		}
		float d = (acc[0] + acc[1]) + (acc[2] + acc[3]);
		for (; e < hd; e++)
			d += q[e] * load1(k, row + e, f16);
		s[j] = d * scale;
	}
}

static inline void values_portable(float *o, const float *p, const void *v, size_t vs, uint32_t nk, uint32_t hd,
                                   int f16)
{
	for (uint32_t j = 0; j < nk; j++) {
		const size_t row = (size_t)j * vs;
		uint32_t e = 0;
		for (; e + 4 <= hd; e += 4) {
			vf4 a;
			memcpy(&a, o + e, sizeof a);
			a += p[j] * load4(v, row + e, f16);
			memcpy(o + e, &a, sizeof a);
		}
		for (; e < hd; e++)
			o[e] += p[j] * load1(v, row + e, f16);
	}
}

static void scores_f32(float *s, const float *q, const void *k, size_t ks, uint32_t nk, uint32_t hd, float scale)
{
	scores_portable(s, q, k, ks, nk, hd, scale, 0);
}

static void scores_f16(float *s, const float *q, const void *k, size_t ks, uint32_t nk, uint32_t hd, float scale)
{
	scores_portable(s, q, k, ks, nk, hd, scale, 1);
}

static float exp_sum_portable(float *s, uint32_t n, float mx)
{
	float sum = 0;
	for (uint32_t j = 0; j < n; j++) {
		s[j] = expf(s[j] - mx);
		sum += s[j];
	}
	return sum;
}

static void values_f32(float *o, const float *p, const void *v, size_t vs, uint32_t nk, uint32_t hd)
{
	values_portable(o, p, v, vs, nk, hd, 0);
}

static void values_f16(float *o, const float *p, const void *v, size_t vs, uint32_t nk, uint32_t hd)
{
	values_portable(o, p, v, vs, nk, hd, 1);
}

static const infs__attn_kernels portable = { scores_f32, scores_f16, exp_sum_portable, values_f32, values_f16 };

#if HAVE_X86
INLINE_AVX2 __m256 load8_avx2(const void *p, size_t i, int f16)
{
	if (f16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
	return _mm256_loadu_ps((const float *)p + i);
}

/* The sums of the lanes of a, b, c, d: one 128-bit vector of 4. */
INLINE_AVX2 __m128 hsum4_avx2(__m256 a, __m256 b, __m256 c, __m256 d)
{
	__m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
	return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* Eight keys at a time, one accumulator each (eight FMA chains in flight),
 * the query's 8 floats loaded once for the eight. The loops over the
 * accumulators unrolled, or they would live in memory. */
INLINE_AVX2 void scores_avx2(float *s, const float *q, const void *k, size_t ks, uint32_t nk, uint32_t hd,
                             float scale, int f16)
{
	const uint32_t hv = hd & ~7u;
	const __m128 sc = _mm_set1_ps(scale);
	uint32_t j = 0;
	for (; j + 8 <= nk; j += 8) {
		const size_t row = (size_t)j * ks;
		__m256 a[8];
		#pragma GCC unroll 8
		for (int r = 0; r < 8; r++)
			a[r] = _mm256_setzero_ps();
		for (uint32_t e = 0; e < hv; e += 8) {
			const __m256 x = _mm256_loadu_ps(q + e);
			#pragma GCC unroll 8
			for (int r = 0; r < 8; r++)
				a[r] = _mm256_fmadd_ps(x, load8_avx2(k, row + r * ks + e, f16), a[r]);
		}
		__m128 lo = hsum4_avx2(a[0], a[1], a[2], a[3]), hi = hsum4_avx2(a[4], a[5], a[6], a[7]);
		if (hv < hd) {
			float t[8];
			#pragma GCC unroll 8
			for (int r = 0; r < 8; r++) {
				t[r] = 0;
				for (uint32_t e = hv; e < hd; e++)
					t[r] += q[e] * load1(k, row + r * ks + e, f16);
			}
			lo = _mm_add_ps(lo, _mm_loadu_ps(t));
			hi = _mm_add_ps(hi, _mm_loadu_ps(t + 4));
		}
		_mm_storeu_ps(s + j, _mm_mul_ps(lo, sc));
		_mm_storeu_ps(s + j + 4, _mm_mul_ps(hi, sc));
	}
	for (; j < nk; j++) {
		const size_t row = (size_t)j * ks;
		__m256 a = _mm256_setzero_ps();
		for (uint32_t e = 0; e < hv; e += 8)
			a = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), load8_avx2(k, row + e, f16), a);
		__m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
		h = _mm_add_ps(h, _mm_movehl_ps(h, h));
		h = _mm_add_ss(h, _mm_movehdup_ps(h));
		float d = _mm_cvtss_f32(h);
		for (uint32_t e = hv; e < hd; e++)
			d += q[e] * load1(k, row + e, f16);
		s[j] = d * scale;
	}
}

TARGET_AVX2 static void scores_f32_avx2(float *s, const float *q, const void *k, size_t ks, uint32_t nk, uint32_t hd,
                                        float scale)
{
	scores_avx2(s, q, k, ks, nk, hd, scale, 0);
}

TARGET_AVX2 static void scores_f16_avx2(float *s, const float *q, const void *k, size_t ks, uint32_t nk, uint32_t hd,
                                        float scale)
{
	scores_avx2(s, q, k, ks, nk, hd, scale, 1);
}

/* exp(x) for x <= 0 (Cephes' expf: x = n ln2 + r, a degree-5 polynomial in
 * r, 2^n from the exponent bits), within 2 ulp of expf; below -87.3 it
 * gives 2^-126 or so where expf gives a subnormal or 0, no difference to a
 * sum that holds exp(0) = 1. */
INLINE_AVX2 __m256 exp_avx2(__m256 x)
{
	x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
	                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 y = _mm256_set1_ps(1.9875691500e-4f);
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
	y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

TARGET_AVX2 static float exp_sum_avx2(float *s, uint32_t n, float mx)
{
	const __m256 m = _mm256_set1_ps(mx);
	__m256 acc = _mm256_setzero_ps();
	uint32_t j = 0;
	for (; j + 8 <= n; j += 8) {
		__m256 p = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
		_mm256_storeu_ps(s + j, p);
		acc = _mm256_add_ps(acc, p);
	}
	float t[8], sum = 0;
	_mm256_storeu_ps(t, acc);
	for (int i = 0; i < 8; i++)
		sum += t[i];
	for (; j < n; j++) {
		s[j] = expf(s[j] - mx);
		sum += s[j];
	}
	return sum;
}

/* Output dims [e, e + 8R) in R registers over the nk weighted value rows
 * (R a constant where it is called: the loops unroll into FMA chains). */
INLINE_AVX2 void values_block(float *o, const float *p, const void *v, size_t vs, uint32_t nk, uint32_t e, int f16,
                              const int R)
{
	__m256 a[8];
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		a[r] = _mm256_loadu_ps(o + e + 8 * r);
	for (uint32_t j = 0; j < nk; j++) {
		const __m256 w = _mm256_broadcast_ss(p + j);
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			a[r] = _mm256_fmadd_ps(w, load8_avx2(v, (size_t)j * vs + e + 8 * r, f16), a[r]);
	}
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		_mm256_storeu_ps(o + e + 8 * r, a[r]);
}

/* The output in registers, 64 floats (eight FMA chains) at a time, then 32,
 * then 8, then the scalar tail. */
INLINE_AVX2 void values_avx2(float *o, const float *p, const void *v, size_t vs, uint32_t nk, uint32_t hd, int f16)
{
	uint32_t e = 0;
	for (; e + 64 <= hd; e += 64)
		values_block(o, p, v, vs, nk, e, f16, 8);
	for (; e + 32 <= hd; e += 32)
		values_block(o, p, v, vs, nk, e, f16, 4);
	for (; e + 8 <= hd; e += 8) {
		__m256 a = _mm256_loadu_ps(o + e);
		for (uint32_t j = 0; j < nk; j++)
			a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), load8_avx2(v, (size_t)j * vs + e, f16), a);
		_mm256_storeu_ps(o + e, a);
	}
	for (; e < hd; e++) {
		float a = o[e];
		for (uint32_t j = 0; j < nk; j++)
			a += p[j] * load1(v, (size_t)j * vs + e, f16);
		o[e] = a;
	}
}

TARGET_AVX2 static void values_f32_avx2(float *o, const float *p, const void *v, size_t vs, uint32_t nk, uint32_t hd)
{
	values_avx2(o, p, v, vs, nk, hd, 0);
}

TARGET_AVX2 static void values_f16_avx2(float *o, const float *p, const void *v, size_t vs, uint32_t nk, uint32_t hd)
{
	values_avx2(o, p, v, vs, nk, hd, 1);
}

static const infs__attn_kernels avx2 = { scores_f32_avx2, scores_f16_avx2, exp_sum_avx2, values_f32_avx2,
	                                 values_f16_avx2 };
#endif

const infs__attn_kernels *infs__attn_kernels_get(int want_avx2)
{
#if HAVE_X86
	if (want_avx2 && infs__cpu_avx2())
		return &avx2;
#else
	(void)want_avx2;
#endif
	return &portable;
}

#include "util/f16_rows.h"

#include "util/cpu.h"
#include "util/dtype.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

__attribute__((target("avx2,fma,f16c"))) static size_t f16c(float *dst, const uint16_t *src, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
	return i;
}
#endif

void infs__f16_to_f32_n(float *dst, const uint16_t *src, size_t n)
{
	size_t i = 0;
#if defined(__x86_64__) || defined(__i386__)
	if (infs__cpu_avx2())
		i = f16c(dst, src, n);
#endif
	for (; i < n; i++)
		dst[i] = infs__f16_to_f32(src[i]);
}

/* The CPU's vector features, asked once per process. */
#ifndef INFS_CPU_H
#define INFS_CPU_H

#include <stddef.h>

/* For the files with AVX2 kernels: HAVE_X86 says whether the compiler
 * targets x86, TARGET_AVX2 / INLINE_AVX2 mark the functions compiled for
 * AVX2, FMA and F16C, called only where infs__cpu_avx2() says so. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#define TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE_AVX2 static inline __attribute__((always_inline, target("avx2,fma,f16c")))
/* AVX2's and AVX-512 VNNI's on 256-bit vectors (vpdpbusd), called only where
 * infs__cpu_avx512_vnni() says so. */
#define VNNI_FEATURES "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"
#define TARGET_VNNI __attribute__((target(VNNI_FEATURES)))
#define INLINE_VNNI static inline __attribute__((always_inline, target(VNNI_FEATURES)))

/* A weight row's cache lines a little ahead of the one being read: the
 * products of one token step from row to row in chunks that the two
 * threads take in turn, where the hardware prefetchers lose the stream
 * (SmolLM2's decode step 9.2 -> 7.3 ms on 2 threads). */
#define INFS__PREFETCH_AHEAD 16384
INLINE_AVX2 void infs__prefetch_row(const void *row, size_t bytes)
{
	for (size_t o = 0; o < bytes; o += 64)
		_mm_prefetch((const char *)row + INFS__PREFETCH_AHEAD + o, _MM_HINT_T0);
}
#else
#define HAVE_X86 0
#endif

/* Whether this CPU runs AVX2 with FMA and F16C (x86-64); 0 elsewhere. */
int infs__cpu_avx2(void);

/* Whether it also runs AVX-512 F, VL, BW and VNNI, with the operating
 * system saving the AVX-512 registers; 0 elsewhere. */
int infs__cpu_avx512_vnni(void);

#endif

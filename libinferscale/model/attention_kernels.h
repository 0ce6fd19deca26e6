/* The inner loops of the attention of a few queries over a long past (the
 * decode step): scores of one query head over a run of key rows, their
 * exponentials, the weighted sum of the value rows. AVX2 with FMA where the
 * CPU has it, else portable C. */
#ifndef INFS_ATTENTION_KERNELS_H
#define INFS_ATTENTION_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Rows k and v are f32 or, in the _f16 kernels, f16 (the paged cache read
 * where it lies); strides ks, vs in elements. */
typedef struct infs__attn_kernels {
	/* s[j] = scale * (q . k[j * ks .. + hd]) for j < nk. */
	void (*scores)(float *s, const float *q, const void *k, size_t ks, uint32_t nk, uint32_t hd, float scale);
	void (*scores_f16)(float *s, const float *q, const void *k, size_t ks, uint32_t nk, uint32_t hd, float scale);
	/* s[j] = exp(s[j] - mx) for j < n; returns their sum. */
	float (*exp_sum)(float *s, uint32_t n, float mx);
	/* o[e] += sum over j < nk of p[j] * v[j * vs + e], for e < hd. */
	void (*values)(float *o, const float *p, const void *v, size_t vs, uint32_t nk, uint32_t hd);
	void (*values_f16)(float *o, const float *p, const void *v, size_t vs, uint32_t nk, uint32_t hd);
} infs__attn_kernels;

/* The AVX2 kernels when avx2 is nonzero and the CPU runs them, else the
 * portable ones (tests compare the two). */
const infs__attn_kernels *infs__attn_kernels_get(int avx2);

#endif

/* Integer dot products of quantized weight rows (Q4_0, Q4_1, Q8_0) with
 * activations quantized per 32-element block to 8 bits, as llama.cpp's
 * q8_1: q = round(x / d), d = max |x| / 127, and the block's d * sum(q) for
 * the weights' offset (Q4_1's m, Q4_0's -8 d). Per block the products are
 * summed in integers (AVX2: maddubs + madd, 32 multiply-adds in two
 * instructions; AVX-512 VNNI: vpdpbusd, one) and scaled once by d_w * d_x. The error against the f32
 * product is the activations' rounding, at most d / 2 an element.
 * model/qmatmul.c picks between these and the f32 kernels per shape. */
#ifndef INFS_QDOT_H
#define INFS_QDOT_H

#include <stddef.h>
#include <stdint.h>

#include "model/wmat.h"

typedef struct infs__q8 {
	float d;       /* scale: x ~ d * q */
	float s;       /* d * sum(q) */
	int8_t q[32];
} infs__q8;

/* Whether rows of this ggml type have integer kernels. */
int infs__qdot_type(uint32_t type);

/* x[n] (n a multiple of 32) as n / 32 blocks. avx2: the AVX2 quantizer
 * (the caller checked the CPU); both give the same blocks. */
void infs__q8_quantize(infs__q8 *dst, const float *x, size_t n, int avx2);

/* The kernels infs__qdot_rows runs: plain C, AVX2, AVX-512 VNNI (the
 * caller checked the CPU). All three give the same sums. */
enum { INFS__QDOT_PORTABLE, INFS__QDOT_AVX2, INFS__QDOT_VNNI };

/* y[t * y_stride + r] = row r of w . token t (+ bias[r]) for r in [r0, r1)
 * and t in [0, n); token t's blocks at xq + t * (w->cols / 32). */
void infs__qdot_rows(float *y, size_t y_stride, const infs__q8 *xq, uint32_t n, const infs__wmat *w,
                     uint32_t r0, uint32_t r1, const float *bias, int level);

#endif

/* Matrix products over weights as the model keeps them (model/wmat.h):
 * y = x W^T (+ b), the activations x in f32. Quantized rows are
 * dequantized a few at a time into a buffer that stays in the L1 cache and
 * multiplied there with f32 FMAs against every token, so the weights are
 * read once per call whatever the number of tokens, and the logits are
 * those of the f32 path up to the order of the sums. The kernels are
 * picked at run time from the CPU's features: AVX2 with FMA, else
 * portable C. */
#ifndef INFS_QMATMUL_H
#define INFS_QMATMUL_H

#include <stdint.h>

#include "model/wmat.h"
#include "util/pool.h"

typedef enum infs__isa {
	INFS__ISA_AUTO,      /* the best the CPU runs */
	INFS__ISA_PORTABLE,  /* plain C (vector extensions) */
	INFS__ISA_AVX2       /* AVX2 + FMA + F16C */
} infs__isa;

/* y[n][w->rows] = x[n][w->cols] * w^T + bias (bias may be NULL). f32
 * weights go through infs__matmul (BLAS when the library has it). */
void infs__matmul_w(float *y, const float *x, const infs__wmat *w, const float *bias, uint32_t n,
                    infs__pool *pool);

/* The same with the kernels of isa, for tests. INFS_EUNSUPPORTED (nothing
 * written) when this CPU or build cannot run them; INFS_ENOMEM. */
int infs__matmul_w_isa(float *y, const float *x, const infs__wmat *w, const float *bias, uint32_t n,
                       infs__pool *pool, infs__isa isa);

/* The kernels INFS__ISA_AUTO picks on this CPU: "avx2" or "portable". */
const char *infs__matmul_w_kernels(void);

#endif

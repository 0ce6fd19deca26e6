/* Matrix products over weights as the model keeps them (model/wmat.h):
 * y = x W^T (+ b), the activations x in f32. A pool task dequantizes its 16
 * rows once into a buffer that stays in the L2 cache; the tokens then pass
 * over it 32 at a time, 4 rows x 2 tokens of f32 FMA accumulators in
 * registers, so each weight is read and dequantized once per call whatever
 * the number of tokens. A single token over Q4_0, Q4_1 or Q8_0 rows skips
 * the buffer: each block's values go from registers to the FMAs as
 * d * (q . x) plus the block's offset times its sum of x. The logits are
 * those of the dequantized f32 path up to the order of the sums. The
 * kernels are picked at run time from the CPU's features: AVX2 with FMA
 * and F16C, else portable C. A model loaded with int8_activations takes,
 * for products of few tokens over Q4_0 / Q4_1 / Q8_0 rows, the integer
 * kernels of model/qdot.h instead (activations rounded to 8 bits). */
#ifndef INFS_QMATMUL_H
#define INFS_QMATMUL_H

#include <stdint.h>

#include "model/wmat.h"
#include "util/pool.h"

typedef enum infs__isa {
	INFS__ISA_AUTO,      /* the best the CPU runs */
	INFS__ISA_PORTABLE,  /* plain C (vector extensions) */
	INFS__ISA_AVX2,      /* AVX2 + FMA + F16C */
	INFS__ISA_AVX512_VNNI /* the integer kernels' dot products in vpdpbusd (f32 kernels: AVX2's) */
} infs__isa;

/* y[n][w->rows] = x[n][w->cols] * w^T + bias (bias may be NULL). f32
 * weights go through infs__matmul (BLAS when the library has it). */
void infs__matmul_w(float *y, const float *x, const infs__wmat *w, const float *bias, uint32_t n,
                    infs__pool *pool);

/* ys[i] = x ws[i]^T + biases[i] (biases[i] may be NULL) for count (up to
 * INFS__MATMUL_MULTI_MAX) matrices of one input, as count calls of
 * infs__matmul_w give them, bit for bit: q|k|v and gate|up. Where the
 * kernels allow (the same columns and block type, one token or 8-bit
 * activations), the input is prepared once and all the matrices' rows go
 * through the pool together: one hand-off instead of count. */
#define INFS__MATMUL_MULTI_MAX 4
void infs__matmul_w_multi(float *const *ys, const float *x, const infs__wmat *const *ws, const float *const *biases,
                          int count, uint32_t n, infs__pool *pool);

/* The same with the kernels of isa, for tests. INFS_EUNSUPPORTED (nothing
 * written) when this CPU or build cannot run them; INFS_ENOMEM. */
int infs__matmul_w_isa(float *y, const float *x, const infs__wmat *w, const float *bias, uint32_t n,
                       infs__pool *pool, infs__isa isa);

/* The same with the activations quantized per block to 8 bits and integer
 * dot products (model/qdot.h): Q4_0, Q4_1 and Q8_0 rows;
 * INFS_EUNSUPPORTED for other types or a CPU without isa. */
int infs__matmul_w_q8(float *y, const float *x, const infs__wmat *w, const float *bias, uint32_t n,
                      infs__pool *pool, infs__isa isa);

/* The largest token count for which infs__matmul_w takes the integer
 * kernels over a matrix of this type when the model asks for 8-bit
 * activations (infs_model_options.int8_activations); 0: never. */
uint32_t infs__matmul_w_int8_tokens(uint32_t type);

/* The kernels INFS__ISA_AUTO picks on this CPU: "avx512-vnni" (the
 * integer kernels; the f32 ones AVX2's), "avx2" or "portable". */
const char *infs__matmul_w_kernels(void);

#endif

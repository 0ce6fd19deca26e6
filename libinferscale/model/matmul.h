/* Matrix products of the forward pass: y = x W^T (+ b) with W stored
 * [out][in] row-major as checkpoints store linear layers. */
#ifndef INFS_MATMUL_H
#define INFS_MATMUL_H

#include <stdint.h>

#include "util/pool.h"

/* y[n][out] = x[n][in] * w[out][in]^T + bias (bias may be NULL). Through
 * CBLAS when the library has BLAS, else infs__matmul_blocked. */
void infs__matmul(float *y, const float *x, const float *w, const float *bias, uint32_t n,
                  uint32_t in, uint32_t out, infs__pool *pool);

/* The plain-C product: tiles of tokens x output rows spread over the pool,
 * with independent accumulator lanes the compiler vectorises. */
void infs__matmul_blocked(float *y, const float *x, const float *w, const float *bias, uint32_t n,
                          uint32_t in, uint32_t out, infs__pool *pool);

#endif

/* The model tests' helpers: a model's info, and comparing the runtime's
 * outputs: the largest difference between two float arrays (NaN
 * propagates), the largest magnitude, and the index of the largest value
 * (top-1). Shared by the CPU and GPU model tests. */
#ifndef INFS_TEST_MODEL_COMPARE_H
#define INFS_TEST_MODEL_COMPARE_H

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "check.h"
#include "inferscale/model.h"
#include "util/rope.h"

static inline infs_model_info model_info(const infs_model *m)
{
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, m));
	return info;
}

static inline float max_diff(const float *a, const float *b, size_t n)
{
	float m = 0;
	for (size_t i = 0; i < n; i++) {
		float d = fabsf(a[i] - b[i]);
		if (!(d <= m))
			m = d; /* NaN propagates */
	}
	return m;
}

static inline float max_abs(const float *a, size_t n)
{
	float m = 0;
	for (size_t i = 0; i < n; i++)
		m = fabsf(a[i]) > m ? fabsf(a[i]) : m;
	return m;
}

static inline size_t argmax(const float *a, size_t n)
{
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (a[i] > a[best])
			best = i;
	return best;
}

/* The K of layer l, token t, head h in pre-RoPE K laid out [L][n][H][D],
 * rotated by r to position t, into kv (D floats). */
static inline void rotated_k(float *kv, const infs__rope *r, const float *k_pre, uint32_t n, uint32_t l,
                             uint32_t t, uint32_t h, uint32_t H, uint32_t D)
{
	float cs[INFS_ROPE_MAX_PAIRS], sn[INFS_ROPE_MAX_PAIRS];
	infs__rope_cos_sin(r, t, cs, sn);
	memcpy(kv, k_pre + (((size_t)l * n + t) * H + h) * D, D * sizeof *kv);
	infs__rope_apply(r, kv, cs, sn);
}

#endif

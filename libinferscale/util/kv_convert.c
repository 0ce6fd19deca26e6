/* infs_kv_convert: one fact's K or V from one element type to another,
 * quantizing to fp8 e4m3 with a scale per row (layer, token, KV head) and
 * dequantizing from it. */
#include <math.h>
#include <stdbool.h>

#include "inferscale/geometry.h"
#include "util/rope.h"
#include "util/dtype.h"
#include "util/error.h"

/* Bytes of a buffer of rows rows of head_dim elements of dtype. */
static size_t buffer_bytes(infs_dtype t, size_t rows, uint32_t head_dim)
{
	if (t == INFS_DTYPE_FP8_E4M3)
		return rows * (head_dim + sizeof(float));
	return rows * head_dim * infs_dtype_size(t);
}

/* Row r of src (rows rows of D elements) as floats. */
static void load(float *x, const void *src, infs_dtype t, size_t rows, size_t r, uint32_t D)
{
	if (t == INFS_DTYPE_FP8_E4M3) {
		const uint8_t *c = (const uint8_t *)src + r * D;
		float scale;
		memcpy(&scale, (const uint8_t *)src + rows * D + r * sizeof scale, sizeof scale);
		for (uint32_t i = 0; i < D; i++)
			x[i] = infs__e4m3_to_f32(c[i]) * scale;
		return;
	}
	for (uint32_t i = 0; i < D; i++)
		x[i] = infs__load(src, t, r * D + i);
}

static void quantize_row(uint8_t *codes, float *scale, const float *x, uint32_t D)
{
	float amax = 0;
	for (uint32_t i = 0; i < D; i++)
		amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
	float s = amax / INFS__E4M3_MAX;
	/* a row of zeros, or one so small that its scale is 0, stores zeros */
	for (uint32_t i = 0; i < D; i++)
		codes[i] = s > 0 ? infs__f32_to_e4m3(x[i] / s) : 0;
	*scale = s;
}

static void store(void *dst, infs_dtype t, size_t rows, size_t r, uint32_t D, const float *x)
{
	if (t == INFS_DTYPE_FP8_E4M3) {
		float scale;
		quantize_row((uint8_t *)dst + r * D, &scale, x, D);
		memcpy((uint8_t *)dst + rows * D + r * sizeof scale, &scale, sizeof scale);
		return;
	}
	for (uint32_t i = 0; i < D; i++)
		infs__store(dst, t, r * D + i, x[i]);
}

int infs_kv_convert(void *dst, infs_dtype dst_dtype, const void *src, infs_dtype src_dtype, const infs_geometry *g,
                    uint32_t n_tokens)
{
	static const char fn[] = "infs_kv_convert";
	int rc = infs_geometry_validate(g);
	if (rc)
		return infs__error_wrap(rc, "%s", fn);
	if (!dst || !src)
		return infs__error(INFS_EINVAL, "%s: %s is NULL", fn, !dst ? "dst" : "src");
	if (!infs_dtype_size(dst_dtype) || !infs_dtype_size(src_dtype))
		return infs__error(INFS_EINVAL, "%s: %s %d is not a known dtype", fn,
		                   !infs_dtype_size(dst_dtype) ? "dst_dtype" : "src_dtype",
		                   !infs_dtype_size(dst_dtype) ? (int)dst_dtype : (int)src_dtype);
	const uint32_t D = g->head_dim;
	bool fp8 = dst_dtype == INFS_DTYPE_FP8_E4M3 || src_dtype == INFS_DTYPE_FP8_E4M3;
	if (fp8 && D % 4)
		return infs__error(INFS_EINVAL, "%s: fp8_e4m3 needs a head_dim divisible by 4, not %u", fn, D);
	size_t da = dst_dtype == INFS_DTYPE_FP8_E4M3 ? 4 : infs_dtype_size(dst_dtype);
	size_t sa = src_dtype == INFS_DTYPE_FP8_E4M3 ? 4 : infs_dtype_size(src_dtype);
	if ((uintptr_t)dst % da || (uintptr_t)src % sa)
		return infs__error(INFS_EINVAL, "%s: %s is not aligned to %zu bytes", fn, (uintptr_t)dst % da ? "dst" : "src",
		                   (uintptr_t)dst % da ? da : sa);
	size_t rows;
	if (__builtin_mul_overflow((size_t)g->n_layers * g->n_kv_heads, (size_t)n_tokens, &rows) ||
	    rows > SIZE_MAX / (D + sizeof(float)) / 4)
		return infs__error(INFS_ERANGE, "%s: %u tokens of KV do not fit in memory", fn, n_tokens);
	size_t db = buffer_bytes(dst_dtype, rows, D), sb = buffer_bytes(src_dtype, rows, D);
	uintptr_t d0 = (uintptr_t)dst, s0 = (uintptr_t)src;
	if (rows && d0 < s0 + sb && s0 < d0 + db)
		return infs__error(INFS_EINVAL, "%s: dst and src overlap", fn);

	float x[2 * INFS_ROPE_MAX_PAIRS];
	for (size_t r = 0; r < rows; r++) { /* every row is checked before any is written */
		load(x, src, src_dtype, rows, r, D);
		for (uint32_t i = 0; i < D; i++)
			if (!isfinite(x[i]))
				return infs__error(INFS_EINVAL, "%s: src element %zu is NaN or infinite", fn, r * D + i);
	}
	for (size_t r = 0; r < rows; r++) {
		load(x, src, src_dtype, rows, r, D);
		store(dst, dst_dtype, rows, r, D, x);
	}
	return INFS_OK;
}

#include "util/geometry.h"

#include <math.h>
#include <string.h>

#include "util/error.h"
#include "util/options.h"
#include "util/rope.h"

size_t infs_dtype_size(infs_dtype dtype)
{
	switch (dtype) {
	case INFS_DTYPE_F32: return 4;
	case INFS_DTYPE_F16: return 2;
	case INFS_DTYPE_BF16: return 2;
	case INFS_DTYPE_FP8_E4M3: return 1;
	default: return 0;
	}
}

INFS__DEFINE_INIT(infs_geometry_init, infs_geometry, infs__sizes_geometry, INFS_GEOMETRY_INIT)

int infs__geometry_copy(infs_geometry *dst, const infs_geometry *src)
{
	if (!src)
		return infs__error(INFS_EINVAL, "geometry is NULL");
	*dst = (infs_geometry)INFS_GEOMETRY_INIT;
	return INFS__TAKE(*dst, src, infs__sizes_geometry, "geometry", "struct");
}

int infs_geometry_validate(const infs_geometry *in)
{
	infs_geometry geometry;
	int rc = infs__geometry_copy(&geometry, in);
	if (rc)
		return rc;
	const infs_geometry *g = &geometry;
	if (g->n_layers == 0 || g->n_layers > 4096)
		return infs__error(INFS_EINVAL, "geometry: n_layers %u is not in 1..4096", g->n_layers);
	if (g->n_kv_heads == 0 || g->n_kv_heads > 4096)
		return infs__error(INFS_EINVAL, "geometry: n_kv_heads %u is not in 1..4096", g->n_kv_heads);
	if (g->head_dim == 0 || g->head_dim > 2 * INFS_ROPE_MAX_PAIRS)
		return infs__error(INFS_EINVAL, "geometry: head_dim %u is not in 1..%u", g->head_dim,
		                   2 * INFS_ROPE_MAX_PAIRS);
	if (g->rotary_dim == 0 || g->rotary_dim % 2 || g->rotary_dim > g->head_dim)
		return infs__error(INFS_EINVAL, "geometry: rotary_dim %u must be even and in 2..head_dim (%u)",
		                   g->rotary_dim, g->head_dim);
	if (g->rope_style != INFS_ROPE_NEOX && g->rope_style != INFS_ROPE_GPTJ)
		return infs__error(INFS_EINVAL, "geometry: unknown rope_style %d", (int)g->rope_style);
	if (!(g->rope_theta > 1.0) || !isfinite(g->rope_theta))
		return infs__error(INFS_EINVAL, "geometry: rope_theta %g must be finite and > 1", g->rope_theta);
	switch (g->rope_scaling) {
	case INFS_ROPE_SCALING_NONE:
		break;
	case INFS_ROPE_SCALING_LINEAR:
		if (!(g->rope_factor > 0) || !isfinite(g->rope_factor))
			return infs__error(INFS_EINVAL, "geometry: rope_factor %g must be > 0", g->rope_factor);
		break;
	case INFS_ROPE_SCALING_LLAMA3:
		if (!(g->rope_factor > 0) || !isfinite(g->rope_factor))
			return infs__error(INFS_EINVAL, "geometry: rope_factor %g must be > 0", g->rope_factor);
		if (!(g->rope_low_freq_factor > 0) || !(g->rope_high_freq_factor > g->rope_low_freq_factor))
			return infs__error(INFS_EINVAL,
			                   "geometry: llama3 scaling needs 0 < rope_low_freq_factor (%g) < rope_high_freq_factor (%g)",
			                   g->rope_low_freq_factor, g->rope_high_freq_factor);
		if (g->rope_original_max_pos == 0)
			return infs__error(INFS_EINVAL, "geometry: llama3 scaling needs rope_original_max_pos > 0");
		break;
	case INFS_ROPE_SCALING_YARN:
		if (!(g->rope_factor > 0) || !isfinite(g->rope_factor))
			return infs__error(INFS_EINVAL, "geometry: rope_factor %g must be > 0", g->rope_factor);
		if (g->rope_original_max_pos == 0)
			return infs__error(INFS_EINVAL, "geometry: yarn scaling needs rope_original_max_pos > 0");
		if (!(g->rope_beta_fast > 0) || !(g->rope_beta_slow > 0))
			return infs__error(INFS_EINVAL, "geometry: yarn scaling needs rope_beta_fast and rope_beta_slow > 0");
		if (g->rope_attn_factor < 0 || !isfinite(g->rope_attn_factor))
			return infs__error(INFS_EINVAL, "geometry: rope_attn_factor %g must be >= 0", g->rope_attn_factor);
		break;
	default:
		return infs__error(INFS_EINVAL, "geometry: unknown rope_scaling %d", (int)g->rope_scaling);
	}
	if (infs_dtype_size(g->kv_dtype) == 0)
		return infs__error(INFS_EINVAL, "geometry: unknown kv_dtype %d", (int)g->kv_dtype);
	/* the f32 scales follow the e4m3 bytes: aligned when every row is */
	if (g->kv_dtype == INFS_DTYPE_FP8_E4M3 && g->head_dim % 4)
		return infs__error(INFS_EINVAL, "geometry: kv_dtype fp8_e4m3 needs a head_dim divisible by 4, not %u",
		                   g->head_dim);
	if (g->embed_dim > 65536)
		return infs__error(INFS_EINVAL, "geometry: embed_dim %u is above 65536", g->embed_dim);
	return INFS_OK;
}

size_t infs_geometry_kv_token_bytes(const infs_geometry *g)
{
	if (!g)
		return 0;
	size_t rows = (size_t)g->n_layers * g->n_kv_heads;
	if (g->kv_dtype == INFS_DTYPE_FP8_E4M3) /* e4m3 bytes and an f32 scale per row */
		return rows * (g->head_dim + sizeof(float));
	return rows * g->head_dim * infs_dtype_size(g->kv_dtype);
}

const char *infs__geometry_diff(const infs_geometry *a, const infs_geometry *b)
{
#define DIFF(f)            \
	if (a->f != b->f)  \
		return #f;
	DIFF(n_layers) DIFF(n_kv_heads) DIFF(head_dim) DIFF(rotary_dim) DIFF(rope_style)
	DIFF(rope_theta) DIFF(rope_scaling) DIFF(kv_dtype) DIFF(embed_dim)
	if (a->rope_scaling != INFS_ROPE_SCALING_NONE) {
		DIFF(rope_factor)
	}
	if (a->rope_scaling == INFS_ROPE_SCALING_LLAMA3) {
		DIFF(rope_low_freq_factor) DIFF(rope_high_freq_factor) DIFF(rope_original_max_pos)
	}
	if (a->rope_scaling == INFS_ROPE_SCALING_YARN) {
		DIFF(rope_original_max_pos) DIFF(rope_beta_fast) DIFF(rope_beta_slow) DIFF(rope_attn_factor)
	}
#undef DIFF
	return NULL;
}

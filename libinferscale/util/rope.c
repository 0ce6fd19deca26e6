#include "util/rope.h"

#include <math.h>

static double yarn_correction_dim(double rotations, double dim, double base, double max_pos)
{
	return dim * log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

void infs__rope_init(infs__rope *r, const infs_geometry *g)
{
	uint32_t dim = g->rotary_dim;
	r->style = g->rope_style;
	r->head_dim = g->head_dim;
	r->n_pairs = dim / 2;
	r->attn_scale = 1.0f;
	for (uint32_t i = 0; i < r->n_pairs; i++)
		r->inv_freq[i] = (float)(1.0 / pow(g->rope_theta, (double)(2 * i) / dim));

	double factor = g->rope_factor;
	switch (g->rope_scaling) {
	case INFS_ROPE_SCALING_NONE:
		break;
	case INFS_ROPE_SCALING_LINEAR:
		for (uint32_t i = 0; i < r->n_pairs; i++)
			r->inv_freq[i] = (float)(r->inv_freq[i] / factor);
		break;
	case INFS_ROPE_SCALING_LLAMA3: {
		/* Llama 3.1: long wavelengths are divided by factor, short ones kept,
		 * the band between interpolated smoothly. */
		double old = g->rope_original_max_pos;
		double lo = g->rope_low_freq_factor, hi = g->rope_high_freq_factor;
		double low_wavelen = old / lo, high_wavelen = old / hi;
		for (uint32_t i = 0; i < r->n_pairs; i++) {
			double f = r->inv_freq[i], wavelen = 2.0 * M_PI / f;
			if (wavelen > low_wavelen) {
				f = f / factor;
			} else if (wavelen >= high_wavelen) {
				double smooth = (old / wavelen - lo) / (hi - lo);
				f = (1.0 - smooth) * f / factor + smooth * f;
			}
			r->inv_freq[i] = (float)f;
		}
		break;
	}
	case INFS_ROPE_SCALING_YARN: {
		double base = g->rope_theta, maxp = g->rope_original_max_pos;
		double low = floor(yarn_correction_dim(g->rope_beta_fast, dim, base, maxp));
		double high = ceil(yarn_correction_dim(g->rope_beta_slow, dim, base, maxp));
		if (low < 0)
			low = 0;
		if (high > dim - 1)
			high = dim - 1;
		if (low == high)
			high += 0.001;
		for (uint32_t i = 0; i < r->n_pairs; i++) {
			double extrap = r->inv_freq[i], interp = extrap / factor;
			double ramp = ((double)i - low) / (high - low);
			ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
			double extrap_w = 1.0 - ramp;
			r->inv_freq[i] = (float)(interp * (1.0 - extrap_w) + extrap * extrap_w);
		}
		r->attn_scale = infs__rope_attn_scale(g);
		break;
	}
	}
}

float infs__rope_attn_scale(const infs_geometry *g)
{
	if (g->rope_scaling != INFS_ROPE_SCALING_YARN)
		return 1.0f;
	double a = g->rope_attn_factor, factor = g->rope_factor;
	if (a <= 0)
		a = factor > 1 ? 0.1 * log(factor) + 1.0 : 1.0;
	return (float)a;
}

void infs__rope_cos_sin(const infs__rope *r, int64_t pos, float *cos_out, float *sin_out)
{
	for (uint32_t i = 0; i < r->n_pairs; i++) {
		double a = (double)pos * (double)r->inv_freq[i];
		cos_out[i] = (float)cos(a) * r->attn_scale;
		sin_out[i] = (float)sin(a) * r->attn_scale;
	}
}

void infs__rope_apply(const infs__rope *r, float *x, const float *cos_v, const float *sin_v)
{
	uint32_t n = r->n_pairs;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t a = r->style == INFS_ROPE_NEOX ? i : 2 * i;
		uint32_t b = r->style == INFS_ROPE_NEOX ? i + n : 2 * i + 1;
		float x0 = x[a], x1 = x[b];
		x[a] = x0 * cos_v[i] - x1 * sin_v[i];
		x[b] = x1 * cos_v[i] + x0 * sin_v[i];
	}
}

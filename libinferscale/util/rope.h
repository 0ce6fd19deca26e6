/* Rotary position embedding: frequencies for every scaling the store
 * supports, and the rotation itself. The CPU forward pass, CPU injection and
 * the CUDA kernels all take their frequencies from here. */
#ifndef INFS_ROPE_H
#define INFS_ROPE_H

#include "inferscale/geometry.h"

#define INFS_ROPE_MAX_PAIRS 512

typedef struct infs__rope {
	infs_rope_style style;
	uint32_t head_dim;
	uint32_t n_pairs;     /* rotary_dim / 2 */
	float attn_scale;     /* multiplies cos and sin (YaRN's mscale, else 1) */
	float inv_freq[INFS_ROPE_MAX_PAIRS]; /* float32, as transformers computes them */
} infs__rope;

/* Computes the frequencies of g. g must have passed infs_geometry_validate. */
void infs__rope_init(infs__rope *r, const infs_geometry *g);

/* The factor cos and sin are scaled by: YaRN's mscale, else 1. A rotated
 * pair's members stay within 2 x attn_scale x the larger of the two. */
float infs__rope_attn_scale(const infs_geometry *g);

/* cos and sin (each n_pairs floats, already scaled) for position pos. The
 * angle is formed in double so that large positions keep their precision. */
void infs__rope_cos_sin(const infs__rope *r, int64_t pos, float *cos_out, float *sin_out);

/* Rotates one head vector of head_dim floats in place. */
void infs__rope_apply(const infs__rope *r, float *x, const float *cos_v, const float *sin_v);

#endif

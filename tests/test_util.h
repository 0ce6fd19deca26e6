/* Helpers shared by the tests: random numbers and a geometry to start from. */
#ifndef INFS_TEST_UTIL_H
#define INFS_TEST_UTIL_H

#include <stdint.h>

#include "inferscale/inferscale.h"
#include "util/splitmix.h"

/* One xorshift64 stream per test program, for data that needs no seed of
 * its own. */
static uint64_t rng_state = 0x853c49e6748fea9bu;

static inline uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Uniform in [-1, 1). */
static inline float frnd(void)
{
	return (float)((rnd() >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* The library's splitmix64 over the caller's state, for data rebuilt from a seed. */
#define rng_next infs__splitmix64

/* Uniform in [-1, 1). */
static inline float rng_float(uint64_t *state)
{
	return (float)((double)(rng_next(state) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A geometry of the given shape with full rotary, the defaults of
 * INFS_GEOMETRY_INIT otherwise and embed_dim 8; tests change what they need. */
static inline infs_geometry test_geometry(uint32_t layers, uint32_t heads, uint32_t head_dim, infs_dtype dtype)
{
	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = layers;
	g.n_kv_heads = heads;
	g.head_dim = head_dim;
	g.rotary_dim = head_dim;
	g.kv_dtype = dtype;
	g.embed_dim = 8;
	return g;
}

#endif

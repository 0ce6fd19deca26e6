/* splitmix64: a generator whose whole state is one word that the caller
 * keeps, so that a stream is rebuilt from its seed (the sampler's, and the
 * tests' and GPU benchmarks' data). */
#ifndef INFS_SPLITMIX_H
#define INFS_SPLITMIX_H

#include <stdint.h>

static inline uint64_t infs__splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif

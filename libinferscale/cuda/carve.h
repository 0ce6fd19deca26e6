/* Laying buffers out in one device allocation: a layout function runs
 * twice, first with base NULL to count the bytes, then over the
 * allocation to hand out each buffer's address. */
#ifndef INFS_CARVE_H
#define INFS_CARVE_H

#include <stdint.h>

#define INFS__CARVE_ALIGN 256u

typedef struct infs__carve {
	char *base;
	uint64_t used;
} infs__carve;

/* The next bytes of c, aligned for any kernel's loads; NULL while only
 * counting, and for 0 bytes. */
static inline void *infs__carve_take(infs__carve *c, uint64_t bytes)
{
	const uint64_t at = (c->used + INFS__CARVE_ALIGN - 1) / INFS__CARVE_ALIGN * INFS__CARVE_ALIGN;
	c->used = at + bytes;
	return c->base && bytes ? c->base + at : NULL;
}

#endif

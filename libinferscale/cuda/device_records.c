/* The device copy's record map: every live record of the store by id,
 * open addressing with linear probing. */
#include <stdlib.h>
#include <string.h>

#include "cuda/device_copy.h"
#include "util/error.h"

static size_t slot_of(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

infs__dev_rec *infs__device_rec_mut(infs__device *d, uint64_t id)
{
	return (infs__dev_rec *)infs__device_rec(d, id);
}

const infs__dev_rec *infs__device_rec(const infs__device *d, uint64_t id)
{
	if (!d->recs_cap)
		return NULL;
	for (size_t i = slot_of(id, d->recs_cap);; i = (i + 1) & (d->recs_cap - 1)) {
		if (d->recs[i].id == id)
			return &d->recs[i];
		if (!d->recs[i].id)
			return NULL;
	}
}

int infs__device_rec_reserve(infs__device *d)
{
	if ((d->recs_n + 1) * 2 <= d->recs_cap)
		return INFS_OK;
	size_t cap = d->recs_cap ? d->recs_cap * 2 : 1024;
	infs__dev_rec *t = calloc(cap, sizeof *t);
	if (!t)
		return infs__error(INFS_ENOMEM, "device copy: out of memory for its record map");
	for (size_t i = 0; i < d->recs_cap; i++) {
		if (!d->recs[i].id)
			continue;
		size_t j = slot_of(d->recs[i].id, cap);
		while (t[j].id)
			j = (j + 1) & (cap - 1);
		t[j] = d->recs[i];
	}
	free(d->recs);
	d->recs = t;
	d->recs_cap = cap;
	return INFS_OK;
}

void infs__device_rec_remove(infs__device *d, infs__dev_rec *e)
{
	/* backward-shift deletion keeps every probe chain unbroken */
	size_t mask = d->recs_cap - 1, i = (size_t)(e - d->recs), j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (!d->recs[j].id)
			break;
		size_t home = slot_of(d->recs[j].id, d->recs_cap);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			d->recs[i] = d->recs[j];
			i = j;
		}
	}
	memset(&d->recs[i], 0, sizeof d->recs[i]);
	d->recs_n--;
}

void infs__device_rec_insert(infs__device *d, const infs__dev_rec *e)
{
	size_t i = slot_of(e->id, d->recs_cap);
	while (d->recs[i].id)
		i = (i + 1) & (d->recs_cap - 1);
	d->recs[i] = *e;
	d->recs_n++;
}

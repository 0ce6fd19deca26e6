/* Pools of fact KV: chunks of device memory, or of pinned host memory
 * mapped for the device, handed out in aligned ranges, so that a fact
 * costs no allocation. Released ranges merge with their free neighbours
 * (tier moves release whole namespaces, which then leave room for larger
 * facts) and wait for a device sync before reuse: work queued earlier on
 * any stream may still read them. */
#include <stdlib.h>

#include "cuda/device_copy.h"
#include "util/error.h"

#define ALIGN 256u

static uint64_t round_up(uint64_t bytes)
{
	return (bytes + ALIGN - 1) / ALIGN * ALIGN;
}

static int sync_pending(infs__kvpool *p, const char *fn)
{
	if (!p->pending)
		return INFS_OK;
	cudaError_t err = cudaDeviceSynchronize();
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "waiting for the device before reusing memory");
	p->pending = 0;
	return INFS_OK;
}

static int new_chunk(infs__kvpool *p, uint64_t bytes, uint64_t other, uint32_t *chunk, const char *fn)
{
	uint64_t size = p->chunk_bytes > bytes ? p->chunk_bytes : bytes;
	if (p->budget) {
		uint64_t avail = p->budget > other + p->held ? p->budget - other - p->held : 0;
		if (avail < bytes)
			return INFS_EBUDGET;
		if (size > avail)
			size = avail / ALIGN * ALIGN;
	}
	size_t slot = 0;
	while (slot < p->n_chunks && p->chunks[slot].base)
		slot++;
	if (slot == p->n_chunks) {
		infs__kvpool_chunk *t = realloc(p->chunks, (p->n_chunks + 1) * sizeof *t);
		if (!t)
			return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
		p->chunks = t;
		p->n_chunks++;
	}
	char *base = NULL;
	void *dbase = NULL;
	cudaError_t err;
	if (p->host) {
		err = cudaHostAlloc((void **)&base, size, cudaHostAllocMapped | cudaHostAllocPortable);
		if (err == cudaSuccess && (err = cudaHostGetDevicePointer(&dbase, base, 0)) != cudaSuccess)
			cudaFreeHost(base);
	} else {
		err = cudaMalloc((void **)&base, size);
		dbase = base;
	}
	if (err != cudaSuccess) {
		p->chunks[slot] = (infs__kvpool_chunk){ 0 };
		return infs__cuda_error(err, fn, p->host ? "allocating pinned memory for fact KV"
		                                         : "allocating a chunk of the KV pool");
	}
	p->chunks[slot] = (infs__kvpool_chunk){ base, dbase, size, 0, 0 };
	p->held += size;
	*chunk = (uint32_t)slot;
	return INFS_OK;
}

int infs__kvpool_alloc(infs__kvpool *p, uint64_t bytes, uint64_t other, uint32_t *chunk, char **ptr, const char *fn)
{
	bytes = round_up(bytes);
	if (p->budget && (other > p->budget || bytes > p->budget - other))
		return INFS_EBUDGET; /* never fits */
	for (size_t i = 0; i < p->n_chunks; i++) {
		infs__kvpool_chunk *c = &p->chunks[i];
		if (c->base && c->size - c->used >= bytes) {
			*chunk = (uint32_t)i;
			*ptr = c->base + c->used;
			c->used += bytes;
			c->live += bytes;
			return INFS_OK;
		}
	}
	for (size_t i = 0; i < p->n_free; i++) {
		infs__kvpool_range *f = &p->free[i];
		if (f->size < bytes)
			continue;
		int rc = sync_pending(p, fn);
		if (rc)
			return rc;
		infs__kvpool_chunk *c = &p->chunks[f->chunk];
		*chunk = f->chunk;
		*ptr = c->base + f->off;
		c->live += bytes;
		f->off += bytes;
		f->size -= bytes;
		if (!f->size)
			p->free[i] = p->free[--p->n_free];
		return INFS_OK;
	}
	uint32_t slot = 0;
	int rc = new_chunk(p, bytes, other, &slot, fn);
	if (rc)
		return rc;
	infs__kvpool_chunk *c = &p->chunks[slot];
	*chunk = slot;
	*ptr = c->base;
	c->used = c->live = bytes;
	return INFS_OK;
}

void infs__kvpool_release(infs__kvpool *p, uint32_t chunk, const char *ptr, uint64_t bytes)
{
	bytes = round_up(bytes);
	infs__kvpool_chunk *c = &p->chunks[chunk];
	uint64_t off = (uint64_t)(ptr - c->base);
	c->live -= bytes;
	p->pending = 1;
	for (size_t i = 0; i < p->n_free;) {
		infs__kvpool_range *f = &p->free[i];
		if (f->chunk == chunk && (f->off + f->size == off || off + bytes == f->off)) {
			if (f->off < off)
				off = f->off;
			bytes += f->size;
			p->free[i] = p->free[--p->n_free];
			continue;
		}
		i++;
	}
	if (p->n_free == p->cap_free) {
		size_t cap = p->cap_free ? 2 * p->cap_free : 64;
		infs__kvpool_range *t = realloc(p->free, cap * sizeof *t);
		if (!t)
			return; /* the range is lost to reuse, nothing else */
		p->free = t;
		p->cap_free = cap;
	}
	p->free[p->n_free++] = (infs__kvpool_range){ chunk, off, bytes };
}

static void chunk_free(infs__kvpool *p, infs__kvpool_chunk *c)
{
	if (p->host)
		cudaFreeHost(c->base);
	else
		cudaFree(c->base);
	p->held -= c->size;
	*c = (infs__kvpool_chunk){ 0 };
}

uint64_t infs__kvpool_trim(infs__kvpool *p)
{
	int any = 0;
	for (size_t i = 0; i < p->n_chunks; i++)
		any |= p->chunks[i].base && !p->chunks[i].live;
	if (!any || sync_pending(p, "freeing empty chunks of fact KV"))
		return 0;
	uint64_t given = 0;
	for (size_t i = 0; i < p->n_chunks; i++) {
		infs__kvpool_chunk *c = &p->chunks[i];
		if (!c->base || c->live)
			continue;
		for (size_t j = 0; j < p->n_free;)
			if (p->free[j].chunk == i)
				p->free[j] = p->free[--p->n_free];
			else
				j++;
		given += c->size;
		chunk_free(p, c);
	}
	return given;
}

void infs__kvpool_destroy(infs__kvpool *p)
{
	for (size_t i = 0; i < p->n_chunks; i++)
		if (p->chunks[i].base)
			chunk_free(p, &p->chunks[i]);
	free(p->chunks);
	free(p->free);
	*p = (infs__kvpool){ 0 };
}

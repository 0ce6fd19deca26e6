/* Uploads from pageable memory (the store file's mapping) through pinned
 * buffers of our own: the CPU copies a piece into one buffer while the copy
 * engine sends the piece before from the other, so the bus runs at the
 * speed of pinned copies instead of the driver's pageable path, which
 * copies and sends one piece at a time. */
#include <stdlib.h>
#include <string.h>

#include "cuda/device_copy.h"
#include "util/error.h"

#define PIECE (4u << 20)
#define BUFS 2

struct infs__stager {
	char *buf[BUFS];
	cudaEvent_t done[BUFS]; /* the last copy out of each buffer */
	unsigned next;
};

int infs__stager_create(infs__stager **out, const char *fn)
{
	infs__stager *st = calloc(1, sizeof *st);
	if (!st)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	cudaError_t err = cudaSuccess;
	for (int i = 0; i < BUFS && err == cudaSuccess; i++) {
		err = cudaHostAlloc((void **)&st->buf[i], PIECE, cudaHostAllocPortable);
		if (err == cudaSuccess)
			err = cudaEventCreateWithFlags(&st->done[i], cudaEventDisableTiming);
	}
	if (err != cudaSuccess) {
		infs__stager_free(st);
		return infs__cuda_error(err, fn, "allocating pinned buffers to upload from the store file");
	}
	*out = st;
	return INFS_OK;
}

void infs__stager_free(infs__stager *st)
{
	if (!st)
		return;
	for (int i = 0; i < BUFS; i++) {
		if (st->done[i]) {
			cudaEventSynchronize(st->done[i]);
			cudaEventDestroy(st->done[i]);
		}
		cudaFreeHost(st->buf[i]);
	}
	free(st);
}

int infs__stage_upload(infs__stager *st, void *dst, const void *src, size_t bytes, cudaStream_t stream,
                       const char *fn)
{
	for (size_t off = 0; off < bytes; off += PIECE) {
		const size_t n = bytes - off < PIECE ? bytes - off : PIECE;
		const unsigned b = st->next++ % BUFS;
		cudaError_t err = cudaEventSynchronize(st->done[b]);
		if (err == cudaSuccess) {
			memcpy(st->buf[b], (const char *)src + off, n);
			err = cudaMemcpyAsync((char *)dst + off, st->buf[b], n, cudaMemcpyHostToDevice, stream);
		}
		if (err == cudaSuccess)
			err = cudaEventRecord(st->done[b], stream);
		if (err != cudaSuccess)
			return infs__cuda_error(err, fn, "uploading fact KV from the store file");
	}
	return INFS_OK;
}

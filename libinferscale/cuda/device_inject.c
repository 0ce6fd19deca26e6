/* Injection into a paged KV cache in device memory: resolves each record's
 * K and V on the device (the store's device copy, or a stream-ordered
 * upload from the tier that holds it: pinned memory by the copy engine,
 * the store file through pinned staging buffers), sends the call's small
 * tables through a ring of pinned buffers, and queues the one fused kernel
 * on the caller's stream; then records the use of the facts' namespaces
 * and queues the move up of those it read from a lower tier. Everything
 * was checked by inject.c before this runs. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device_copy.h"
#include "cuda/inject_params.h"
#include "util/error.h"
#include "inject/inject.h"
#include "inject_kernels.h"
#include "util/rope.h"

/* The tables of a call (fact and layer pointers, token offsets, block ids,
 * frequencies) travel through one of RING pinned buffers per device, so the
 * upload is asynchronous; a buffer is reused once the kernel that read it
 * has run (its event). */
#define RING 8
#define MAX_DEVICES 64

typedef struct ring_slot {
	void *host, *dev;
	size_t cap;
	cudaEvent_t done;
} ring_slot;

static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static ring_slot rings[MAX_DEVICES][RING];
static unsigned ring_next[MAX_DEVICES];

static const char fn[] = "infs_inject_into_blocks";

/* Room for the uploads of a call comes from a pool of the library's own
 * per device, which keeps up to SCRATCH_KEEP bytes between calls: the
 * device's default pool gives its memory back at every synchronization,
 * and mapping it again costs more than the copies of a call. */
#define SCRATCH_KEEP ((uint64_t)1 << 30)
static cudaMemPool_t scratch_pools[MAX_DEVICES];

static int scratch_alloc(char **out, size_t bytes, int dev, cudaStream_t stream)
{
	cudaError_t err = cudaSuccess;
	pthread_mutex_lock(&ring_lock);
	if (!scratch_pools[dev]) {
		struct cudaMemPoolProps props = { 0 };
		props.allocType = cudaMemAllocationTypePinned;
		props.location.type = cudaMemLocationTypeDevice;
		props.location.id = dev;
		cudaMemPool_t pool;
		uint64_t keep = SCRATCH_KEEP;
		err = cudaMemPoolCreate(&pool, &props);
		if (err == cudaSuccess && (err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)))
			cudaMemPoolDestroy(pool);
		if (err == cudaSuccess)
			scratch_pools[dev] = pool;
	}
	pthread_mutex_unlock(&ring_lock);
	if (err == cudaSuccess)
		err = cudaMallocFromPoolAsync((void **)out, bytes, scratch_pools[dev], stream);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "allocating room to upload records without a device copy");
	return INFS_OK;
}

/* A record of the call in pinned memory: its chunk of the pinned pool. */
typedef struct pinned_src {
	const char *host;
	size_t bytes, f;
	uint32_t chunk;
} pinned_src;

static int by_address(const void *a, const void *b)
{
	const char *x = ((const pinned_src *)a)->host, *y = ((const pinned_src *)b)->host;
	return (x > y) - (x < y);
}

/* The call's records in pinned memory go first into scratch, in address
 * order, so that records that lie next to each other in a chunk of the
 * pinned pool (a namespace's facts are stored together) go up in one copy:
 * the copy engine's cost per copy is that of a fact's bytes. Chunks are
 * allocations of their own, which one copy must not span even where they
 * happen to touch. off[f] receives each one's place in scratch; returns the
 * bytes used. */
static size_t upload_pinned(cudaError_t *err, char *scratch, size_t *off, pinned_src *ps, size_t n,
                            cudaStream_t stream)
{
	qsort(ps, n, sizeof *ps, by_address);
	size_t at = 0;
	for (size_t i = 0; i < n && *err == cudaSuccess;) {
		size_t j = i + 1, run = ps[i].bytes;
		off[ps[i].f] = at;
		for (; j < n && ps[j].chunk == ps[i].chunk && ps[j].host == ps[j - 1].host + ps[j - 1].bytes; j++) {
			off[ps[j].f] = at + run;
			run += ps[j].bytes;
		}
		*err = cudaMemcpyAsync(scratch + at, ps[i].host, run, cudaMemcpyHostToDevice, stream);
		at += run;
		i = j;
	}
	return at;
}

/* A slot of the device's ring with room for bytes, its last use finished.
 * Called with ring_lock held. */
static int ring_take(ring_slot **out, int dev, size_t bytes)
{
	ring_slot *r = &rings[dev][ring_next[dev]++ % RING];
	cudaError_t err = cudaSuccess;
	if (!r->done)
		err = cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming);
	else
		err = cudaEventSynchronize(r->done);
	if (err == cudaSuccess && r->cap < bytes) {
		size_t cap = bytes < 4096 ? 4096 : bytes * 2;
		cudaFreeHost(r->host);
		cudaFree(r->dev);
		r->host = r->dev = NULL;
		r->cap = 0;
		err = cudaHostAlloc(&r->host, cap, cudaHostAllocDefault);
		if (err == cudaSuccess)
			err = cudaMalloc(&r->dev, cap);
		if (err == cudaSuccess)
			r->cap = cap;
	}
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "preparing the upload of the call's tables");
	*out = r;
	return INFS_OK;
}

int infs__inject_device(const infs__inject_plan *plan)
{
	const infs_kv_layout *l = plan->layout;
	const infs_geometry *g = plan->geom;
	const size_t nf = plan->n_records, L = g->n_layers;
	const cudaStream_t stream = (cudaStream_t)plan->stream;
	if (l->device >= MAX_DEVICES)
		return infs__error(INFS_EUNSUPPORTED, "%s: device %d: at most %d devices are supported", fn, l->device,
		                   MAX_DEVICES);
	if (plan->n_tokens > INT32_MAX || nf > UINT32_MAX)
		return infs__error(INFS_ERANGE, "%s: %u tokens in one call is more than a launch takes", fn, plan->n_tokens);
	infs__rope rope;
	infs__rope_init(&rope, g);
	const uint32_t bs = l->block_size, b0 = plan->start_pos / bs;
	const uint32_t nblk = (plan->start_pos + plan->n_tokens - 1) / bs - b0 + 1;

	/* [src_k][src_v][dst_k][dst_v] pointers, then [first][blocks][inv_freq] */
	const size_t ptr_bytes = 8 * (2 * nf + 2 * L);
	const size_t bytes = ptr_bytes + 4 * (nf + 1 + nblk + rope.n_pairs);
	infs__device *d = infs__device_of(plan->store);
	if (d && d->device != l->device)
		d = NULL;
	const size_t half_token = infs_geometry_kv_token_bytes(g);

	/* per record: its K and V pointers, its device entry, its place in
	 * scratch; and the pinned ones */
	const void **src = malloc(nf * (3 * sizeof *src + sizeof(size_t) + sizeof(pinned_src)));
	if (!src)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	const infs__dev_rec **recs = (const infs__dev_rec **)(src + 2 * nf);
	size_t *off = (size_t *)(recs + nf);
	pinned_src *ps = (pinned_src *)(off + nf);
	int prev, rc = infs__device_enter(&prev, l->device, fn);
	if (rc) {
		free(src);
		return rc;
	}
	cudaError_t err = cudaSuccess;
	/* Records off the device are uploaded, in stream order. */
	size_t upload = 0, n_pinned = 0;
	for (size_t f = 0; f < nf; f++) {
		const infs__dev_rec *e = recs[f] = d ? infs__device_rec(d, plan->records[f].id) : NULL;
		const size_t kv = 2 * (size_t)plan->records[f].n_tokens * half_token;
		if (e && !e->kv && e->host)
			ps[n_pinned++] = (pinned_src){ e->host, kv, f, e->hchunk };
		if (!e || !e->kv)
			upload += kv;
	}
	char *scratch = NULL;
	if (upload && (rc = scratch_alloc(&scratch, upload, l->device, stream))) {
		free(src);
		infs__device_restore(prev);
		return rc;
	}
	size_t up = upload_pinned(&err, scratch, off, ps, n_pinned, stream);
	if (err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "uploading records from pinned memory");
	infs__stager *st = NULL;
	infs__kv_ns *touched = NULL, *queued = NULL;
	for (size_t f = 0; f < nf && rc == INFS_OK; f++) {
		const infs__record *rec = &plan->records[f];
		const infs__dev_rec *e = recs[f];
		const size_t half = (size_t)rec->n_tokens * half_token;
		if (e && e->kns != touched)
			infs__kns_touch(d, touched = e->kns);
		if (e && (e->kv || e->host)) { /* on the device, or uploaded above */
			const char *kv = e->kv ? e->kv : scratch + off[f];
			src[f] = kv;
			src[nf + f] = kv + half;
		} else {
			src[f] = scratch + up;
			src[nf + f] = scratch + up + half;
			if (d) {
				if (!st && !(st = infs__tier_stager_take(d, fn)))
					rc = infs_error_last_code();
				else if (!(rc = infs__stage_upload(st, scratch + up, rec->k, half, stream, fn)))
					rc = infs__stage_upload(st, scratch + up + half, rec->v, half, stream, fn);
			} else {
				err = cudaMemcpyAsync(scratch + up, rec->k, half, cudaMemcpyHostToDevice, stream);
				if (err == cudaSuccess)
					err = cudaMemcpyAsync(scratch + up + half, rec->v, half, cudaMemcpyHostToDevice,
					                      stream);
				if (err != cudaSuccess)
					rc = infs__cuda_error(err, fn, "uploading a record without a device copy");
			}
			up += 2 * half;
		}
		if (e && !e->kv && e->kns != queued && infs__tier_can_rise(d, queued = e->kns, 0))
			infs__tier_queue(d, e->kns->name, 0);
	}
	if (st)
		infs__tier_stager_give(d, st);
	if (rc)
		goto out_unlocked;

	pthread_mutex_lock(&ring_lock);
	ring_slot *r = NULL;
	if ((rc = ring_take(&r, l->device, bytes)))
		goto out;
	char *h = r->host, *dv = r->dev;
	const void **src_k = (const void **)h, **src_v = src_k + nf;
	void **dst_k = (void **)(src_v + nf), **dst_v = dst_k + L;
	uint32_t *first = (uint32_t *)(h + ptr_bytes), *blocks = first + nf + 1;
	float *freq = (float *)(blocks + nblk);
	uintptr_t bits = 0;
	memcpy(src_k, src, 2 * nf * sizeof *src);
	first[0] = 0;
	for (size_t f = 0; f < nf; f++) {
		first[f + 1] = first[f] + plan->records[f].n_tokens;
		bits |= (uintptr_t)src_k[f] | (uintptr_t)src_v[f];
	}
	for (size_t i = 0; i < L; i++) {
		dst_k[i] = l->k_layers[i];
		dst_v[i] = l->v_layers[i];
		bits |= (uintptr_t)dst_k[i] | (uintptr_t)dst_v[i];
	}
	memcpy(blocks, plan->block_table + b0, nblk * sizeof *blocks);
	memcpy(freq, rope.inv_freq, rope.n_pairs * sizeof *freq);

	/* the tables as uploaded: src_k, src_v, dst_k, dst_v, then fact_first, blocks, inv_freq */
	const infs_k_inject_params p = infs__inject_params(
		g, l, (const void *const *)dv, (const void *const *)(dv + 8 * nf), (const uint32_t *)(dv + ptr_bytes),
		(uint32_t)nf, plan->n_tokens, plan->start_pos, (const int32_t *)(dv + ptr_bytes + 4 * (nf + 1)),
		(void *const *)(dv + 8 * 2 * nf), (void *const *)(dv + 8 * (2 * nf + L)), rope.attn_scale,
		(const float *)(dv + ptr_bytes + 4 * (nf + 1 + nblk)), bits);
	err = cudaMemcpyAsync(dv, h, bytes, cudaMemcpyHostToDevice, stream);
	if (err == cudaSuccess)
		err = infs_k_inject(&p, stream);
	if (err == cudaSuccess)
		err = cudaEventRecord(r->done, stream);
	if (err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "queueing the injection");
out:
	pthread_mutex_unlock(&ring_lock);
out_unlocked:
	free(src);
	if (scratch) {
		err = cudaFreeAsync(scratch, stream);
		if (err != cudaSuccess && rc == INFS_OK)
			rc = infs__cuda_error(err, fn, "releasing the upload room");
	}
	infs__device_restore(prev);
	return rc;
}

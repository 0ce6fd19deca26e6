/* Injection from fact ids in device memory (infs_inject_device). An
 * injector holds the device tables of one call, made when it is created,
 * the layout's layer pointers and the RoPE frequencies copied there once.
 * A call queues on the caller's stream the resolve kernel, which looks the
 * ids up in the namespace's device rows, builds the fact tables and checks
 * every limit, then the injection kernel with a grid for max_tokens tokens,
 * which reads the counts the resolve kernel wrote (zero after an error):
 * no allocation, no copy from the host, no wait, so a call can be captured
 * in a CUDA graph. It runs under the store's read lock, as retrieval does:
 * memory the device copy frees is freed only after a device sync. Facts in
 * pinned memory are read there by the kernel, through the mapping; a fact
 * only in the store file makes the call write nothing (status
 * INFS_ENOTRESIDENT), and every call that finds its namespace not all on
 * the device queues its move up. */
#include <stdlib.h>
#include <string.h>

#include "cuda/device_copy.h"
#include "cuda/inject_params.h"
#include "util/error.h"
#include "inject/inject.h"
#include "util/rope.h"
#include "inject_kernels.h"

_Static_assert(INFS_K_RESOLVE_MAX_IDS == INFS_RETRIEVE_K_MAX, "max_ids goes up to INFS_RETRIEVE_K_MAX");

struct infs_injector {
	infs_store *store;
	int device;
	uint32_t max_ids, max_tokens;
	infs_kv_layout layout;      /* the caller's, checked; k_layers and v_layers NULL: dst_k, dst_v hold them */
	float attn_scale;
	uintptr_t ptr_bits;         /* what every source and destination pointer's low bits can be */
	char *mem;                  /* device: the arrays below, one allocation */
	const void **src_k, **src_v; /* [max_ids] */
	void **dst_k, **dst_v;      /* [n_layers] */
	uint32_t *first;            /* [max_ids + 1] */
	uint32_t *counts;           /* [2]: facts, tokens */
	float *inv_freq;            /* [rotary_dim / 2] */
};

int infs__injector_create(infs_injector **out, infs_store *store, const infs_kv_layout *l,
                          const infs_injector_options *o)
{
	static const char fn[] = "infs_injector_create";
	const infs__device *d = infs__device_of(store);
	if (l->device != d->device)
		return infs__error(INFS_EMISMATCH, "%s: the cache is on device %d, the store's device copy on device %d", fn,
		                   l->device, d->device);
	const infs_geometry *g = infs__store_geom(store);
	infs__rope rope;
	infs__rope_init(&rope, g);
	const size_t n = o->max_ids, L = g->n_layers;
	/* [src_k][src_v][dst_k][dst_v] pointers, then [first][counts][inv_freq] */
	const size_t ptr_bytes = sizeof(void *) * (2 * n + 2 * L);
	const size_t bytes = ptr_bytes + 4 * (n + 1 + 2 + rope.n_pairs);
	infs_injector *inj = calloc(1, sizeof *inj);
	char *h = malloc(bytes);
	if (!inj || !h) {
		free(inj), free(h);
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	}
	/* Pool records start 256-aligned and V follows K after whole tokens:
	 * the token's bytes bound V's alignment. */
	uintptr_t bits = (uintptr_t)d->token_bytes;
	void **hk = (void **)(h + sizeof(void *) * 2 * n), **hv = hk + L;
	for (size_t i = 0; i < L; i++) {
		hk[i] = l->k_layers[i];
		hv[i] = l->v_layers[i];
		bits |= (uintptr_t)hk[i] | (uintptr_t)hv[i];
	}
	memcpy(h + ptr_bytes + 4 * (n + 3), rope.inv_freq, 4 * (size_t)rope.n_pairs);

	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc == INFS_OK) {
		cudaError_t err = cudaMalloc((void **)&inj->mem, bytes);
		if (err == cudaSuccess)
			err = cudaMemcpy(inj->mem, h, bytes, cudaMemcpyHostToDevice);
		if (err != cudaSuccess) {
			cudaFree(inj->mem);
			rc = infs__cuda_error(err, fn, "allocating the injector's tables");
		}
		infs__device_restore(prev);
	}
	free(h);
	if (rc) {
		free(inj);
		return rc;
	}
	char *m = inj->mem;
	inj->store = store;
	inj->device = d->device;
	inj->max_ids = o->max_ids;
	inj->max_tokens = o->max_tokens;
	inj->layout = *l;
	inj->layout.k_layers = inj->layout.v_layers = NULL;
	inj->attn_scale = rope.attn_scale;
	inj->ptr_bits = bits;
	inj->src_k = (const void **)m;
	inj->src_v = inj->src_k + n;
	inj->dst_k = (void **)(m + sizeof(void *) * 2 * n);
	inj->dst_v = inj->dst_k + L;
	inj->first = (uint32_t *)(m + ptr_bytes);
	inj->counts = inj->first + n + 1;
	inj->inv_freq = (float *)(inj->counts + 2);
	*out = inj;
	return INFS_OK;
}

void infs__injector_free(infs_injector *inj)
{
	int prev;
	if (infs__device_enter(&prev, inj->device, "infs_injector_free") == INFS_OK) {
		cudaDeviceSynchronize(); /* calls queued on any stream may still use the tables */
		cudaFree(inj->mem);
		infs__device_restore(prev);
	}
	free(inj);
}

int infs__inject_on_device(infs_injector *inj, const char *ns, const void *ids, size_t id_stride,
                           const uint32_t *n_ids, uint32_t start_pos, const int32_t *block_table,
                           size_t block_table_len, uint32_t *next_pos, int32_t *status, void *stream)
{
	static const char fn[] = "infs_inject_device";
	if (start_pos > UINT32_MAX - inj->max_tokens)
		return infs__error(INFS_ERANGE, "%s: start_pos %u plus the injector's max_tokens %u passes position %u", fn,
		                   start_pos, inj->max_tokens, UINT32_MAX);
	const infs_kv_layout *l = &inj->layout;
	const infs_geometry *g = infs__store_geom(inj->store);
	infs__device *d = infs__device_of(inj->store);
	const size_t b0 = start_pos / l->block_size;
	int prev, rc = infs__device_enter(&prev, inj->device, fn);
	if (rc)
		return rc;
	infs__store_read_lock(inj->store);
	/* no namespace on the device: no rows, every id not found */
	const infs__dev_ns *p = infs__device_ns(d, ns);
	infs__kv_ns *k = infs__kns_find(d, ns);
	if (k) {
		infs__kns_touch(d, k);
		if (infs__tier_can_rise(d, k, 0))
			infs__tier_queue(d, ns, 0);
	}
	infs_k_resolve_params rp = {
		.ids = ids, .id_stride = id_stride, .n_ids = n_ids,
		.row_ids = p ? p->ids : NULL, .row_kv = p ? p->kv : NULL, .row_ntok = p ? p->ntok : NULL,
		.dead = p ? p->dead : NULL, .n_rows = p ? p->n_rows : 0,
		.token_bytes = d->token_bytes, .max_ids = inj->max_ids, .max_tokens = inj->max_tokens,
		.start_pos = start_pos, .block_size = l->block_size,
		.block_table = block_table, .block_table_len = block_table_len, .n_blocks = l->n_blocks,
		.src_k = inj->src_k, .src_v = inj->src_v, .fact_first = inj->first, .counts = inj->counts,
		.next_pos = next_pos, .status = status, .err_notfound = INFS_ENOTFOUND, .err_range = INFS_ERANGE,
		.err_notresident = INFS_ENOTRESIDENT,
	};
	/* The table from start_pos's block; past its end every call with
	 * tokens is refused on the device and nothing reads it. The counts are
	 * the device's (written by the resolve), max_ids and max_tokens their
	 * bounds. */
	infs_k_inject_params kp = infs__inject_params(
		g, l, (const void *const *)inj->src_k, (const void *const *)inj->src_v, inj->first, inj->max_ids,
		inj->max_tokens, start_pos, b0 < block_table_len ? block_table + b0 : block_table,
		(void *const *)inj->dst_k, (void *const *)inj->dst_v, inj->attn_scale, inj->inv_freq, inj->ptr_bits);
	kp.dev_counts = inj->counts;
	cudaError_t err = infs_k_inject_resolve(&rp, (cudaStream_t)stream);
	if (err == cudaSuccess)
		err = infs_k_inject(&kp, (cudaStream_t)stream);
	infs__store_read_unlock(inj->store);
	infs__device_restore(prev);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "queueing the injection");
}

/* Chunked RoPE injection inside the library: the checks that every path
 * shares, the host writer, and the hook the CUDA writer implements. */
#ifndef INFS_INJECT_INTERNAL_H
#define INFS_INJECT_INTERNAL_H

#include "inferscale/inject.h"
#include "store/store.h"

/* An injection that has passed every check: the device writer may trust it.
 * Token j of the concatenated records (j < n_tokens) lands at position
 * start_pos + j, block block_table[(start_pos + j) / block_size], slot
 * (start_pos + j) % block_size, for every layer of both K and V. */
typedef struct infs__inject_plan {
	const infs_geometry *geom;      /* the store's: kv_dtype, RoPE, shape */
	const infs_kv_layout *layout;   /* matches geom; strides positive, slots disjoint */
	const infs__record *records;    /* in injection order; k and v in host memory */
	size_t n_records;
	uint32_t n_tokens;              /* sum of the records' n_tokens, >= 1 */
	uint32_t start_pos;             /* start_pos + n_tokens <= UINT32_MAX */
	const int32_t *block_table;     /* host memory; the entries used are in [0, n_blocks) */
	size_t block_table_len;
	infs_store *store;              /* the records' store, for its device copy; may be NULL */
	void *stream;                   /* cudaStream_t for a device layout */
} infs__inject_plan;

/* Copies the caller's layout in to dst as options.h says and checks it
 * against g (device, dtype, shape, pointers, strides); fn names the entry
 * point in messages. */
int infs__inject_take_layout(infs_kv_layout *dst, const infs_kv_layout *in, const infs_geometry *g, const char *fn);

/* Checks the records, positions and block table and fills plan. The layout
 * must have passed infs__inject_take_layout. */
int infs__inject_plan_init(infs__inject_plan *plan, const infs_geometry *g, const infs__record *records,
                           size_t n_records, uint32_t start_pos, const int32_t *block_table,
                           size_t block_table_len, const infs_kv_layout *layout, const char *fn);

/* Writes a checked plan into a host cache. Fails only for lack of memory
 * for its scratch table, before writing anything. */
int infs__inject_host(const infs__inject_plan *plan);

/* Writes a checked plan into a device cache (layout->device >= 0), queued
 * on plan->stream. Implemented by the CUDA module; returns INFS_EDEVICE with
 * a message on a CUDA failure. */
int infs__inject_device(const infs__inject_plan *plan);

/* The device-pointer path (cuda/device_inject_ids.c), its arguments checked
 * by inject.c: o complete and valid, the layout taken and checked, on a
 * device, the store with a device copy. */
int infs__injector_create(infs_injector **out, infs_store *store, const infs_kv_layout *layout,
                          const infs_injector_options *o);
void infs__injector_free(infs_injector *inj);
int infs__inject_on_device(infs_injector *inj, const char *ns, const void *ids, size_t id_stride,
                           const uint32_t *n_ids, uint32_t start_pos, const int32_t *block_table,
                           size_t block_table_len, uint32_t *next_pos, int32_t *status, void *stream);

/* The core of infs_inject_into_blocks, from records already looked up:
 * checks everything, then writes (host or device). On error nothing is
 * written. */
int infs__inject_records(uint32_t *out_next_pos, const infs_geometry *g, const infs__record *records,
                         size_t n_records, uint32_t start_pos, const int32_t *block_table,
                         size_t block_table_len, const infs_kv_layout *layout, infs_store *store,
                         void *stream, const char *fn);

#endif

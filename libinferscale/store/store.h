/* The store as the rest of the library sees it: read access to records and
 * to each namespace's embedding matrix, for retrieval, injection and the
 * device copy. */
#ifndef INFS_STORE_INTERNAL_H
#define INFS_STORE_INTERNAL_H

#include <stdbool.h>

#include "inferscale/store.h"

typedef struct infs__record {
	uint64_t id;
	unsigned flags;             /* INFS_FACT_* */
	uint32_t n_tokens;
	const int32_t *tokens;
	const float *embedding;     /* embed_dim floats; NULL for segments */
	const void *k;              /* [n_layers][n_tokens][n_kv_heads][head_dim], kv_dtype, pre-RoPE */
	const void *v;
	const char *text;           /* "" when none */
	const char *metadata;       /* "" when none */
	uint64_t source_id;
	int64_t timestamp;
} infs__record;

/* Readers hold the shared lock while they use records or matrices; writers
 * (put, delete, compaction) wait for them. Not recursive with a write. */
void infs__store_read_lock(infs_store *s);
void infs__store_read_unlock(infs_store *s);

const infs_geometry *infs__store_geom(const infs_store *s);

/* Checks a namespace name (non-NULL, 1..INFS_NAMESPACE_MAX bytes, valid
 * UTF-8, no control characters) and sets the error message when not. */
int infs__check_namespace(const char *ns);

/* Whether a (checked) namespace name starts with INFS_RESERVED_PREFIX. */
bool infs__namespace_reserved(const char *ns);

/* infs_fact_put without the reserved-namespace check: how the library
 * itself writes its segments into INFS_SEGMENT_NAMESPACE. */
int infs__fact_put(uint64_t *out_id, infs_store *s, const char *ns, const infs_fact *f);

/* A live record of namespace ns, valid until the read lock is released.
 * INFS_ENOTFOUND when the id does not exist, was deleted, or belongs to
 * another namespace. Requires the read lock. */
int infs__store_find(infs__record *out, infs_store *s, const char *ns, uint64_t id);

/* The facts (segments excluded) of namespace ns as a dense row-major matrix of
 * *n rows of embed_dim floats, with their ids in increasing order. *n = 0 for
 * an empty or unknown namespace. Valid until the read lock is released.
 * *generation changes whenever the namespace's facts change, so callers can
 * cache derived indexes. Requires the read lock. */
int infs__store_ns_matrix(const float **emb, const uint64_t **ids, size_t *n, uint64_t *generation,
                          infs_store *s, const char *ns);

/* State that other modules attach to a store (a FAISS index cache, the
 * device copy), and the hooks through which the store keeps it in step
 * without knowing what it is. A hook left NULL is not called; none is
 * called while data is NULL. The store calls destroy(data) when it closes.
 * The owning module does its own locking, except that the hooks below run
 * under the store's lock, so that the store and the state change together:
 *
 * on_put runs under the write lock before a put's record is written, with
 * r pointing at the caller's data (valid only during the call: copy, do
 * not keep). When it fails it has set the error message and left its state
 * as it was, and the put fails with nothing written. When the write fails
 * after on_put succeeded, on_delete(id) takes the fact back out (so a slot
 * with on_put needs on_delete).
 *
 * on_delete runs under the write lock after a delete or a namespace drop
 * is written, once per id removed.
 *
 * bytes, under the read lock, is the device memory held for the store
 * (infs_store_stats.device_bytes sums it over the slots).
 *
 * The tiers of fact KV, which only the device copy has: prefetch
 * (infs_prefetch) and wait (infs_tier_wait) run without the store's lock
 * (the moves they start or wait for take it); tier (an infs_tier for
 * infs_namespace_tier) and stats (adds the tier counters, version 3 of
 * infs_store_stats) under the read lock.
 * (The struct has no typedef: its name is taken by the accessor.) */
struct infs__store_ext {
	void *data;
	void (*destroy)(void *data);
	int (*on_put)(void *data, const char *ns, const infs__record *r);
	void (*on_delete)(void *data, uint64_t id);
	uint64_t (*bytes)(void *data);
	int (*prefetch)(void *data, const char *ns);
	int (*tier)(void *data, const char *ns);
	int (*wait)(void *data);
	void (*stats)(void *data, infs_store_stats *st);
};

/* The write lock, for the device copy's tier moves, which build a new
 * copy of a namespace's KV outside any lock and publish it under this one.
 * Not from a hook (they already run under it). */
void infs__store_write_lock(infs_store *s);
void infs__store_write_unlock(infs_store *s);

typedef enum infs__ext_slot { INFS_EXT_FAISS = 0, INFS_EXT_DEVICE = 1, INFS_EXT_COUNT } infs__ext_slot;

struct infs__store_ext *infs__store_ext(infs_store *s, infs__ext_slot slot);

/* The options the store was opened with (faiss_index, device, budget). */
const infs_store_options *infs__store_opts(const infs_store *s);

/* infs_store_open's work. A store opened with options.device >= 0 gets its
 * device copy from attach, which runs last and installs the INFS_EXT_DEVICE
 * slot (the store is closed when it fails). When attach is NULL such an
 * open is refused with INFS_EUNSUPPORTED before anything is opened or
 * created, "but this build has " no_device. The store knows nothing of what
 * attach builds: infs_store_open (backend.c) supplies both. */
int infs__store_open(infs_store **out, const char *path, const infs_store_options *opts,
                     int (*attach)(infs_store *s), const char *no_device);

#endif

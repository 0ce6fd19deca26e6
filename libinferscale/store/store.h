/* The store as the rest of the library sees it: read access to records and
 * to each namespace's embedding matrix, for retrieval, injection and the
 * device copy. */
#ifndef INFS_STORE_INTERNAL_H
#define INFS_STORE_INTERNAL_H

#include <stdbool.h>
#include <sys/uio.h>

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

/* The facts of namespace ns (0 for an empty or unknown one) and a bound on
 * the tokens of each: no live fact is longer (a deleted one may have been,
 * until compaction), so callers can plan room for any k of them without
 * reading them. Requires the read lock. */
int infs__store_ns_bound(size_t *n_facts, uint32_t *max_tokens, infs_store *s, const char *ns);

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
	/* The remote tier's hooks (remote/remote.h), through which a server
	 * holds the store and the file caches it. writer(data, true) and
	 * (data, false) bracket every put, delete and drop outside the
	 * store's lock, so that the remote tier's own lock comes first.
	 * Under the write lock: take_id gives a put's id (at least floor:
	 * ids are unique across every node sharing the server); put_value
	 * sends the put's record (head and body, rec[0..n-1]) to the server
	 * after the other slots' on_put, and undo_put takes it back when the
	 * local write then fails; erase removes fact id (or, with id 0, the
	 * whole namespace) from the server before the local delete or drop is
	 * written. use, without the lock, brings namespace ns from the server
	 * into the store (infs__store_install) on its first use by this
	 * handle, or every time with refresh. */
	void (*writer)(void *data, bool begin);
	int (*take_id)(void *data, uint64_t floor, uint64_t *id);
	int (*put_value)(void *data, const char *ns, uint64_t id, const struct iovec *rec, int n);
	void (*undo_put)(void *data, const char *ns, uint64_t id);
	int (*erase)(void *data, const char *ns, uint64_t id);
	int (*use)(void *data, const char *ns, bool refresh);
};

/* Brings namespace ns in from the remote tier, when the store has one,
 * before an entry point reads it (retrieval, injection, get, count, list).
 * INFS_OK at once without a remote tier. */
int infs__store_use(infs_store *s, const char *ns);

/* The ids of remote (n_remote ids, the server's set for namespace ns)
 * that the store does not hold live in ns, in a malloc'd array (NULL when
 * none). */
int infs__store_missing(uint64_t **out, size_t *n_out, infs_store *s, const char *ns, const uint64_t *remote,
                        size_t n_remote);

/* Makes namespace ns hold exactly the facts of remote (the server's ids):
 * deletes the local ones not in it, and appends values[i] (values_len[i]
 * bytes each, a whole put record, head and body, as put_value sent it)
 * for the ones it lacks. Every value is checked first (its checksums,
 * its kind, its namespace, its id against want_ids[i], its sizes against
 * the store's geometry): one that fails is refused with INFS_ECORRUPT
 * naming it, and nothing is written. body_crcs[i], when not NULL, is
 * infs__store_value_crc of values[i], taken while it was still in the
 * CPU's caches. */
int infs__store_install(infs_store *s, const char *ns, const uint64_t *remote, size_t n_remote,
                        const unsigned char *const *values, const size_t *values_len, const uint64_t *want_ids,
                        size_t n_values, const char *server, const uint32_t *body_crcs);

/* The checksum a value's record head must hold for its body (0 for a
 * value too short to be a record). */
uint32_t infs__store_value_crc(const unsigned char *v, size_t len);

/* The store's header (geometry and identity, with its checksum) as the
 * remote tier keeps it beside the facts, and its check: *len bytes in a
 * malloc'd buffer. */
int infs__store_header_value(unsigned char **out, size_t *len, const infs_store *s);
/* Decodes a header value into a geometry and an identity (malloc'd);
 * INFS_ECORRUPT when it is not one. */
int infs__header_value_decode(infs_geometry *g, char **identity, const unsigned char *buf, size_t len);

/* The write lock, for the device copy's tier moves, which build a new
 * copy of a namespace's KV outside any lock and publish it under this one.
 * Not from a hook (they already run under it). */
void infs__store_write_lock(infs_store *s);
void infs__store_write_unlock(infs_store *s);

typedef enum infs__ext_slot { INFS_EXT_FAISS = 0, INFS_EXT_DEVICE = 1, INFS_EXT_REMOTE = 2, INFS_EXT_COUNT } infs__ext_slot;

struct infs__store_ext *infs__store_ext(infs_store *s, infs__ext_slot slot);

/* This open of the store: a number no other open in the process has had,
 * so that what is kept for a store (an engine's segment ids, its device
 * tools) is never taken for another opened later at the same address. */
uint64_t infs__store_serial(const infs_store *s);

/* The store's file, for messages. */
const char *infs__store_path(const infs_store *s);

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

/* The store's private state, shared by store*.c only. The on-disk format is
 * described in docs/store-format.md; this header mirrors its constants. */
#ifndef INFS_STORE_IMPL_H
#define INFS_STORE_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "store/store.h"
#include "store/store_record.h"

/* Bytes past the log kept allocated by puts, so that deletes and drops fit
 * on a full disk: a delete record for every live record
 * (infs__index.erase_bytes, which also covers any drop, a drop record being
 * no longer than a delete of the same namespace), plus this much slack. */
#define INFS__RESERVE (64u << 10)

/* A namespace with at least one live record. ids holds facts and segments,
 * fact_ids and emb the facts only (row i of emb belongs to fact_ids[i]);
 * both increase because ids are handed out in increasing order. */
typedef struct infs__ns {
	char *name;
	uint64_t erase_len; /* bytes of a delete record of this namespace */
	uint64_t *ids;
	size_t n_ids, cap_ids;
	uint64_t *fact_ids;
	float *emb;
	size_t n_facts, cap_facts;
	uint32_t max_tokens; /* the longest fact's tokens since the index was built
	                        (deleted facts count: a bound, not the maximum) */
	uint64_t generation;
} infs__ns;

/* A live record: its file offset (of the record head) and total length. */
typedef struct infs__entry {
	uint64_t id; /* 0 marks an empty hash slot; ids start at 1 */
	uint64_t off;
	uint64_t len;
	infs__ns *ns;
	unsigned flags;
} infs__entry;

typedef struct infs__index {
	infs__entry *slots; /* open addressing, linear probing, power-of-two size */
	size_t cap, n;
	infs__ns **ns; /* sorted by name (bytewise) */
	size_t n_ns, cap_ns;
	uint32_t embed_dim;
	uint64_t generation; /* store-wide counter: a re-created namespace never repeats one */
	uint64_t n_facts, n_segments, live_bytes;
	uint64_t erase_bytes; /* the delete records that would erase every live record */
} infs__index;

void infs__index_init(infs__index *ix, uint32_t embed_dim);
void infs__index_free(infs__index *ix);
infs__ns *infs__index_ns(const infs__index *ix, const char *name);
infs__entry *infs__index_get(const infs__index *ix, uint64_t id);
/* Makes room for one more record of namespace name (creating it empty if
 * needed) so that infs__index_add cannot fail. */
int infs__index_reserve(infs__ns **out, infs__index *ix, const char *name);
/* Adds a record; returns the matrix row to fill for a fact, else NULL. */
float *infs__index_add(infs__index *ix, infs__ns *ns, uint64_t id, uint64_t off, uint64_t len, unsigned flags,
                       uint32_t n_tokens);
void infs__index_remove(infs__index *ix, uint64_t id);
void infs__index_drop(infs__index *ix, infs__ns *ns);
/* Frees ns when it holds no records (after a failed write or a removal). */
void infs__index_prune(infs__index *ix, infs__ns *ns);

struct infs_store {
	pthread_rwlock_t lock;
	uint64_t serial;  /* this open's, never repeated in the process (infs__store_serial) */
	char *path;
	int fd;
	bool readonly;
	infs_geometry geom;
	char *identity;
	infs_store_options opts; /* geometry, identity and faiss_index point into this store */
	char *faiss_index;
	size_t kv_token_bytes;
	uint64_t header_len;
	uint32_t version; /* of the file's format */
	uint64_t log_start; /* the first record: after the header, and the slots in format 2 */
	uint64_t end;     /* end of the last valid record: where the next one goes */
	uint64_t next_id;
	uint64_t seq;       /* of the newest commit slot (format 2) */
	uint64_t n_records; /* records in the log */
	uint64_t reserved;  /* the file is allocated up to here (at least) */
	uint64_t dropped_tail;
	uint64_t lost;      /* acknowledged records missing at open */
	uint64_t slot_end;  /* end of the log per the newest sound slot; 0 when none */
	uint64_t lost_slot_end; /* slot_end as the open found it, before a repair's commit */
	bool newer_damaged; /* a damaged slot was the newest commit: lost counts its records */
	uint64_t torn_bytes, torn_records; /* in the .torn files found at open */
	const unsigned char *map; /* PROT_READ, MAP_SHARED; map_cap may run past end */
	size_t map_cap;
	dev_t dev;
	ino_t ino;
	infs__index ix;
	struct infs__store_ext ext[INFS_EXT_COUNT];
};

/* store_file.c: reading and writing the file (the byte layout is in
 * store_record.c). */
int infs__header_read(infs_geometry *g, char **identity, uint64_t *header_len, uint32_t *version, int fd,
                      uint64_t size, const char *path);
/* Writes the next commit slot for the current log (format 2; nothing for 1). */
int infs__commit(infs_store *s);
/* Verifies the log and builds the index; sets end, n_records, dropped_tail,
 * seq, slot_end and lost. */
int infs__store_scan(infs_store *s, uint64_t size);
/* Re-reads the header and every record of the log and checks their
 * checksums; on damage returns INFS_ECORRUPT with *bad_off set. */
int infs__store_verify(infs_store *s, uint64_t *bad_off);
/* Checks the body checksum of the record at off through the mapping. */
bool infs__record_sound(const infs_store *s, uint64_t off, uint64_t len);
int infs__map_reserve(infs_store *s, uint64_t need);
/* Appends a record whose body is iov[1..n-1] (iov[0] is set here to the
 * record head), per the sync mode, and advances s->end. keep: bytes past
 * the record the file must hold allocated first (a put's reserve; 0 for
 * deletes and drops, which write into it). On error the file is cut back
 * and s->end is unchanged. */
int infs__append(infs_store *s, uint32_t type, struct iovec *iov, int n, uint64_t keep, const char *fn);
/* infs__append of a whole record whose head the caller has made or checked
 * already (iov[0] is the head): a remote tier's value, installed as it is. */
int infs__append_record(infs_store *s, struct iovec *iov, int n, uint64_t keep, const char *fn);
/* Writes whole records iov[0..n) past the end in one call, with keep bytes
 * allocated after them (none when keep is 0: deletes and drops use the
 * reserve), without moving s->end: the caller books each
 * (s->end += its length, s->n_records++) and commits once, or cuts the
 * file back to s->end (infs__cut). On error the file is cut back. */
int infs__write_records(infs_store *s, struct iovec *iov, int n, uint64_t keep, const char *fn);
/* Cuts the file back to s->end (what follows it was never booked). */
void infs__cut(infs_store *s);
/* The reserve a put of a record in ns keeps past it: deletes of every live
 * record and of the new one, and the slack. */
uint64_t infs__reserve_after_put(const infs_store *s, const infs__ns *ns);
/* Allocates the reserve past the end of the file at fd (which ends at end)
 * when the file system allows, without reporting anything: a best effort
 * at open and after compaction. Returns the end of what is allocated. */
uint64_t infs__reserve_quietly(int fd, uint64_t end, uint64_t keep);
int infs__write_all(int fd, uint64_t off, struct iovec *iov, int n);
/* Decodes the put record at file offset off (already verified). */
void infs__record_at(infs__record *out, const infs_store *s, uint64_t off);

/* store_check.c: argument checks shared by the entry points. infs__check_fact
 * copies the caller's fact in to dst (options.h) and checks it against g. */
int infs__check_fact(infs_fact *dst, const infs_fact *in, const infs_geometry *g, size_t *text_len,
                     size_t *meta_len);

/* store.c: the extensions' hooks (store.h), under the write lock. A put
 * that one refuses is taken back out of those that took it. */
int infs__ext_put(infs_store *s, const char *ns, const infs__record *r);
void infs__ext_delete(infs_store *s, uint64_t id);

/* store_open.c */
int infs__fsync_dir(const char *path);
void infs__registry_update(dev_t old_dev, ino_t old_ino, dev_t dev, ino_t ino);

#endif

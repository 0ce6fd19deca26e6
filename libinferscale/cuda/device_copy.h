/* The CUDA module's state, shared by device*.c: the store's device copy
 * (fact KV in pooled chunks, each namespace's embeddings), and what each
 * of its files offers the others. */
#ifndef INFS_DEVICE_COPY_H
#define INFS_DEVICE_COPY_H

#include <cuda_runtime_api.h>
#include <pthread.h>

#include "backend/backend.h"
#include "cuda/cuda_util.h"
#include "store/store.h"

/* One namespace's facts on the device, rows in increasing id order (the
 * store hands ids out increasing), deleted rows flagged in dead until the
 * namespace is compacted (when half its rows are dead). The arrays share
 * one allocation, mem. Rows are kept twice: unit vectors in f16 to rank,
 * and the store's f32 rows to score exactly as the CPU does. */
typedef struct infs__dev_ns {
	char *name;
	uint32_t n_rows, n_dead, cap;
	uint64_t *host_ids;         /* the ids of the rows, on the host */
	uint32_t *host_dead;
	void *mem;
	uint64_t *ids;              /* device [cap] */
	const char **kv;            /* device [cap]: the row's K, V after it: in the device pool, in mapped pinned
	                             * memory, or NULL while only the file holds it (rewritten by tier moves) */
	float *emb32;               /* device [cap][embed_dim] */
	float *norm;                /* device [cap] ||row||: inner-product ranking */
	float *inv;                 /* device [cap] 1/||row|| rounded as the CPU's: cosine scores */
	uint32_t *ntok;             /* device [cap] the row's tokens */
	uint16_t *emb;              /* device [cap][embed_dim] */
	uint32_t *dead;             /* device [cap / 32] bitmap */
	struct infs__dev_ns *next;
} infs__dev_ns;

/* Memory in chunks (device memory, or pinned host memory mapped for the
 * device) handed out in 256-byte aligned ranges: no allocation per fact.
 * A released range is merged with its free neighbours and reused only
 * after a device sync, since work queued before the release may still read
 * it (device_pool.c). */
typedef struct infs__kvpool_chunk {
	char *base;                 /* NULL: a slot given back */
	char *dbase;                /* the device's address of base */
	uint64_t size, used;        /* used: bytes from base ever handed out */
	uint64_t live;              /* bytes handed out and not released */
} infs__kvpool_chunk;

typedef struct infs__kvpool_range {
	uint32_t chunk;
	uint64_t off, size;
} infs__kvpool_range;

typedef struct infs__kvpool {
	int host;                   /* pinned host memory */
	uint64_t budget;            /* 0: no limit */
	uint64_t chunk_bytes;       /* a new chunk's size, unless a range needs more */
	uint64_t held;              /* bytes of the chunks */
	infs__kvpool_chunk *chunks;
	size_t n_chunks;
	infs__kvpool_range *free;
	size_t n_free, cap_free;
	int pending;                /* ranges released since the last device sync */
} infs__kvpool;

/* Room for bytes (rounded up to 256) in p: the unused end of a chunk, a
 * released range (after a device sync when one is pending), or a new
 * chunk if the budget, less other bytes counted against it, holds it.
 * INFS_EBUDGET, with no message, when there is no room; other errors set
 * the message. The device must be current. */
int infs__kvpool_alloc(infs__kvpool *p, uint64_t bytes, uint64_t other, uint32_t *chunk, char **ptr, const char *fn);
void infs__kvpool_release(infs__kvpool *p, uint32_t chunk, const char *ptr, uint64_t bytes);
/* Gives back the chunks nothing lives in (after a device sync when a
 * release is pending); returns the bytes given back. */
uint64_t infs__kvpool_trim(infs__kvpool *p);
void infs__kvpool_destroy(infs__kvpool *p);

/* The device's address of ptr, from chunk of p. */
static inline const char *infs__kvpool_dptr(const infs__kvpool *p, uint32_t chunk, const char *ptr)
{
	return p->chunks[chunk].dbase + (ptr - p->chunks[chunk].base);
}

/* Uploads from pageable memory (the store file's mapping) through two
 * pinned buffers: the CPU fills one while the copy engine sends the other,
 * each refilled once its copy is done (device_stage.c). */
typedef struct infs__stager infs__stager;
int infs__stager_create(infs__stager **out, const char *fn);
void infs__stager_free(infs__stager *st);
/* Queues the copy of bytes from src (host) to dst (device) on stream; src
 * is read before the call returns. */
int infs__stage_upload(infs__stager *st, void *dst, const void *src, size_t bytes, cudaStream_t stream,
                       const char *fn);

struct infs__kv_ns;

/* A record of the store: where its pre-RoPE K then V lie in each tier that
 * holds them (the file always does), and its embedding's row (UINT32_MAX
 * for a segment). */
typedef struct infs__dev_rec {
	uint64_t id;                /* 0: an empty slot (ids start at 1) */
	char *kv;                   /* in the device pool; NULL: not on the device */
	char *host;                 /* in the pinned pool; NULL: not in pinned memory */
	const char *rowv;           /* the K pointer its device row holds (row_kv of the resolve kernel) */
	uint64_t bytes;             /* K and V */
	uint32_t chunk, hchunk;     /* of kv in the device pool, of host in the pinned pool */
	uint32_t row;
	uint32_t pos;               /* in its kv namespace's ids */
	infs__dev_ns *ns;           /* its rows' namespace; NULL for a segment */
	struct infs__kv_ns *kns;
} infs__dev_rec;

/* A namespace's fact KV in the tiers, facts and segments alike, with the
 * clock of its last use (injection, prefetch, put) for least recently used
 * eviction. */
typedef struct infs__kv_ns {
	char *name;
	uint64_t *ids;              /* its records, in no order */
	uint32_t n, cap;
	uint32_t n_dev, n_up;       /* records on the device; on the device or in pinned memory */
	uint64_t bytes, dev_bytes, host_bytes;
	uint64_t lru;               /* atomic: readers touch it under the read lock */
	struct infs__kv_ns *next;
} infs__kv_ns;

/* A tier move queued for the store's thread: a namespace's KV moved up
 * (prefetch, or after an injection read it from a lower tier), or down to
 * pinned memory after its eviction from the device. */
typedef struct infs__move {
	char *name;
	int down;
} infs__move;

/* The INFS_EXT_DEVICE slot. Its structure changes only under the store's
 * write lock (its hooks, and the tier moves' short reservations and
 * publications), so readers (injection, retrieval) under the read lock see
 * it stable without a lock of their own. */
typedef struct infs__device {
	int device;
	infs_store *store;
	uint64_t budget;            /* 0: none; counts rows and pool chunks */
	uint64_t rows;              /* bytes of the namespaces' row arrays */
	size_t token_bytes;         /* K (or V) bytes of one token, all layers */
	uint32_t embed_dim;
	infs__dev_rec *recs;        /* open addressing by id: every live record */
	size_t recs_cap, recs_n;
	infs__kvpool dpool;           /* fact KV on the device */
	infs__kvpool hpool;           /* fact KV in pinned host memory (budget 0: none) */
	infs__dev_ns *ns;
	infs__kv_ns *kns;
	uint64_t tick;              /* atomic: the clock of kv namespaces' uses */
	uint64_t kv_dev, kv_host;   /* bytes of fact KV in each tier */
	uint64_t evictions, host_evictions, promotions;

	/* rows rewritten by a tier move (infs_k_set_rows): their device table */
	cudaStream_t set_stream;
	void *set_buf;
	size_t set_cap;

	/* The store's thread and its queue of tier moves (device_tiers.c). */
	pthread_t mover;
	int mover_started, stop, busy;
	pthread_mutex_t q_lock;
	pthread_cond_t q_cond, q_idle;
	infs__move *queue;
	size_t q_n, q_cap;
	cudaStream_t move_stream;
	infs__stager *move_stager;

	/* Stagers of the injections that upload from the file (device_inject.c). */
	pthread_mutex_t stage_lock;
	infs__stager **stagers;
	size_t n_stagers, cap_stagers;

	/* Searchers of the host-pointer path, each with its own stream, taken
	 * by one search at a time: concurrent searches do not wait for each
	 * other (device_retrieve.c). */
	pthread_mutex_t pool_lock;
	struct infs_searcher *pool;
} infs__device;

/* The tiers (device_tiers.c). Under the write lock unless said otherwise. */

/* The kv namespace name, or NULL. Under the read lock. */
infs__kv_ns *infs__kns_find(const infs__device *d, const char *name);
/* Records a use of k (injection, prefetch, put): any lock. */
void infs__kns_touch(infs__device *d, infs__kv_ns *k);
/* Adds record r of namespace ns (rows p, row; p NULL and row UINT32_MAX
 * for a segment) to the map and its kv namespace, on the device when it
 * finds room there (evicting least recently used namespaces but its own
 * when evict is set), else in the file's tier only. *row_kv: the row's K
 * pointer (NULL off the device). */
int infs__tier_add(infs__device *d, const infs__record *r, const char *ns, infs__dev_ns *p, uint32_t row,
                   int evict, const char **row_kv, const char *fn);
/* Releases record e's copies and takes it out of its kv namespace (the
 * caller then removes it from the map). */
void infs__tier_drop(infs__device *d, infs__dev_rec *e);
/* Makes room for more bytes of rows within the budget, evicting any
 * namespace's KV, least recently used first, and giving back empty pool
 * chunks; INFS_EBUDGET with no message when even that is not enough. */
int infs__tier_rows_room(infs__device *d, uint64_t more);
/* Whether a move of k (down: to pinned memory only) may find room for any
 * of its records off their tier: no room on the device for a record of
 * k's mean size beside the rows, and no pinned tier, say no. Under the
 * read lock. */
int infs__tier_can_rise(const infs__device *d, const infs__kv_ns *k, int down);
/* Queues a tier move of namespace name (any lock, or none). */
void infs__tier_queue(infs__device *d, const char *name, int down);
/* The store's thread: started last by attach, stopped first by destroy. */
int infs__tier_start(infs__device *d, const char *fn);
void infs__tier_stop(infs__device *d);
/* The stagers of injections: one taken per call, given back once its
 * copies are queued. */
infs__stager *infs__tier_stager_take(infs__device *d, const char *fn);
void infs__tier_stager_give(infs__device *d, infs__stager *st);
/* The slot's tier hooks (store.h). */
int infs__tier_prefetch(void *data, const char *ns);
int infs__tier_of(void *data, const char *ns);
int infs__tier_wait(void *data);
void infs__tier_stats(void *data, infs_store_stats *st);

/* The record map (device_records.c). Under the write lock. */
infs__dev_rec *infs__device_rec_mut(infs__device *d, uint64_t id);
/* Room for one more record in the map. */
int infs__device_rec_reserve(infs__device *d);
void infs__device_rec_insert(infs__device *d, const infs__dev_rec *e);
void infs__device_rec_remove(infs__device *d, infs__dev_rec *e);

/* Each namespace's embeddings (device_rows.c). Under the write lock. */
/* The rows of namespace name, made empty when it has none. */
infs__dev_ns *infs__rows_get(infs__device *d, const char *name, const char *fn);
/* Appends n rows (ids increasing, all above the namespace's last). */
int infs__rows_append(infs__device *d, infs__dev_ns *p, const float *emb, const uint64_t *ids, uint32_t n,
                      const char *fn);
/* Sets where rows row .. row + n's K lies and their tokens. */
int infs__rows_set_kv(infs__dev_ns *p, uint32_t row, const char *const *kv, const uint32_t *ntok, uint32_t n,
                      const char *fn);
/* Flags row of p dead: p is compacted once half its rows are dead, and
 * freed (unlinked) once all are. */
void infs__rows_drop(infs__device *d, infs__dev_ns *p, uint32_t row);
/* Takes p out of d's list and frees it. */
void infs__rows_unlink(infs__device *d, infs__dev_ns *p);

/* Builds the device copy of store s and installs its hooks (device_copy.c):
 * the backend's attach. */
int infs__device_attach(infs_store *s);

/* The model on a device (device_model.c), the backend's model_* entries. */
struct infs_model;
struct infs__device_forward;
int infs__device_model_upload(struct infs_model *m, int device, uint64_t budget, uint32_t max_tokens);
int infs__device_model_random(struct infs_model *m, int device, uint32_t max_tokens, uint64_t seed);
void infs__device_model_release(struct infs_model *m);
int infs__device_model_forward(const struct infs_model *m, const struct infs__device_forward *a);
/* Accuracy recovery on the device (device_recompute.c). */
struct infs__recompute_args;
int infs__device_model_recompute(const struct infs_model *m, const struct infs__recompute_args *a, float *logits,
                                 void *stream);

/* Fact encoding (device_encode.c): model_encode is begin, run, end; the
 * GPU benchmark times run alone. begin allocates, on the model's device,
 * a cache for n_context tokens and the buffers of device_max_tokens
 * tokens of K/V in kv_dtype; run encodes a job whose n_context is at most
 * begin's and whose kv_dtype is begin's. */
typedef struct infs__encode_ws infs__encode_ws;
int infs__device_encode_begin(infs__encode_ws **out, const struct infs_model *m, uint32_t n_context,
                              infs_dtype kv_dtype);
int infs__device_encode_run(infs__encode_ws *w, const infs__encode_job *job);
void infs__device_encode_end(infs__encode_ws *w);
int infs__device_model_encode(const struct infs_model *m, const infs__encode_job *job);

/* The engine on a device (device_engine.c). */
extern const struct infs__dengine_ops infs__dengine_cuda;

/* Releases the searchers of d's pool (device_retrieve.c). */
void infs__device_pool_free(infs__device *d);

/* The store's device copy, or NULL when it has none. */
static inline infs__device *infs__device_of(infs_store *s)
{
	return s ? infs__store_ext(s, INFS_EXT_DEVICE)->data : NULL;
}

/* Record id of the device copy (kv NULL when it is not on the device), or
 * NULL. */
const infs__dev_rec *infs__device_rec(const infs__device *d, uint64_t id);

/* The device copy of namespace ns, or NULL when it has no facts there. */
infs__dev_ns *infs__device_ns(const infs__device *d, const char *ns);

#endif

/* The CUDA module's state, shared by device*.c: the store's device copy
 * (fact KV in pooled chunks, each namespace's embeddings) and the
 * conversions of CUDA and cuBLAS failures into inferscale errors. */
#ifndef INFS_DEVICE_COPY_H
#define INFS_DEVICE_COPY_H

#include <cuda_runtime_api.h>
#include <pthread.h>

#include "cuda/device.h"
#include "store/store.h"

/* Sets the calling thread's message for a failed CUDA call and returns
 * INFS_EDEVICE (INFS_EBUDGET when the device is out of memory). */
int infs__cuda_error(cudaError_t err, const char *fn, const char *what);

/* Makes dev the calling thread's current device, remembering the previous
 * one in *prev for infs__device_restore. */
int infs__device_enter(int *prev, int dev, const char *fn);
void infs__device_restore(int prev);

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
	const char **kv;            /* device [cap]: the row's K in the pool; V follows it */
	float *emb32;               /* device [cap][embed_dim] */
	float *norm;                /* device [cap] ||row||: inner-product ranking */
	float *inv;                 /* device [cap] 1/||row|| rounded as the CPU's: cosine scores */
	uint32_t *ntok;             /* device [cap] the row's tokens */
	uint16_t *emb;              /* device [cap][embed_dim] */
	uint32_t *dead;             /* device [cap / 32] bitmap */
	struct infs__dev_ns *next;
} infs__dev_ns;

/* Where a record's pre-RoPE K then V lie on the device, and its
 * embedding's row (row UINT32_MAX for a segment). */
typedef struct infs__dev_rec {
	uint64_t id;                /* 0: an empty slot (ids start at 1) */
	char *kv;
	uint64_t bytes;
	uint32_t chunk;
	uint32_t row;
	infs__dev_ns *ns;
} infs__dev_rec;

typedef struct infs__dev_chunk {
	char *base;
	uint64_t size, used;
} infs__dev_chunk;

typedef struct infs__dev_free {
	uint32_t chunk;
	uint64_t off, size;
} infs__dev_free;

/* The INFS_EXT_DEVICE slot. Its structure changes only in the store's
 * hooks, under the store's write lock, so readers (injection, retrieval)
 * under the read lock see it stable without a lock of their own. */
typedef struct infs__device {
	int device;
	uint64_t budget, used;      /* budget 0: none */
	size_t token_bytes;         /* K (or V) bytes of one token, all layers */
	uint32_t embed_dim;
	infs__dev_rec *recs;        /* open addressing by id */
	size_t recs_cap, recs_n;
	infs__dev_chunk *chunks;
	size_t n_chunks;
	infs__dev_free *free;       /* freed KV ranges, reusable after a device sync */
	size_t n_free, cap_free;
	int free_pending;           /* ranges freed since the last device sync */
	infs__dev_ns *ns;

	/* Searchers of the host-pointer path, each with its own stream, taken
	 * by one search at a time: concurrent searches do not wait for each
	 * other (device_retrieve.c). */
	pthread_mutex_t pool_lock;
	struct infs_searcher *pool;
} infs__device;

/* The model on a device (device_model.c), the backend's model_* entries. */
struct infs_model;
struct infs__device_forward;
int infs__device_model_upload(struct infs_model *m, int device, uint64_t budget, uint32_t max_tokens);
int infs__device_model_random(struct infs_model *m, int device, uint32_t max_tokens, uint64_t seed);
void infs__device_model_release(struct infs_model *m);
int infs__device_model_forward(const struct infs_model *m, const struct infs__device_forward *a);

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
infs__device *infs__device_of(infs_store *s);

/* The device copy of record id, or NULL. */
const infs__dev_rec *infs__device_rec(const infs__device *d, uint64_t id);

/* The device copy of namespace ns, or NULL when it has no facts there. */
infs__dev_ns *infs__device_ns(const infs__device *d, const char *ns);

#endif

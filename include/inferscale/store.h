/* inferscale — the fact store: a crash-safe file of facts, each kept once
 * under a 64-bit id with its retrieval embedding and its pre-RoPE KV. */
#ifndef INFERSCALE_STORE_H
#define INFERSCALE_STORE_H

#include "inferscale/geometry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A store handle. Safe to share between threads of one process. */
typedef struct infs_store infs_store;

/* Limits checked at every entry point. */
#define INFS_NAMESPACE_MAX 255u        /* bytes, without the terminating NUL */
#define INFS_IDENTITY_MAX 4096u
#define INFS_TEXT_MAX (1u << 20)
#define INFS_METADATA_MAX (64u << 10)
#define INFS_FACT_TOKENS_MAX 65536u

/* Namespaces whose names start with this prefix are reserved for the
 * library (the engine keeps its prompt segments in "inferscale.segments"):
 * infs_fact_put, infs_fact_encode, infs_fact_delete and infs_namespace_drop
 * refuse them with INFS_EINVAL; reads (get, count, list, retrieve, inject)
 * are allowed. */
#define INFS_RESERVED_PREFIX "inferscale."

/* infs_store_options.flags */
#define INFS_OPEN_CREATE (1u << 0)   /* create the store if the path does not exist */
#define INFS_OPEN_READONLY (1u << 1) /* no writes; does not take the writer lock */

/* When acknowledged writes reach stable storage. In every mode a write is in
 * the operating system's hands before the call returns, so it survives the
 * process being killed; the modes differ for power loss and kernel crashes. */
typedef enum infs_sync_mode {
	INFS_SYNC_FULL = 0,  /* fsync before every write call returns (default) */
	INFS_SYNC_NORMAL = 1,/* fsync on close, compaction and infs_store_sync() */
	INFS_SYNC_OFF = 2    /* never fsync */
} infs_sync_mode;

#define INFS_STORE_OPTIONS_VERSION 3

typedef struct infs_store_options {
	unsigned version;
	unsigned flags;                /* INFS_OPEN_* */
	const infs_geometry *geometry; /* required to create; checked against the store when set */
	const char *identity;          /* model, tokenizer, template...: required to create; checked when set */
	infs_sync_mode sync;
	int device;                    /* -1: host only; >= 0: keep a copy on this CUDA device */
	uint64_t device_budget_bytes;  /* device memory the store may use; 0 = no limit (infs_prefetch) */
	const char *faiss_index;       /* FAISS index factory string ("Flat", "HNSW32", ...); NULL = none */
	uint64_t faiss_min_facts;      /* namespaces at least this large use FAISS under INFS_BACKEND_AUTO */
	/* version 2 */
	uint64_t host_budget_bytes;    /* pinned host memory for fact KV off the device; 0 = none (infs_prefetch) */
	/* version 3: the remote tier on a Redis or Valkey server (docs/scale-out.md).
	 * With remote set, the server holds the store and the file is a cache of
	 * it: puts, encodes, deletes and drops are acknowledged once the server
	 * has them, and a namespace is brought into the file whole on
	 * infs_prefetch or on its first use by this handle. remote may list
	 * several seeds separated by commas: the first that answers serves, and
	 * a Redis Cluster is followed to the node of each namespace's slot. A
	 * build without hiredis refuses remote with INFS_EUNSUPPORTED. */
	const char *remote;            /* "redis://[user[:password]@]host[:port]", "host:port", a list; NULL = none */
	const char *remote_user;       /* ACL user (overrides the URL's); NULL = the URL's, or none */
	const char *remote_password;   /* ACL password (overrides the URL's); NULL = the URL's, or none */
	unsigned remote_timeout_ms;    /* connecting and each command; 0 = 2000 */
	const char *remote_prefix;     /* key prefix, [A-Za-z0-9._-], 1..64 bytes; NULL = "infs" */
	unsigned remote_replicas;      /* a write waits (WAIT) for this many replicas; 0 = the primary only */
} infs_store_options;

#define INFS_STORE_OPTIONS_INIT \
	{ INFS_STORE_OPTIONS_VERSION, 0, NULL, NULL, INFS_SYNC_FULL, -1, 0, NULL, 100000, 0, NULL, NULL, NULL, 0, NULL, 0 }

INFS_API int infs_store_options_init(infs_store_options *opts, unsigned version);

/* Opens (or with INFS_OPEN_CREATE creates) the store at path, which must be
 * a regular file. A second writer, in this or another process, gets
 * INFS_EBUSY. A torn tail left by a crash is dropped, and acknowledged
 * records found missing are counted: both are reported in infs_store_stats
 * and, after an open that returns INFS_OK, in infs_error_last(). A writable
 * open copies dropped bytes to <path>.torn before cutting them off. */
INFS_API int infs_store_open(infs_store **out, const char *path, const infs_store_options *opts);

/* Flushes per the sync mode and releases the store. Accepts NULL. No other
 * thread may use the store during or after this call. */
INFS_API void infs_store_close(infs_store *store);

/* The store's geometry and identity (owned by the store). */
INFS_API int infs_store_geometry(infs_geometry *out, const infs_store *store);
INFS_API const char *infs_store_identity(const infs_store *store);

/* Forces every acknowledged write to stable storage. */
INFS_API int infs_store_sync(infs_store *store);

/* Rewrites the file without deleted records, atomically: a crash at any
 * point leaves either the old file or the new one, each complete. */
INFS_API int infs_store_compact(infs_store *store);

#define INFS_STORE_STATS_VERSION 4

typedef struct infs_store_stats {
	unsigned version;             /* set by the caller */
	uint64_t n_facts;             /* live facts in all namespaces */
	uint64_t n_segments;          /* live segments in all namespaces */
	uint64_t n_namespaces;        /* namespaces with at least one live record */
	uint64_t file_bytes;
	uint64_t live_bytes;          /* bytes of live records */
	uint64_t dropped_tail_bytes;  /* torn or corrupt tail dropped when opening */
	uint64_t device_bytes;        /* device memory held for this store */
	/* version 2 */
	uint64_t lost_records;        /* acknowledged records missing when opening */
	/* version 3: the tiers of fact KV (infs_prefetch); 0 without a device copy */
	uint64_t host_bytes;          /* pinned host memory held for this store */
	uint64_t kv_device_bytes;     /* fact KV (K and V) held on the device */
	uint64_t kv_host_bytes;       /* fact KV held in pinned host memory */
	uint64_t device_evictions;    /* namespaces whose KV left the device for lack of room */
	uint64_t host_evictions;      /* namespaces whose KV left pinned host memory for lack of room */
	uint64_t promotions;          /* namespaces whose KV was moved up (prefetch, injection) */
	/* version 4: what writable opens set aside before, as found by this
	 * open: the files <path>.torn, <path>.torn.1, ... up to the first missing */
	uint64_t torn_bytes;          /* bytes in those files */
	uint64_t torn_records;        /* whole records in them (sound head, body inside the file) */
} infs_store_stats;

/* out->version may be 1 to 4: fields past it are not written. */
INFS_API int infs_store_stats_get(infs_store_stats *out, infs_store *store);

/* Re-reads the header and every record of the open store's log from the
 * file and checks their checksums. INFS_ECORRUPT names the first damaged
 * record (offset, and the fact id and namespace when it is a live fact's);
 * bad_offset and bad_id (each may be NULL) receive its offset and fact id
 * (0 when none). */
INFS_API int infs_store_verify(infs_store *store, uint64_t *bad_offset, uint64_t *bad_id);

/* infs_fact.flags */
#define INFS_FACT_SEGMENT (1u << 0) /* header, footer or separator: injectable, never retrieved */

#define INFS_FACT_VERSION 1

/* What infs_fact_put stores. K and V are laid out
 * [n_layers][n_tokens][n_kv_heads][head_dim] in the store's kv_dtype, keys
 * before rotary embedding. */
typedef struct infs_fact {
	unsigned version;
	unsigned flags;             /* INFS_FACT_* */
	uint32_t n_tokens;          /* 1 .. INFS_FACT_TOKENS_MAX */
	const int32_t *tokens;      /* n_tokens token ids */
	const float *embedding;     /* embed_dim floats; required for facts, NULL for segments */
	const void *k;
	const void *v;
	const char *text;           /* optional UTF-8, < INFS_TEXT_MAX bytes */
	const char *metadata;       /* optional UTF-8 (JSON by convention), < INFS_METADATA_MAX */
	uint64_t source_id;         /* caller's reference, e.g. a conversation turn */
	int64_t timestamp;          /* caller's clock, e.g. Unix seconds */
} infs_fact;

#define INFS_FACT_INIT { INFS_FACT_VERSION, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0 }

/* Stores a fact in namespace ns (not a reserved one: INFS_RESERVED_PREFIX)
 * and returns its id, unique within the store and never reused. When it returns INFS_OK the fact survives a crash of the
 * process (see infs_sync_mode for power loss). */
INFS_API int infs_fact_put(uint64_t *out_id, infs_store *store, const char *ns, const infs_fact *fact);

/* A stored fact, as returned by infs_fact_get: a copy the caller owns. */
typedef struct infs_fact_record {
	uint64_t id;
	unsigned flags;
	uint32_t n_tokens;
	const int32_t *tokens;
	const float *embedding;     /* NULL for segments */
	const void *k;              /* [n_layers][n_tokens][n_kv_heads][head_dim], pre-RoPE */
	const void *v;
	const char *text;           /* "" when none was stored */
	const char *metadata;       /* "" when none was stored */
	uint64_t source_id;
	int64_t timestamp;
} infs_fact_record;

/* Reads fact id of namespace ns. An id of another namespace is
 * INFS_ENOTFOUND, exactly like an id that never existed. */
INFS_API int infs_fact_get(infs_fact_record **out, infs_store *store, const char *ns, uint64_t id);
INFS_API void infs_fact_record_free(infs_fact_record *record);

/* Deletes fact id of namespace ns (durable like a put); INFS_EINVAL for a
 * reserved namespace. */
INFS_API int infs_fact_delete(infs_store *store, const char *ns, uint64_t id);

/* Live records (facts and segments) in namespace ns; 0 for an unknown one. */
INFS_API int infs_fact_count(uint64_t *out, infs_store *store, const char *ns);

/* The ids of namespace ns in increasing order, in an array released with
 * infs_free. An unknown namespace gives *out_n = 0 and *out_ids = NULL. */
INFS_API int infs_fact_list(uint64_t **out_ids, size_t *out_n, infs_store *store, const char *ns);

/* The names of the namespaces holding live records, sorted, as one
 * allocation (array and strings) released with infs_free. */
INFS_API int infs_namespace_list(char ***out_names, size_t *out_n, infs_store *store);

/* Deletes every record of namespace ns; INFS_EINVAL for a reserved one. */
INFS_API int infs_namespace_drop(infs_store *store, const char *ns);

/* A number that changes with every change of namespace ns (a put, a
 * delete, a drop) and never repeats in the life of the handle. CUDA graphs
 * that captured infs_retrieve_device or infs_inject_device on ns must be
 * captured again once it changes. */
INFS_API int infs_namespace_generation(uint64_t *out, infs_store *store, const char *ns);

/* Where a namespace's fact KV lies, fastest first. A store with a device
 * copy keeps every namespace's retrieval rows on the device and its KV in
 * the fastest tier with room: the device (device_budget_bytes), pinned
 * host memory that the device reads over the bus (host_budget_bytes), the
 * store file (always all of it). Budgets are filled per namespace and
 * evicted least recently used (injection, prefetch and puts use a
 * namespace); an injection reads each fact from the tier that holds it and
 * then moves its namespace up in the background. docs/cuda.md, "Tiers". */
typedef enum infs_tier {
	INFS_TIER_DEVICE = 0, /* all of its KV on the device */
	INFS_TIER_HOST = 1,   /* all on the device or in pinned host memory, not all on the device */
	INFS_TIER_FILE = 2    /* some of it only in the store file */
} infs_tier;

/* Starts moving namespace ns's fact KV up to the device (as far as the
 * budgets hold it, evicting least recently used namespaces) and returns at
 * once; the move runs on the store's own thread. INFS_OK with nothing to
 * do for an empty namespace or a store without a device copy (a build
 * without CUDA: every namespace stays INFS_TIER_FILE). */
INFS_API int infs_prefetch(infs_store *store, const char *ns);

/* The slowest tier that holds some of namespace ns's fact KV (infs_tier):
 * INFS_TIER_FILE for every namespace of a store without a device copy;
 * the fastest tier the store has for an empty namespace. */
INFS_API int infs_namespace_tier(infs_tier *out, infs_store *store, const char *ns);

/* Waits until the tier moves queued before the call (prefetches,
 * promotions after injections, evicted KV going down to pinned memory)
 * are done. INFS_OK at once for a store without a device copy. */
INFS_API int infs_tier_wait(infs_store *store);

#ifdef __cplusplus
}
#endif
#endif

/* What a device engine needs of the device (cuda/device_engine.c, through
 * the backend table): its paged KV cache and stream, and batched forward
 * steps that bring back logits or greedy tokens. The scheduling (admission,
 * blocks, sampling, stop rules) is host code, engine/engine_batch.c. */
#ifndef INFS_ENGINE_DEVICE_H
#define INFS_ENGINE_DEVICE_H

#include <stdint.h>

#include "inferscale/inject.h"
#include "inferscale/model.h"
#include "inferscale/retrieve.h"

typedef struct infs__dengine infs__dengine;
struct infs__recompute_args;
struct infs__calib;

typedef struct infs__dengine_config {
	const infs_model *model;  /* loaded on the device (model->dev) */
	const infs_geometry *geom;
	infs_dtype kv_dtype;
	uint32_t n_blocks, block_size;
	uint32_t max_seqs;        /* sequences of one step */
	uint32_t seq_blocks;      /* block-table entries of one sequence */
	uint32_t n_vocab;
} infs__dengine_config;

/* One forward step over n_seqs sequences, every array in host memory:
 * sequence s is tokens[starts[s] .. starts[s + 1]) at positions n_past[s],
 * n_past[s] + 1, ..., its blocks tables[s * seq_blocks ...]. Brings back
 * each sequence's last-token logits (logits: n_seqs * n_vocab, or with
 * logit_rows set, sequence s's to logit_rows[s]) and/or its argmax
 * (argmax: n_seqs), either NULL. With graph set, the step is a
 * CUDA graph captured once per shape (tokens, sequences, outputs), the
 * first or the second time the shape is seen, and replayed with the new
 * values. Returns when the outputs are in place. */
enum {
	INFS__GRAPH_NONE,   /* eager */
	INFS__GRAPH_SECOND, /* captured when the shape comes again: a shape seen once is not worth a capture */
	INFS__GRAPH_FIRST   /* captured at once: the shape will come again */
};

/* The device buffers of one question's device path (engine/ask_device.c):
 * its query, retrieval's hits and count, the injection order, and what
 * the injection leaves (its end and status), on the engine's device. They
 * stay where they are for the engine's life, so graphs may read them; the
 * query grows to the embedder's width. */
typedef struct infs__dask {
	float *query;
	infs_hit *hits;            /* INFS__ASK_K_MAX */
	uint64_t *ids;             /* INFS__ASK_K_MAX: the injection order */
	uint32_t *count, *next_pos;
	int32_t *status;
	int32_t *table;            /* seq_blocks: the sequence's blocks */
} infs__dask;

#define INFS__ASK_K_MAX INFS_SEARCHER_K_MAX

/* A step that follows a question's device path (one sequence): n_past[0]
 * (host) is only the bound its plan is made for; on the device n_past is
 * the injection's end (infs__dask.next_pos), the calibration the entry of
 * calib_by_count for the hits found. The hits, their count, and the
 * injection's end and status come back with the step's outputs. Where the
 * injection ended on the other side of the attention's few-keys bound
 * (2,048 keys) from the plan's bound, the step runs again from where it
 * ended, planned as a host step is (*replanned 1). */
typedef struct infs__dstep_ask {
	uint32_t k;                    /* hits brought back: 1 .. INFS__ASK_K_MAX */
	const int32_t *calib_by_count; /* NULL, or (k + 1) * 4 words (host): for each count of facts,
	                                  lo, on, inv_temp and the log2 scale (infs__calib_pack's) */
	infs_hit *hits;                /* host: k */
	uint32_t *count, *next_pos;
	int32_t *status;
	int *replanned;
} infs__dstep_ask;

typedef struct infs__dstep {
	uint32_t n_seqs, n_tokens;
	const int32_t *tokens, *starts, *n_past, *tables;
	float *logits;
	int32_t *argmax;
	int graph;                       /* INFS__GRAPH_* */
	const struct infs__calib *calib; /* NULL, or per sequence its attention's calibration
	                                    (model/forward.h; lo == hi: none) */
	const infs__dstep_ask *ask;      /* NULL, or the device path's (calib then NULL) */
	float *const *logit_rows;        /* NULL, or per sequence where its logits go (logits NULL) */
} infs__dstep;

/* The CUDA backend's implementation (infs__cuda->engine). */
typedef struct infs__dengine_ops {
	int (*open)(infs__dengine **out, const infs__dengine_config *cfg);
	void (*close)(infs__dengine *d);
	/* The cache (device memory, vLLM's layout) and the stream every step
	 * and injection of the engine runs on. */
	const infs_kv_layout *(*cache)(const infs__dengine *d);
	void *(*stream)(const infs__dengine *d);
	/* Tokens one step may take: the model's device_max_tokens. */
	uint32_t (*max_tokens)(const infs__dengine *d);
	int (*step)(infs__dengine *d, const infs__dstep *step);
	/* Waits for the stream (to time injection apart from the prefill). */
	int (*sync)(infs__dengine *d);
	/* Accuracy recovery (infs__recompute_device, model/forward.h) of one
	 * sequence in place: its blocks table[0..seq_blocks) (host memory),
	 * positions [0, n_past) injected. a->past and a->pool are ignored: the
	 * engine's cache is the one written. With logits (host, n_vocab floats)
	 * set, the question a->query[0..n_query) is prefilled in the same pass
	 * (infs__recompute_prefill_device) at n_past.. and its last token's
	 * logits land there. Returns when it is done. */
	int (*recompute)(infs__dengine *d, const struct infs__recompute_args *a, const int32_t *table, uint32_t n_past,
	                 float *logits);
	/* How many steps ran as a CUDA graph (captured then or before); NULL
	 * where steps never do (a host engine's pool). */
	uint64_t (*graph_runs)(const infs__dengine *d);
	/* A question's device path (NULL for a host engine's pool). ask_begin:
	 * its buffers in *out, the query grown to dim floats (with host_query
	 * set, those values queued into it), the sequence's blocks
	 * (seq_blocks, host) queued into out->table, and mark 0 recorded on
	 * the stream. ask_mark: mark i (1..3) recorded. ask_order: the
	 * injection order of out->hits queued into out->ids. ask_times, once
	 * the step is back: ms[i - 1] = the device's time from mark 0 to mark
	 * i. */
	int (*ask_begin)(infs__dengine *d, uint32_t dim, const float *host_query, const int32_t *table, infs__dask *out);
	int (*ask_mark)(infs__dengine *d, int i);
	int (*ask_order)(infs__dengine *d, uint32_t k);
	int (*ask_times)(infs__dengine *d, float ms[3]);
} infs__dengine_ops;

#endif

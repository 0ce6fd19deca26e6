/* The device backend as the rest of the library reaches it: one table of
 * the CUDA module's entry points, or none. It lives outside cuda/ so that
 * the subsystems calling it include nothing of cuda/, which implements it.
 * Which it is is decided by the build alone: cuda/backend_table.c defines
 * infs__cuda when CUDA is built in, cuda/device_none.c defines it NULL
 * otherwise. */
#ifndef INFS_BACKEND_H
#define INFS_BACKEND_H

#include "inferscale/inject.h"
#include "inferscale/retrieve.h"
#include "store/store.h"

struct infs__inject_plan;
struct infs_model;
struct infs__device_forward;
struct infs__recompute_args;
struct infs__bert_config;
struct infs__bert_weights;
struct infs__bert_dev;
struct infs__dengine_ops;

/* Fact encoding on the device (engine/encode.c): every fact runs after the
 * shared context, then its own context; fact i's own tokens' pre-RoPE K
 * and V go to fact() in order, [n_layers][n_tokens[i]][n_kv_heads *
 * head_dim] in kv_dtype, valid during the call. A non-zero return from
 * fact() stops the encoding and is returned. */
typedef struct infs__encode_job {
	const int32_t *context;
	uint32_t n_context;
	size_t n_facts;
	const int32_t *const *own;    /* per fact: its own context (n_own[i] tokens) */
	const uint32_t *n_own;
	const int32_t *const *tokens; /* per fact: its tokens (n_tokens[i], at least 1) */
	const uint32_t *n_tokens;
	infs_dtype kv_dtype;
	int (*fact)(void *user, size_t i, const void *k, const void *v);
	void *user;
} infs__encode_job;

typedef struct infs__device_backend {
	/* Builds the device copy of every live record of a store opened with
	 * options.device >= 0 and installs its hooks in the INFS_EXT_DEVICE
	 * slot (store.h). Sets the error message on failure. */
	int (*attach)(infs_store *s);
	/* infs__retrieve_device (retrieve.h): a search of the device copy,
	 * under the store's read lock. */
	int (*retrieve)(infs_hit *out, size_t *out_n, infs_store *s, const char *ns, const float *queries,
	                size_t n_queries, size_t k, infs_metric metric);
	/* The device-pointer path of retrieval (retrieve/retrieve.h). */
	int (*searcher_create)(infs_searcher **out, infs_store *s, const infs_searcher_options *o);
	void (*searcher_free)(infs_searcher *s);
	int (*retrieve_on_device)(infs_searcher *s, const char *ns, const float *queries, size_t n_queries, size_t k,
	                          infs_hit *hits, uint32_t *counts, void *stream);
	/* infs__inject_device (inject.h): an injection into a device cache. */
	int (*inject)(const struct infs__inject_plan *plan);
	/* The device-pointer path of injection (inject/inject.h). */
	int (*injector_create)(infs_injector **out, infs_store *s, const infs_kv_layout *layout,
	                       const infs_injector_options *o);
	void (*injector_free)(infs_injector *inj);
	int (*inject_on_device)(infs_injector *inj, const char *ns, const void *ids, size_t id_stride,
	                        const uint32_t *n_ids, uint32_t start_pos, const int32_t *block_table,
	                        size_t block_table_len, uint32_t *next_pos, int32_t *status, void *stream);
	/* Uploads a loaded model's weights to device as bf16 and allocates its
	 * workspace for max_tokens tokens, within budget bytes (0: no limit),
	 * checked before anything is allocated; sets model->dev. */
	int (*model_upload)(struct infs_model *m, int device, uint64_t budget, uint32_t max_tokens);
	/* The same for a model without host weights (its config and RoPE
	 * set): random bf16 weights made on the device from seed, for
	 * benchmarks (infs__model_random_device). */
	int (*model_random)(struct infs_model *m, int device, uint32_t max_tokens, uint64_t seed);
	/* Releases model->dev. */
	void (*model_release)(struct infs_model *m);
	/* infs_model_forward_device, its host-side arguments checked by
	 * model/forward_device.c (model/forward.h). */
	int (*model_forward)(const struct infs_model *m, const struct infs__device_forward *a);
	/* infs__recompute_device (logits NULL) and infs__recompute_prefill_device,
	 * their host-side arguments checked by model/forward_device.c
	 * (model/forward.h). */
	int (*model_recompute)(const struct infs_model *m, const struct infs__recompute_args *a, float *logits,
	                       void *stream);
	/* Encodes job's facts with model->dev (cuda/device_encode.c): the
	 * shared context once into a bf16 paged cache made for the call, then
	 * the facts in batches of whole facts within device_max_tokens tokens.
	 * A fact whose own context and tokens exceed device_max_tokens is
	 * refused (INFS_ERANGE) before anything runs. */
	int (*model_encode)(const struct infs_model *m, const infs__encode_job *job);
	/* The embedder's encoder on a device (cuda/device_embed.c; embed/embed_device.h says what callers see). */
	int (*bert_upload)(struct infs__bert_dev **out, int device, const struct infs__bert_config *cfg,
	                   const struct infs__bert_weights *w, uint32_t max_tokens);
	void (*bert_release)(struct infs__bert_dev *d);
	int (*bert_encode)(struct infs__bert_dev *d, const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
	                   int pooling, int normalize, float *out, void *stream);
	int (*bert_encode_host)(struct infs__bert_dev *d, const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
	                        int pooling, int normalize, float *out);
	/* How many forward passes d replayed from a CUDA graph (a shape's
	 * second call captures it, later ones replay it). */
	uint64_t (*bert_graph_runs)(const struct infs__bert_dev *d);
	/* The engine on a device (engine/engine_device.h). */
	const struct infs__dengine_ops *engine;
} infs__device_backend;

/* The CUDA backend, or NULL in a build without CUDA. */
extern const infs__device_backend *const infs__cuda;

#endif

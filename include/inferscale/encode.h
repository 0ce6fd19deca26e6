/* inferscale — fact encoding: a fact's text (or token ids) run through the
 * model, its pre-RoPE K and V of every layer stored with its retrieval
 * embedding under one fact id. See docs/end-to-end.md. */
#ifndef INFERSCALE_ENCODE_H
#define INFERSCALE_ENCODE_H

#include "inferscale/embedder.h"
#include "inferscale/model.h"
#include "inferscale/store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INFS_FACT_INPUT_VERSION 1

/* One fact to encode. */
typedef struct infs_fact_input {
	unsigned version;
	unsigned flags;            /* INFS_FACT_SEGMENT: a header or footer (no embedding) */
	const char *text;          /* UTF-8: tokenized by the model's tokenizer (no BOS, special
	                              tokens read as plain text) unless tokens is set; stored */
	const int32_t *tokens;     /* token ids used instead of tokenizing text; NULL = tokenize */
	uint32_t n_tokens;
	const char *embed_text;    /* what the embedder embeds; NULL = text */
	const float *embedding;    /* a caller-computed embedding (embed_dim floats); NULL = the
	                              embedder's of embed_text */
	const int32_t *context;    /* this fact's own encoding context, after the options' one:
	                              e.g. the conversation turns that preceded it */
	uint32_t n_context;
	const char *metadata;      /* stored as given (JSON by convention) */
	uint64_t source_id;
	int64_t timestamp;
} infs_fact_input;

#define INFS_FACT_INPUT_INIT { INFS_FACT_INPUT_VERSION, 0, NULL, NULL, 0, NULL, NULL, NULL, 0, NULL, 0, 0 }

/* Called after each fact is stored with the number done and the total.
 * Returning non-zero stops the encoding: the call returns INFS_ECANCELED. */
typedef int (*infs_progress_fn)(void *user, size_t done, size_t total);

#define INFS_ENCODE_OPTIONS_VERSION 1

typedef struct infs_encode_options {
	unsigned version;
	/* The encoding context: tokens every fact is encoded after (typically the
	 * composed prompt's system message and memory header), run once per call.
	 * Its KV is not stored. A fact's tokens sit at positions n_context +
	 * n_fact_context, ... during encoding; since keys are stored before RoPE
	 * those positions shape only what the fact's tokens attended to, and
	 * injection later rotates the keys to wherever the fact lands. */
	const int32_t *context;
	uint32_t n_context;
	const infs_embedder *embedder; /* computes embeddings not given; NULL: every fact
	                                  must bring its embedding (segments need none) */
	infs_progress_fn progress;
	void *progress_user;
} infs_encode_options;

#define INFS_ENCODE_OPTIONS_INIT { INFS_ENCODE_OPTIONS_VERSION, NULL, 0, NULL, NULL, NULL }

INFS_API int infs_encode_options_init(infs_encode_options *opts, unsigned version);
INFS_API int infs_fact_input_init(infs_fact_input *fact, unsigned version);

/* Encodes facts[0..n_facts) in order and stores each in namespace ns of
 * store with infs_fact_put; out_ids[i] receives fact i's id. The store must
 * have been created for this model (geometry and identity of
 * infs_model_geometry / infs_model_identity with the store's kv_dtype, and
 * embed_dim equal to the embedder's): otherwise INFS_EMISMATCH. Every
 * argument is checked and every text tokenized before anything is stored.
 * If encoding stops early (a callback's cancel: INFS_ECANCELED, or an I/O
 * error), the facts already stored stay stored with their ids in out_ids
 * and the others' ids are 0 (ids start at 1).
 * A model loaded with infs_model_options.device >= 0 encodes on its device,
 * batched: the shared context once, then as many whole facts (own context
 * + tokens) as fit in device_max_tokens per forward call, with bf16
 * weights and activations at the matrix products and f32 accumulation, so
 * the stored K/V match the host's within the bf16 bound of
 * docs/model-runtime.md; a fact whose own context and tokens exceed
 * device_max_tokens is refused (INFS_ERANGE) before anything is stored. */
INFS_API int infs_fact_encode(uint64_t *out_ids, infs_store *store, const char *ns,
                              const infs_model *model, const infs_fact_input *facts, size_t n_facts,
                              const infs_encode_options *opts);

#ifdef __cplusplus
}
#endif
#endif

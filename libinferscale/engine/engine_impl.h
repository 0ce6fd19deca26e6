/* The engine's state and the helpers its files share. engine.c: creation,
 * the host engine's sequence operations and infs_engine_ask; engine_batch.c:
 * requests batched over a block pool, a device engine's or a host
 * engine's, and through ask_device.c one question's device path. Both
 * call, and neither is called by, ask_options.c (options
 * checked), prompt_tokens.c (the prompt read from the store), recover.c
 * (accuracy recovery) and answer.c (the answer's text). */
#ifndef INFS_ENGINE_IMPL_H
#define INFS_ENGINE_IMPL_H

#include <pthread.h>
#include <time.h>

#include "inferscale/engine.h"
#include "engine/compose.h"
#include "engine/engine_device.h"
#include "engine/kvcache.h"
#include "model/forward.h"
#include "util/pool.h"

struct infs_engine {
	const infs_model *model;
	infs_geometry geom;
	infs__kvcache cache;        /* host engine */
	uint32_t n_past;
	uint32_t n_vocab;
	float *logits;
	int have_logits;
	infs__pool *pool;
	infs__calib calib;          /* host engine: the calibration of the current sequence's */
	int have_calib;             /* prefills (infs_ask_options.fact_temperature) */
	infs__compose prompt;
	int have_prompt;
	int prompt_rc;              /* why there is no prompt layout */
	infs_store *prepared;       /* the store whose segment ids are below */
	uint64_t prepared_serial;   /* and its open's (infs__store_serial) */
	uint64_t header_id, footer_id;
	infs__engine_view view;
	pthread_mutex_t ask_lock;   /* infs_engine_ask and _ask_batch take turns */
	/* device engine */
	infs__dengine *dev;
	const infs__dengine_ops *ops;
	uint32_t max_seqs, n_blocks, block_size, seq_blocks;
	/* The block pool infs_engine_ask_batch schedules over: the device
	 * engine's (dev), or a host engine's with max_seqs > 1; else NULL. */
	infs__dengine *batch;
	const infs__dengine_ops *batch_ops;
	/* One question's device path (ask_device.c): its searcher and injector
	 * over the prepared store, made at its first question. */
	infs_searcher *searcher;
	infs_metric searcher_metric;
	uint64_t tools_serial;      /* the store open they were made for (infs__store_serial) */
	infs_injector *injector;
	uint32_t injector_tokens;   /* its max_tokens */
	int no_device_path;         /* every question takes the host path (tests, benchmarks) */
	int device_path_strikes;    /* questions in a row it could not queue; 2: off until the next prepare */
	uint64_t device_asks;       /* questions it answered */
	uint64_t device_fallbacks;  /* questions it ran whose injection refused: the host path answered */
	uint64_t device_replans;    /* of those it answered, prefills run again from where the facts ended */
};

/* A question's prefill of at most this many tokens (its chat template's
 * footer and suffix included) is captured as a graph the first time its
 * length is seen (device_engine.c keeps the graphs of 64 lengths). */
#define INFS__QUESTION_GRAPH_TOKENS 64u

static inline double infs__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Whether e has a prompt layout (ask_options.c); the error names fn. */
int infs__engine_need_prompt(const infs_engine *e, const char *fn);
/* The attention calibration o asks for, n_facts facts at positions
 * [lo, hi): into *c and 1, or 0 when it is off. */
int infs__calib_of(infs__calib *c, const infs_ask_options *o, size_t n_facts, uint32_t lo, uint32_t hi);
/* The options of infs_engine_ask checked and defaulted into *o. */
int infs__ask_take(infs_ask_options *o, const infs_engine *e, const infs_store *store,
                   const infs_embedder *embedder, const infs_ask_options *opts, const char *fn);
/* Whether t ends an answer: the end of sequence, a special token, or an id
 * the tokenizer does not have. */
int infs__token_ends(const infs_tokenizer *tok, int32_t t);
/* The answer's text of ids, without the tokens that end an answer;
 * released with free(). */
int infs__answer_text(char **out, const infs_tokenizer *tok, const int32_t *ids, uint32_t n);
/* The facts' tokens, order[0..n) one after another; released with free();
 * lens (NULL, or n counts): each fact's token count. */
int infs__fact_tokens(int32_t **out, uint32_t *n_out, uint32_t *lens, infs_store *store, const char *ns,
                      const uint64_t *order, size_t n);
/* The prompt of full recompute: e's header, the facts order[0..n)'s tokens,
 * then qt[0..nq) (footer, question and the template's suffix); released
 * with free(). *n_fact_tokens (NULL: not wanted): the facts' share. */
int infs__full_prompt(int32_t **out, uint32_t *n_out, uint32_t *n_fact_tokens, const infs_engine *e,
                      infs_store *store, const char *ns, const uint64_t *order, size_t n, const int32_t *qt,
                      uint32_t nq);
/* Accuracy recovery of a prompt injected into positions [0, n_past):
 * header, facts order[0..nh), footer; qt[0..nq) the question's tokens.
 * Fills a's n_recomputable and n_recomputed. table: the sequence's blocks
 * in the engine's block pool (host memory), NULL for the host engine's own
 * cache. With table, logits (n_vocab floats) and prefilled set, the
 * question's prefill may run in the recompute's pass (positions n_past..):
 * *prefilled says whether it did, its last token's logits then in logits. */
int infs__recover(infs_answer *a, infs_engine *e, infs_store *store, const char *ns, const uint64_t *order,
                  size_t nh, const int32_t *qt, uint32_t nq, const infs_ask_options *o, uint32_t n_past,
                  const int32_t *table, float *logits, int *prefilled);
/* One question's device path (ask_device.c): from its text to its first
 * logits with no wait between embedding, retrieval, injection and
 * prefill. infs__ask_device_plan: whether it takes the question (a device
 * engine, retrieval rather than fact_ids, no accuracy recovery, a store
 * with a device copy on the engine's device and the embedder's width,
 * k <= INFS__ASK_K_MAX, a question of one step, and
 * every k facts of ns fitting beside the question's nq tokens, by the
 * store's bound on a fact's tokens); if so, *bound: the positions the
 * header and the facts take at most, which the sequence's blocks and the
 * step are planned for. Never fails: what it cannot take goes the host
 * path. */
int infs__ask_device_plan(uint32_t *bound, infs_engine *e, infs_store *store, const infs_embedder *emb,
                          const char *ns, const infs_ask_options *o, uint32_t nq);

typedef struct infs__ask_device_out {
	int done;                 /* 0: its injection refused (a fact only in the store file, whose
	                             move up it queued; facts past the bound, a longer fact put
	                             since the plan): nothing to use, the host path answers */
	size_t n_hits;            /* hits (best first) */
	uint32_t next_pos;        /* where the facts end, the question begins */
	int32_t pick;             /* greedy: the first token, picked on the device; else -1 */
	double embed_ms, retrieve_ms, inject_ms, ttft_ms;
} infs__ask_device_out;

/* Runs it for question (qt[0..nq): its footer, text and suffix) into the
 * sequence's blocks table[0..seq_blocks) (host; n_own of them its own):
 * hits receives o->k hits, logits the question's last token's (n_vocab). */
int infs__ask_device(infs__ask_device_out *out, infs_engine *e, infs_store *store, const infs_embedder *emb,
                     const char *ns, const char *question, const infs_ask_options *o, const int32_t *qt, uint32_t nq,
                     const int32_t *table, uint32_t n_own, uint32_t bound, infs_hit *hits, float *logits);

/* The device path's calibrations (by_count: (k + 1) * 4 words): for each
 * count c of facts 0..k, what infs__calib_of gives for c facts after
 * n_header positions, packed (infs__calib_pack) with its hi word 1 when on
 * (the device writes where the facts end there, kernels/ask.cu), all 0
 * when off. Returns whether any count is on. */
int infs__calib_by_count(int32_t *by_count, const infs_ask_options *o, uint32_t k, uint32_t n_header);

/* Frees the device path's searcher and injector (a new store, the end). */
void infs__ask_device_release(infs_engine *e);

/* infs_engine_ask_batch over the engine's block pool (engine_batch.c); o
 * is taken. */
int infs__ask_batched(infs_answer **out, infs_engine *e, infs_store *store, const infs_embedder *embedder,
                     const char *ns, const char *const *questions, size_t n, const infs_ask_options *o);

#endif

/* inferscale — the reference engine on the CPU: a paged KV cache in host
 * memory, facts injected into it with Chunked RoPE, prefill of only the
 * question after them, and decoding. The same engine runs the full-recompute
 * baseline (prefill of the whole composed prompt), so both are compared on
 * identical code. See docs/end-to-end.md. */
#ifndef INFERSCALE_ENGINE_H
#define INFERSCALE_ENGINE_H

#include "inferscale/embedder.h"
#include "inferscale/encode.h"
#include "inferscale/model.h"
#include "inferscale/retrieve.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An engine: a model, a prompt layout and a paged KV cache, in host memory
 * or on the model's CUDA device (infs_engine_options.device). Any thread
 * may call infs_engine_ask and infs_engine_ask_batch: calls on one engine
 * take turns. The other calls are for one thread at a time per engine.
 * Host engines over one model may run in parallel; a device engine has its
 * model's device workspace to itself (one device engine per model at a
 * time). */
typedef struct infs_engine infs_engine;

/* Namespace where infs_engine_prepare keeps the header and footer segments. */
#define INFS_SEGMENT_NAMESPACE "inferscale.segments"

#define INFS_ENGINE_OPTIONS_VERSION 2

typedef struct infs_engine_options {
	unsigned version;
	uint32_t n_ctx;        /* tokens the cache holds (prompt and answer); 0 = 4096 */
	uint32_t block_size;   /* tokens per cache block; 0 = 16 */
	infs_dtype kv_dtype;   /* element type of the cache */
	/* The prompt layout, in the model's chat template:
	 *   system turn:  system "\n\n" memory_intro "\n" [fact 1 .. fact k]
	 *   user turn:    question
	 *   then the opening of the assistant turn.
	 * The header (everything before the facts) and the footer (from the end
	 * of the facts to the question) are segments; NULL = the defaults. */
	const char *system;
	const char *memory_intro;
	/* version 2: the engine on a device (docs/end-to-end.md, "On a GPU"). */
	int device;            /* -1: the host; >= 0: the CUDA device the model was loaded
	                          on (infs_model_options.device), where the cache lives */
	uint32_t max_seqs;     /* sequences decoded together by infs_engine_ask_batch on a
	                          device; 0 = 32 (1 on the host, which answers one by one) */
	uint32_t n_blocks;     /* device: blocks in the pool all sequences share;
	                          0 = max_seqs * ceil(n_ctx / block_size) */
} infs_engine_options;

#define INFS_ENGINE_OPTIONS_INIT { INFS_ENGINE_OPTIONS_VERSION, 0, 0, INFS_DTYPE_F32, NULL, NULL, -1, 0, 0 }

INFS_API int infs_engine_options_init(infs_engine_options *opts, unsigned version);

/* The model must outlive the engine. The model needs a tokenizer with a
 * known chat template (INFS_EUNSUPPORTED otherwise). */
INFS_API int infs_engine_create(infs_engine **out, const infs_model *model, const infs_engine_options *opts);
INFS_API void infs_engine_free(infs_engine *engine);

/* The header's tokens: the encoding context facts should be encoded after
 * (infs_encode_options.context), so that a fact's KV is computed as it will
 * be read, right after the header. Owned by the engine. */
INFS_API int infs_engine_header(const int32_t **out_tokens, uint32_t *out_n, const infs_engine *engine);

/* Renders a fact as it appears in the prompt, into a buffer released with
 * infs_free:
 *   "- " [ "(" date ") " ] [ speaker ": " ] text "\n"
 * where date and speaker are the string members "date" and "speaker" of the
 * JSON object metadata (NULL, "" or other members: left out). */
INFS_API int infs_fact_render(char **out, const char *text, const char *metadata);

/* Encodes the header and footer segments into INFS_SEGMENT_NAMESPACE of
 * store unless segments with the same tokens are already there: once per
 * store. Needed before infs_engine_ask on that store. */
INFS_API int infs_engine_prepare(infs_engine *engine, infs_store *store);

/* Positions infs_engine_fact_limit keeps for a question: its tokens, the
 * template's opening of the answer and the answer's first token. */
#define INFS_ENGINE_QUESTION_ROOM 64u

/* The most tokens one fact may have and still fit a prompt of this engine:
 * n_ctx less the header, the footer, the template's opening of the answer
 * and INFS_ENGINE_QUESTION_ROOM (0 when n_ctx cannot hold even those).
 * A fact above it could never be injected with a question; check facts
 * against it before storing them (infs_engine_fact_check). A question asked
 * later leaves out the retrieved facts that do not fit next to it
 * (infs_answer.n_left_out), never failing for them. */
INFS_API int infs_engine_fact_limit(uint32_t *out_tokens, const infs_engine *engine);

/* The tokens fact text takes in this engine's prompt, rendered with its
 * metadata as infs_fact_render renders it and tokenized as infs_fact_encode
 * tokenizes text, into *out_tokens (may be NULL); INFS_ERANGE, with a
 * message naming both counts and n_ctx, when it is above
 * infs_engine_fact_limit, and INFS_EINVAL for a text of only white space.
 * What an application calls before infs_fact_encode. */
INFS_API int infs_engine_fact_check(uint32_t *out_tokens, const infs_engine *engine, const char *text,
                                    const char *metadata);

/* --- Low-level sequence operations: positions are appended. A device
 * engine answers them with INFS_EUNSUPPORTED: it runs whole requests
 * (infs_engine_ask, infs_engine_ask_batch). --- */

/* Empties the sequence. */
INFS_API void infs_engine_reset(infs_engine *engine);
/* Positions used so far. */
INFS_API uint32_t infs_engine_n_past(const infs_engine *engine);
/* Injects records ids[0..n) of namespace ns at the next positions. */
INFS_API int infs_engine_inject(infs_engine *engine, infs_store *store, const char *ns,
                                const uint64_t *ids, size_t n);
/* Runs tokens[0..n) at the next positions over everything before them,
 * keeping their KV; the last token's logits become infs_engine_logits. */
INFS_API int infs_engine_prefill(infs_engine *engine, const int32_t *tokens, uint32_t n);
/* The next-token logits after the last prefill or decoded token (n_vocab
 * floats, owned by the engine), or NULL before any. */
INFS_API const float *infs_engine_logits(const infs_engine *engine);

#define INFS_GENERATE_OPTIONS_VERSION 1

typedef struct infs_generate_options {
	unsigned version;
	uint32_t max_tokens;   /* token budget of the answer; 0 = 64 */
	float temperature;     /* <= 0: greedy */
	float top_p;           /* nucleus sampling, (0, 1]; 1 = off */
	uint64_t seed;         /* the sampler's seed: same seed, same answer */
	const char *stop;      /* stop string, cut from the answer; NULL = none */
} infs_generate_options;

#define INFS_GENERATE_OPTIONS_INIT { INFS_GENERATE_OPTIONS_VERSION, 0, 0.0f, 1.0f, 0, NULL }

INFS_API int infs_generate_options_init(infs_generate_options *opts, unsigned version);

/* Samples from the current logits and decodes until the end of sequence
 * (the model's EOS, any special token, or an id the tokenizer does not
 * have, such as the padding rows of a vocabulary), the stop string, the
 * token budget or a full cache. *out is the answer's UTF-8 text, released with infs_free. */
INFS_API int infs_engine_generate(char **out, uint32_t *out_n_tokens, infs_engine *engine,
                                  const infs_generate_options *opts);

/* --- The main job. --- */

#define INFS_ASK_OPTIONS_VERSION 4

typedef struct infs_ask_options {
	unsigned version;
	uint32_t k;               /* facts retrieved; 0 = 10 */
	int full_recompute;       /* prefill the whole composed prompt instead of injecting */
	infs_metric metric;
	const uint64_t *fact_ids; /* use these facts (best first) instead of retrieving */
	size_t n_fact_ids;
	infs_generate_options generate;
	/* version 2: accuracy recovery with injection (docs/end-to-end.md,
	 * "Accuracy recovery"). Before the question is prefilled, the injected
	 * facts' and footer's tokens run again in place through layers
	 * 0..check_layer, their new K/V written over the injected ones; there
	 * the share recompute_ratio of them whose keys deviate most from the
	 * injected ones go on through the later layers. A device engine runs it
	 * on the device (the rows and the question within the model's
	 * device_max_tokens, else INFS_ERANGE). */
	float recompute_ratio;    /* 0: plain injection; 1: the whole prompt prefilled, as
	                             full_recompute */
	uint32_t check_layer;     /* below the model's layer count */
	/* version 3: */
	int ignore_eos;           /* decode on to the token budget (or a full cache) past the
	                             tokens that end an answer, as benchmarks of decoding do
	                             (vLLM's ignore_eos); those tokens are left out of the text */
	/* The first prefix_tokens tokens of every injected fact and of the
	 * footer are always recomputed through every layer (EPIC); with
	 * recompute_ratio 0 only they are, else they count in the ratio's share
	 * (at least all of them). query_weight w > 0 makes the selection at
	 * check_layer score each token (1 - w) * deviation / max deviation +
	 * w * mass / max mass, mass being the attention the question's tokens,
	 * run through layers 0..check_layer after the footer, give it there
	 * (summed over tokens and heads); with recompute_ratio 0 it does nothing. */
	uint32_t prefix_tokens;   /* 0: none */
	float query_weight;       /* 0..1; 0: the deviation alone */
	/* version 4: attention calibration for injected facts (APE-style,
	 * docs/eval.md). Every token after the facts (the question, the answer)
	 * scores the keys of the injected facts' positions as
	 *   q.k / sqrt(head_dim) / fact_temperature + ln(fact_scale)
	 * (their softmax weights multiplied by fact_scale before normalising);
	 * every other key as usual. Facts encoded apart each draw attention as
	 * if they alone followed the header, so k of them draw too much of it;
	 * a scale below 1 gives it back without recomputing anything, and
	 * brings the first token nearer full recompute's, but answers then lean
	 * less on the facts' content (docs/eval.md): off by default (1 and 1,
	 * plain injection bit for bit). fact_scale 0 is 1 / sqrt(facts
	 * injected), the scale nearest full recompute's first token measured on
	 * the LoCoMo development split (1, so off, for one fact). */
	float fact_temperature;   /* > 0 */
	float fact_scale;         /* > 0; 0: 1 / sqrt(facts injected) */
} infs_ask_options;

#define INFS_ASK_OPTIONS_INIT                                                                               \
	{ INFS_ASK_OPTIONS_VERSION, 0, 0, INFS_METRIC_COSINE, NULL, 0, INFS_GENERATE_OPTIONS_INIT, 0.0f, 0, 0, \
	  0, 0.0f, 1.0f, 1.0f }

INFS_API int infs_ask_options_init(infs_ask_options *opts, unsigned version);

/* What infs_engine_ask returns. Times are milliseconds. Time to first token
 * ttft_ms = embed + retrieve + inject + prefill: the first token's logits
 * exist then (sampling it is counted in decode_ms). For full recompute
 * inject_ms is the reading of the facts' tokens from the store. */
typedef struct infs_answer {
	char *text;
	uint32_t n_tokens;          /* tokens generated */
	uint32_t n_prompt;          /* positions of the composed prompt */
	uint32_t n_prefilled;       /* of which were prefilled (the rest were injected) */
	size_t n_facts;
	uint64_t *fact_ids;         /* facts used, best first */
	float *scores;              /* their retrieval scores (0 when given) */
	float *first_logits;        /* n_vocab logits of the first answer token */
	uint32_t n_vocab;
	double embed_ms, retrieve_ms, inject_ms, prefill_ms, ttft_ms, decode_ms;
	/* Accuracy recovery (infs_ask_options.recompute_ratio): */
	uint32_t n_recomputable;    /* injected fact and footer tokens it may recompute */
	uint32_t n_recomputed;      /* of which went through every layer again */
	/* Appended (the library allocates answers, so old callers are unaffected): */
	size_t n_left_out;          /* facts retrieved (or given) that the context could not
	                               hold next to the question: left out of the prompt, the
	                               best-ranked that fit kept (infs_engine_fact_limit) */
} infs_answer;

/* Answers question for namespace ns of store: embeds it with embedder,
 * retrieves the top k facts (or takes opts->fact_ids), lays out
 * [header][fact k .. fact 1][footer][question] (best fact nearest the
 * question), injects header, facts and footer into the engine's cache and
 * prefills only the question (or, with full_recompute, prefills all of it),
 * then decodes. infs_engine_prepare must have run on store. embedder may be
 * NULL when fact_ids are given. */
INFS_API int infs_engine_ask(infs_answer **out, infs_engine *engine, infs_store *store,
                             const infs_embedder *embedder, const char *ns, const char *question,
                             const infs_ask_options *opts);
INFS_API void infs_answer_free(infs_answer *answer);

/* Answers n questions as infs_engine_ask answers each (same options, every
 * question of namespace ns): out[i] is question i's answer, released with
 * infs_answer_free. On a device engine the requests run together with
 * continuous batching: up to max_seqs sequences at once, the newly
 * admitted ones' prompts prefilled in one batched forward, every running
 * sequence advanced by one batched decode step, a finished sequence's
 * blocks returned to the pool and the next question admitted in its place.
 * A request is admitted once the pool has blocks for its prompt and its
 * token budget (at most n_ctx positions, which an empty pool always has),
 * so a running sequence never runs out of cache; a prompt of n_ctx
 * positions or more fails the call (INFS_ERANGE). Its
 * time parts are those of the group it was admitted with (embedded,
 * retrieved, injected and prefilled together). On the host the questions
 * are answered one after another. On error every out[i] is NULL. Calls
 * from several threads take turns: a server gets batches, and with them
 * the device's throughput, by collecting its threads' requests into one
 * call (docs/end-to-end.md, "The engine on a GPU"). */
INFS_API int infs_engine_ask_batch(infs_answer **out, infs_engine *engine, infs_store *store,
                                   const infs_embedder *embedder, const char *ns,
                                   const char *const *questions, size_t n, const infs_ask_options *opts);

#ifdef __cplusplus
}
#endif
#endif

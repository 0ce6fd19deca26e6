/* eval's conversation: its observation facts with their metadata,
 * rendering and (--context-turns) encoding context, read from a
 * LoCoMo-format file (locomo_read.h), and their encoding into a store. */
#ifndef EVAL_CONV_H
#define EVAL_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "cli_options.h"
#include "cli_runtime.h"
#include "inferscale/inferscale.h"
#include "locomo_read.h"
#include "strbuf.h"

/* The namespace of eval's temporary store. */
#define EVAL_NS "eval"

/* One observation fact: its text, its metadata (speaker, date and evidence
 * turns, as scripts/locomo-jsonl.py writes them), its evidence turns
 * joined by ';', its rendering, its encoding context (--context-turns: the
 * turns' text and its tokens; NULL without) and its ids in the store and in
 * the reference store (--reference-kv-dtype). */
typedef struct conv_fact {
	const char *text;
	str meta, evidence;
	char *rendered, *context;
	int32_t *context_tokens;
	uint32_t n_context;
	uint64_t id, ref_id;
} conv_fact;

typedef struct conv {
	char *text;    /* the file, which holds lc's strings */
	locomo_doc lc; /* its facts and questions (tools/locomo_read.h) */
	conv_fact *facts;
	size_t n_facts;
	size_t n_no_context;     /* --context-turns: facts whose evidence names no turn */
	uint64_t context_tokens; /* --context-turns: of all facts together */
	double encode_ms;        /* the facts' encoding into the main store */
} conv;

void conv_free(conv *c);
/* Reads the conversation at path (tools/locomo_read.h): its facts, each
 * with its metadata (speaker, date and evidence turns, as
 * scripts/locomo-jsonl.py writes them) and rendering, and its questions.
 * 0, or 1 after a message; free c with conv_free in either case. */
int conv_read(conv *c, const char *path);
/* --context-turns w: each fact's context, the w turns up to and including
 * its first evidence turn (tools/locomo_turns.h); none for a fact whose
 * evidence names no turn. Read before any model loads, so that malformed
 * turns fail early. */
int conv_contexts(conv *c, const char *path, unsigned w);
/* The contexts' tokens, by the model's tokenizer, as the fact texts are
 * tokenized (no BOS, special tokens as plain text). */
int conv_context_tokens(conv *c, const infs_model *m);
/* Encodes the conversation's facts into store (r's or the reference
 * store), after the engine's header, keeping their ids (id or ref_id). */
int eval_encode(conv *c, const runtime *r, infs_store *store, int ref, const cli_args *a);

#endif

/* Requests batched over an engine's block pool, a device engine's or a
 * host engine's (host_batch.c): continuous batching. Each round admits
 * waiting questions while sequence slots and blocks allow (embedded and
 * retrieved together, their header and facts injected into their own
 * blocks), prefills the admitted prompts in
 * one batched step (with accuracy recovery, each request's recompute and
 * question prefill are one pass of its own), then advances every running
 * sequence by one batched decode step; a finished sequence gives its
 * blocks back at once. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/fit.h"
#include "engine/sampling.h"
#include "util/error.h"

static const char fn[] = "infs_engine_ask";

typedef struct request {
	size_t q;                 /* the question's index */
	infs_answer *a;
	infs_hit *hits;           /* retrieval, best first */
	size_t n_hits;
	int32_t *question;        /* footer, question and the template's suffix */
	uint32_t n_question;
	int32_t *prefill;         /* what its prefill step runs: the question or the whole prompt */
	uint32_t n_prefill;
	uint32_t n_past;          /* cache positions written */
	uint32_t capacity;        /* positions its blocks hold */
	int32_t *table;           /* seq_blocks entries, n_own of them its blocks */
	uint32_t n_own;
	int32_t *ids;             /* answer tokens */
	int32_t next;             /* the token its next decode step runs */
	int32_t pick;             /* its first token, picked on the device (greedy), or -1 */
	infs__sampler sampler;
	int have_sampler;
	infs__calib calib;        /* its attention's calibration (lo == hi: none) */
	double t_first;           /* when its first token's logits were back */
	double lost_ms;           /* a device path that fell back: its time, counted in embed_ms */
	int running;              /* has a slot */
} request;

typedef struct batch {
	infs_engine *e;
	infs_store *store;
	const infs_embedder *embedder;
	const char *ns;
	const char *const *questions;
	const infs_ask_options *o;
	request *req;
	size_t n, next_q, n_done;
	int32_t *free_blocks;     /* a stack */
	uint32_t n_free;
	uint32_t n_running;
	float *qv, *logits;       /* max_seqs queries and logit rows */
	float **rows;             /* max_seqs: a step's requests' first logits */
	infs__calib *calib;       /* max_seqs: a step's calibrations */
	int32_t *argmax, *tokens, *starts, *n_past, *tables;
	uint64_t *order;
	request **group;          /* max_seqs: a step's requests */
	const char **texts;       /* max_seqs: questions embedded together */
} batch;

static void request_free(request *r)
{
	infs_answer_free(r->a);
	free(r->hits);
	free(r->question);
	free(r->prefill);
	free(r->table);
	free(r->ids);
	if (r->have_sampler)
		infs__sampler_free(&r->sampler);
	memset(r, 0, sizeof *r);
}

static void release_blocks(batch *b, request *r)
{
	for (uint32_t i = 0; i < r->n_own; i++)
		b->free_blocks[b->n_free++] = r->table[i];
	r->n_own = 0;
	if (r->running) {
		r->running = 0;
		b->n_running--;
	}
}

/* Ends request r: its text (cut at the stop string), times and blocks. */
static int finish(batch *b, request *r)
{
	infs_answer *a = r->a;
	const char *stop = b->o->generate.stop;
	int rc = infs__answer_text(&a->text, infs_model_tokenizer(b->e->model), r->ids, a->n_tokens);
	char *hit = !rc && stop && *stop ? strstr(a->text, stop) : NULL;
	if (hit)
		*hit = '\0';
	a->decode_ms = infs__now_ms() - r->t_first;
	release_blocks(b, r);
	b->n_done++;
	return rc;
}

/* Takes token t for r, as infs_engine_generate does: a token that ends an
 * answer ends it (unless ignore_eos); else it is appended, and the stop
 * string, the budget or a full cache end it; else r decodes t next. */
static int take_token(batch *b, request *r, int32_t t)
{
	const infs_tokenizer *tok = infs_model_tokenizer(b->e->model);
	const infs_generate_options *g = &b->o->generate;
	infs_answer *a = r->a;
	if (!b->o->ignore_eos && infs__token_ends(tok, t))
		return finish(b, r);
	r->ids[a->n_tokens++] = t;
	if (g->stop && *g->stop) {
		char *text = NULL;
		int rc = infs__answer_text(&text, tok, r->ids, a->n_tokens);
		int hit = !rc && strstr(text, g->stop);
		free(text);
		if (rc)
			return rc;
		if (hit)
			return finish(b, r);
	}
	if (a->n_tokens == g->max_tokens || r->n_past == r->capacity)
		return finish(b, r);
	r->next = t;
	return INFS_OK;
}

/* Embeds and retrieves for requests [first, first + m) together. */
static int retrieve_group(batch *b, size_t first, size_t m, double *embed_ms, double *retrieve_ms)
{
	const infs_ask_options *o = b->o;
	*embed_ms = *retrieve_ms = 0;
	if (o->fact_ids) {
		for (size_t i = first; i < first + m; i++) {
			for (size_t j = 0; j < o->n_fact_ids; j++)
				b->req[i].hits[j].id = o->fact_ids[j];
			b->req[i].n_hits = o->n_fact_ids;
		}
		return INFS_OK;
	}
	for (size_t i = 0; i < m; i++)
		b->texts[i] = b->questions[b->req[first + i].q];
	double t0 = infs__now_ms();
	int rc = infs_embed(b->qv, b->embedder, b->texts, m, NULL);
	double t1 = infs__now_ms();
	infs_hit *hits = rc ? NULL : malloc(m * o->k * sizeof *hits);
	size_t *found = rc ? NULL : malloc(m * sizeof *found);
	if (!rc && (!hits || !found))
		rc = infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	infs_retrieve_options ro = INFS_RETRIEVE_OPTIONS_INIT;
	ro.metric = o->metric;
	if (!rc)
		rc = infs_retrieve(hits, found, b->store, b->ns, b->qv, m, o->k, &ro);
	for (size_t i = 0; !rc && i < m; i++) {
		request *r = &b->req[first + i];
		memcpy(r->hits, hits + i * o->k, found[i] * sizeof *hits);
		r->n_hits = found[i];
	}
	free(hits);
	free(found);
	*embed_ms = t1 - t0;
	*retrieve_ms = infs__now_ms() - t1;
	return rc;
}

/* The blocks of a sequence of n_prompt positions and its answer's tokens
 * (capped at a sequence's reach). */
static uint32_t blocks_for(const infs_engine *e, const infs_ask_options *o, uint64_t n_prompt)
{
	const uint32_t seq_cap = e->seq_blocks * e->block_size;
	const uint64_t want = n_prompt + o->generate.max_tokens;
	return (uint32_t)(((want < seq_cap ? want : seq_cap) + e->block_size - 1) / e->block_size);
}

/* Takes need blocks of the pool for r, which runs from now on. */
static void take_blocks(batch *b, request *r, uint32_t need)
{
	for (uint32_t i = 0; i < need; i++)
		r->table[i] = b->free_blocks[--b->n_free];
	r->n_own = need;
	r->capacity = need * b->e->block_size;
	r->running = 1;
	b->n_running++;
}

/* r's header and n_hits facts are in its blocks up to pos: its attention's
 * calibration for every step after (lo == hi: none), its question next. */
static void injected(batch *b, request *r, size_t n_hits, uint32_t pos)
{
	if (!infs__calib_of(&r->calib, b->o, n_hits, b->e->prompt.n_header, pos))
		r->calib.lo = r->calib.hi = 0;
	r->n_past = pos;
	r->prefill = r->question;
	r->n_prefill = r->n_question;
	r->question = NULL;
}

/* Lays out r's prompt and, when blocks allow, takes them and injects it.
 * *admitted 0: not now (the pool is short; it waits for a sequence to end). */
static int place(batch *b, request *r, int *admitted)
{
	infs_engine *e = b->e;
	const infs_ask_options *o = b->o;
	const infs_kv_layout *cache = e->batch_ops->cache(e->batch);
	*admitted = 0;
	for (size_t i = 0; i < r->n_hits; i++)
		b->order[i] = r->hits[r->n_hits - 1 - i].id; /* best fact nearest the question */
	int32_t *all = NULL;
	uint32_t nf = 0, n_prompt = 0;
	int rc = infs__full_prompt(&all, &n_prompt, &nf, e, b->store, b->ns, b->order, r->n_hits, r->question,
	                           r->n_question);
	if (rc)
		return rc;
	const uint32_t seq_cap = e->seq_blocks * e->block_size;
	if (n_prompt >= seq_cap) {
		free(all);
		return infs__error(INFS_ERANGE, "%s: question %zu: a prompt of %llu positions leaves no room in n_ctx %u",
		                   fn, r->q, (unsigned long long)n_prompt, seq_cap);
	}
	const uint32_t need = blocks_for(e, o, n_prompt);
	/* need <= seq_blocks <= n_blocks: an empty pool takes any request. */
	if (need > b->n_free) {
		free(all);
		return INFS_OK;
	}
	r->a->n_prompt = n_prompt;
	r->a->n_facts = r->n_hits;
	if (o->recompute_ratio >= 1.0f) /* recovery that recomputed everything */
		r->a->n_recomputable = r->a->n_recomputed = nf;
	if (o->full_recompute) {
		r->prefill = all; /* the same tokens, all prefilled */
		r->n_prefill = n_prompt;
	} else {
		free(all);
	}
	take_blocks(b, r, need);
	*admitted = 1;
	if (o->full_recompute)
		return INFS_OK;
	infs_inject_options io = INFS_INJECT_OPTIONS_INIT;
	io.stream = e->batch_ops->stream(e->batch);
	uint32_t pos = 0;
	rc = infs_inject_into_blocks(&pos, b->store, INFS_SEGMENT_NAMESPACE, &e->header_id, 1, 0, r->table, r->n_own,
	                             cache, &io);
	if (!rc && r->n_hits)
		rc = infs_inject_into_blocks(&pos, b->store, b->ns, b->order, r->n_hits, pos, r->table, r->n_own, cache, &io);
	injected(b, r, r->n_hits, pos);
	return rc;
}

/* Accuracy recovery of r's injected prompt (infs__recover), after its
 * injection, with its question's prefill in the same pass where it fits
 * (*prefilled then set: its first logits are in, n_past past the
 * question); else its question's prefill follows. Each request runs its
 * own pass: a single ask and a batch give the same numbers. */
static int recover(batch *b, request *r, int *prefilled)
{
	const infs_ask_options *o = b->o;
	*prefilled = 0;
	if (o->full_recompute || !(o->recompute_ratio > 0.0f || o->prefix_tokens))
		return INFS_OK;
	for (size_t i = 0; i < r->n_hits; i++)
		b->order[i] = r->hits[r->n_hits - 1 - i].id;
	int rc = infs__recover(r->a, b->e, b->store, b->ns, b->order, r->n_hits, r->prefill, r->n_prefill, o,
	                       r->n_past, r->table, r->a->first_logits, prefilled);
	if (!rc && *prefilled)
		r->n_past += r->n_prefill;
	return rc;
}

/* The step's calibrations of group[0..m), or NULL when none has one. */
static const infs__calib *put_calib(batch *b, request *const *group, uint32_t m)
{
	int any = 0;
	for (uint32_t i = 0; i < m; i++) {
		b->calib[i] = group[i]->calib;
		any |= group[i]->calib.hi > group[i]->calib.lo;
	}
	return any ? b->calib : NULL;
}

/* Rows of the step's block tables: sequence i's blocks, the rest 0. */
static void put_table(batch *b, uint32_t i, const request *r)
{
	int32_t *row = b->tables + (size_t)i * b->e->seq_blocks;
	memcpy(row, r->table, r->n_own * sizeof *row);
	memset(row + r->n_own, 0, (b->e->seq_blocks - r->n_own) * sizeof *row);
}

/* Prefills group[0..m): one step when their prompts fit one, else each
 * alone in chunks of the step's token budget. Fills their first logits. */
static int prefill(batch *b, request **group, uint32_t m)
{
	infs_engine *e = b->e;
	const uint32_t max_t = e->batch_ops->max_tokens(e->batch);
	uint64_t total = 0;
	for (uint32_t i = 0; i < m; i++)
		total += group[i]->n_prefill;
	if (total <= max_t) {
		/* Their first logits straight into their answers; a greedy
		 * answer's first token picked on the device, as decoding does. */
		const int greedy = b->o->generate.temperature <= 0;
		uint32_t at = 0;
		for (uint32_t i = 0; i < m; i++) {
			request *r = group[i];
			b->starts[i] = (int32_t)at;
			b->n_past[i] = (int32_t)r->n_past;
			memcpy(b->tokens + at, r->prefill, r->n_prefill * sizeof *b->tokens);
			at += r->n_prefill;
			put_table(b, i, r);
			b->rows[i] = r->a->first_logits;
		}
		b->starts[m] = (int32_t)at;
		/* Question-only prefills repeat their shapes, full prompts rarely;
		 * one question's (its length) comes again with later requests, so
		 * it is captured at once rather than run eagerly the first time. */
		const int graph = b->o->full_recompute ? INFS__GRAPH_NONE
		                  : m == 1 && at <= INFS__QUESTION_GRAPH_TOKENS ? INFS__GRAPH_FIRST : INFS__GRAPH_SECOND;
		infs__dstep st = { m, at, b->tokens, b->starts, b->n_past, b->tables, NULL, greedy ? b->argmax : NULL,
			           graph, put_calib(b, group, m), NULL, b->rows };
		int rc = e->batch_ops->step(e->batch, &st);
		for (uint32_t i = 0; !rc && i < m; i++) {
			group[i]->n_past += group[i]->n_prefill;
			group[i]->pick = greedy ? b->argmax[i] : -1;
		}
		return rc;
	}
	for (uint32_t i = 0; i < m; i++) {
		request *r = group[i];
		for (uint32_t done = 0; done < r->n_prefill;) {
			const uint32_t c = r->n_prefill - done < max_t ? r->n_prefill - done : max_t;
			const int last = done + c == r->n_prefill;
			b->starts[0] = 0;
			b->starts[1] = (int32_t)c;
			b->n_past[0] = (int32_t)r->n_past;
			put_table(b, 0, r);
			infs__dstep st = { 1, c, r->prefill + done, b->starts, b->n_past, b->tables, b->logits, NULL,
				           INFS__GRAPH_NONE, put_calib(b, &r, 1), NULL, NULL };
			int rc = e->batch_ops->step(e->batch, &st);
			if (rc)
				return rc;
			r->n_past += c;
			done += c;
			if (last)
				memcpy(r->a->first_logits, b->logits, e->n_vocab * sizeof(float));
		}
	}
	return INFS_OK;
}

/* r's first token, from its first logits (in at t, host ms). */
static int first_token(batch *b, request *r, double t)
{
	const infs_engine *e = b->e;
	r->a->n_prefilled = r->n_prefill;
	r->a->n_vocab = e->n_vocab;
	r->t_first = t;
	int rc = infs__sampler_init(&r->sampler, e->n_vocab, b->o->generate.temperature, b->o->generate.top_p,
	                            b->o->generate.seed);
	if (rc)
		return rc;
	r->have_sampler = 1;
	return take_token(b, r, r->pick >= 0 ? r->pick : infs__sample(&r->sampler, r->a->first_logits));
}

/* The question of a call of one, by the device path (ask_device.c) where
 * it takes it: its blocks taken for the plan's bound, then embedded,
 * retrieved, injected and prefilled with one wait. *done 0: the host path
 * answers it (nothing taken). */
static int ask_device(batch *b, request *r, int *done)
{
	infs_engine *e = b->e;
	const infs_ask_options *o = b->o;
	uint32_t bound = 0;
	*done = 0;
	if (!infs__ask_device_plan(&bound, e, b->store, b->embedder, b->ns, o, r->n_question))
		return INFS_OK;
	const uint32_t need = blocks_for(e, o, (uint64_t)bound + r->n_question);
	take_blocks(b, r, need); /* the pool is whole: the call's only request */
	memset(r->table + need, 0, (e->seq_blocks - need) * sizeof *r->table);
	infs__ask_device_out d;
	const double t0 = infs__now_ms();
	int rc = infs__ask_device(&d, e, b->store, b->embedder, b->ns, b->questions[r->q], o, r->question,
	                          r->n_question, r->table, need, bound, r->hits, r->a->first_logits);
	if (rc || !d.done) {
		r->lost_ms = infs__now_ms() - t0;
		release_blocks(b, r);
		return rc;
	}
	*done = 1;
	r->pick = d.pick;
	r->n_hits = d.n_hits;
	b->next_q = r->q + 1;
	injected(b, r, d.n_hits, d.next_pos);
	r->n_past += r->n_prefill; /* its question prefilled too */
	infs_answer *a = r->a;
	a->n_prompt = r->n_past;
	a->n_facts = d.n_hits;
	a->embed_ms = d.embed_ms;
	a->retrieve_ms = d.retrieve_ms;
	a->inject_ms = d.inject_ms;
	a->ttft_ms = d.ttft_ms;
	a->prefill_ms = d.ttft_ms - d.embed_ms - d.retrieve_ms - d.inject_ms;
	return first_token(b, r, infs__now_ms());
}

/* Admits what fits: the next waiting requests, up to the free slots and
 * blocks, prefilled together; each samples its first token. */
static int admit(batch *b)
{
	infs_engine *e = b->e;
	const uint32_t slots = e->max_seqs - b->n_running;
	size_t first = b->next_q, m = 0;
	if (!slots)
		return INFS_OK;
	/* Requests retrieved earlier but not yet placed come first. */
	while (first + m < b->n && m < slots && b->req[first + m].a)
		m++;
	if (!m && first < b->n) {
		for (; first + m < b->n && m < slots; m++) {
			request *r = &b->req[first + m];
			r->q = first + m;
			r->pick = -1;
			r->a = calloc(1, sizeof *r->a);
			r->hits = calloc(b->o->fact_ids ? b->o->n_fact_ids + 1 : b->o->k, sizeof *r->hits);
			r->table = malloc(e->seq_blocks * sizeof *r->table);
			r->ids = malloc(b->o->generate.max_tokens * sizeof *r->ids);
			if (r->a)
				r->a->first_logits = malloc(e->n_vocab * sizeof(float));
			if (!r->a || !r->hits || !r->table || !r->ids || !r->a->first_logits)
				return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
			int rc = infs__compose_question(&r->question, &r->n_question, &e->prompt, e->model,
			                                b->questions[r->q]);
			if (rc)
				return rc;
		}
		int done = 0;
		int rc = b->n == 1 ? ask_device(b, &b->req[first], &done) : INFS_OK;
		if (rc || done)
			return rc;
		double em, rm;
		rc = retrieve_group(b, first, m, &em, &rm);
		if (rc)
			return rc;
		for (size_t i = first; i < first + m; i++) {
			request *r = &b->req[i];
			r->a->embed_ms = em + r->lost_ms;
			r->a->retrieve_ms = rm;
			if ((rc = infs__fit_facts(r->hits, &r->n_hits, &r->a->n_left_out, e, b->store, b->ns,
			                          r->n_question, b->o)))
				return rc;
		}
	}
	if (!m)
		return INFS_OK;
	request **group = b->group;
	uint32_t placed = 0;
	double t0 = infs__now_ms();
	for (size_t i = first; i < first + m; i++) {
		int ok = 0;
		int rc = place(b, &b->req[i], &ok);
		if (rc)
			return rc;
		if (!ok)
			break;
		group[placed++] = &b->req[i];
	}
	if (!placed)
		return INFS_OK;
	b->next_q = first + placed;
	int rc = e->batch_ops->sync(e->batch);
	double t1 = infs__now_ms();
	/* Those whose recovery did not prefill them go first, prefilled together. */
	uint32_t n_left = 0;
	for (uint32_t i = 0; !rc && i < placed; i++) {
		int done = 0;
		if (!(rc = recover(b, group[i], &done)) && !done) {
			request *t = group[n_left];
			group[n_left++] = group[i];
			group[i] = t;
		}
	}
	if (!rc && n_left)
		rc = prefill(b, group, n_left);
	double t2 = infs__now_ms();
	for (uint32_t i = 0; !rc && i < placed; i++) {
		request *r = group[i];
		r->a->inject_ms = t1 - t0;
		r->a->prefill_ms = t2 - t1;
		r->a->ttft_ms = r->a->embed_ms + r->a->retrieve_ms + r->a->inject_ms + r->a->prefill_ms;
		rc = first_token(b, r, t2);
	}
	return rc;
}

/* One decode step of every running sequence. */
static int decode(batch *b)
{
	infs_engine *e = b->e;
	request **run = b->group;
	uint32_t m = 0;
	for (size_t i = 0; i < b->next_q; i++)
		if (b->req[i].running)
			run[m++] = &b->req[i];
	if (!m)
		return INFS_OK;
	for (uint32_t i = 0; i < m; i++) {
		b->tokens[i] = run[i]->next;
		b->starts[i] = (int32_t)i;
		b->n_past[i] = (int32_t)run[i]->n_past;
		put_table(b, i, run[i]);
	}
	b->starts[m] = (int32_t)m;
	const int greedy = b->o->generate.temperature <= 0;
	infs__dstep st = { m, m, b->tokens, b->starts, b->n_past, b->tables, greedy ? NULL : b->logits,
		           greedy ? b->argmax : NULL, INFS__GRAPH_SECOND, put_calib(b, run, m), NULL, NULL };
	int rc = e->batch_ops->step(e->batch, &st);
	for (uint32_t i = 0; !rc && i < m; i++) {
		run[i]->n_past++;
		rc = take_token(b, run[i], greedy ? b->argmax[i]
		                                  : infs__sample(&run[i]->sampler, b->logits + (size_t)i * e->n_vocab));
	}
	return rc;
}

int infs__ask_batched(infs_answer **out, infs_engine *e, infs_store *store, const infs_embedder *embedder,
                     const char *ns, const char *const *questions, size_t n, const infs_ask_options *o)
{
	const size_t S = e->max_seqs, T = e->batch_ops->max_tokens(e->batch);
	batch b = { .e = e, .store = store, .embedder = embedder, .ns = ns, .questions = questions, .o = o, .n = n };
	const size_t dim = embedder ? infs_embedder_dim(embedder) : 1;
	const size_t n_order = o->fact_ids ? o->n_fact_ids : o->k;
	b.req = calloc(n, sizeof *b.req);
	b.free_blocks = malloc(e->n_blocks * sizeof *b.free_blocks);
	b.qv = malloc(S * dim * sizeof *b.qv);
	b.logits = malloc(S * e->n_vocab * sizeof *b.logits);
	b.argmax = malloc(S * sizeof *b.argmax);
	b.tokens = malloc((T > S ? T : S) * sizeof *b.tokens);
	b.starts = malloc((S + 1) * sizeof *b.starts);
	b.n_past = malloc(S * sizeof *b.n_past);
	b.tables = malloc(S * e->seq_blocks * sizeof *b.tables);
	b.order = malloc((n_order ? n_order : 1) * sizeof *b.order);
	b.group = malloc(S * sizeof *b.group);
	b.calib = malloc(S * sizeof *b.calib);
	b.rows = malloc(S * sizeof *b.rows);
	b.texts = malloc(S * sizeof *b.texts);
	int rc = INFS_OK;
	if (!b.req || !b.free_blocks || !b.qv || !b.logits || !b.argmax || !b.tokens || !b.starts || !b.n_past ||
	    !b.tables || !b.order || !b.group || !b.texts || !b.calib || !b.rows)
		rc = infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	/* Blocks are handed out lowest first. */
	for (uint32_t i = 0; !rc && i < e->n_blocks; i++)
		b.free_blocks[b.n_free++] = (int32_t)(e->n_blocks - 1 - i);
	while (!rc && b.n_done < n) {
		if ((rc = admit(&b)))
			break;
		rc = decode(&b);
	}
	for (size_t i = 0; !rc && i < n; i++) {
		request *r = &b.req[i];
		infs_answer *a = r->a;
		a->fact_ids = malloc((r->n_hits ? r->n_hits : 1) * sizeof *a->fact_ids);
		a->scores = malloc((r->n_hits ? r->n_hits : 1) * sizeof *a->scores);
		if (!a->fact_ids || !a->scores) {
			rc = infs__error(INFS_ENOMEM, "%s: out of memory", fn);
			break;
		}
		for (size_t j = 0; j < r->n_hits; j++) {
			a->fact_ids[j] = r->hits[j].id;
			a->scores[j] = o->fact_ids ? 0.0f : r->hits[j].score;
		}
	}
	/* Injections of a failed call may still be queued: they end before
	 * the blocks serve another call. */
	const int sr = e->batch_ops->sync(e->batch);
	if (!rc)
		rc = sr;
	for (size_t i = 0; b.req && i < n; i++) {
		if (!rc) {
			out[i] = b.req[i].a;
			b.req[i].a = NULL;
		}
		request_free(&b.req[i]);
	}
	free(b.req);
	free(b.free_blocks);
	free(b.qv);
	free(b.logits);
	free(b.argmax);
	free(b.tokens);
	free(b.starts);
	free(b.n_past);
	free(b.tables);
	free(b.order);
	free(b.group);
	free(b.calib);
	free(b.rows);
	free(b.texts);
	return rc;
}

/* infs_fact_encode: tokenize, embed, run the model after the encoding
 * context, keep the fact's own pre-RoPE KV, put it in the store. */
#include <stdlib.h>
#include <string.h>

#include "inferscale/encode.h"
#include "engine/encode.h"
#include "util/error.h"
#include "util/options.h"
#include "store/store.h"
#include "model/forward.h"
#include "engine/kvcache.h"
#include "backend/backend.h"

/* Facts embedded per infs_embed call: one batch of the embedder, and the
 * granularity at which a cancel is noticed while embedding. */
#define EMBED_CHUNK 32

INFS__DEFINE_INIT(infs_encode_options_init, infs_encode_options, infs__sizes_encode_options, INFS_ENCODE_OPTIONS_INIT)

INFS__DEFINE_INIT(infs_fact_input_init, infs_fact_input, infs__sizes_fact_input, INFS_FACT_INPUT_INIT)

int infs__encode_check_store(infs_geometry *out, infs_store *store, const infs_model *model)
{
	infs_geometry sg, mg;
	int rc = infs_store_geometry(&sg, store);
	if (rc)
		return rc;
	if ((rc = infs_model_geometry(&mg, model, sg.kv_dtype)))
		return rc;
	if (sg.n_layers != mg.n_layers || sg.n_kv_heads != mg.n_kv_heads || sg.head_dim != mg.head_dim ||
	    sg.rotary_dim != mg.rotary_dim || sg.rope_style != mg.rope_style || sg.rope_theta != mg.rope_theta ||
	    sg.rope_scaling != mg.rope_scaling)
		return infs__error(INFS_EMISMATCH, "the store's geometry (%u layers x %u KV heads x %u) is not the model's (%u x %u x %u, or its RoPE differs)",
		                   sg.n_layers, sg.n_kv_heads, sg.head_dim, mg.n_layers, mg.n_kv_heads, mg.head_dim);
	char *id = NULL;
	if ((rc = infs_model_identity(&id, model, sg.kv_dtype)))
		return rc;
	const char *sid = infs_store_identity(store);
	rc = strcmp(id, sid ? sid : "") ? infs__error(INFS_EMISMATCH, "the store was made for \"%s\", not this model (\"%s\")",
	                                               sid ? sid : "", id)
	                                : INFS_OK;
	infs_free(id);
	*out = sg;
	return rc;
}

int infs__encode_tokenize(int32_t **out, uint32_t *n_out, const infs_model *model, const char *text,
                          unsigned flags)
{
	const infs_tokenizer *tok = infs_model_tokenizer(model);
	if (!tok)
		return infs__error(INFS_EINVAL, "the model has no tokenizer: give token ids");
	size_t len = strlen(text), n = 0;
	int rc = infs_tokenize(tok, text, len, flags, NULL, 0, &n);
	if (rc)
		return rc;
	if (n > INFS_FACT_TOKENS_MAX)
		return infs__error(INFS_ERANGE, "a text of %zu tokens is above %u", n, INFS_FACT_TOKENS_MAX);
	int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
	if (!ids)
		return infs__error(INFS_ENOMEM, "out of memory for %zu tokens", n);
	if ((rc = infs_tokenize(tok, text, len, flags, ids, n, &n))) {
		free(ids);
		return rc;
	}
	*out = ids;
	*n_out = (uint32_t)n;
	return INFS_OK;
}

/* The caller's facts, copied as options.h says, and the token ids of each:
 * the caller's, or its text's (then owned[i]). */
typedef struct plan {
	infs_fact_input *facts;
	const int32_t **tokens;
	uint32_t *n_tokens;
	int32_t **owned;
	size_t n;
} plan;

static void plan_free(plan *p)
{
	for (size_t i = 0; p->owned && i < p->n; i++)
		free(p->owned[i]);
	free(p->owned);
	free(p->facts);
	free(p->tokens);
	free(p->n_tokens);
}

static int check_inputs(plan *p, const infs_model *model, const infs_geometry *g,
                        const infs_fact_input *facts, size_t n, const infs_encode_options *o)
{
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	int rc = infs_model_info_get(&info, model);
	if (rc)
		return rc;
	if (o->n_context && !o->context)
		return infs__error(INFS_EINVAL, "infs_fact_encode: n_context %u with a NULL context", o->n_context);
	for (uint32_t t = 0; t < o->n_context; t++)
		if (o->context[t] < 0 || (uint32_t)o->context[t] >= info.n_vocab)
			return infs__error(INFS_EINVAL, "infs_fact_encode: context token %u is %d, outside the vocabulary of %u",
			                   t, o->context[t], info.n_vocab);
	if (o->embedder && infs_embedder_dim(o->embedder) != g->embed_dim)
		return infs__error(INFS_EMISMATCH, "infs_fact_encode: the embedder gives %u floats, the store keeps %u",
		                   infs_embedder_dim(o->embedder), g->embed_dim);
	/* The array's stride is the size of its first fact's version, which
	 * every fact shares. */
	size_t stride = 0;
	if (n && (rc = infs__version_size(&stride, facts[0].version, infs__sizes_fact_input,
	                                  INFS__CURRENT(infs__sizes_fact_input), sizeof *facts, "infs_fact_encode",
	                                  "fact")))
		return rc;
	p->n = n;
	p->facts = calloc(n, sizeof *p->facts);
	p->tokens = calloc(n, sizeof *p->tokens);
	p->n_tokens = calloc(n, sizeof *p->n_tokens);
	p->owned = calloc(n, sizeof *p->owned);
	if (!p->facts || !p->tokens || !p->n_tokens || !p->owned)
		return infs__error(INFS_ENOMEM, "infs_fact_encode: out of memory for %zu facts", n);
	for (size_t i = 0; i < n; i++) {
		const infs_fact_input *in = (const void *)((const char *)facts + i * stride);
		if (in->version != facts[0].version)
			return infs__error(INFS_EINVAL, "infs_fact_encode: fact %zu has version %u, fact 0 version %u "
			                   "(an array holds one version)", i, in->version, facts[0].version);
		p->facts[i] = (infs_fact_input)INFS_FACT_INPUT_INIT;
		memcpy(&p->facts[i], in, stride);
		const infs_fact_input *f = &p->facts[i];
		if (f->flags & ~INFS_FACT_SEGMENT)
			return infs__error(INFS_EINVAL, "infs_fact_encode: fact %zu has unknown flags 0x%x", i, f->flags);
		int segment = (f->flags & INFS_FACT_SEGMENT) != 0;
		if (!f->tokens && !f->text)
			return infs__error(INFS_EINVAL, "infs_fact_encode: fact %zu has neither text nor tokens", i);
		if (f->n_context && !f->context)
			return infs__error(INFS_EINVAL, "infs_fact_encode: fact %zu has n_context %u and a NULL context",
			                   i, f->n_context);
		if (!segment && !f->embedding && !o->embedder)
			return infs__error(INFS_EINVAL, "infs_fact_encode: fact %zu has no embedding and there is no embedder", i);
		if (!segment && !f->embedding && !f->embed_text && !f->text)
			return infs__error(INFS_EINVAL, "infs_fact_encode: fact %zu has no text to embed", i);
		for (uint32_t t = 0; t < f->n_context; t++)
			if (f->context[t] < 0 || (uint32_t)f->context[t] >= info.n_vocab)
				return infs__error(INFS_EINVAL, "infs_fact_encode: fact %zu context token %u is %d, outside the vocabulary of %u",
				                   i, t, f->context[t], info.n_vocab);
		if (f->tokens) {
			p->tokens[i] = f->tokens;
			p->n_tokens[i] = f->n_tokens;
		} else {
			/* Segments are template text: their chat markers are the markers. */
			rc = infs__encode_tokenize(&p->owned[i], &p->n_tokens[i], model, f->text,
			                           segment ? INFS_TOKENIZE_PARSE_SPECIAL : 0);
			if (rc)
				return infs__error_wrap(rc, "infs_fact_encode: fact %zu", i);
			p->tokens[i] = p->owned[i];
		}
		if (p->n_tokens[i] == 0 || p->n_tokens[i] > INFS_FACT_TOKENS_MAX)
			return infs__error(INFS_ERANGE, "infs_fact_encode: fact %zu has %u tokens (1 .. %u)", i,
			                   p->n_tokens[i], INFS_FACT_TOKENS_MAX);
		for (uint32_t t = 0; t < p->n_tokens[i]; t++)
			if (p->tokens[i][t] < 0 || (uint32_t)p->tokens[i][t] >= info.n_vocab)
				return infs__error(INFS_EINVAL, "infs_fact_encode: fact %zu token %u is %d, outside the vocabulary of %u",
				                   i, t, p->tokens[i][t], info.n_vocab);
		if ((uint64_t)o->n_context + f->n_context + p->n_tokens[i] > INT32_MAX)
			return infs__error(INFS_ERANGE, "infs_fact_encode: fact %zu with its context is too long", i);
	}
	return INFS_OK;
}

/* Runs one fact after the shared context held in ctx (NULL: none) and its
 * own context, and writes the fact's pre-RoPE K and V, [n_layers][n][row]. */
int infs__encode_kv(void *k, void *v, const infs_model *model, const infs_geometry *g,
                    const infs__kvcache *ctx, uint32_t n_ctx, const int32_t *own_ctx, uint32_t n_own,
                    const int32_t *tokens, uint32_t n, infs__pool *pool)
{
	uint32_t m = n_own + n;
	size_t es = infs_dtype_size(g->kv_dtype), row = (size_t)g->n_kv_heads * g->head_dim * es;
	int32_t *tok = malloc(m * sizeof *tok), *pos = malloc(m * sizeof *pos);
	char *kall = n_own ? malloc((size_t)g->n_layers * m * row) : k;
	char *vall = n_own ? malloc((size_t)g->n_layers * m * row) : v;
	if (!tok || !pos || !kall || !vall) {
		free(tok);
		free(pos);
		if (n_own) {
			free(kall);
			free(vall);
		}
		return infs__error(INFS_ENOMEM, "infs_fact_encode: out of memory for %u tokens", m);
	}
	if (n_own)
		memcpy(tok, own_ctx, n_own * sizeof *tok);
	memcpy(tok + n_own, tokens, n * sizeof *tok);
	for (uint32_t i = 0; i < m; i++)
		pos[i] = (int32_t)(n_ctx + i);
	infs__paged_kv past = { ctx ? &ctx->layout : NULL, ctx ? ctx->table : NULL,
	                        ctx ? ctx->layout.n_blocks : 0, ctx ? n_ctx : 0, 0 };
	infs__forward_args a = { .tokens = tok, .positions = pos, .n_tokens = m, .k_out = kall, .v_out = vall,
	                         .kv_dtype = g->kv_dtype, .past = &past, .pool = pool };
	int rc = infs__forward(model, &a);
	if (!rc && n_own)
		for (uint32_t l = 0; l < g->n_layers; l++) {
			memcpy((char *)k + (size_t)l * n * row, kall + ((size_t)l * m + n_own) * row, n * row);
			memcpy((char *)v + (size_t)l * n * row, vall + ((size_t)l * m + n_own) * row, n * row);
		}
	if (n_own) {
		free(kall);
		free(vall);
	}
	free(tok);
	free(pos);
	return rc;
}

int infs__encode_context(infs__kvcache *c, const infs_model *model, const infs_geometry *g,
                         const int32_t *tokens, uint32_t n, infs__pool *pool)
{
	int rc = infs__kvcache_init(c, g, INFS_DTYPE_F32, n, 16);
	if (rc)
		return rc;
	infs__paged_kv past = { &c->layout, c->table, c->layout.n_blocks, 0, 1 };
	infs__forward_args a = { .tokens = tokens, .n_tokens = n, .kv_dtype = INFS_DTYPE_F32, .past = &past, .pool = pool };
	if ((rc = infs__forward(model, &a)))
		infs__kvcache_free(c);
	return rc;
}

/* What storing the facts of one call needs, whichever path computed
 * their K/V. */
typedef struct encoder {
	uint64_t *out_ids;
	infs_store *store;
	const char *ns;
	const plan *p;
	const infs_encode_options *o;
	const infs_geometry *g;
	const infs_geometry *kg;    /* g with the dtype the model writes K/V in: f32 for fp8 stores */
	void *qk, *qv;              /* fp8 stores: a fact's quantized K and V */
	float *emb;                 /* EMBED_CHUNK embeddings */
	size_t slot[EMBED_CHUNK];   /* each fact's of the chunk being stored */
} encoder;

/* Embeds the facts [c0, c0 + EMBED_CHUNK) that need it, in one call. */
static int embed_chunk(encoder *e, size_t c0)
{
	const size_t c1 = c0 + EMBED_CHUNK < e->p->n ? c0 + EMBED_CHUNK : e->p->n;
	const char *texts[EMBED_CHUNK];
	size_t n_texts = 0;
	for (size_t i = c0; i < c1; i++) {
		const infs_fact_input *f = &e->p->facts[i];
		if (f->flags & INFS_FACT_SEGMENT || f->embedding)
			continue;
		e->slot[i - c0] = n_texts;
		texts[n_texts++] = f->embed_text ? f->embed_text : f->text;
	}
	return n_texts ? infs_embed(e->emb, e->o->embedder, texts, n_texts, NULL) : INFS_OK;
}

/* Stores fact i with its K/V (kg->kv_dtype, [n_layers][n_tokens][row];
 * quantized first for fp8 stores), embedding first the chunk it opens; then
 * progress. Facts come in order. */
static int store_fact(void *user, size_t i, const void *k, const void *v)
{
	encoder *e = user;
	const infs_fact_input *f = &e->p->facts[i];
	int rc = i % EMBED_CHUNK ? INFS_OK : embed_chunk(e, i);
	if (rc)
		return rc;
	if (e->qk) {
		const uint32_t n = e->p->n_tokens[i];
		if ((rc = infs_kv_convert(e->qk, e->g->kv_dtype, k, e->kg->kv_dtype, e->kg, n)) ||
		    (rc = infs_kv_convert(e->qv, e->g->kv_dtype, v, e->kg->kv_dtype, e->kg, n)))
			return infs__error_wrap(rc, "infs_fact_encode: fact %zu", i);
		k = e->qk;
		v = e->qv;
	}
	infs_fact fact = INFS_FACT_INIT;
	fact.flags = f->flags;
	fact.n_tokens = e->p->n_tokens[i];
	fact.tokens = e->p->tokens[i];
	fact.embedding = f->flags & INFS_FACT_SEGMENT ? NULL
	                 : f->embedding ? f->embedding : e->emb + e->slot[i % EMBED_CHUNK] * e->g->embed_dim;
	fact.k = k;
	fact.v = v;
	fact.text = f->text;
	fact.metadata = f->metadata;
	fact.source_id = f->source_id;
	fact.timestamp = f->timestamp;
	if ((rc = infs__fact_put(&e->out_ids[i], e->store, e->ns, &fact)))
		return rc;
	const size_t n = e->p->n;
	if (e->o->progress && e->o->progress(e->o->progress_user, i + 1, n))
		return infs__error(INFS_ECANCELED, "infs_fact_encode: canceled after %zu of %zu facts", i + 1, n);
	return INFS_OK;
}

/* Facts that share one forward pass on the CPU: packed one after the other
 * up to BATCH_TOKENS tokens (a longer fact goes alone), each attending to
 * the shared context and to its own tokens only. Enough tokens that the
 * matrix products read each weight once for many rows; few enough that the
 * attention's masked scores (quadratic in the batch) stay small. */
#define BATCH_TOKENS 384
#define BATCH_FACTS 64

/* One pass over the packed facts: tokens, positions and sequence ids of up
 * to cap tokens, their K/V out, [n_layers][cap][row]. */
typedef struct host_batch {
	int32_t *tok, *pos, *seq;
	char *k, *v;
	size_t cap;
} host_batch;

/* Runs facts [i, j) (their own context, then their tokens, at positions
 * n_context.. each) in one forward pass over the context cache ctx, then
 * stores each in order from its rows of the pass. */
static int encode_batch(encoder *e, const infs_model *model, const infs__kvcache *ctx, host_batch *b, size_t i,
                        size_t j, void *k, void *v, infs__pool *pool)
{
	const plan *p = e->p;
	const uint32_t n_ctx = e->o->n_context;
	uint32_t m = 0;
	for (size_t f = i; f < j; f++) {
		const infs_fact_input *in = &p->facts[f];
		const uint32_t len = in->n_context + p->n_tokens[f];
		if (in->n_context)
			memcpy(b->tok + m, in->context, in->n_context * sizeof *b->tok);
		memcpy(b->tok + m + in->n_context, p->tokens[f], p->n_tokens[f] * sizeof *b->tok);
		for (uint32_t t = 0; t < len; t++) {
			b->pos[m + t] = (int32_t)(n_ctx + t);
			b->seq[m + t] = (int32_t)(f - i);
		}
		m += len;
	}
	infs__paged_kv past = { ctx ? &ctx->layout : NULL, ctx ? ctx->table : NULL, ctx ? ctx->layout.n_blocks : 0,
		                ctx ? n_ctx : 0, 0 };
	infs__forward_args a = { .tokens = b->tok, .positions = b->pos, .n_tokens = m, .k_out = b->k, .v_out = b->v,
		                 .kv_dtype = e->kg->kv_dtype, .seq = j - i > 1 ? b->seq : NULL, .past = &past,
		                 .pool = pool };
	int rc = infs__forward(model, &a);
	const size_t row = infs_geometry_kv_token_bytes(e->kg) / e->kg->n_layers;
	for (size_t f = i, at = 0; f < j && !rc; f++) {
		const uint32_t own = p->facts[f].n_context, n = p->n_tokens[f];
		for (uint32_t l = 0; l < e->kg->n_layers; l++) {
			memcpy((char *)k + (size_t)l * n * row, b->k + ((size_t)l * m + at + own) * row, n * row);
			memcpy((char *)v + (size_t)l * n * row, b->v + ((size_t)l * m + at + own) * row, n * row);
		}
		rc = store_fact(e, f, k, v);
		at += own + n;
	}
	return rc;
}

/* The CPU model: the context once into an f32 cache, then the facts in
 * batches that share forward passes. */
static int encode_host(encoder *e, const infs_model *model)
{
	const plan *p = e->p;
	const infs_encode_options *o = e->o;
	infs__pool *pool = NULL;
	infs__kvcache ctx = { 0 };
	uint32_t max_n = 0, max_len = 0;
	for (size_t i = 0; i < p->n; i++) {
		const uint32_t len = p->facts[i].n_context + p->n_tokens[i];
		max_n = p->n_tokens[i] > max_n ? p->n_tokens[i] : max_n;
		max_len = len > max_len ? len : max_len;
	}
	host_batch b = { .cap = max_len > BATCH_TOKENS ? max_len : BATCH_TOKENS };
	const size_t tok_bytes = infs_geometry_kv_token_bytes(e->kg);
	b.tok = malloc(b.cap * sizeof *b.tok);
	b.pos = malloc(b.cap * sizeof *b.pos);
	b.seq = malloc(b.cap * sizeof *b.seq);
	b.k = malloc(tok_bytes * b.cap);
	b.v = malloc(tok_bytes * b.cap);
	void *k = malloc(tok_bytes * max_n), *v = malloc(tok_bytes * max_n);
	int rc = k && v && b.tok && b.pos && b.seq && b.k && b.v
	                 ? INFS_OK
	                 : infs__error(INFS_ENOMEM, "infs_fact_encode: out of memory for %zu tokens of KV", b.cap);
	if (!rc)
		rc = infs__pool_borrow(model->pool, model->n_threads, &pool);
	if (!rc && o->n_context)
		rc = infs__encode_context(&ctx, model, e->kg, o->context, o->n_context, pool);
	for (size_t i = 0; i < p->n && !rc;) {
		size_t j = i, m = 0;
		while (j < p->n && j - i < BATCH_FACTS) {
			const size_t len = p->facts[j].n_context + p->n_tokens[j];
			if (j > i && m + len > BATCH_TOKENS)
				break;
			m += len;
			j++;
		}
		rc = encode_batch(e, model, o->n_context ? &ctx : NULL, &b, i, j, k, v, pool);
		i = j;
	}
	infs__kvcache_free(&ctx);
	infs__pool_give_back(model->pool, pool);
	free(b.tok);
	free(b.pos);
	free(b.seq);
	free(b.k);
	free(b.v);
	free(k);
	free(v);
	return rc;
}

/* The model's device (cuda/device_encode.c), batched. */
static int encode_device(encoder *e, const infs_model *model)
{
	const plan *p = e->p;
	const int32_t **own = malloc(p->n * sizeof *own);
	uint32_t *n_own = malloc(p->n * sizeof *n_own);
	int rc = INFS_OK;
	if (!own || !n_own)
		rc = infs__error(INFS_ENOMEM, "infs_fact_encode: out of memory for %zu facts", p->n);
	for (size_t i = 0; !rc && i < p->n; i++) {
		own[i] = p->facts[i].context;
		n_own[i] = p->facts[i].n_context;
	}
	const infs__encode_job job = {
		.context = e->o->context, .n_context = e->o->n_context, .n_facts = p->n, .own = own, .n_own = n_own,
		.tokens = p->tokens, .n_tokens = p->n_tokens, .kv_dtype = e->kg->kv_dtype, .fact = store_fact, .user = e,
	};
	if (!rc)
		rc = infs__cuda->model_encode(model, &job);
	free(own);
	free(n_own);
	return rc;
}

int infs_fact_encode(uint64_t *out_ids, infs_store *store, const char *ns, const infs_model *model,
                     const infs_fact_input *facts, size_t n_facts, const infs_encode_options *opts)
{
	if (ns && !infs__check_namespace(ns) && infs__namespace_reserved(ns))
		return infs__error(INFS_EINVAL, "infs_fact_encode: namespace \"%s\" is reserved (names starting with \""
		                   INFS_RESERVED_PREFIX "\" belong to the library)", ns);
	return infs__fact_encode(out_ids, store, ns, model, facts, n_facts, opts);
}

int infs__fact_encode(uint64_t *out_ids, infs_store *store, const char *ns, const infs_model *model,
                      const infs_fact_input *facts, size_t n_facts, const infs_encode_options *opts)
{
	if (!out_ids || !store || !ns || !model || (!facts && n_facts))
		return infs__error(INFS_EINVAL, "infs_fact_encode: %s is NULL",
		                   !out_ids ? "out_ids" : !store ? "store" : !ns ? "ns" : !model ? "model" : "facts");
	int rc = infs__check_namespace(ns);
	if (rc)
		return infs__error_wrap(rc, "infs_fact_encode");
	infs_encode_options o = INFS_ENCODE_OPTIONS_INIT;
	rc = INFS__TAKE(o, opts, infs__sizes_encode_options, "infs_fact_encode", "options");
	if (rc)
		return rc;
	infs_geometry g;
	rc = infs__encode_check_store(&g, store, model);
	if (rc)
		return rc;
	plan p = { 0 };
	if ((rc = check_inputs(&p, model, &g, facts, n_facts, &o))) {
		plan_free(&p);
		return rc;
	}
	for (size_t i = 0; i < n_facts; i++)
		out_ids[i] = 0;
	if (!n_facts) {
		plan_free(&p);
		return INFS_OK;
	}

	/* the model runs in f32; fp8 is quantized from it, fact by fact */
	infs_geometry kg = g;
	if (g.kv_dtype == INFS_DTYPE_FP8_E4M3)
		kg.kv_dtype = INFS_DTYPE_F32;
	encoder e = { out_ids, store, ns, &p, &o, &g, &kg, NULL, NULL, NULL, { 0 } };
	if (g.kv_dtype == INFS_DTYPE_FP8_E4M3) {
		uint32_t max_n = 0;
		for (size_t i = 0; i < p.n; i++)
			max_n = p.n_tokens[i] > max_n ? p.n_tokens[i] : max_n;
		e.qk = malloc(infs_geometry_kv_token_bytes(&g) * max_n);
		e.qv = malloc(infs_geometry_kv_token_bytes(&g) * max_n);
	}
	if ((g.embed_dim && !(e.emb = malloc((size_t)EMBED_CHUNK * g.embed_dim * sizeof *e.emb))) ||
	    (g.kv_dtype == INFS_DTYPE_FP8_E4M3 && (!e.qk || !e.qv)))
		rc = infs__error(INFS_ENOMEM, "infs_fact_encode: out of memory for %u embeddings and a fact's KV",
		                 EMBED_CHUNK);
	else
		rc = model->dev ? encode_device(&e, model) : encode_host(&e, model);
	free(e.emb);
	free(e.qk);
	free(e.qv);
	plan_free(&p);
	return rc;
}

/* The reference engine: one sequence in a paged host KV cache, filled by
 * injection and by the model's paged forward pass, then decoded. */
#include <stdlib.h>
#include <string.h>

#include "inferscale/engine.h"
#include "engine/compose.h"
#include "engine/encode.h"
#include "engine/host_batch.h"
#include "util/dtype.h"
#include "util/error.h"
#include "util/options.h"
#include "model/forward.h"
#include "backend/backend.h"
#include "engine/engine_impl.h"
#include "engine/fit.h"
#include "engine/sampling.h"
#include "store/store.h"

const infs__engine_view *infs__engine_view_of(const infs_engine *e)
{
	return &e->view;
}

INFS__DEFINE_INIT(infs_engine_options_init, infs_engine_options, infs__sizes_engine_options, INFS_ENGINE_OPTIONS_INIT)

INFS__DEFINE_INIT(infs_generate_options_init, infs_generate_options, infs__sizes_generate_options, INFS_GENERATE_OPTIONS_INIT)

INFS__DEFINE_INIT(infs_ask_options_init, infs_ask_options, infs__sizes_ask_options, INFS_ASK_OPTIONS_INIT)

/* The block pool infs_engine_ask_batch schedules over, through ops: the
 * device's, or (a host engine with max_seqs > 1) in host memory. */
static int create_pool(infs_engine *e, const infs_engine_options *o, const infs__dengine_ops *ops)
{
	e->max_seqs = o->max_seqs ? o->max_seqs : 32;
	e->block_size = o->block_size;
	e->seq_blocks = (o->n_ctx + o->block_size - 1) / o->block_size;
	uint64_t nb = o->n_blocks ? o->n_blocks : (uint64_t)e->max_seqs * e->seq_blocks;
	if (e->max_seqs > 4096 || nb > (1u << 26))
		return infs__error(INFS_ERANGE, "infs_engine_create: max_seqs %u, n_blocks %llu (at most 4096 and 2^26)",
		                   e->max_seqs, (unsigned long long)nb);
	if (nb < e->seq_blocks)
		return infs__error(INFS_ERANGE, "infs_engine_create: n_blocks %llu cannot hold one sequence of n_ctx %u "
		                   "(%u blocks of %u)", (unsigned long long)nb, o->n_ctx, e->seq_blocks, o->block_size);
	e->n_blocks = (uint32_t)nb;
	infs__dengine_config c = { .model = e->model, .geom = &e->geom, .kv_dtype = o->kv_dtype, .n_blocks = e->n_blocks,
		                   .block_size = o->block_size, .max_seqs = e->max_seqs, .seq_blocks = e->seq_blocks,
		                   .n_vocab = e->n_vocab };
	int rc = ops->open(&e->batch, &c);
	if (rc)
		return infs__error_wrap(rc, "infs_engine_create");
	e->batch_ops = ops;
	return INFS_OK;
}

/* The device engine's pool and stream (the model must be on that device). */
static int create_device(infs_engine *e, const infs_engine_options *o)
{
	if (!infs__cuda)
		return infs__error(INFS_EUNSUPPORTED, "infs_engine_create: device %d: this build has no CUDA backend",
		                   o->device);
	if (o->device != e->model->device || !e->model->dev)
		return infs__error(INFS_EINVAL, "infs_engine_create: device %d, but the model is %s %d", o->device,
		                   e->model->dev ? "on device" : "not loaded on a device: its infs_model_options.device is",
		                   e->model->device);
	int rc = create_pool(e, o, infs__cuda->engine);
	if (rc)
		return rc;
	e->dev = e->batch;
	e->ops = e->batch_ops;
	e->view.layout = e->ops->cache(e->dev);
	return INFS_OK;
}

int infs_engine_create(infs_engine **out, const infs_model *model, const infs_engine_options *opts)
{
	if (!out || !model)
		return infs__error(INFS_EINVAL, "infs_engine_create: %s is NULL", out ? "model" : "out");
	infs_engine_options o = INFS_ENGINE_OPTIONS_INIT;
	int rc = INFS__TAKE(o, opts, infs__sizes_engine_options, "infs_engine_create", "options");
	if (rc)
		return rc;
	if (!o.n_ctx)
		o.n_ctx = 4096;
	if (!o.block_size)
		o.block_size = 16;
	if (o.n_ctx > (1u << 24) || o.block_size > o.n_ctx)
		return infs__error(INFS_ERANGE, "infs_engine_create: n_ctx %u, block_size %u (n_ctx <= 2^24, block_size <= n_ctx)",
		                   o.n_ctx, o.block_size);
	if (!infs_dtype_size(o.kv_dtype))
		return infs__error(INFS_EINVAL, "infs_engine_create: unknown kv_dtype %d", (int)o.kv_dtype);
	if (!infs__dtype_cache_ok(o.kv_dtype))
		return infs__error(INFS_EUNSUPPORTED, "infs_engine_create: kv_dtype %s", INFS__FP8_CACHE_MSG);
	if (o.device < -1)
		return infs__error(INFS_EINVAL, "infs_engine_create: device %d (-1 is the host)", o.device);
	infs_engine *e = calloc(1, sizeof *e);
	if (!e)
		return infs__error(INFS_ENOMEM, "infs_engine_create: out of memory");
	e->model = model;
	pthread_mutex_init(&e->ask_lock, NULL);
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	rc = infs_model_info_get(&info, model);
	if (!rc)
		rc = infs_model_geometry(&e->geom, model, o.kv_dtype);
	e->n_vocab = info.n_vocab;
	if (!rc && o.device >= 0)
		rc = create_device(e, &o);
	else if (!rc)
		rc = infs__kvcache_init(&e->cache, &e->geom, o.kv_dtype, o.n_ctx, o.block_size);
	if (!rc && o.device < 0 && o.max_seqs > 1)
		rc = create_pool(e, &o, &infs__host_batch_ops);
	if (!rc && !(e->logits = malloc((size_t)e->n_vocab * sizeof *e->logits)))
		rc = infs__error(INFS_ENOMEM, "infs_engine_create: out of memory");
	if (!rc)
		rc = infs__pool_create(&e->pool, model->n_threads);
	if (rc) {
		infs_engine_free(e);
		return rc;
	}
	/* A model without a tokenizer still runs token ids; only the prompt
	 * layout needs the chat template. */
	e->prompt_rc = infs__compose_init(&e->prompt, model, o.system, o.memory_intro);
	e->have_prompt = e->prompt_rc == INFS_OK;
	if (!e->dev) {
		e->view.layout = &e->cache.layout;
		e->view.table = e->cache.table;
	}
	e->view.prompt = &e->prompt;
	*out = e;
	return INFS_OK;
}

void infs_engine_free(infs_engine *e)
{
	if (!e)
		return;
	infs__ask_device_release(e);
	if (e->batch)
		e->batch_ops->close(e->batch);
	infs__kvcache_free(&e->cache);
	infs__pool_free(e->pool);
	infs__compose_free(&e->prompt);
	free(e->logits);
	pthread_mutex_destroy(&e->ask_lock);
	free(e);
}

int infs_engine_header(const int32_t **out_tokens, uint32_t *out_n, const infs_engine *e)
{
	if (!out_tokens || !out_n || !e)
		return infs__error(INFS_EINVAL, "infs_engine_header: an argument is NULL");
	int rc = infs__engine_need_prompt(e, "infs_engine_header");
	if (rc)
		return rc;
	*out_tokens = e->prompt.header;
	*out_n = e->prompt.n_header;
	return INFS_OK;
}

/* The metadata infs_engine_prepare gives its segments: their role. */
static const char header_role[] = "{\"segment\":\"header\"}";
static const char footer_role[] = "{\"segment\":\"footer\"}";

/* The id of the first record of INFS_SEGMENT_NAMESPACE that is a segment
 * (INFS_FACT_SEGMENT) of this role and holds exactly tokens, or 0. Tokens
 * alone do not decide: a record that is not such a segment is never taken
 * for one, whatever it holds. */
static int find_segment(uint64_t *out, infs_store *store, const char *role, const int32_t *tokens, uint32_t n)
{
	uint64_t *ids = NULL;
	size_t n_ids = 0;
	*out = 0;
	int rc = infs_fact_list(&ids, &n_ids, store, INFS_SEGMENT_NAMESPACE);
	for (size_t i = 0; !rc && i < n_ids && !*out; i++) {
		infs_fact_record *r = NULL;
		if ((rc = infs_fact_get(&r, store, INFS_SEGMENT_NAMESPACE, ids[i])))
			break;
		if (r->flags & INFS_FACT_SEGMENT && !strcmp(r->metadata, role) && r->n_tokens == n &&
		    !memcmp(r->tokens, tokens, n * sizeof *tokens))
			*out = ids[i];
		infs_fact_record_free(r);
	}
	infs_free(ids);
	return rc;
}

int infs_engine_prepare(infs_engine *e, infs_store *store)
{
	if (!e || !store)
		return infs__error(INFS_EINVAL, "infs_engine_prepare: %s is NULL", e ? "store" : "engine");
	int rc = infs__engine_need_prompt(e, "infs_engine_prepare");
	infs_geometry g;
	if (!rc)
		rc = infs__encode_check_store(&g, store, e->model);
	uint64_t hid = 0, fid = 0;
	if (!rc)
		rc = find_segment(&hid, store, header_role, e->prompt.header, e->prompt.n_header);
	if (!rc)
		rc = find_segment(&fid, store, footer_role, e->prompt.footer, e->prompt.n_footer);
	if (!rc && !hid) {
		infs_fact_input in = INFS_FACT_INPUT_INIT;
		in.flags = INFS_FACT_SEGMENT;
		in.tokens = e->prompt.header;
		in.n_tokens = e->prompt.n_header;
		in.metadata = header_role;
		rc = infs__fact_encode(&hid, store, INFS_SEGMENT_NAMESPACE, e->model, &in, 1, NULL);
	}
	if (!rc && !fid) {
		/* The footer follows the facts; it is encoded after the header,
		 * the part of its preceding prompt that every question shares. */
		infs_fact_input in = INFS_FACT_INPUT_INIT;
		in.flags = INFS_FACT_SEGMENT;
		in.tokens = e->prompt.footer;
		in.n_tokens = e->prompt.n_footer;
		in.metadata = footer_role;
		infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
		eo.context = e->prompt.header;
		eo.n_context = e->prompt.n_header;
		rc = infs__fact_encode(&fid, store, INFS_SEGMENT_NAMESPACE, e->model, &in, 1, &eo);
	}
	if (rc)
		return infs__error_wrap(rc, "infs_engine_prepare");
	/* an ask on another thread may be using the device path's tools */
	pthread_mutex_lock(&e->ask_lock);
	infs__ask_device_release(e);
	e->prepared = store;
	e->prepared_serial = infs__store_serial(store);
	e->header_id = hid;
	e->footer_id = fid;
	pthread_mutex_unlock(&e->ask_lock);
	return INFS_OK;
}

void infs_engine_reset(infs_engine *e)
{
	if (e) {
		e->n_past = 0;
		e->have_logits = 0;
		e->have_calib = 0;
	}
}

uint32_t infs_engine_n_past(const infs_engine *e)
{
	return e ? e->n_past : 0;
}

const float *infs_engine_logits(const infs_engine *e)
{
	return e && e->have_logits ? e->logits : NULL;
}

/* The sequence operations are the host engine's. */
static int host_only(const infs_engine *e, const char *fn)
{
	return e->dev ? infs__error(INFS_EUNSUPPORTED, "%s: a device engine runs whole requests "
	                            "(infs_engine_ask, infs_engine_ask_batch)", fn) : INFS_OK;
}

int infs_engine_inject(infs_engine *e, infs_store *store, const char *ns, const uint64_t *ids, size_t n)
{
	if (!e)
		return infs__error(INFS_EINVAL, "infs_engine_inject: engine is NULL");
	int hr = host_only(e, "infs_engine_inject");
	if (hr)
		return hr;
	uint32_t next = 0;
	int rc = infs_inject_into_blocks(&next, store, ns, ids, n, e->n_past, e->cache.table,
	                                 e->cache.layout.n_blocks, &e->cache.layout, NULL);
	if (rc)
		return rc;
	e->n_past = next;
	e->have_logits = 0;
	return INFS_OK;
}

int infs_engine_prefill(infs_engine *e, const int32_t *tokens, uint32_t n)
{
	if (!e || !tokens)
		return infs__error(INFS_EINVAL, "infs_engine_prefill: %s is NULL", e ? "tokens" : "engine");
	if (!n)
		return infs__error(INFS_EINVAL, "infs_engine_prefill: no tokens");
	int hr = host_only(e, "infs_engine_prefill");
	if (hr)
		return hr;
	if (n > e->cache.capacity - e->n_past)
		return infs__error(INFS_ERANGE, "infs_engine_prefill: %u tokens after %u do not fit the cache of %u",
		                   n, e->n_past, e->cache.capacity);
	int32_t *pos = malloc((size_t)n * sizeof *pos);
	if (!pos)
		return infs__error(INFS_ENOMEM, "infs_engine_prefill: out of memory");
	for (uint32_t i = 0; i < n; i++)
		pos[i] = (int32_t)(e->n_past + i);
	infs__paged_kv past = { &e->cache.layout, e->cache.table, e->cache.layout.n_blocks, e->n_past, 1 };
	infs__forward_args a = { .tokens = tokens, .positions = pos, .n_tokens = n, .logits = e->logits,
	                         .kv_dtype = INFS_DTYPE_F32, .past = &past, .pool = e->pool,
	                         .calib = e->have_calib ? &e->calib : NULL };
	int rc = infs__forward(e->model, &a);
	free(pos);
	if (rc)
		return rc;
	e->n_past += n;
	e->have_logits = 1;
	return INFS_OK;
}

/* infs_engine_generate, also past the tokens that end an answer when
 * ignore_eos is set. */
static int generate(char **out, uint32_t *out_n_tokens, infs_engine *e, const infs_generate_options *opts,
                    int ignore_eos);

int infs_engine_generate(char **out, uint32_t *out_n_tokens, infs_engine *e, const infs_generate_options *opts)
{
	return generate(out, out_n_tokens, e, opts, 0);
}

static int generate(char **out, uint32_t *out_n_tokens, infs_engine *e, const infs_generate_options *opts,
                    int ignore_eos)
{
	if (!out || !e)
		return infs__error(INFS_EINVAL, "infs_engine_generate: %s is NULL", out ? "engine" : "out");
	infs_generate_options o = INFS_GENERATE_OPTIONS_INIT;
	int rc = host_only(e, "infs_engine_generate");
	if (!rc)
		rc = INFS__TAKE(o, opts, infs__sizes_generate_options, "infs_engine_generate", "options");
	if (rc)
		return rc;
	if (!o.max_tokens)
		o.max_tokens = 64;
	if (!(o.top_p > 0 && o.top_p <= 1) || o.temperature != o.temperature)
		return infs__error(INFS_ERANGE, "infs_engine_generate: top_p %g is outside (0, 1] or the temperature is NaN",
		                   (double)o.top_p);
	const infs_tokenizer *tok = infs_model_tokenizer(e->model);
	if (!tok)
		return infs__error(INFS_EUNSUPPORTED, "infs_engine_generate: the model has no tokenizer");
	if (!e->have_logits)
		return infs__error(INFS_EINVAL, "infs_engine_generate: nothing was prefilled");
	infs__sampler s;
	rc = infs__sampler_init(&s, e->n_vocab, o.temperature, o.top_p, o.seed);
	if (rc)
		return rc;
	int32_t *ids = malloc((size_t)o.max_tokens * sizeof *ids);
	char *text = NULL;
	uint32_t n = 0;
	if (!ids)
		rc = infs__error(INFS_ENOMEM, "infs_engine_generate: out of memory");
	while (!rc && n < o.max_tokens) {
		int32_t t = infs__sample(&s, e->logits);
		if (!ignore_eos && infs__token_ends(tok, t))
			break;
		ids[n++] = t;
		if (o.stop) {
			free(text);
			text = NULL;
			if ((rc = infs__answer_text(&text, tok, ids, n)))
				break;
			char *hit = strstr(text, o.stop);
			if (hit && *o.stop) {
				*hit = '\0';
				break;
			}
		}
		if (n == o.max_tokens || e->n_past == e->cache.capacity)
			break;
		rc = infs_engine_prefill(e, &t, 1);
	}
	if (!rc && !text)
		rc = infs__answer_text(&text, tok, ids, n);
	infs__sampler_free(&s);
	free(ids);
	if (rc) {
		free(text);
		return rc;
	}
	*out = text;
	if (out_n_tokens)
		*out_n_tokens = n;
	return INFS_OK;
}

static int ask(infs_answer **out, infs_engine *e, infs_store *store, const infs_embedder *embedder,
               const char *ns, const char *question, const infs_ask_options *opts);

int infs_engine_ask(infs_answer **out, infs_engine *e, infs_store *store, const infs_embedder *embedder,
                    const char *ns, const char *question, const infs_ask_options *opts)
{
	if (!e)
		return infs__error(INFS_EINVAL, "infs_engine_ask: engine is NULL");
	pthread_mutex_lock(&e->ask_lock);
	int rc = ask(out, e, store, embedder, ns, question, opts);
	pthread_mutex_unlock(&e->ask_lock);
	return rc;
}

static int ask(infs_answer **out, infs_engine *e, infs_store *store, const infs_embedder *embedder,
               const char *ns, const char *question, const infs_ask_options *opts)
{
	if (!out || !e || !store || !ns || !question)
		return infs__error(INFS_EINVAL, "infs_engine_ask: %s is NULL",
		                   !out ? "out" : !e ? "engine" : !store ? "store" : !ns ? "ns" : "question");
	infs_ask_options o;
	int rc = infs__ask_take(&o, e, store, embedder, opts, "infs_engine_ask");
	if (rc)
		return rc;
	if (e->dev)
		return infs__ask_batched(out, e, store, embedder, ns, &question, 1, &o);

	infs_answer *a = calloc(1, sizeof *a);
	size_t cap = o.fact_ids ? o.n_fact_ids : o.k;
	infs_hit *hits = calloc(cap ? cap : 1, sizeof *hits);
	uint64_t *order = calloc(cap ? cap : 1, sizeof *order);
	float *qv = embedder ? malloc((size_t)infs_embedder_dim(embedder) * sizeof *qv) : NULL;
	int32_t *qt = NULL, *all = NULL;
	uint32_t nq = 0, nf = 0;
	if (!a || !hits || !order || (embedder && !qv)) {
		rc = infs__error(INFS_ENOMEM, "infs_engine_ask: out of memory");
		goto fail;
	}
	if ((rc = infs__compose_question(&qt, &nq, &e->prompt, e->model, question)))
		goto fail;

	double t0 = infs__now_ms();
	size_t nh = 0;
	if (o.fact_ids) {
		for (size_t i = 0; i < o.n_fact_ids; i++)
			hits[i].id = o.fact_ids[i];
		nh = o.n_fact_ids;
	} else if ((rc = infs_embed(qv, embedder, &question, 1, NULL))) {
		goto fail;
	}
	double t1 = infs__now_ms();
	if (!o.fact_ids) {
		infs_retrieve_options ro = INFS_RETRIEVE_OPTIONS_INIT;
		ro.metric = o.metric;
		if ((rc = infs_retrieve(hits, &nh, store, ns, qv, 1, o.k, &ro)))
			goto fail;
	}
	double t2 = infs__now_ms();
	if ((rc = infs__fit_facts(hits, &nh, &a->n_left_out, e, store, ns, nq, &o)))
		goto fail;
	/* Best fact nearest the question: injected last. */
	for (size_t i = 0; i < nh; i++)
		order[i] = hits[nh - 1 - i].id;
	infs_engine_reset(e);
	uint32_t n_prompt;
	if (!o.full_recompute) {
		if ((rc = infs_engine_inject(e, store, INFS_SEGMENT_NAMESPACE, &e->header_id, 1)) ||
		    (nh && (rc = infs_engine_inject(e, store, ns, order, nh))))
			goto fail;
		n_prompt = e->n_past + nq;
	} else {
		/* The same tokens, all prefilled: facts' tokens read from the store. */
		if ((rc = infs__full_prompt(&all, &n_prompt, &nf, e, store, ns, order, nh, qt, nq)))
			goto fail;
	}
	double t3 = infs__now_ms();
	if (!o.full_recompute && (o.recompute_ratio > 0.0f || o.prefix_tokens) &&
	    (rc = infs__recover(a, e, store, ns, order, nh, qt, nq, &o, e->n_past, NULL, NULL, NULL)))
		goto fail;
	/* The question and the answer see the facts through the calibration. */
	if (!o.full_recompute)
		e->have_calib = infs__calib_of(&e->calib, &o, nh, e->prompt.n_header, e->n_past);
	if ((rc = o.full_recompute ? infs_engine_prefill(e, all, n_prompt) : infs_engine_prefill(e, qt, nq)))
		goto fail;
	double t4 = infs__now_ms();

	a->n_prompt = n_prompt;
	a->n_prefilled = o.full_recompute ? n_prompt : nq;
	if (o.recompute_ratio >= 1.0f) /* recovery that recomputed everything */
		a->n_recomputable = a->n_recomputed = nf;
	a->n_facts = nh;
	a->n_vocab = e->n_vocab;
	a->fact_ids = malloc((nh ? nh : 1) * sizeof *a->fact_ids);
	a->scores = malloc((nh ? nh : 1) * sizeof *a->scores);
	a->first_logits = malloc((size_t)e->n_vocab * sizeof *a->first_logits);
	if (!a->fact_ids || !a->scores || !a->first_logits) {
		rc = infs__error(INFS_ENOMEM, "infs_engine_ask: out of memory");
		goto fail;
	}
	for (size_t i = 0; i < nh; i++) {
		a->fact_ids[i] = hits[i].id;
		a->scores[i] = o.fact_ids ? 0.0f : hits[i].score;
	}
	memcpy(a->first_logits, e->logits, (size_t)e->n_vocab * sizeof *a->first_logits);
	a->embed_ms = o.fact_ids ? 0 : t1 - t0;
	a->retrieve_ms = o.fact_ids ? 0 : t2 - t1;
	a->inject_ms = t3 - t2;
	a->prefill_ms = t4 - t3;
	a->ttft_ms = a->embed_ms + a->retrieve_ms + a->inject_ms + a->prefill_ms;
	if ((rc = generate(&a->text, &a->n_tokens, e, &o.generate, o.ignore_eos)))
		goto fail;
	a->decode_ms = infs__now_ms() - t4;
	free(hits);
	free(order);
	free(qv);
	free(qt);
	free(all);
	e->have_calib = 0;
	*out = a;
	return INFS_OK;
fail:
	e->have_calib = 0;
	infs_answer_free(a);
	free(hits);
	free(order);
	free(qv);
	free(qt);
	free(all);
	return rc;
}

int infs_engine_ask_batch(infs_answer **out, infs_engine *e, infs_store *store, const infs_embedder *embedder,
                          const char *ns, const char *const *questions, size_t n, const infs_ask_options *opts)
{
	if (!out || !e || !store || !ns || (!questions && n))
		return infs__error(INFS_EINVAL, "infs_engine_ask_batch: %s is NULL",
		                   !out ? "out" : !e ? "engine" : !store ? "store" : !ns ? "ns" : "questions");
	for (size_t i = 0; i < n; i++) {
		out[i] = NULL;
		if (!questions[i])
			return infs__error(INFS_EINVAL, "infs_engine_ask_batch: question %zu is NULL", i);
	}
	infs_ask_options o;
	/* checked under the lock: a prepare on another thread changes what it checks */
	pthread_mutex_lock(&e->ask_lock);
	int rc = infs__ask_take(&o, e, store, embedder, opts, "infs_engine_ask_batch");
	if (rc || !n) {
		pthread_mutex_unlock(&e->ask_lock);
		return rc;
	}
	if (e->batch)
		rc = infs__ask_batched(out, e, store, embedder, ns, questions, n, &o);
	for (size_t i = 0; !e->batch && i < n && !rc; i++)
		rc = ask(&out[i], e, store, embedder, ns, questions[i], &o);
	pthread_mutex_unlock(&e->ask_lock);
	if (rc)
		for (size_t i = 0; i < n; i++) {
			infs_answer_free(out[i]);
			out[i] = NULL;
		}
	return rc;
}

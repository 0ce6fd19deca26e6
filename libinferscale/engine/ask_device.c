/* One question on a device engine from its text to its first logits with
 * the host out of the way: the question embedded into device memory (by a
 * device embedder; a host embedder's vector is copied there), searched
 * there (infs_retrieve_device), its hits put in injection order (best
 * last) and injected by device ids (infs_inject_device) after the header,
 * and its prefill (a CUDA graph) taking its position and calibration from
 * where the injection ended: all queued on the engine's stream, the host
 * waiting once, for the first logits, the hits and the injection's status.
 *
 * The host plans before retrieval has chosen, so it plans for a bound: the
 * sequence's blocks and the step's attention for the header and k facts
 * of the namespace's longest (infs__store_ns_bound). Where that bound
 * leaves out nothing the host path would keep (every k facts fit beside
 * the question), the two paths inject the same facts in the same order and
 * run the same step: the same answer. Where it does not, or the store has
 * no device copy, or the injection refuses (a fact only in the store file:
 * the call queues its move up), the question goes the host path. */
#include <stdlib.h>
#include <string.h>

#include "embed/embed_device.h"
#include "engine/engine_impl.h"
#include "store/store.h"
#include "util/error.h"

void infs__ask_device_release(infs_engine *e)
{
	infs_searcher_free(e->searcher);
	infs_injector_free(e->injector);
	e->searcher = NULL;
	e->injector = NULL;
	e->device_path_strikes = 0;
}

/* The searcher (for metric) and an injector for at least facts tokens
 * over store, made anew only when those change. The injection's grid is
 * sized for the injector's bound, so it is kept near what questions take:
 * a power of two, at least 256, at most a sequence. */
static int make_tools(infs_engine *e, infs_store *store, infs_metric metric, uint32_t facts)
{
	if (e->tools_serial != infs__store_serial(store))
		infs__ask_device_release(e); /* another open's (prepare releases them too) */
	e->tools_serial = infs__store_serial(store);
	if (!e->searcher || e->searcher_metric != metric) {
		infs_searcher_free(e->searcher);
		e->searcher = NULL;
		infs_searcher_options so = INFS_SEARCHER_OPTIONS_INIT;
		so.metric = metric;
		so.max_queries = 1;
		so.max_k = INFS__ASK_K_MAX;
		int rc = infs_searcher_create(&e->searcher, store, &so);
		if (rc)
			return rc;
		e->searcher_metric = metric;
	}
	if (e->injector && e->injector_tokens >= facts)
		return INFS_OK;
	infs_injector_free(e->injector);
	e->injector = NULL;
	const uint32_t seq_cap = e->seq_blocks * e->block_size;
	uint32_t tokens = 256;
	while (tokens < facts && tokens < seq_cap)
		tokens *= 2;
	infs_injector_options io = INFS_INJECTOR_OPTIONS_INIT;
	io.max_ids = INFS__ASK_K_MAX;
	io.max_tokens = tokens < seq_cap ? tokens : seq_cap;
	int rc = infs_injector_create(&e->injector, store, e->ops->cache(e->dev), &io);
	if (!rc)
		e->injector_tokens = io.max_tokens;
	return rc;
}

int infs__ask_device_plan(uint32_t *bound, infs_engine *e, infs_store *store, const infs_embedder *emb,
                          const char *ns, const infs_ask_options *o, uint32_t nq)
{
	*bound = 0;
	if (!e->dev || e->no_device_path || e->device_path_strikes >= 2 || !e->ops->ask_begin || o->fact_ids ||
	    o->full_recompute || o->recompute_ratio > 0.0f || o->prefix_tokens || o->k > INFS__ASK_K_MAX || !emb)
		return 0;
	/* the embedder's vectors searched in place, the question in one step */
	const int emb_dev = infs__embedder_device(emb);
	if ((emb_dev >= 0 && emb_dev != e->model->device) || infs__store_opts(store)->device != e->model->device ||
	    infs_embedder_dim(emb) != infs__store_geom(store)->embed_dim || nq > e->ops->max_tokens(e->dev))
		return 0;
	size_t n = 0;
	uint32_t longest = 0;
	infs__store_read_lock(store);
	int rc = infs__store_ns_bound(&n, &longest, store, ns);
	infs__store_read_unlock(store);
	if (rc || !n)
		return 0; /* the host path says what is wrong with ns, or answers without facts */
	/* KV only in the store file: the injection would refuse (the host path reads the file) */
	infs_tier tier = INFS_TIER_FILE;
	if (infs_namespace_tier(&tier, store, ns) || tier == INFS_TIER_FILE)
		return 0;
	const uint64_t k = n < o->k ? n : o->k;
	const uint64_t facts = k * longest, head = e->prompt.n_header;
	/* infs__fit_facts's room: the facts beside the header, the question and one answer token */
	if (head + facts + nq + 1 > (uint64_t)e->seq_blocks * e->block_size)
		return 0;
	if (make_tools(e, store, o->metric, (uint32_t)facts)) {
		/* this store's device copy cannot serve it (its embeddings' width,
		 * its device, memory): tried once more, then not until the next
		 * prepare */
		const int strikes = e->device_path_strikes + 1;
		infs__ask_device_release(e);
		e->device_path_strikes = strikes;
		return 0;
	}
	*bound = (uint32_t)(head + facts);
	return 1;
}

int infs__calib_by_count(int32_t *by_count, const infs_ask_options *o, uint32_t k, uint32_t n_header)
{
	int any = 0;
	for (uint32_t c = 0; c <= k; c++) {
		infs__calib cb;
		int32_t *t = by_count + 4 * (size_t)c;
		memset(t, 0, 4 * sizeof *t);
		if (infs__calib_of(&cb, o, c, n_header, 1)) {
			infs__calib_pack(t, &cb);
			t[1] = 1;
			any = 1;
		}
	}
	return any;
}

int infs__ask_device(infs__ask_device_out *out, infs_engine *e, infs_store *store, const infs_embedder *emb,
                     const char *ns, const char *question, const infs_ask_options *o, const int32_t *qt, uint32_t nq,
                     const int32_t *table, uint32_t n_own, uint32_t bound, infs_hit *hits, float *logits)
{
	static const char fn[] = "infs_engine_ask";
	memset(out, 0, sizeof *out);
	const uint32_t dim = infs_embedder_dim(emb), k = o->k;
	void *stream = e->ops->stream(e->dev);
	const double t0 = infs__now_ms();
	float *hq = NULL;
	int rc = INFS_OK;
	const int on_host = infs__embedder_device(emb) < 0;
	/* A host embedder embeds before the device's part starts. */
	if (on_host) {
		if (!(hq = malloc(dim * sizeof *hq)))
			return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
		if ((rc = infs_embed(hq, emb, &question, 1, NULL))) {
			free(hq);
			return rc; /* the question's own error, as the host path says it */
		}
	}
	const double t1 = infs__now_ms();
	infs__dask d;
	rc = e->ops->ask_begin(e->dev, dim, hq, table, &d);
	free(hq);
	if (!rc && !on_host && (rc = infs__embed_device(d.query, emb, &question, 1, NULL, stream))) {
		e->ops->sync(e->dev); /* what was queued ends first */
		return rc;
	}
	if (!rc)
		rc = e->ops->ask_mark(e->dev, 1);
	if (!rc)
		rc = infs_retrieve_device(e->searcher, ns, d.query, 1, k, d.hits, d.count, stream);
	if (!rc && (rc = e->ops->ask_mark(e->dev, 2)) == INFS_OK)
		rc = e->ops->ask_order(e->dev, k);
	uint32_t pos = 0;
	if (!rc) {
		infs_inject_options io = INFS_INJECT_OPTIONS_INIT;
		io.stream = stream;
		rc = infs_inject_into_blocks(&pos, store, INFS_SEGMENT_NAMESPACE, &e->header_id, 1, 0, table, n_own,
		                             e->ops->cache(e->dev), &io);
	}
	if (!rc)
		rc = infs_inject_device(e->injector, ns, d.ids, sizeof *d.ids, d.count, pos, d.table, n_own, d.next_pos,
		                        d.status, stream);
	if (!rc)
		rc = e->ops->ask_mark(e->dev, 3);
	if (rc) {
		/* Not queued whole (a namespace grown past the searcher's rows,
		 * say): the host path answers, and the tools are made anew next
		 * time; after two such questions in a row, not until the next
		 * prepare. What was queued ends before the host path runs. */
		const int strikes = e->device_path_strikes + 1;
		infs__ask_device_release(e);
		e->device_path_strikes = strikes;
		return e->ops->sync(e->dev);
	}
	int32_t by_count[4 * (INFS__ASK_K_MAX + 1)];
	const int32_t starts[2] = { 0, (int32_t)nq }, past[1] = { (int32_t)bound };
	uint32_t count = 0, next_pos = 0;
	int32_t status = INFS_OK, pick = -1;
	int replanned = 0;
	const int greedy = o->generate.temperature <= 0;
	const int32_t *calib = infs__calib_by_count(by_count, o, k, e->prompt.n_header) ? by_count : NULL;
	const infs__dstep_ask ask = { k, calib, hits, &count, &next_pos, &status, &replanned };
	infs__dstep st = { 1, nq, qt, starts, past, table, logits, greedy ? &pick : NULL,
		           nq <= INFS__QUESTION_GRAPH_TOKENS ? INFS__GRAPH_FIRST : INFS__GRAPH_SECOND, NULL, &ask, NULL };
	if ((rc = e->ops->step(e->dev, &st)))
		return rc;
	const double t2 = infs__now_ms();
	/* Not done: the host path answers (and says what is wrong, if
	 * anything). Facts past the bound: a longer fact put since the plan. */
	if (status != INFS_OK || !count || next_pos > bound) {
		e->device_fallbacks++;
		return INFS_OK;
	}
	float ms[3];
	if (e->ops->ask_times(e->dev, ms))
		ms[0] = ms[1] = ms[2] = 0; /* the answer stands; its parts are not known */
	e->device_replans += replanned != 0;
	out->done = 1;
	out->n_hits = count;
	out->next_pos = next_pos;
	out->pick = greedy ? pick : -1;
	out->ttft_ms = t2 - t0;
	out->embed_ms = t1 - t0 + ms[0];
	out->retrieve_ms = ms[1] - ms[0];
	out->inject_ms = ms[2] - ms[1];
	e->device_asks++;
	e->device_path_strikes = 0;
	return INFS_OK;
}

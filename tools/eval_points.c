#include "eval_points.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ask_setup.h"
#include "cli_fail.h"
#include "eval_metrics.h"
#include "jsonl.h"

static void point_options(infs_ask_options *o, const cli_args *a, const eval_point *p)
{
	ask_options(o, a, a->k, 0);
	o->recompute_ratio = p->ratio;
	o->check_layer = p->check;
	o->prefix_tokens = p->prefix;
	o->query_weight = p->weight;
	o->fact_temperature = p->temp;
	o->fact_scale = p->scale;
}


void point_make(eval_point *p, const cli_args *a, const char *mode, float ratio, size_t cal)
{
	cli_args b = *a;
	if (mode) {
		cli_parse_recovery(&b, mode);
		b.recovery = mode;
	}
	infs_ask_options o;
	ask_options(&o, &b, b.k, 0);
	memset(p, 0, sizeof *p);
	p->ratio = ratio < 0 ? o.recompute_ratio : ratio;
	p->check = o.check_layer;
	p->prefix = o.prefix_tokens;
	p->weight = o.query_weight;
	p->temp = a->n_cal ? a->cal_t[cal] : o.fact_temperature;
	p->scale = a->n_cal ? a->cal_s[cal] : o.fact_scale;
	if (b.recovery) /* the name asked for, also where the ratio is 0 */
		snprintf(p->mode, sizeof p->mode, "%s", b.mode);
	else /* the engine's default, named by what it does */
		snprintf(p->mode, sizeof p->mode, "%s%s%s", p->prefix ? "prefix" : "",
		         p->prefix && p->ratio > 0 ? "+" : "", p->ratio <= 0 ? "" : p->weight > 0 ? "query" : "deviation");
	if (!p->mode[0])
		strcpy(p->mode, "none");
}

/* Adds answer x (TTFT ttft_x, recomputed share frac) of question q against
 * full recompute y (TTFT ttft_y), against ref (the same facts injected
 * from the reference store; NULL without one), and y against wref (full
 * recompute with the reference weights; NULL without them), to p's sums. */
static int eval_score(eval_point *p, const conv *c, size_t qi, const infs_answer *x, double ttft_x, double frac,
                      const infs_answer *y, double ttft_y, const infs_answer *ref, const infs_answer *floor2,
                      const infs_answer *wref)
{
	const jsonl_value *q = c->lc.qs[qi];
	const jsonl_value *ans = jsonl_get(q, "answer"), *ev = jsonl_get(q, "evidence");
	char num[64];
	/* A number answer as its text: integers without a fraction. */
	if (ans->type == JSONL_NUMBER)
		snprintf(num, sizeof num, fabs(ans->num) < 1e15 && ans->num == floor(ans->num) ? "%.0f" : "%.15g",
		         ans->num);
	const char *gold = ans->type == JSONL_STRING ? ans->str : num;
	size_t n_gold = ev ? ev->len : 0;
	const char **golds = calloc(n_gold ? n_gold : 1, sizeof *golds);
	const char **have = calloc(x->n_facts ? x->n_facts : 1, sizeof *have);
	double f1i = 0, f1f = 0, f1x = 0;
	int rc = !golds || !have || eval_f1(&f1i, x->text, gold) || eval_f1(&f1f, y->text, gold) ||
	         eval_f1(&f1x, x->text, y->text);
	if (rc)
		rc = fail("out of memory");
	if (!rc) {
		for (size_t i = 0; i < n_gold; i++)
			golds[i] = ev[1 + i].str;
		for (size_t i = 0; i < x->n_facts; i++) {
			have[i] = "";
			for (size_t j = 0; j < c->n_facts; j++)
				if (c->facts[j].id == x->fact_ids[i] && c->facts[j].evidence.p)
					have[i] = c->facts[j].evidence.p;
		}
		size_t total, found = eval_evidence_found(&total, golds, n_gold, have, x->n_facts);
		const divergence d = divergence_add(&p->full, y, x);
		p->ev_found += found;
		p->ev_total += total;
		p->f1_inject += f1i;
		p->f1_full += f1f;
		p->f1_vs_full += f1x;
		/* The floor: full recompute against itself in two steps. */
		const divergence f = divergence_add(&p->floor, y, floor2);
		p->ttft_inject += ttft_x;
		p->recomputed += frac;
		p->ttft_full += ttft_y;
		/* By place in "qa", not by text: the JSON may be published where
		 * the data set's text may not. */
		char buf[512];
		snprintf(buf, sizeof buf,
		         "%s\n  {\"qa\": %zu, \"facts\": %zu, \"first_token_agree\": %s, \"answer_agree\": %s, "
		         "\"kl_first_token\": %.6g, \"f1_inject\": %.6f, \"f1_full\": %.6f, \"evidence_found\": %zu, "
		         "\"evidence_total\": %zu, \"ttft_inject_ms\": %.3f, \"ttft_full_ms\": %.3f, "
		         "\"answer_f1_vs_full\": %.6f, \"floor_first_token_agree\": %s, \"floor_kl_first_token\": %.6g",
		         p->detail.n ? "," : "", c->lc.qa_index[qi], x->n_facts, d.top1 ? "true" : "false",
		         d.same ? "true" : "false", d.kl, f1i, f1f, found, total, ttft_x, ttft_y, f1x,
		         f.top1 ? "true" : "false", f.kl);
		str_puts(&p->detail, buf);
		if (ref) {
			/* KL(reference || x), as KL(full || x) above. */
			const divergence r = divergence_add(&p->ref, ref, x);
			snprintf(buf, sizeof buf, ", \"first_token_agree_vs_reference\": %s, \"answer_agree_vs_reference\": %s, "
			         "\"kl_first_token_vs_reference\": %.6g", r.top1 ? "true" : "false", r.same ? "true" : "false", r.kl);
			str_puts(&p->detail, buf);
		}
		if (wref) {
			/* KL(reference weights || main weights), both by full recompute. */
			const divergence w = divergence_add(&p->wref, wref, y);
			snprintf(buf, sizeof buf, ", \"first_token_agree_full_vs_reference_weights\": %s, "
			         "\"kl_first_token_full_vs_reference_weights\": %.6g", w.top1 ? "true" : "false", w.kl);
			str_puts(&p->detail, buf);
		}
		str_puts(&p->detail, "}");
	}
	free(golds);
	free(have);
	return rc;
}

int eval_question(eval_point *pts, size_t np, const conv *c, size_t qi, runtime *r, infs_store *ref_store,
                  infs_engine *ref_engine, const cli_args *a)
{
	const char *question = jsonl_get(c->lc.qs[qi], "question")->str;
	infs_answer **got = calloc(np, sizeof *got), *first = NULL, *full = NULL, *ref = NULL, *floor2 = NULL,
		    *wref = NULL;
	uint8_t *own = calloc(np, 1);
	uint64_t *ref_ids = NULL;
	int rc = !got || !own ? fail("out of memory") : 0;
	/* The engine answers from the store it was last prepared on. */
	if (!rc && ref_store && infs_engine_prepare(r->engine, r->store))
		rc = lib_fail("eval");
	for (size_t i = 0; !rc && i < np; i++) {
		if (a->sweep && pts[i].ratio >= 1.0f)
			continue; /* full recompute's answer, below */
		for (size_t j = 0; j < i && !got[i]; j++)
			if (got[j] && pts[j].ratio == 0 && pts[i].ratio == 0 && pts[j].prefix == pts[i].prefix &&
			    pts[j].temp == pts[i].temp && pts[j].scale == pts[i].scale)
				got[i] = got[j];
		if (got[i])
			continue;
		infs_ask_options o;
		point_options(&o, a, &pts[i]);
		if (infs_engine_ask(&got[i], r->engine, r->store, r->embedder, EVAL_NS, question, &o))
			rc = lib_fail("eval");
		own[i] = 1;
		first = first ? first : got[i];
	}
	/* The same facts in the same order, all prefilled. */
	infs_ask_options o;
	ask_options(&o, a, a->k, 1);
	if (!rc) {
		o.fact_ids = first->fact_ids;
		o.n_fact_ids = first->n_facts;
	}
	if (!rc && infs_engine_ask(&full, r->engine, r->store, r->embedder, EVAL_NS, question, &o))
		rc = lib_fail("eval");
	/* The same prompt, the same options, the other weights. */
	if (!rc && ref_engine && infs_engine_ask(&wref, ref_engine, r->store, r->embedder, EVAL_NS, question, &o))
		rc = lib_fail("eval: the reference weights");
	/* The floor: every fact token recomputed in place over the injected
	 * header (so through every layer), then the question: full recompute's
	 * prompt, prefilled in two steps, uncalibrated. */
	if (!rc) {
		ask_options(&o, a, a->k, 0);
		o.fact_ids = first->fact_ids;
		o.n_fact_ids = first->n_facts;
		o.recompute_ratio = 0;
		o.query_weight = 0;
		o.prefix_tokens = UINT32_MAX;
		o.fact_temperature = o.fact_scale = 1.0f;
		if (infs_engine_ask(&floor2, r->engine, r->store, r->embedder, EVAL_NS, question, &o))
			rc = lib_fail("eval: the floor");
	}
	if (!rc && ref_store) {
		/* The same facts by their ids in the reference store. */
		if (!(ref_ids = calloc(first->n_facts ? first->n_facts : 1, sizeof *ref_ids)))
			rc = fail("out of memory");
		for (size_t i = 0; !rc && i < first->n_facts; i++)
			for (size_t j = 0; j < c->n_facts; j++)
				if (c->facts[j].id == first->fact_ids[i])
					ref_ids[i] = c->facts[j].ref_id;
		point_options(&o, a, &pts[0]);
		o.fact_ids = ref_ids;
		o.n_fact_ids = first->n_facts;
		if (!rc && (infs_engine_prepare(r->engine, ref_store) ||
		            infs_engine_ask(&ref, r->engine, ref_store, NULL, EVAL_NS, question, &o)))
			rc = lib_fail("eval: the reference");
	}
	/* Full recompute's TTFT counts the same embedding and retrieval. */
	double ttft_full = rc ? 0 : first->embed_ms + first->retrieve_ms + full->inject_ms + full->prefill_ms;
	for (size_t i = 0; !rc && i < np; i++) {
		const infs_answer *x = got[i] ? got[i] : full;
		double frac = !got[i] ? 1 : x->n_recomputable ? (double)x->n_recomputed / x->n_recomputable : 0;
		rc = eval_score(&pts[i], c, qi, x, got[i] ? x->ttft_ms : ttft_full, frac, full, ttft_full, ref, floor2,
		                wref);
	}
	for (size_t i = 0; got && i < np; i++)
		if (own[i])
			infs_answer_free(got[i]);
	infs_answer_free(full);
	infs_answer_free(floor2);
	infs_answer_free(ref);
	infs_answer_free(wref);
	free(ref_ids);
	free(got);
	free(own);
	return rc;
}

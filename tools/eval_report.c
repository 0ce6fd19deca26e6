#include "eval_report.h"

#include <stdlib.h>

#include "charts.h"
#include "cli_fail.h"

void context_summary(const conv *c, const cli_args *a)
{
	const size_t with = c->n_facts - c->n_no_context;
	if (a->context_turns)
		fprintf(stderr, "  context: up to %u turn%s ending with each fact's evidence turn, %.1f tokens on average; "
		                "%zu of %zu facts without (no known evidence turn); encoding %.1f s\n",
		        a->context_turns, a->context_turns == 1 ? "" : "s",
		        with ? (double)c->context_tokens / (double)with : 0.0, c->n_no_context, c->n_facts,
		        c->encode_ms / 1e3);
}

void eval_report(FILE *jf, const eval_point *p, size_t nq, const conv *c, const cli_args *a)
{
	const double n = (double)nq;
	char recall[32], recall_h[48];
	/* No gold evidence at all: no recall to report. */
	snprintf(recall, sizeof recall, p->ev_total ? "%.6f" : "null",
	         p->ev_total ? (double)p->ev_found / (double)p->ev_total : 0.0);
	snprintf(recall_h, sizeof recall_h, "%zu of %zu turns", p->ev_found, p->ev_total);
	const size_t with_context = c->n_facts - c->n_no_context;
	fprintf(jf, "{\"mode\": \"%s\", \"recompute_ratio\": %g, \"check_layer\": %u, \"prefix_tokens\": %u, "
	            "\"query_weight\": %g, \"fact_temperature\": %g, \"fact_scale\": %g, \"k\": %u, \"kv_dtype\": \"%s\", \"device_weights\": \"%s\", \"context_turns\": %u, "
	            "\"facts_without_context\": %zu, \"context_tokens_mean\": %.3f, \"encode_ms\": %.3f, "
	            "\"n_questions\": %zu, "
	            "\"recompute_fraction\": %.6f, "
	            "\"first_token_agreement\": %.6f, \"answer_agreement\": %.6f, \"kl_first_token_mean\": %.6g, "
	            "\"f1_inject\": %.6f, \"f1_full\": %.6f, \"evidence_recall\": %s, "
	            "\"ttft_inject_ms\": %.3f, \"ttft_full_ms\": %.3f, \"answer_f1_vs_full\": %.6f, "
	            "\"floor_first_token_agreement\": %.6f, \"floor_answer_agreement\": %.6f, "
	            "\"floor_kl_first_token_mean\": %.6g, ",
	        p->mode, (double)p->ratio, p->check, p->prefix, (double)p->weight, (double)p->temp, (double)p->scale, a->k,
	        cli_dtype_name(a->kv_dtype), cli_dtype_name(a->weights),
	        a->context_turns, c->n_no_context,
	        a->context_turns && with_context ? (double)c->context_tokens / (double)with_context : 0.0, c->encode_ms, nq,
	        p->recomputed / n, (double)p->full.top1 / n, (double)p->full.same / n, p->full.kl / n, p->f1_inject / n,
	        p->f1_full / n, recall, p->ttft_inject / n, p->ttft_full / n, p->f1_vs_full / n,
	        (double)p->floor.top1 / n, (double)p->floor.same / n, p->floor.kl / n);
	if (a->ref)
		fprintf(jf, "\"reference_kv_dtype\": \"%s\", \"first_token_agreement_vs_reference\": %.6f, "
		            "\"answer_agreement_vs_reference\": %.6f, \"kl_first_token_vs_reference_mean\": %.6g, ",
		        cli_dtype_name(a->ref_dtype), (double)p->ref.top1 / n, (double)p->ref.same / n, p->ref.kl / n);
	if (a->ref_w)
		fprintf(jf, "\"reference_device_weights\": \"%s\", \"first_token_agreement_full_vs_reference_weights\": %.6f, "
		            "\"answer_agreement_full_vs_reference_weights\": %.6f, "
		            "\"kl_first_token_full_vs_reference_weights_mean\": %.6g, ",
		        cli_dtype_name(a->ref_weights), (double)p->wref.top1 / n, (double)p->wref.same / n, p->wref.kl / n);
	fprintf(jf, "\"questions\": [%s\n]}", p->detail.p ? p->detail.p : "");
	if (a->sweep || a->n_cal > 1) {
		fprintf(stderr, "%-16s r %.2f T %.2f S %.2f: recomputed %.3f, first token %5.1f%% (floor %5.1f%%), "
		                "answer %5.1f%% (F1 vs full %.3f), KL %.4f (floor %.4f), F1 %.3f / %.3f, TTFT %.1f / %.1f ms\n",
		        p->mode, (double)p->ratio, (double)p->temp, (double)p->scale, p->recomputed / n,
		        100.0 * (double)p->full.top1 / n, 100.0 * (double)p->floor.top1 / n, 100.0 * (double)p->full.same / n,
		        p->f1_vs_full / n, p->full.kl / n, p->floor.kl / n, p->f1_inject / n, p->f1_full / n, p->ttft_inject / n,
		        p->ttft_full / n);
		return;
	}
	fprintf(stderr,
	        "%s: %zu of %zu questions (categories 1-4), %zu facts, k %u, recovery %s, calibration %g:%g\n"
	        "  agreement with full recompute: first token %.1f%%, answer %.1f%% (token F1 %.3f); first-token KL %.4f nats\n"
	        "  the floor (full recompute in two steps against one): first token %.1f%%, answer %.1f%%; KL %.4f\n"
	        "  F1: injection %.3f, full recompute %.3f; evidence recall %s\n"
	        "  mean TTFT: injection %.1f ms, full recompute %.1f ms\n",
	        a->positional, nq, c->lc.n_qs, c->n_facts, a->k, p->mode, (double)p->temp, (double)p->scale,
	        100.0 * (double)p->full.top1 / n, 100.0 * (double)p->full.same / n, p->f1_vs_full / n, p->full.kl / n,
	        100.0 * (double)p->floor.top1 / n, 100.0 * (double)p->floor.same / n, p->floor.kl / n,
	        p->f1_inject / n, p->f1_full / n, recall_h, p->ttft_inject / n, p->ttft_full / n);
	context_summary(c, a);
	if (a->ref)
		fprintf(stderr, "  %s KV against %s: first token %.1f%%, answer %.1f%%; first-token KL %.4g nats\n",
		        cli_dtype_name(a->kv_dtype), cli_dtype_name(a->ref_dtype), 100.0 * (double)p->ref.top1 / n,
		        100.0 * (double)p->ref.same / n, p->ref.kl / n);
	if (a->ref_w)
		fprintf(stderr, "  full recompute, %s device weights against %s: first token %.1f%%, answer %.1f%%; "
		                "first-token KL %.4g nats\n",
		        cli_dtype_name(a->weights), cli_dtype_name(a->ref_weights), 100.0 * (double)p->wref.top1 / n,
		        100.0 * (double)p->wref.same / n, p->wref.kl / n);
}

int eval_plot(const char *png, const eval_point *pts, size_t np, size_t nq)
{
	chart_sweep_run *runs = calloc(np ? np : 1, sizeof *runs);
	if (!runs)
		return fail("--plot: out of memory");
	const double n = nq ? (double)nq : 1.0;
	for (size_t i = 0; i < np; i++) {
		const eval_point *p = &pts[i];
		runs[i] = (chart_sweep_run){ p->mode, (int)p->check, p->recomputed / n, (double)p->full.top1 / n,
			                     (double)p->full.same / n, p->full.kl / n, p->f1_inject / n, p->f1_full / n,
			                     p->ttft_inject / n, p->ttft_full / n };
	}
	char why[256];
	int rc = chart_sweep(png, runs, np, why, sizeof why) ? fail("--plot: %s", why) : 0;
	free(runs);
	return rc;
}

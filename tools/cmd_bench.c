/* inferscale bench [QUESTION]: for each k and each question, injection and
 * then full recompute of the same prompt; the mean TTFT of each way part by
 * part, and their divergence, as a table, JSON (--json) and a chart
 * (--plot). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ask_setup.h"
#include "charts.h"
#include "cli_commands.h"
#include "cli_fail.h"
#include "cli_runtime.h"
#include "divergence.h"
#include "strbuf.h"

static void cpu_name(char *out, size_t n)
{
	snprintf(out, n, "unknown CPU");
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
			char *s = strchr(line, ':') + 1;
			while (*s == ' ')
				s++;
			s[strcspn(s, "\n")] = '\0';
			snprintf(out, n, "%s", s);
			break;
		}
	if (f)
		fclose(f);
}

static int run(const cli_args *a)
{
	questions Q;
	if (questions_load(&Q, a)) {
		questions_free(&Q);
		return 1;
	}
	size_t nq = Q.n;
	const char **qs = Q.q, **nss = Q.ns;
	runtime r;
	int rc = runtime_open(&r, a, 0);
	/* A warm-up question first, at the largest k: it pages in the weights,
	 * starts the threads, and fails before anything is printed when the
	 * prompt does not fit. */
	if (!rc && nq) {
		uint32_t k_max = 0;
		for (size_t ki = 0; ki < a->n_ks; ki++)
			k_max = a->ks[ki] > k_max ? a->ks[ki] : k_max;
		infs_ask_options o;
		ask_options(&o, a, k_max, 0);
		o.generate.max_tokens = 1;
		infs_answer *w = NULL;
		if (infs_engine_ask(&w, r.engine, r.store, r.embedder, nss[0], qs[0], &o))
			rc = lib_fail("bench");
		infs_answer_free(w);
	}
	FILE *jf = NULL;
	if (!rc && a->json)
		jf = strcmp(a->json, "-") ? fopen(a->json, "w") : stdout;
	if (!rc && a->json && !jf)
		rc = fail("%s: %s", a->json, strerror(errno));
	/* The chart is drawn at the end: its file must be writable now. */
	FILE *pf = !rc && a->plot ? fopen(a->plot, "wb") : NULL;
	if (!rc && a->plot && !pf)
		rc = fail("%s: %s", a->plot, strerror(errno));
	if (pf)
		fclose(pf);
	/* Every statistic is a mean over the questions at one k, parts and totals
	 * alike, so the parts add up to the TTFT in the table, the JSON's
	 * "summary" and the chart. */
	chart_bench_k chart[sizeof a->ks / sizeof a->ks[0]];
	double prompt[sizeof a->ks / sizeof a->ks[0]], facts[sizeof a->ks / sizeof a->ks[0]];
	double read[sizeof a->ks / sizeof a->ks[0]], fprefill[sizeof a->ks / sizeof a->ks[0]];
	char cpu[256];
	cpu_name(cpu, sizeof cpu);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (jf)
		fprintf(jf, "{\"hardware\": {\"cpu\": \"%s\", \"cores\": %ld}, \"max_tokens\": %u, \"questions\": %zu, "
		            "\"statistic\": \"mean\", \"results\": [",
		        cpu, ncpu, a->max_tokens, nq);
	if (!rc) {
		printf("%s, %ld cores; %zu question%s; answers of up to %u token%s\n\n", cpu, ncpu, nq,
		       nq == 1 ? "" : "s", a->max_tokens, a->max_tokens == 1 ? "" : "s");
		printf("%5s %7s | %-45s | %-27s | %7s | %s\n", "", "mean", "injection, mean ms",
		       "full recompute, mean ms", "", "mean KL, shares");
		printf("%5s %7s | %9s %8s %8s %8s %8s | %9s %8s %8s | %7s | %8s %6s %6s\n", "k", "prompt", "TTFT",
		       "embed", "retr", "inject", "prefill", "TTFT", "read", "prefill", "speedup", "KL", "top1", "answer");
	}
	for (size_t ki = 0; !rc && ki < a->n_ks; ki++) {
		uint32_t k = a->ks[ki];
		double s_emb = 0, s_ret = 0, s_inj = 0, s_pre = 0, s_read = 0, s_fpre = 0, s_prompt = 0, s_facts = 0;
		divergence_sum dv = { 0, 0, 0 };
		for (size_t q = 0; !rc && q < nq; q++) {
			infs_answer *x = NULL, *y = NULL;
			infs_ask_options o;
			ask_options(&o, a, k, 0);
			if (infs_engine_ask(&x, r.engine, r.store, r.embedder, nss[q], qs[q], &o)) {
				rc = lib_fail("bench");
				break;
			}
			/* The same facts in the same order, all prefilled. */
			ask_options(&o, a, k, 1);
			o.fact_ids = x->fact_ids;
			o.n_fact_ids = x->n_facts;
			if (infs_engine_ask(&y, r.engine, r.store, r.embedder, nss[q], qs[q], &o)) {
				infs_answer_free(x);
				rc = lib_fail("bench");
				break;
			}
			/* Full recompute's TTFT counts the same embedding and retrieval. */
			double full_ttft = x->embed_ms + x->retrieve_ms + y->inject_ms + y->prefill_ms;
			const divergence d = divergence_add(&dv, y, x);
			s_emb += x->embed_ms;
			s_ret += x->retrieve_ms;
			s_inj += x->inject_ms;
			s_pre += x->prefill_ms;
			s_read += y->inject_ms;
			s_fpre += y->prefill_ms;
			s_prompt += x->n_prompt;
			s_facts += (double)x->n_facts;
			if (jf) {
				/* Questions by their line number, not their text: the JSON
				 * may be published where the data set's text may not. */
				str s = { 0 };
				str_json(&s, nss[q]);
				fprintf(jf, "%s\n  {\"k\": %u, \"namespace\": %s, \"question\": %zu", ki || q ? "," : "",
				        k, s.p, q + 1);
				free(s.p);
				fprintf(jf, ", \"facts\": %zu, \"prompt_tokens\": %u, \"prefilled_tokens\": %u, "
				            "\"injection_ms\": {\"ttft\": %.3f, \"embed\": %.3f, \"retrieve\": %.3f, \"inject\": %.3f, \"prefill\": %.3f}, "
				            "\"full_ms\": {\"ttft\": %.3f, \"read_tokens\": %.3f, \"prefill\": %.3f}, "
				            "\"kl\": %.6g, \"top1_agree\": %s, \"answer_agree\": %s}",
				        x->n_facts, x->n_prompt, x->n_prefilled, x->ttft_ms, x->embed_ms, x->retrieve_ms,
				        x->inject_ms, x->prefill_ms, full_ttft, y->inject_ms, y->prefill_ms, d.kl,
				        d.top1 ? "true" : "false", d.same ? "true" : "false");
			}
			infs_answer_free(x);
			infs_answer_free(y);
		}
		if (rc)
			break;
		double n = (double)nq;
		chart_bench_k *c = &chart[ki];
		*c = (chart_bench_k){ k, s_emb / n, s_ret / n, s_inj / n, s_pre / n, (s_emb + s_ret + s_read + s_fpre) / n,
		                      (double)dv.top1 / n, (double)dv.same / n, dv.kl / n };
		prompt[ki] = s_prompt / n;
		facts[ki] = s_facts / n;
		read[ki] = s_read / n;
		fprefill[ki] = s_fpre / n;
		double ti = c->embed_ms + c->retrieve_ms + c->inject_ms + c->prefill_ms;
		printf("%5u %7.0f | %9.1f %8.1f %8.2f %8.1f %8.1f | %9.1f %8.2f %8.1f | %6.1fx | %8.4f %5.0f%% %5.0f%%\n",
		       k, prompt[ki], ti, c->embed_ms, c->retrieve_ms, c->inject_ms, c->prefill_ms, c->full_ms, read[ki],
		       fprefill[ki], ti > 0 ? c->full_ms / ti : 0, c->kl, 100 * c->top1, 100 * c->answer);
		if (s_facts < k * n)
			printf("      (k %u: %.1f facts on average: the namespaces are smaller)\n", k, facts[ki]);
	}
	if (!rc)
		printf("\nMeans over the questions at each k, in ms: TTFT = embed + retr + inject + prefill for\n"
		       "injection, embed + retr + read (the facts' tokens from the store) + prefill for full\n"
		       "recompute; speedup = full TTFT / inj TTFT; KL(full || injection) of the first token, nats;\n"
		       "top1 / answer: share of questions whose first token / whole answer is the same.\n");
	if (jf) {
		/* The table's rows: the same means as the text. */
		fprintf(jf, "\n], \"summary\": [");
		for (size_t ki = 0; !rc && ki < a->n_ks; ki++) {
			const chart_bench_k *c = &chart[ki];
			double ti = c->embed_ms + c->retrieve_ms + c->inject_ms + c->prefill_ms;
			fprintf(jf, "%s\n  {\"k\": %u, \"facts\": %.3f, \"prompt_tokens\": %.3f, "
			            "\"injection_ms\": {\"ttft\": %.3f, \"embed\": %.3f, \"retrieve\": %.3f, \"inject\": %.3f, \"prefill\": %.3f}, "
			            "\"full_ms\": {\"ttft\": %.3f, \"read_tokens\": %.3f, \"prefill\": %.3f}, "
			            "\"speedup\": %.3f, \"kl\": %.6g, \"top1_agree\": %.6g, \"answer_agree\": %.6g}",
			        ki ? "," : "", a->ks[ki], facts[ki], prompt[ki], ti, c->embed_ms, c->retrieve_ms, c->inject_ms,
			        c->prefill_ms, c->full_ms, read[ki], fprefill[ki], ti > 0 ? c->full_ms / ti : 0, c->kl,
			        c->top1, c->answer);
		}
		fprintf(jf, "\n]}\n");
		if (jf != stdout)
			fclose(jf);
	}
	char why[512];
	if (!rc && a->plot && chart_bench(a->plot, chart, a->n_ks, nq, a->max_tokens, why, sizeof why))
		rc = fail("--plot: %s", why);
	runtime_free(&r);
	questions_free(&Q);
	return rc;
}

static int check(const cli_args *a)
{
	int rc = cli_check_asking(a);
	if (!rc && !a->positional && !a->questions)
		rc = fail("bench needs a question or --questions FILE") + 1;
	if (!rc && a->positional && !a->ns)
		rc = fail("bench with a question needs --namespace NS") + 1;
	return rc;
}

static const char *const opts[] = { "--store", "--namespace", "--questions", CLI_OPTS_MODELS, "-k", "--k",
	                            CLI_OPTS_SAMPLING, CLI_OPTS_RECOVERY, "--json", "--plot", "--quiet", NULL };

const cli_command cmd_bench = {
	.name = "bench",
	.args = "[QUESTION]",
	.what = "For each k of --k and each question: injection, then full recompute of the same\n"
	        "prompt. Prints the mean TTFT of each way and of each of its parts (so the parts add\n"
	        "up to the TTFT), and their divergence (mean KL of the first token, first-token and\n"
	        "answer agreement).\n",
	.opts = opts,
	.positional = "question",
	.k_list = 1,
	.max_tokens = 1,
	.check = check,
	.run = run,
};

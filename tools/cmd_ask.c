/* inferscale ask QUESTION: answers from injected memory (or by full
 * recompute, or both side by side), with the facts used and the time to
 * first token by part; --json writes every answer as JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ask_setup.h"
#include "cli_commands.h"
#include "cli_fail.h"
#include "cli_hints.h"
#include "cli_runtime.h"
#include "strbuf.h"

static void print_timing(FILE *out, const infs_answer *x, int full)
{
	fprintf(out, "TTFT %7.1f ms = embed %.1f + retrieve %.2f + %s %.1f + prefill %.1f (%u of %u prompt tokens prefilled)",
	       x->ttft_ms, x->embed_ms, x->retrieve_ms, full ? "read tokens" : "inject", x->inject_ms,
	       x->prefill_ms, x->n_prefilled, x->n_prompt);
}

/* One answer as a JSON object of ask --json. */
static void answer_json(str *j, const infs_answer *x, const char *question, const char *ns, int full)
{
	char buf[512];
	str_puts(j, j->n > 2 ? ",\n {\"question\": " : " {\"question\": ");
	str_json(j, question);
	str_puts(j, ", \"namespace\": ");
	str_json(j, ns);
	str_puts(j, full ? ", \"mode\": \"full_recompute\", \"answer\": " : ", \"mode\": \"injection\", \"answer\": ");
	str_json(j, x->text);
	snprintf(buf, sizeof buf, ", \"n_tokens\": %u, \"n_prompt\": %u, \"n_prefilled\": %u, \"facts\": [", x->n_tokens,
	         x->n_prompt, x->n_prefilled);
	str_puts(j, buf);
	for (size_t i = 0; i < x->n_facts; i++) {
		snprintf(buf, sizeof buf, "%s{\"id\": %llu, \"score\": %.6f}", i ? ", " : "",
		         (unsigned long long)x->fact_ids[i], (double)x->scores[i]);
		str_puts(j, buf);
	}
	snprintf(buf, sizeof buf, "], \"ttft_ms\": %.3f, \"embed_ms\": %.3f, \"retrieve_ms\": %.3f, \"inject_ms\": %.3f, "
	         "\"prefill_ms\": %.3f, \"decode_ms\": %.3f}", x->ttft_ms, x->embed_ms, x->retrieve_ms, x->inject_ms,
	         x->prefill_ms, x->decode_ms);
	str_puts(j, buf);
}

static int run(const cli_args *a)
{
	questions Q;
	runtime r;
	int rc = questions_load(&Q, a);
	if (!rc)
		rc = runtime_open(&r, a, 0);
	else
		memset(&r, 0, sizeof r);
	/* --json is opened before anything is answered: a path that cannot be
	 * written fails first. */
	FILE *jf = NULL;
	if (!rc && a->json && !(jf = strcmp(a->json, "-") ? fopen(a->json, "w") : stdout))
		rc = fail("%s: %s", a->json, strerror(errno));
	/* With --json - the JSON has stdout to itself and the text goes to stderr. */
	FILE *out = a->json && !strcmp(a->json, "-") ? stderr : stdout;
	str j = { 0 };
	str_puts(&j, "[\n");
	int modes = a->compare ? 2 : 1;
	double sum[2] = { 0, 0 };
	if (!rc)
		cli_warn_empty(r.store, Q.ns, Q.n);
	/* Several questions: a first one untimed, so that the mean holds no
	 * cold start (first touches of the weights, thread start-up). */
	if (!rc && Q.n > 1) {
		infs_ask_options o;
		ask_options(&o, a, a->k, a->full);
		o.generate.max_tokens = 1;
		infs_answer *x = NULL;
		if (infs_engine_ask(&x, r.engine, r.store, r.embedder, Q.ns[0], Q.q[0], &o))
			rc = lib_fail("ask");
		infs_answer_free(x);
	}
	for (size_t q = 0; !rc && q < Q.n; q++) {
		if (Q.n > 1 || a->compare)
			fprintf(out, "%sQ: %s\n", q ? "\n" : "", Q.q[q]);
		for (int mode = 0; !rc && mode < modes; mode++) {
			int full = a->compare ? mode : a->full;
			infs_ask_options o;
			ask_options(&o, a, a->k, full);
			infs_answer *x = NULL;
			if (infs_engine_ask(&x, r.engine, r.store, r.embedder, Q.ns[q], Q.q[q], &o)) {
				rc = lib_fail("ask");
				break;
			}
			sum[mode] += x->ttft_ms;
			cli_warn_left_out(x, CLI_N_CTX);
			if (jf)
				answer_json(&j, x, Q.q[q], Q.ns[q], full);
			if (a->compare) {
				fprintf(out, "  %-15s %s\n  %15s ", full ? "full recompute:" : "injection:", x->text, "");
				print_timing(out, x, full);
				fprintf(out, "\n");
				infs_answer_free(x);
				continue;
			}
			fprintf(out, "%s\n\nfacts used (best first):\n", x->text);
			for (size_t i = 0; i < x->n_facts; i++) {
				infs_fact_record *rec = NULL;
				if (infs_fact_get(&rec, r.store, Q.ns[q], x->fact_ids[i])) {
					rc = lib_fail("reading a fact");
					break;
				}
				size_t len = strlen(rec->text);
				while (len && rec->text[len - 1] == '\n')
					len--;
				fprintf(out, "  %2zu. %.3f  %.*s\n", i + 1, (double)x->scores[i], (int)len, rec->text);
				infs_fact_record_free(rec);
			}
			fprintf(out, "\n%s: ", full ? "full recompute" : "injection");
			print_timing(out, x, full);
			fprintf(out, "; %u tokens decoded in %.1f ms\n", x->n_tokens, x->decode_ms);
			infs_answer_free(x);
		}
	}
	if (!rc && a->compare && Q.n)
		fprintf(out, "\nmean TTFT over %zu questions (k %u): injection %.1f ms, full recompute %.1f ms (%.1fx)\n", Q.n,
		       a->k, sum[0] / (double)Q.n, sum[1] / (double)Q.n, sum[0] > 0 ? sum[1] / sum[0] : 0);
	if (!rc && jf) {
		str_puts(&j, "\n]\n");
		if (fputs(j.p, jf) == EOF || (jf != stdout && fclose(jf)))
			rc = fail("%s: %s", a->json, strerror(errno));
		jf = NULL;
	}
	if (jf && jf != stdout)
		fclose(jf);
	free(j.p);
	runtime_free(&r);
	questions_free(&Q);
	return rc;
}

static int check(const cli_args *a)
{
	int rc = cli_check_asking(a);
	if (!rc && !a->questions && (!a->positional || !a->ns))
		rc = fail("ask needs --namespace NS and a question, or --questions FILE") + 1;
	return rc;
}

static const char *const opts[] = { "--store", "--namespace", "--questions", CLI_OPTS_MODELS, "-k", "--k",
	                            "--full-recompute", "--compare", CLI_OPTS_SAMPLING, CLI_OPTS_RECOVERY, "--json", NULL };

const cli_command cmd_ask = {
	.name = "ask",
	.args = "QUESTION",
	.what = "Answers a question for --namespace (or the questions of --questions): prints the\n"
	        "answer, the facts used and the time to first token by part; --compare answers both\n"
	        "ways side by side; --json writes every answer, its facts and timings as JSON.\n",
	.opts = opts,
	.positional = "question",
	.max_tokens = 64,
	.check = check,
	.run = run,
};

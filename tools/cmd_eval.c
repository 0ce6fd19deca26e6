/* inferscale eval FILE.json: a LoCoMo-format conversation's observation
 * facts encoded into a temporary store, its questions of categories 1-4
 * answered by injection (at each point of a sweep) and by full recompute,
 * and their agreement, F1, evidence recall and TTFT reported as JSON
 * (docs/eval.md). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_commands.h"
#include "cli_fail.h"
#include "cli_runtime.h"
#include "eval_conv.h"
#include "eval_metrics.h"
#include "eval_points.h"
#include "eval_report.h"

/* The temporary store's directory, removed at exit. */
static char eval_dir[4096];

static void eval_cleanup(void)
{
	if (!eval_dir[0])
		return;
	DIR *d = opendir(eval_dir);
	const struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[sizeof eval_dir + 256];
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof p, "%s/%s", eval_dir, e->d_name);
			unlink(p);
		}
	}
	if (d)
		closedir(d);
	rmdir(eval_dir);
	eval_dir[0] = '\0';
}

/* The ratios of --sweep, and its modes without --recovery. */
static const float sweep_ratios[] = { 0, 0.05f, 0.1f, 0.15f, 0.2f, 0.3f, 0.5f, 1 };
static const char *const sweep_modes[] = { "deviation", "query", "prefix+deviation", "prefix+query" };

static int run(const cli_args *a)
{
	conv c;
	runtime r;
	memset(&r, 0, sizeof r);
	int rc = conv_read(&c, a->positional);
	if (!rc && a->context_turns)
		rc = conv_contexts(&c, a->positional, a->context_turns);
	/* A chart that cannot be written fails before the long part. */
	FILE *pf = !rc && a->plot ? fopen(a->plot, "wb") : NULL;
	if (!rc && a->plot && !pf)
		rc = fail("%s: %s", a->plot, strerror(errno));
	if (pf)
		fclose(pf);
	size_t n = c.lc.n_qs, *pick = rc ? NULL : calloc(n, sizeof *pick);
	const size_t n_ratios = sizeof sweep_ratios / sizeof sweep_ratios[0];
	const size_t n_modes = !a->sweep ? 1 : a->recovery ? 1 : sizeof sweep_modes / sizeof sweep_modes[0];
	const size_t n_cal = a->n_cal ? a->n_cal : 1, multi = a->sweep || n_cal > 1;
	const size_t np = (a->sweep ? n_modes * n_ratios : 1) * n_cal;
	eval_point *pts = calloc(np, sizeof *pts);
	if (!rc && (!pick || !pts))
		rc = fail("out of memory");
	for (size_t i = 0; !rc && i < np; i++) {
		const size_t m = i / n_cal; /* each setting at every calibration */
		point_make(&pts[i], a, a->sweep && !a->recovery ? sweep_modes[m / n_ratios] : NULL,
		           a->sweep ? sweep_ratios[m % n_ratios] : -1, i % n_cal);
	}
	if (!rc && a->limit && a->limit < n) {
		eval_sample(pick, n, a->limit, a->seed);
		n = a->limit;
	} else if (!rc) {
		for (size_t i = 0; i < n; i++)
			pick[i] = i;
	}
	FILE *jf = stdout;
	if (!rc && a->json && strcmp(a->json, "-") && !(jf = fopen(a->json, "w")))
		rc = fail("%s: %s", a->json, strerror(errno));
	const char *tmp = getenv("TMPDIR");
	snprintf(eval_dir, sizeof eval_dir, "%s/inferscale-eval-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!rc && !mkdtemp(eval_dir)) {
		rc = fail("%s: %s", eval_dir, strerror(errno));
		eval_dir[0] = '\0';
	}
	if (rc)
		eval_dir[0] = '\0';
	else
		atexit(eval_cleanup); /* also when the process exits from deeper down */
	char store[sizeof eval_dir + 16];
	snprintf(store, sizeof store, "%s/eval.infs", eval_dir);
	cli_args b = *a;
	b.store = store;
	if (!rc)
		rc = runtime_open(&r, &b, 1);
	if (!rc)
		rc = conv_context_tokens(&c, r.model);
	if (!rc)
		rc = eval_encode(&c, &r, r.store, 0, a);
	/* The reference store, beside the other: its facts, header and footer
	 * in --reference-kv-dtype, injected into the same engine's cache. */
	char ref_path[sizeof eval_dir + 16];
	snprintf(ref_path, sizeof ref_path, "%s/reference.infs", eval_dir);
	infs_store *ref = NULL;
	if (!rc && a->ref)
		rc = store_create(&ref, ref_path, &r, a->ref_dtype, a->device);
	if (!rc && a->ref && infs_engine_prepare(r.engine, ref))
		rc = lib_fail(ref_path);
	if (!rc && a->ref)
		rc = eval_encode(&c, &r, ref, 1, a);
	/* The reference weights: the same model with other device weights,
	 * its own engine on the same device, prepared on the same store. */
	infs_model *wmodel = NULL;
	infs_engine *wengine = NULL;
	if (!rc && a->ref_w)
		rc = runtime_model(&wmodel, &b, a->ref_weights) || runtime_engine(&wengine, wmodel, r.store, &b);
	int show = !a->quiet && isatty(2);
	for (size_t i = 0; !rc && i < n; i++) {
		if (show)
			fprintf(stderr, "\ranswering %zu/%zu", i + 1, n);
		rc = eval_question(pts, np, &c, pick[i], &r, ref, wengine, a);
	}
	if (show && n)
		fputc('\n', stderr);
	if (!rc && multi)
		fprintf(stderr, "%s: %zu of %zu questions (categories 1-4), %zu facts, k %u; injection / full recompute\n",
		        a->positional, n, c.lc.n_qs, c.n_facts, a->k);
	if (!rc && multi)
		context_summary(&c, a);
	for (size_t i = 0; !rc && i < np; i++) {
		fputs(!multi ? "" : i ? ",\n" : "[\n", jf);
		eval_report(jf, &pts[i], n, &c, a);
	}
	if (!rc)
		fputs(multi ? "\n]\n" : "\n", jf);
	if (jf && jf != stdout && fclose(jf) && !rc)
		rc = fail("%s: %s", a->json, strerror(errno));
	if (!rc && a->plot)
		rc = eval_plot(a->plot, pts, np, n);
	for (size_t i = 0; pts && i < np; i++)
		free(pts[i].detail.p);
	free(pts);
	free(pick);
	infs_store_close(ref);
	infs_engine_free(wengine);
	infs_model_free(wmodel);
	runtime_free(&r);
	eval_cleanup();
	conv_free(&c);
	return rc;
}

static int check(const cli_args *a)
{
	if (!a->positional)
		return fail("eval needs a LoCoMo-format conversation FILE.json") + 1;
	if (a->plot && !a->sweep)
		return fail("eval: --plot draws a sweep: give --sweep") + 1;
	int rc = cli_check_recovery(a);
	if (rc)
		return rc;
	if (a->sweep && a->ref)
		return fail("--reference-kv-dtype compares one run: not with --sweep") + 1;
	if (a->sweep && a->ref_w)
		return fail("--reference-device-weights compares one run: not with --sweep") + 1;
	if (a->ref_w && a->device < 0)
		return fail("--reference-device-weights compares the model's copies on a device: give --device N") + 1;
	if (a->sweep && a->recompute_set)
		return fail("--sweep sets --recompute itself") + 1;
	if (a->sweep && a->recovery && !a->select)
		return fail("--sweep varies --recompute: --recovery %s has none", a->mode) + 1;
	return 0;
}

static const char *const opts[] = { CLI_OPTS_MODELS, "--kv-dtype", "--reference-kv-dtype",
	                            "--reference-device-weights", "-k", "--k", "--seed",
	                            "--limit", CLI_OPTS_RECOVERY, "--context-turns", "--sweep", "--json", "--plot",
	                            "--quiet", NULL };

const cli_command cmd_eval = {
	.name = "eval",
	.args = "FILE.json",
	.what = "Encodes a LoCoMo-format conversation's observation facts into a temporary store,\n"
	        "answers its questions of categories 1-4 by injection and by full recompute (greedy,\n"
	        "up to 32 tokens) and prints agreement, F1, evidence recall and TTFT as JSON\n"
	        "(docs/eval.md).\n",
	.opts = opts,
	.positional = "file",
	.cal_list = 1,
	.max_tokens = 32,
	.check = check,
	.run = run,
};

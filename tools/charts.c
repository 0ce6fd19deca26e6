#include "charts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_text.h"
#include "jsonl.h"
#include "plot.h"
#include "say.h"

#define WIDTH 1200
#define GROUPS_MAX 8

/* The palette: the parts of injection, full recompute, the peers. */
#define C_EMBED 0x4c72b0u
#define C_RETRIEVE 0x8172b3u
#define C_INJECT 0xdd8452u
#define C_PREFILL 0x55a868u
#define C_FULL 0xc44e52u
#define C_PEER1 0x937860u
#define C_PEER2 0xda8bc3u
#define C_PEER3 0x404040u
#define C_GROUP 0x707070u

/* Draws charts c[i] in horizontal strips heights[i] high, one under the
 * other, and writes the PNG. png NULL: laid out and drawn the same, into a
 * one-pixel image that clips everything, and not written. */
static int draw(const char *png, plot_chart *const *c, const int *heights, size_t n, char *err, size_t n_err)
{
	int h = 0;
	for (size_t i = 0; i < n; i++)
		h += heights[i];
	plot_image im;
	if (plot_image_init(&im, png ? WIDTH : 1, png ? h : 1, 0xffffff))
		return say(err, n_err, "out of memory for a %dx%d image", WIDTH, h);
	int rc = 0, y = 0;
	for (size_t i = 0; i < n && !rc; y += heights[i++]) {
		const char *why;
		if (plot_draw(&im, c[i], 0, y, WIDTH, heights[i], &why))
			rc = say(err, n_err, "%s", why);
	}
	if (!rc && png && plot_write_png(&im, png))
		rc = say(err, n_err, "%s: %s", png, strerror(errno));
	plot_image_free(&im);
	return rc;
}

int chart_bench(const char *png, const chart_bench_k *ks, size_t n, size_t questions, unsigned max_tokens, char *err,
                size_t n_err)
{
	if (!n)
		return say(err, n_err, "no k values to plot");
	char (*labels)[32] = calloc(n, sizeof *labels);
	const char **cats = calloc(n, sizeof *cats);
	double *v = calloc(8 * n, sizeof *v); /* the series, one after the other */
	if (!labels || !cats || !v) {
		free(labels);
		free(cats);
		free(v);
		return say(err, n_err, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(labels[i], sizeof labels[i], "%g", ks[i].k);
		cats[i] = labels[i];
		double row[8] = { ks[i].embed_ms, ks[i].retrieve_ms, ks[i].inject_ms, ks[i].prefill_ms,
		                  ks[i].full_ms,  ks[i].top1,        ks[i].answer,    ks[i].kl };
		for (int j = 0; j < 8; j++)
			v[(size_t)j * n + i] = row[j];
	}
	char title[128];
	snprintf(title, sizeof title, "Time to first token by part, mean of %zu question%s", questions,
	         questions == 1 ? "" : "s");
	plot_chart t, a;
	plot_chart_init(&t, title, "k (facts retrieved)", "ms", NULL);
	plot_chart_init(&a, "Injection against full recompute: first token", "k (facts retrieved)",
	                "share of questions", "KL (nats)");
	t.bar_totals = 1;
	a.y_cover[0] = 1;
	t.categories = a.categories = cats;
	t.n_categories = a.n_categories = n;
	static const char *const parts[] = { "embed", "retrieve", "inject", "prefill" };
	static const unsigned colors[] = { C_EMBED, C_RETRIEVE, C_INJECT, C_PREFILL };
	for (int j = 0; j < 4; j++)
		plot_add(&t, PLOT_BAR, parts[j], colors[j], NULL, v + (size_t)j * n, n);
	plot_add(&t, PLOT_BAR, "full recompute", C_FULL, NULL, v + 4 * n, n)->stack = 1;
	plot_add(&a, PLOT_LINE, "same first token", C_EMBED, NULL, v + 5 * n, n)->marker = PLOT_MARK_CIRCLE;
	if (max_tokens > 1)
		plot_add(&a, PLOT_LINE, "same answer", C_PREFILL, NULL, v + 6 * n, n)->marker = PLOT_MARK_SQUARE;
	plot_series *kl = plot_add(&a, PLOT_LINE, "KL(full || injection), right axis", C_FULL, NULL, v + 7 * n, n);
	kl->marker = PLOT_MARK_DIAMOND;
	kl->axis = 1;
	kl->dashed = 1;
	plot_chart *c[] = { &t, &a };
	static const int heights[] = { 620, 440 };
	int rc = draw(png, c, heights, 2, err, n_err);
	free(labels);
	free(cats);
	free(v);
	return rc;
}

/* A run's place in the sweep's drawing order: by group, then fraction. */
typedef struct sweep_order {
	size_t group, run;
	double fraction;
} sweep_order;

static int cmp_order(const void *x, const void *y)
{
	const sweep_order *a = x, *b = y;
	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	return (a->fraction > b->fraction) - (a->fraction < b->fraction);
}

int chart_sweep(const char *png, const chart_sweep_run *runs, size_t n, char *err, size_t n_err)
{
	if (!n)
		return say(err, n_err, "no runs to plot");
	/* The groups, in order of appearance. */
	size_t first[GROUPS_MAX], n_groups = 0;
	sweep_order *o = calloc(n, sizeof *o);
	double *v = calloc(8 * n, sizeof *v); /* x, then the 7 metrics, in drawing order */
	if (!o || !v) {
		free(o);
		free(v);
		return say(err, n_err, "out of memory");
	}
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		size_t g = 0;
		while (g < n_groups && (strcmp(runs[first[g]].mode, runs[i].mode) || runs[first[g]].check_layer != runs[i].check_layer))
			g++;
		if (g == n_groups && n_groups == GROUPS_MAX)
			rc = say(err, n_err, "more than %d groups of runs (mode and check layer)", GROUPS_MAX);
		else if (g == n_groups)
			first[n_groups++] = i;
		o[i] = (sweep_order){ g, i, runs[i].recompute_fraction };
	}
	qsort(o, n, sizeof *o, cmp_order);
	for (size_t i = 0; i < n; i++) {
		const chart_sweep_run *r = &runs[o[i].run];
		double row[8] = { r->recompute_fraction, r->first_token_agreement, r->answer_agreement, r->f1_inject,
		                  r->f1_full, r->kl_first_token_mean, r->ttft_inject_ms, r->ttft_full_ms };
		for (int j = 0; j < 8; j++)
			v[(size_t)j * n + i] = row[j];
	}
	plot_chart a, t;
	plot_chart_init(&a, "Injection against full recompute, by share of fact tokens recomputed",
	                "recompute fraction", "share / F1", "KL (nats)");
	plot_chart_init(&t, "Time to first token (mean)", "recompute fraction", "ms", NULL);
	a.y_cover[0] = 1;
	static const char *const metrics[] = { "same first token", "same answer", "F1 injection", "F1 full recompute",
	                                       "KL(full || injection), right axis", "TTFT injection",
	                                       "TTFT full recompute" };
	static const unsigned colors[] = { C_EMBED, C_PREFILL, C_INJECT, C_RETRIEVE, C_FULL, C_EMBED, C_FULL };
	char names[GROUPS_MAX][64];
	/* The legend: a line per metric, a marker per group; the data's series
	 * themselves stay out of it. */
	for (int j = 0; j < 7; j++) {
		plot_series *s = plot_add(j < 5 ? &a : &t, PLOT_LINE, metrics[j], colors[j], NULL, NULL, 0);
		s->dashed = j == 4;
	}
	for (size_t g = 0, start = 0; g < n_groups && !rc; g++) {
		const chart_sweep_run *r = &runs[first[g]];
		size_t len = 0;
		while (start + len < n && o[start + len].group == g)
			len++;
		if (r->check_layer >= 0)
			snprintf(names[g], sizeof names[g], "%s, check layer %d", r->mode, r->check_layer);
		else
			snprintf(names[g], sizeof names[g], "%s", r->mode);
		plot_marker m = (plot_marker)(PLOT_MARK_CIRCLE + g % 4);
		for (int j = 0; j < 7; j++) {
			plot_series *s = plot_add(j < 5 ? &a : &t, PLOT_LINE, NULL, colors[j], v + start, v + (size_t)(j + 1) * n + start, len);
			s->marker = m;
			s->axis = j == 4;
			s->dashed = j == 4;
		}
		for (int c = 0; c < 2; c++) {
			plot_series *s = plot_add(c ? &t : &a, PLOT_LINE, names[g], C_GROUP, NULL, NULL, 0);
			s->marker = m;
			s->no_line = 1;
		}
		start += len;
	}
	plot_chart *c[] = { &a, &t };
	static const int heights[] = { 620, 440 };
	if (!rc)
		rc = draw(png, c, heights, 2, err, n_err);
	free(o);
	free(v);
	return rc;
}

/* --- Result files. --- */

/* o's member at a path of at most two keys, "a" or "a.b". */
static const jsonl_value *member(const jsonl_value *o, const char *path)
{
	const char *dot = strchr(path, '.');
	if (!dot)
		return jsonl_get(o, path);
	char head[64];
	snprintf(head, sizeof head, "%.*s", (int)(dot - path), path);
	return jsonl_get(jsonl_get(o, head), dot + 1);
}

/* The ranges of a result's numbers: a share (0..1), or a time, a count or
 * a divergence (at least 0). */
enum { SHARE = 1, AT_LEAST_0 = 2 };

/* The number at path in o, the idx-th member of list, in its range; null
 * (and a missing member when optional) reads as NaN. */
static int number(double *out, const jsonl_value *o, const char *path, int optional, int range, const char *file,
                  const char *list, size_t idx, char *err, size_t n_err)
{
	const jsonl_value *v = member(o, path);
	*out = NAN;
	if (v && v->type == JSONL_NUMBER)
		*out = v->num;
	else if ((v && v->type != JSONL_NULL) || (!v && !optional))
		return say(err, n_err, "%s: %s[%zu]: \"%s\" is not a number", file, list, idx, path);
	double x = *out;
	if (!isnan(x) && (!isfinite(x) || x < 0 || (range == SHARE && x > 1)))
		return say(err, n_err, "%s: %s[%zu]: \"%s\" %g is out of its range %s", file, list, idx, path, x,
		           range == SHARE ? "0..1" : "(at least 0)");
	return 0;
}

static int boolean(double *out, const jsonl_value *o, const char *key, const char *file, size_t idx, char *err,
                   size_t n_err)
{
	const jsonl_value *v = jsonl_get(o, key);
	if (!v || (v->type != JSONL_TRUE && v->type != JSONL_FALSE))
		return say(err, n_err, "%s: results[%zu]: \"%s\" is not true or false", file, idx, key);
	*out = v->type == JSONL_TRUE;
	return 0;
}

/* The first member of an array, if it is an object. */
static const jsonl_value *first_object(const jsonl_value *list)
{
	return list && list->type == JSONL_ARRAY && list->len && list[1].type == JSONL_OBJECT ? list + 1 : NULL;
}

/* bench --json: a result per k and question (at least one), averaged per k. */
static int bench_file(const char *png, const jsonl_value *root, const char *file, char *err, size_t n_err)
{
	const jsonl_value *res = jsonl_get(root, "results");
	chart_bench_k *ks = calloc(res->len, sizeof *ks);
	size_t *count = calloc(res->len, sizeof *count), n = 0, questions = 0;
	if (!ks || !count) {
		free(ks);
		free(count);
		return say(err, n_err, "out of memory");
	}
	static const char *const keys[] = { "injection_ms.embed", "injection_ms.retrieve", "injection_ms.inject",
	                                    "injection_ms.prefill", "full_ms.ttft", "kl" };
	int rc = 0;
	const jsonl_value *r = res + 1;
	for (size_t i = 0; i < res->len && !rc; i++, r = jsonl_next(r)) {
		double k, x[8];
		if (r->type != JSONL_OBJECT) {
			rc = say(err, n_err, "%s: results[%zu] is not an object", file, i);
			break;
		}
		rc = number(&k, r, "k", 0, AT_LEAST_0, file, "results", i, err, n_err);
		for (int j = 0; j < 6 && !rc; j++)
			rc = number(&x[j], r, keys[j], 0, AT_LEAST_0, file, "results", i, err, n_err);
		if (!rc && (boolean(&x[6], r, "top1_agree", file, i, err, n_err)
		            || boolean(&x[7], r, "answer_agree", file, i, err, n_err)))
			rc = -1;
		if (rc)
			break;
		size_t at = 0;
		while (at < n && ks[at].k != k)
			at++;
		n += at == n;
		chart_bench_k *p = &ks[at];
		p->k = k;
		p->embed_ms += x[0];
		p->retrieve_ms += x[1];
		p->inject_ms += x[2];
		p->prefill_ms += x[3];
		p->full_ms += x[4];
		p->kl += x[5];
		p->top1 += x[6];
		p->answer += x[7];
		questions = ++count[at] > questions ? count[at] : questions;
	}
	for (size_t i = 0; i < n; i++) {
		double c = (double)count[i];
		ks[i].embed_ms /= c;
		ks[i].retrieve_ms /= c;
		ks[i].inject_ms /= c;
		ks[i].prefill_ms /= c;
		ks[i].full_ms /= c;
		ks[i].kl /= c;
		ks[i].top1 /= c;
		ks[i].answer /= c;
	}
	/* the answers' budget: answer agreement is drawn when it is above 1 */
	const jsonl_value *mt = jsonl_get(root, "max_tokens");
	double max_tokens = jsonl_num(mt, 1);
	if (!rc && mt && !(max_tokens >= 1 && max_tokens <= 8192 && max_tokens == floor(max_tokens)))
		rc = say(err, n_err, "%s: \"max_tokens\" is not a count of tokens (1..8192)", file);
	if (!rc)
		rc = chart_bench(png, ks, n, questions, (unsigned)max_tokens, err, n_err);
	free(ks);
	free(count);
	return rc;
}

static int sweep_file(const char *png, const jsonl_value *list, const char *file, char *err, size_t n_err)
{
	chart_sweep_run *runs = calloc(list->len ? list->len : 1, sizeof *runs);
	if (!runs)
		return say(err, n_err, "out of memory");
	static const char *const keys[] = { "recompute_fraction", "first_token_agreement", "answer_agreement",
	                                    "kl_first_token_mean", "f1_inject", "f1_full", "ttft_inject_ms",
	                                    "ttft_full_ms" };
	int rc = 0;
	const jsonl_value *r = list + 1;
	for (size_t i = 0; i < list->len && !rc; i++, r = jsonl_next(r)) {
		chart_sweep_run *p = &runs[i];
		double *x[] = { &p->recompute_fraction, &p->first_token_agreement, &p->answer_agreement,
		                &p->kl_first_token_mean, &p->f1_inject, &p->f1_full, &p->ttft_inject_ms,
		                &p->ttft_full_ms };
		if (r->type != JSONL_OBJECT) {
			rc = say(err, n_err, "%s: runs[%zu] is not an object", file, i);
			break;
		}
		/* fraction, agreements and F1: shares; KL and TTFT: at least 0 */
		for (int j = 0; j < 8 && !rc; j++)
			rc = number(x[j], r, keys[j], 0, j < 3 || j == 4 || j == 5 ? SHARE : AT_LEAST_0, file, "runs", i,
			            err, n_err);
		p->mode = jsonl_str(jsonl_get(r, "mode"), NULL);
		double layer = -1;
		if (!rc && !p->mode)
			rc = say(err, n_err, "%s: runs[%zu]: \"mode\" is not a string", file, i);
		if (!rc)
			rc = number(&layer, r, "check_layer", 1, AT_LEAST_0, file, "runs", i, err, n_err);
		if (!rc && !isnan(layer) && !(layer == floor(layer) && layer < 1e6))
			rc = say(err, n_err, "%s: runs[%zu]: \"check_layer\" %g is not a layer (an integer from 0)", file, i,
			         layer);
		p->check_layer = rc || isnan(layer) ? -1 : (int)layer;
	}
	if (!rc)
		rc = chart_sweep(png, runs, list->len, err, n_err);
	free(runs);
	return rc;
}

/* The GPU engine benchmark: a row per k (and batch; at least one), null where
 * not measured. */
static int gpu_file(const char *png, const jsonl_value *rows, const char *file, char *err, size_t n_err)
{
	enum { N_KEYS = 9 };
	static const char *const keys[N_KEYS] = { "embed_ms", "retrieve_ms", "inject_ms", "prefill_ms", "ttft_full_ms",
	                                          "ref_full_ms", "ref_question_graph_ms", "hf_full_ms", "batch" };
	size_t n = rows->len;
	double *v = calloc(N_KEYS * n, sizeof *v);
	char (*labels)[48] = calloc(n, sizeof *labels);
	const char **cats = calloc(n, sizeof *cats);
	int rc = v && labels && cats ? 0 : say(err, n_err, "out of memory");
	const jsonl_value *r = rows + 1;
	for (size_t i = 0; i < n && !rc; i++, r = jsonl_next(r)) {
		double k;
		if (r->type != JSONL_OBJECT) {
			rc = say(err, n_err, "%s: rows[%zu] is not an object", file, i);
			break;
		}
		rc = number(&k, r, "k", 0, AT_LEAST_0, file, "rows", i, err, n_err);
		for (int j = 0; j < N_KEYS && !rc; j++)
			rc = number(&v[(size_t)j * n + i], r, keys[j], 1, AT_LEAST_0, file, "rows", i, err, n_err);
		double batch = v[8 * n + i];
		if (isfinite(batch) && batch != 1)
			snprintf(labels[i], sizeof labels[i], "%g x%g", k, batch);
		else
			snprintf(labels[i], sizeof labels[i], "%g", k);
		cats[i] = labels[i];
	}
	if (!rc) {
		plot_chart c;
		plot_chart_init(&c, "GPU engine: time to first token by part, full recompute and peers",
		                "k (facts retrieved; x batch)", "ms", NULL);
		c.categories = cats;
		c.n_categories = n;
		c.bar_totals = 1;
		static const char *const names[] = { "embed", "retrieve", "inject", "prefill", "full recompute",
		                                     "reference engine, full prefill",
		                                     "reference engine, question only (graph)", "HF transformers, full" };
		static const unsigned colors[] = { C_EMBED, C_RETRIEVE, C_INJECT, C_PREFILL, C_FULL, C_PEER1, C_PEER2, C_PEER3 };
		static const plot_marker marks[] = { PLOT_MARK_CIRCLE, PLOT_MARK_SQUARE, PLOT_MARK_TRIANGLE };
		for (int j = 0; j < 8; j++) {
			plot_series *s = plot_add(&c, j < 5 ? PLOT_BAR : PLOT_LINE, names[j], colors[j], NULL, v + (size_t)j * n, n);
			s->stack = j == 4;
			s->marker = j < 5 ? PLOT_MARK_NONE : marks[j - 5];
		}
		plot_chart *cs[] = { &c };
		static const int heights[] = { 700 };
		rc = draw(png, cs, heights, 1, err, n_err);
	}
	free(v);
	free(labels);
	free(cats);
	return rc;
}

int chart_file(const char *png, const char *json, const char **kind, char *err, size_t n_err)
{
	char *text;
	size_t len;
	if (file_text_read(&text, &len, json, err, n_err)) {
		free(text);
		return -1;
	}
	int rc = chart_json(png, text, len, json, kind, err, n_err);
	free(text);
	return rc;
}

int chart_json(const char *png, char *text, size_t len, const char *json, const char **kind, char *err, size_t n_err)
{
	jsonl doc = { 0 };
	int rc;
	if (jsonl_parse(&doc, text, len)) {
		rc = say(err, n_err, "%s:%zu:%zu: %s", json, doc.line, doc.col, doc.err);
	} else {
		const jsonl_value *root = doc.v, *runs = root->type == JSONL_ARRAY ? root : jsonl_get(root, "runs");
		const jsonl_value *first;
		if ((first = first_object(jsonl_get(root, "results"))) && jsonl_get(first, "injection_ms")) {
			*kind = "bench";
			rc = bench_file(png, root, json, err, n_err);
		} else if ((first = first_object(runs)) && jsonl_get(first, "recompute_fraction")) {
			*kind = "eval sweep";
			rc = sweep_file(png, runs, json, err, n_err);
		} else if ((first = first_object(jsonl_get(root, "rows"))) && jsonl_get(first, "k")) {
			*kind = "GPU engine benchmark";
			rc = gpu_file(png, jsonl_get(root, "rows"), json, err, n_err);
		} else {
			rc = say(err, n_err, "%s: not a result inferscale plot knows (bench --json output, an eval sweep, "
			                     "the GPU engine benchmark)", json);
		}
	}
	jsonl_free(&doc);
	return rc;
}

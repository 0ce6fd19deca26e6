/* The project's result files as charts (inferscale plot, bench --plot):
 * each kind of result drawn with plot.h into a PNG. Functions return 0, or
 * -1 with a one-line message in err[0..n_err) (no "inferscale:" prefix). */
#ifndef CHARTS_H
#define CHARTS_H

#include <stddef.h>

/* One k of inferscale bench: means over its questions. */
typedef struct chart_bench_k {
	double k;
	double embed_ms, retrieve_ms, inject_ms, prefill_ms; /* injection's TTFT, part by part */
	double full_ms;                                      /* full recompute's TTFT */
	double top1, answer; /* shares of questions whose first token / whole answer agree */
	double kl;           /* KL(full || injection) of the first token, nats */
} chart_bench_k;

/* inferscale bench's chart, for ks[0..n): above, injection's TTFT as
 * stacked parts beside full recompute's, for each k; below, first-token
 * agreement (and answer agreement when max_tokens > 1) on the left axis and
 * KL on the right one. questions: how many the means are over. */
int chart_bench(const char *png, const chart_bench_k *ks, size_t n, size_t questions, unsigned max_tokens, char *err,
                size_t n_err);

/* One run of an inferscale eval sweep (docs/eval.md names the fields). */
typedef struct chart_sweep_run {
	const char *mode; /* "none", "deviation", ... */
	int check_layer;  /* -1 when the run names none */
	double recompute_fraction, first_token_agreement, answer_agreement, kl_first_token_mean, f1_inject, f1_full,
	        ttft_inject_ms, ttft_full_ms;
} chart_sweep_run;

/* Runs with the same mode and check layer (at most 8 such groups) form one
 * line per metric, against recompute_fraction, each group with its own
 * marker. Above: the agreements and F1 on the left axis, KL on the right
 * one; below: TTFT of injection and of full recompute. */
int chart_sweep(const char *png, const chart_sweep_run *runs, size_t n, char *err, size_t n_err);

/* Reads the JSON file json and draws it into png, recognised by shape:
 * inferscale bench --json output (an object whose "results" are objects
 * with "injection_ms"), an eval sweep (an array of runs with
 * "recompute_fraction", or an object whose "runs" are), or the GPU engine
 * benchmark (an object whose "rows" are objects with "k"). *kind names
 * what it drew. Every number is checked against its range first: shares
 * (fractions, agreements, F1) in 0..1, times, counts and KL at least 0,
 * check layers integers; null is a missing point. */
int chart_file(const char *png, const char *json, const char **kind, char *err, size_t n_err);
/* The same on the text of a file named json, parsed in place. png NULL:
 * read, checked, laid out and drawn, but into nothing (what the fuzz target
 * runs). */
int chart_json(const char *png, char *text, size_t len, const char *json, const char **kind, char *err, size_t n_err);

#endif

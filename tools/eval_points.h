/* The recovery settings that eval measures (a sweep has several), each
 * question answered at every one and by full recompute, and the sums of
 * their agreement, quality and timings. */
#ifndef EVAL_POINTS_H
#define EVAL_POINTS_H

#include <stddef.h>
#include <stdint.h>

#include "cli_options.h"
#include "cli_runtime.h"
#include "divergence.h"
#include "eval_conv.h"
#include "strbuf.h"

/* One recovery setting that eval measures (a sweep has several), and its
 * sums over questions, reported as means. */
typedef struct eval_point {
	char mode[32];
	float ratio, weight, temp, scale;
	uint32_t check, prefix;
	divergence_sum full;  /* against full recompute */
	divergence_sum floor; /* full recompute in two steps against full recompute */
	divergence_sum ref;   /* against injection from the reference store */
	divergence_sum wref;  /* full recompute against full recompute with the reference weights */
	size_t ev_found, ev_total;
	double f1_inject, f1_full, f1_vs_full, ttft_inject, ttft_full, recomputed;
	str detail;
} eval_point;

/* The point of --recovery MODE (a's other flags, or their defaults; no
 * mode: the engine's default) at ratio (< 0: --recompute's) with
 * calibration cal of --calibration (none given: the engine's). */
void point_make(eval_point *p, const cli_args *a, const char *mode, float ratio, size_t cal);

/* Question qi of c answered at every point (pts[0..np)), by full
 * recompute of the same facts, and by full recompute in two steps (the
 * floor: header and facts prefilled, injected-style in place, then the
 * question, as injection's numerics have it), added to the points' sums.
 * Equal answers are answered once: ratio 0 with the same prefix and
 * calibration (the check layer and query weight then do nothing), and, in
 * a sweep, ratio 1, which is full recompute exactly. With ref_store
 * (one point, not a sweep) the facts injection used are also injected from
 * there, by the same engine: the prompts differ only in the store's dtype.
 * With ref_engine (a model with other device weights, prepared on r's
 * store) full recompute of the same facts is also answered there: the
 * answers differ only in the weights' dtype. */
int eval_question(eval_point *pts, size_t np, const conv *c, size_t qi, runtime *r, infs_store *ref_store,
                  infs_engine *ref_engine, const cli_args *a);

#endif

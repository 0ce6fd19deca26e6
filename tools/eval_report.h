/* eval's results: each point's means as JSON, a summary on stderr, and a
 * sweep's chart. */
#ifndef EVAL_REPORT_H
#define EVAL_REPORT_H

#include <stdio.h>

#include "cli_options.h"
#include "eval_conv.h"
#include "eval_points.h"

/* The line of --context-turns in the summary on stderr. */
void context_summary(const conv *c, const cli_args *a);
/* Point p's means over nq questions as one JSON object, and a summary on
 * stderr (one line in a sweep). */
void eval_report(FILE *jf, const eval_point *p, size_t nq, const conv *c, const cli_args *a);
/* The sweep's chart (tools/charts.h) of points pts[0..np), means over nq
 * questions: 0, or 1 after a message. */
int eval_plot(const char *png, const eval_point *pts, size_t np, size_t nq);

#endif

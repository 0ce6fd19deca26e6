/* What ask, bench and eval ask the engine: the options of infs_engine_ask
 * from the command line, and the questions of --questions (or the one
 * given). */
#ifndef ASK_SETUP_H
#define ASK_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include "cli_options.h"
#include "inferscale/inferscale.h"
#include "jsonl_lines.h"

/* The options of a question at k facts, by injection with a's recovery and
 * calibration (the first one) or by full recompute (full). */
void ask_options(infs_ask_options *o, const cli_args *a, uint32_t k, int full);

/* The questions of --questions (or the one positional question) and their
 * namespaces. */
typedef struct questions {
	jsonl_lines L;
	const char **q, **ns;
	size_t n;
} questions;

/* 0, or 1 after a message (FILE:LINE of a line without "question" or
 * "namespace"). Free Q with questions_free in either case. */
int questions_load(questions *Q, const cli_args *a);
void questions_free(questions *Q);

#endif

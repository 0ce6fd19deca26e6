/* inferscale encode's input: a JSONL file of facts, one object a line with
 * "text" and "namespace", read and checked whole before anything is
 * written, so that an encode stores all of a file or none of it. What a
 * fact keeps: its text, its namespace (or the one given for every line),
 * its metadata (the line's other string members and the string members of
 * its "metadata" object, as a JSON object), and "source_id" and
 * "timestamp" when they are numbers, read exactly (json_number.h). */
#ifndef FACT_LINES_H
#define FACT_LINES_H

#include <stdint.h>
#include <stdio.h>

#include "jsonl_lines.h"

typedef struct fact_line {
	size_t line;          /* its line in the file, from 1 */
	const char *text, *ns; /* in the file's lines, or ns the override */
	char *meta;           /* the metadata JSON */
	char *rendered;       /* the fact as the prompt shows it (infs_fact_render), released with infs_free */
	uint64_t source_id;
	int64_t timestamp;
} fact_line;

typedef struct fact_lines {
	jsonl_lines lines;
	fact_line *f;
	size_t n;
} fact_lines;

/* Reads and checks the facts of path, every line in the namespace ns when
 * ns is set. Members a fact cannot keep are named on warn (once per name;
 * NULL: silence). Returns 0, or -1 with one line in why naming the file,
 * the line and the member: a line that is not a JSON object, a missing or
 * empty "text", a text (rendered with its date and speaker) or metadata
 * past the library's limits, a namespace that is missing, empty, longer
 * than 255 bytes, holds a control character or is reserved, a "source_id"
 * or "timestamp" that is not an integer of its type. Free out with
 * fact_lines_free in either case. */
int fact_lines_read(fact_lines *out, const char *path, const char *ns, FILE *warn, char *why, size_t n_why);
void fact_lines_free(fact_lines *F);

#endif

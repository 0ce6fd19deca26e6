/* A JSONL file read whole into memory, one object per line that is not
 * blank, each parsed in place (jsonl.h) and kept with its text and its line
 * number. A line holds at most JSONL_LINE_VALUES_MAX values, so that no
 * line, however long or however made, costs more than its own bytes (read
 * as they come, in place) and a bounded tree. */
#ifndef JSONL_LINES_H
#define JSONL_LINES_H

#include <stddef.h>

#include "jsonl.h"

/* 65,536 values: 3 MiB of tree at most; a fact's metadata (64 KiB) has
 * room for a few thousand members. */
#define JSONL_LINE_VALUES_MAX 65536u

typedef struct jsonl_lines {
	char **text; /* each line's bytes: its document's strings live there */
	jsonl *doc;
	size_t *no;  /* each line's number in the file, from 1 */
	size_t n;
} jsonl_lines;

/* Reads path. Returns 0, or -1 with a message (its path and line first) in
 * why: a line that is not a JSON object, holds a NUL in a string, or more
 * values than the limit; an unreadable file; no memory. Free out with
 * jsonl_lines_free in either case. */
int jsonl_lines_read(jsonl_lines *out, const char *path, char *why, size_t n_why);
void jsonl_lines_free(jsonl_lines *l);

#endif

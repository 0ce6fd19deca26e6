/* The facts and questions of a LoCoMo-format conversation (inferscale
 * eval, docs/eval.md), read and checked before anything uses them: the
 * observation facts of every session_<N>_observation, sessions by
 * increasing N (any number of digits, none leading zeros), each
 * {speaker: [[fact text, evidence turn or list of them], ...]} and dated
 * by session_<N>_date_time; and the questions of categories 1-4 of "qa",
 * each with a "question", an "answer" (a string or a number) and, when
 * present, "evidence" (a list of turns). */
#ifndef LOCOMO_READ_H
#define LOCOMO_READ_H

#include <stddef.h>

#include "jsonl.h"

typedef struct locomo_fact {
	const char *text;        /* the observation */
	const char *session;     /* its session's key, "session_<N>_observation" */
	const char *speaker;     /* its key there */
	size_t index;            /* its place in the speaker's list */
	const char *date;        /* session_<N>_date_time, or "" */
	char *evidence;          /* its evidence turns joined by ';' ("" for none) */
} locomo_fact;

typedef struct locomo_doc {
	jsonl doc;               /* parsed in the caller's text */
	locomo_fact *facts;
	size_t n_facts;
	const jsonl_value **qs;  /* the questions of categories 1-4, in file order */
	size_t *qa_index;        /* their places in "qa" */
	size_t n_qs;
} locomo_doc;

/* Parses text[0..len) in place (it must outlive out) and reads it; path
 * names the file in messages. Returns 0, or -1 with one line in why: not
 * JSON, not an object, a NUL in a string, a session that is malformed or
 * numbered with leading zeros, no facts, no questions of categories 1-4, a
 * malformed question, no memory. Free out with locomo_free in either case. */
int locomo_read(locomo_doc *out, char *text, size_t len, const char *path, char *why, size_t n_why);
void locomo_free(locomo_doc *d);

#endif

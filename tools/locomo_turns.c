/* The turns of a LoCoMo-format conversation and a fact's encoding context
 * (locomo_turns.h). */
#include "locomo_turns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* N of a key "session_N", N in decimal without leading zeros and below
 * 10^9; -1 for any other key (session_N_date_time, session_01, ...). */
static long session_number(const char *key)
{
	if (strncmp(key, "session_", 8))
		return -1;
	const char *d = key + 8;
	size_t n = strspn(d, "0123456789");
	if (!n || n > 9 || d[n] || (d[0] == '0' && n > 1))
		return -1;
	return strtol(d, NULL, 10);
}

static int cmp_long(const void *x, const void *y)
{
	long a = *(const long *)x, b = *(const long *)y;
	return (a > b) - (a < b);
}

static int cmp_turn_id(const void *x, const void *y)
{
	const locomo_turn *a = *(const locomo_turn *const *)x, *b = *(const locomo_turn *const *)y;
	return strcmp(a->dia_id, b->dia_id);
}

void locomo_turns_free(locomo_turns *t)
{
	free(t->turn);
	free(t->by_id);
	memset(t, 0, sizeof *t);
}

/* The strings of turn v into *out when it is {speaker, dia_id, text} with a
 * non-empty dia_id. */
static int read_turn(locomo_turn *out, const jsonl_value *v)
{
	const jsonl_value *sp = jsonl_get(v, "speaker"), *id = jsonl_get(v, "dia_id"), *text = jsonl_get(v, "text");
	if (!sp || !id || !text || sp->type != JSONL_STRING || id->type != JSONL_STRING || text->type != JSONL_STRING ||
	    !id->len)
		return -1;
	*out = (locomo_turn){ sp->str, id->str, text->str };
	return 0;
}

int locomo_turns_read(locomo_turns *out, const jsonl_value *doc, char *why, size_t n_why)
{
	memset(out, 0, sizeof *out);
	const jsonl_value *conv = jsonl_get(doc, "conversation");
	const char *where = conv ? "conversation." : "";
	if (conv && conv->type != JSONL_OBJECT) {
		snprintf(why, n_why, "\"conversation\" is not an object of sessions");
		return -1;
	}
	if (!conv)
		conv = doc;
	if (!conv || conv->type != JSONL_OBJECT) {
		snprintf(why, n_why, "not an object of sessions");
		return -1;
	}
	/* The session numbers, then the turns, sized before they are read. */
	long *ss = calloc(conv->len ? conv->len : 1, sizeof *ss);
	size_t ns = 0, n_turns = 0;
	if (!ss) {
		snprintf(why, n_why, "out of memory");
		return -1;
	}
	const jsonl_value *m = conv + 1;
	for (size_t i = 0; i < conv->len; i++, m = jsonl_next(m)) {
		long s = session_number(m->key);
		if (s >= 0)
			ss[ns++] = s;
	}
	qsort(ss, ns, sizeof *ss, cmp_long);
	int rc = 0;
	size_t u = 0; /* the distinct numbers, each session once (a repeated key: its last value) */
	for (size_t i = 0; i < ns; i++)
		if (!i || ss[i] != ss[i - 1])
			ss[u++] = ss[i];
	for (size_t i = 0; !rc && i < u; i++) {
		char key[32];
		snprintf(key, sizeof key, "session_%ld", ss[i]);
		const jsonl_value *s = jsonl_get(conv, key);
		if (s->type != JSONL_ARRAY) {
			snprintf(why, n_why, "\"%s%s\" is not a list of turns {speaker, dia_id, text}", where, key);
			rc = -1;
		}
		n_turns += rc ? 0 : s->len;
	}
	if (!rc && !n_turns) {
		snprintf(why, n_why, "no conversation turns (%ssession_N lists of {speaker, dia_id, text})", where);
		rc = -1;
	}
	const locomo_turn **sorted = NULL;
	if (!rc && (!(out->turn = calloc(n_turns, sizeof *out->turn)) ||
	            !(out->by_id = calloc(n_turns, sizeof *out->by_id)) || !(sorted = calloc(n_turns, sizeof *sorted)))) {
		snprintf(why, n_why, "out of memory");
		rc = -1;
	}
	for (size_t i = 0; !rc && i < u; i++) {
		char key[32];
		snprintf(key, sizeof key, "session_%ld", ss[i]);
		const jsonl_value *s = jsonl_get(conv, key), *v = s + 1;
		for (size_t j = 0; !rc && j < s->len; j++, v = jsonl_next(v)) {
			if (v->type != JSONL_OBJECT || read_turn(&out->turn[out->n], v)) {
				snprintf(why, n_why, "\"%s%s\"[%zu] is not a turn {speaker, dia_id, text} of strings", where,
				         key, j);
				rc = -1;
			} else {
				sorted[out->n] = &out->turn[out->n];
				out->n++;
			}
		}
	}
	if (!rc)
		qsort(sorted, out->n, sizeof *sorted, cmp_turn_id);
	for (size_t i = 0; !rc && i < out->n; i++) {
		out->by_id[i] = (size_t)(sorted[i] - out->turn);
		if (i && !strcmp(sorted[i]->dia_id, sorted[i - 1]->dia_id)) {
			snprintf(why, n_why, "dia_id \"%s\" names two turns", sorted[i]->dia_id);
			rc = -1;
		}
	}
	free(sorted);
	free(ss);
	if (rc)
		locomo_turns_free(out);
	return rc;
}

long locomo_turn_find(const locomo_turns *t, const char *id)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(t->turn[t->by_id[mid]].dia_id, id);
		if (!c)
			return (long)t->by_id[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

int locomo_context(char **out, size_t *n_turns, const locomo_turns *t, const char *evidence, unsigned w)
{
	*out = NULL;
	*n_turns = 0;
	/* The first id, without the blanks around it. */
	const char *p = evidence ? evidence + strspn(evidence, " \t") : "";
	size_t len = strcspn(p, ";");
	while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	char *id = malloc(len + 1);
	if (!id)
		return -1;
	memcpy(id, p, len);
	id[len] = '\0';
	long at = w && len ? locomo_turn_find(t, id) : -1;
	free(id);
	if (at < 0)
		return 0;
	size_t last = (size_t)at, first = last + 1 >= w ? last + 1 - w : 0, size = 1;
	for (size_t i = first; i <= last; i++)
		size += strlen(t->turn[i].speaker) + strlen(t->turn[i].text) + 3;
	char *s = malloc(size), *q = s;
	if (!s)
		return -1;
	for (size_t i = first; i <= last; i++)
		q += sprintf(q, "%s: %s\n", t->turn[i].speaker, t->turn[i].text);
	*out = s;
	*n_turns = last - first + 1;
	return 0;
}

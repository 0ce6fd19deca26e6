#include "locomo_read.h"

#include <stdlib.h>
#include <string.h>

#include "say.h"

void locomo_free(locomo_doc *d)
{
	for (size_t i = 0; i < d->n_facts; i++)
		free(d->facts[i].evidence);
	free(d->facts);
	free(d->qs);
	free(d->qa_index);
	jsonl_free(&d->doc);
	memset(d, 0, sizeof *d);
}

/* A session's observations: the member, its number's digits within the
 * key, and its place in the document (the last of equal keys counts). */
typedef struct session {
	const jsonl_value *obs;
	const char *digits;
	size_t n_digits, at;
} session;

#define SESSION_PREFIX "session_"
#define OBS_SUFFIX "_observation"

/* Whether key is session_<digits>_observation; sets *digits, *n. */
static int session_key(const char *key, const char **digits, size_t *n)
{
	size_t len = strlen(key), p = sizeof SESSION_PREFIX - 1, s = sizeof OBS_SUFFIX - 1;
	if (len <= p + s || strncmp(key, SESSION_PREFIX, p) || strcmp(key + len - s, OBS_SUFFIX))
		return 0;
	*digits = key + p;
	*n = len - p - s;
	return strspn(*digits, "0123456789") >= *n;
}

/* By number (fewer digits first, then the digits), then by place. */
static int cmp_session(const void *x, const void *y)
{
	const session *a = x, *b = y;
	if (a->n_digits != b->n_digits)
		return a->n_digits < b->n_digits ? -1 : 1;
	int c = memcmp(a->digits, b->digits, a->n_digits);
	return c ? c : (a->at > b->at) - (a->at < b->at);
}

/* Evidence e (a string, or a list of strings) joined by ';'. */
static char *join_evidence(const jsonl_value *e)
{
	if (e->type == JSONL_STRING)
		return strdup(e->str);
	size_t n = 1;
	for (size_t m = 0; m < e->len; m++)
		n += e[1 + m].len + 1;
	char *p = malloc(n), *d = p;
	for (size_t m = 0; p && m < e->len; m++) {
		if (m)
			*d++ = ';';
		memcpy(d, e[1 + m].str, e[1 + m].len);
		d += e[1 + m].len;
	}
	if (p)
		*d = '\0';
	return p;
}

/* The facts of session s, appended to out->facts (room made by the caller). */
static int read_session(locomo_doc *out, const session *s, const char *path, char *why, size_t n_why)
{
	const jsonl_value *obs = s->obs, *root = out->doc.v;
	const char *key = obs->key;
	/* session_<N>_date_time beside it */
	char *dkey = malloc(sizeof SESSION_PREFIX + s->n_digits + sizeof "_date_time");
	if (!dkey)
		return say(why, n_why, "%s: out of memory", path);
	sprintf(dkey, SESSION_PREFIX "%.*s_date_time", (int)s->n_digits, s->digits);
	const jsonl_value *dv = jsonl_get(root, dkey);
	int rc = dv && dv->type != JSONL_STRING ? say(why, n_why, "%s: \"%s\" is not a string", path, dkey) : 0;
	free(dkey);
	if (rc)
		return rc;
	if (obs->type != JSONL_OBJECT)
		return say(why, n_why, "%s: \"%s\" is not an object {speaker: [[fact, evidence], ...]}", path, key);
	const jsonl_value *sp = obs + 1;
	char shown[128];
	for (size_t i = 0; i < obs->len; i++, sp = jsonl_next(sp)) {
		if (sp->type != JSONL_ARRAY)
			return say(why, n_why, "%s: \"%s\".\"%s\" is not a list of [fact, evidence]", path, key,
			           jsonl_shown(shown, sizeof shown, sp->key));
		const jsonl_value *e = sp + 1;
		for (size_t j = 0; j < sp->len; j++, e = jsonl_next(e)) {
			/* Members only of an array: after any other value may lie
			 * the end of the document. */
			int ok = e->type == JSONL_ARRAY && e->len == 2;
			const jsonl_value *t = ok ? e + 1 : NULL, *ev = ok ? jsonl_next(t) : NULL;
			ok = ok && t->type == JSONL_STRING && t->len && (ev->type == JSONL_STRING || ev->type == JSONL_ARRAY);
			for (size_t m = 0; ok && ev->type == JSONL_ARRAY && m < ev->len; m++)
				ok = ev[1 + m].type == JSONL_STRING; /* strings: one value each */
			if (!ok)
				return say(why, n_why, "%s: \"%s\".\"%s\"[%zu] is not [fact text, evidence turn or list of them]",
				           path, key, jsonl_shown(shown, sizeof shown, sp->key), j);
			locomo_fact *f = &out->facts[out->n_facts];
			*f = (locomo_fact){ t->str, key, sp->key, j, dv ? dv->str : "", join_evidence(ev) };
			if (!f->evidence)
				return say(why, n_why, "%s: out of memory", path);
			out->n_facts++;
		}
	}
	return 0;
}

/* The sessions with observations, each once, in increasing order: into
 * *out (its length in *n). */
static int find_sessions(session **out, size_t *n, const jsonl_value *root, const char *path, char *why,
                         size_t n_why)
{
	session *ss = calloc(root->len ? root->len : 1, sizeof *ss);
	*out = ss;
	*n = 0;
	if (!ss)
		return say(why, n_why, "%s: out of memory", path);
	const jsonl_value *m = root + 1;
	for (size_t i = 0; i < root->len; i++, m = jsonl_next(m)) {
		const char *digits;
		size_t nd;
		if (!session_key(m->key, &digits, &nd))
			continue;
		if (digits[0] == '0' && nd > 1)
			return say(why, n_why, "%s: \"%s\": a session's number is written without leading zeros", path,
			           m->key);
		ss[(*n)++] = (session){ m, digits, nd, i };
	}
	qsort(ss, *n, sizeof *ss, cmp_session);
	size_t u = 0; /* a key repeated: its last value, as jsonl_get reads it */
	for (size_t i = 0; i < *n; i++) {
		if (u && ss[u - 1].n_digits == ss[i].n_digits && !memcmp(ss[u - 1].digits, ss[i].digits, ss[i].n_digits))
			u--;
		ss[u++] = ss[i];
	}
	*n = u;
	return 0;
}

static int read_questions(locomo_doc *out, const char *path, char *why, size_t n_why)
{
	const jsonl_value *qa = jsonl_get(out->doc.v, "qa");
	if (!qa || qa->type != JSONL_ARRAY)
		return say(why, n_why, "%s: no \"qa\" list of questions", path);
	out->qs = calloc(qa->len ? qa->len : 1, sizeof *out->qs);
	out->qa_index = calloc(qa->len ? qa->len : 1, sizeof *out->qa_index);
	if (!out->qs || !out->qa_index)
		return say(why, n_why, "%s: out of memory", path);
	const jsonl_value *q = qa + 1;
	for (size_t i = 0; i < qa->len; i++, q = jsonl_next(q)) {
		const jsonl_value *cat = jsonl_get(q, "category");
		if (q->type != JSONL_OBJECT || !cat || cat->type != JSONL_NUMBER)
			return say(why, n_why, "%s: qa[%zu] is not an object with a numeric \"category\"", path, i);
		if (!(cat->num == 1 || cat->num == 2 || cat->num == 3 || cat->num == 4))
			continue;
		const jsonl_value *qt = jsonl_get(q, "question"), *ans = jsonl_get(q, "answer"),
		                  *ev = jsonl_get(q, "evidence");
		if (!qt || qt->type != JSONL_STRING || !qt->len)
			return say(why, n_why, "%s: qa[%zu] has no \"question\"", path, i);
		if (!ans || (ans->type != JSONL_STRING && ans->type != JSONL_NUMBER))
			return say(why, n_why, "%s: qa[%zu] has no \"answer\" (a string or a number)", path, i);
		int ok = !ev || ev->type == JSONL_ARRAY;
		for (size_t j = 0; ok && ev && j < ev->len; j++)
			ok = ev[1 + j].type == JSONL_STRING;
		if (!ok)
			return say(why, n_why, "%s: qa[%zu]: \"evidence\" is not a list of turns", path, i);
		out->qa_index[out->n_qs] = i;
		out->qs[out->n_qs++] = q;
	}
	if (!out->n_qs)
		return say(why, n_why, "%s: no questions of categories 1-4 in \"qa\"", path);
	return 0;
}

int locomo_read(locomo_doc *out, char *text, size_t len, const char *path, char *why, size_t n_why)
{
	memset(out, 0, sizeof *out);
	if (jsonl_parse(&out->doc, text, len))
		return say(why, n_why, "%s: JSON line %zu column %zu: %s", path, out->doc.line, out->doc.col, out->doc.err);
	const jsonl_value *root = out->doc.v;
	char where[256];
	if (root->type != JSONL_OBJECT)
		return say(why, n_why, "%s: not a JSON object (a LoCoMo conversation)", path);
	if (jsonl_find_nul(root, "", where, sizeof where))
		return say(why, n_why, "%s: \"%s\" holds a NUL character", path, where);
	session *ss;
	size_t ns;
	int rc = find_sessions(&ss, &ns, root, path, why, n_why);
	/* Room for every fact at once: each is an array in some session. */
	size_t cap = 0;
	for (size_t i = 0; !rc && i < ns; i++)
		cap += ss[i].obs->span;
	if (!rc && !(out->facts = calloc(cap ? cap : 1, sizeof *out->facts)))
		rc = say(why, n_why, "%s: out of memory", path);
	for (size_t i = 0; !rc && i < ns; i++)
		rc = read_session(out, &ss[i], path, why, n_why);
	free(ss);
	if (rc)
		return rc;
	if (!out->n_facts)
		return say(why, n_why, "%s: no facts (no session_N_observation with [fact, evidence] entries)", path);
	return read_questions(out, path, why, n_why);
}

#include "fact_lines.h"

#include <stdlib.h>
#include <string.h>

#include "inferscale/inferscale.h"
#include "json_number.h"
#include "say.h"

void fact_lines_free(fact_lines *F)
{
	for (size_t i = 0; i < F->n; i++) {
		free(F->f[i].meta);
		infs_free(F->f[i].rendered);
	}
	free(F->f);
	jsonl_lines_free(&F->lines);
	memset(F, 0, sizeof *F);
}

/* The bytes of s as a JSON string, quotes included (str_json's escapes). */
static size_t json_len(const char *s)
{
	size_t n = 2;
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		n += *c == '"' || *c == '\\' ? 2 : *c < 0x20 ? 6 : 1;
	return n;
}

static char *put_json(char *d, const char *s)
{
	*d++ = '"';
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\') {
			*d++ = '\\';
			*d++ = (char)*c;
		} else if (*c < 0x20) {
			static const char hex[] = "0123456789abcdef";
			memcpy(d, "\\u00", 4);
			d[4] = hex[*c >> 4];
			d[5] = hex[*c & 15];
			d += 6;
		} else {
			*d++ = (char)*c;
		}
	}
	*d++ = '"';
	return d;
}

/* The metadata members of line o, in order, into out (NULL: counted
 * only): its string members other than text and namespace, then the string
 * members of its "metadata" object. */
static size_t meta_members(const jsonl_value **out, const jsonl_value *o)
{
	const jsonl_value *src[2] = { o, jsonl_get(o, "metadata") };
	size_t n = 0;
	for (int pass = 0; pass < 2; pass++) {
		if (!src[pass] || src[pass]->type != JSONL_OBJECT)
			continue;
		const jsonl_value *v = src[pass] + 1;
		for (size_t m = 0; m < src[pass]->len; m++, v = jsonl_next(v)) {
			if (v->type != JSONL_STRING || (!pass && (!strcmp(v->key, "text") || !strcmp(v->key, "namespace"))))
				continue;
			if (out)
				out[n] = v;
			n++;
		}
	}
	return n;
}

/* Line o's metadata as a JSON object, sized first so that a member of any
 * length is refused before it is copied: 0, 1 when it would not fit the
 * library's limit, -1 when memory is short. */
static int metadata(char **out, const jsonl_value *o)
{
	size_t n_members = meta_members(NULL, o), n = 2;
	const jsonl_value **m = malloc((n_members ? n_members : 1) * sizeof *m);
	if (!m)
		return -1;
	meta_members(m, o);
	for (size_t i = 0; i < n_members && n < INFS_METADATA_MAX; i++)
		n += json_len(m[i]->key) + 1 + json_len(m[i]->str) + (i ? 1 : 0);
	char *p = n < INFS_METADATA_MAX ? malloc(n + 1) : NULL, *d = p;
	if (p) {
		*d++ = '{';
		for (size_t i = 0; i < n_members; i++) {
			if (i)
				*d++ = ',';
			d = put_json(d, m[i]->key);
			*d++ = ':';
			d = put_json(d, m[i]->str);
		}
		*d++ = '}';
		*d = '\0';
		*out = p;
	}
	free(m);
	return p ? 0 : n >= INFS_METADATA_MAX ? 1 : -1;
}

/* The library's rules for a namespace (store.h), so that a bad one is
 * refused before any other is written: 1..255 bytes, no C0 or C1 control
 * character nor DEL (UTF-8: the JSON reader's), not reserved. 0 when it
 * passes, else what is wrong in fault: 1, or 2 when it holds a control
 * character (the name itself is then not printed). */
static int namespace_fault(char *fault, size_t n, const char *ns, size_t len)
{
	const unsigned char *s = (const unsigned char *)ns;
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x20 || s[i] == 0x7f || (s[i] == 0xc2 && i + 1 < len && s[i + 1] <= 0x9f)) {
			snprintf(fault, n, "holds a control character at byte %zu", i);
			return 2;
		}
	const char *what = !len ? "is empty"
	                 : len > INFS_NAMESPACE_MAX ? "is longer than 255 bytes"
	                 : !strncmp(ns, INFS_RESERVED_PREFIX, sizeof INFS_RESERVED_PREFIX - 1)
	                         ? "is reserved (names starting with \"" INFS_RESERVED_PREFIX "\" belong to the library)"
	                         : NULL;
	if (what)
		snprintf(fault, n, "%s", what);
	return what != NULL;
}

/* Members a fact leaves out, named on warn once each. */
static void warn_unused(const fact_lines *F, const char *path, FILE *warn)
{
	char seen[16][64];
	size_t n_seen = 0;
	for (size_t i = 0; warn && i < F->lines.n; i++) {
		const jsonl_value *o = F->lines.doc[i].v, *v = o + 1;
		for (size_t m = 0; m < o->len; m++, v = jsonl_next(v)) {
			int used = v->type == JSONL_STRING || (!strcmp(v->key, "metadata") && v->type == JSONL_OBJECT) ||
			           ((!strcmp(v->key, "source_id") || !strcmp(v->key, "timestamp")) && v->type == JSONL_NUMBER);
			int known = 0;
			for (size_t k = 0; k < n_seen; k++)
				known |= !strcmp(seen[k], v->key);
			if (used || known)
				continue;
			char shown[128];
			fprintf(warn, "inferscale: warning: %s:%zu: \"%s\" is not a string, the \"metadata\" object, "
			        "\"source_id\" or \"timestamp\": left out of the fact\n", path, F->lines.no[i],
			        jsonl_shown(shown, sizeof shown, v->key));
			if (n_seen < sizeof seen / sizeof seen[0])
				snprintf(seen[n_seen++], sizeof seen[0], "%s", v->key);
		}
	}
}

/* The number member key of o into *u or *i (whichever is set), exactly. */
static int integer(uint64_t *u, int64_t *i, const jsonl_value *o, const char *key, const char *path, size_t no,
                   char *why, size_t n_why)
{
	const jsonl_value *v = jsonl_get(o, key);
	const char *fault = NULL;
	if (!v || v->type != JSONL_NUMBER || !(u ? json_u64(u, v, &fault) : json_i64(i, v, &fault)))
		return 0;
	return say(why, n_why, "%s:%zu: \"%s\" %.*s %s", path, no, key, (int)v->len, v->str, fault);
}

/* Checks line i and fills fact f from it. */
static int read_fact(fact_line *f, const fact_lines *F, size_t i, const char *path, const char *ns, char *why,
                     size_t n_why)
{
	const jsonl_value *o = F->lines.doc[i].v, *t = jsonl_get(o, "text"), *n = jsonl_get(o, "namespace");
	size_t no = F->lines.no[i];
	char fault[128];
	f->line = no;
	if (!t || t->type != JSONL_STRING || !t->len)
		return say(why, n_why, "%s:%zu: no \"text\" (a non-empty string)", path, no);
	if (t->len >= INFS_TEXT_MAX)
		return say(why, n_why, "%s:%zu: \"text\" is %zu bytes, and a fact's text is at most %u", path, no, t->len,
		           INFS_TEXT_MAX - 1);
	if (!ns && (!n || n->type != JSONL_STRING))
		return say(why, n_why, "%s:%zu: no \"namespace\" (a string), and no --namespace", path, no);
	int bad = ns ? 0 : namespace_fault(fault, sizeof fault, n->str, n->len);
	if (bad == 2)
		return say(why, n_why, "%s:%zu: \"namespace\" %s", path, no, fault);
	if (bad)
		return say(why, n_why, "%s:%zu: namespace \"%.64s%s\" %s", path, no, n->str, n->len > 64 ? "..." : "",
		           fault);
	f->text = t->str;
	f->ns = ns ? ns : n->str;
	if (integer(&f->source_id, NULL, o, "source_id", path, no, why, n_why) ||
	    integer(NULL, &f->timestamp, o, "timestamp", path, no, why, n_why))
		return -1;
	int rc = metadata(&f->meta, o);
	if (rc > 0)
		return say(why, n_why, "%s:%zu: the metadata (the string members besides \"text\" and \"namespace\", and "
		           "those of \"metadata\") is more than %u bytes as JSON", path, no, INFS_METADATA_MAX - 1);
	if (rc)
		return say(why, n_why, "%s:%zu: out of memory", path, no);
	if (infs_fact_render(&f->rendered, f->text, f->meta))
		return say(why, n_why, "%s:%zu: %s", path, no, infs_error_last());
	size_t len = strlen(f->rendered);
	if (len >= INFS_TEXT_MAX)
		return say(why, n_why, "%s:%zu: \"text\" with its date and speaker is %zu bytes, and a fact's text is at most %u",
		           path, no, len, INFS_TEXT_MAX - 1);
	return 0;
}

int fact_lines_read(fact_lines *out, const char *path, const char *ns, FILE *warn, char *why, size_t n_why)
{
	memset(out, 0, sizeof *out);
	char fault[128];
	int bad = ns ? namespace_fault(fault, sizeof fault, ns, strlen(ns)) : 0;
	if (bad == 2)
		return say(why, n_why, "--namespace %s", fault);
	if (bad)
		return say(why, n_why, "--namespace \"%.64s\" %s", ns, fault);
	if (jsonl_lines_read(&out->lines, path, why, n_why))
		return -1;
	if (!(out->f = calloc(out->lines.n ? out->lines.n : 1, sizeof *out->f)))
		return say(why, n_why, "%s: out of memory", path);
	for (size_t i = 0; i < out->lines.n; i++, out->n++)
		if (read_fact(&out->f[i], out, i, path, ns, why, n_why)) {
			out->n++; /* its buffers, for fact_lines_free */
			return -1;
		}
	warn_unused(out, path, warn);
	return 0;
}

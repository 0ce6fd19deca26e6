#include "jsonl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX 256

typedef struct parser {
	char *s, *end;
	const char *line_start; /* for the column of an error */
	size_t line;
	int depth;
	size_t max; /* values at most; 0: no limit */
	jsonl *doc;
} parser;

static int bad(parser *p, const char *what)
{
	p->doc->err = what;
	p->doc->line = p->line;
	p->doc->col = (size_t)(p->s - p->line_start) + 1;
	return -1;
}

/* Raw newlines are legal only here, between tokens, so the lines are
 * counted here (decoded strings may hold newline bytes). */
static void blanks(parser *p)
{
	for (; p->s < p->end; p->s++) {
		if (*p->s == '\n') {
			p->line++;
			p->line_start = p->s + 1;
		} else if (*p->s != ' ' && *p->s != '\t' && *p->s != '\r') {
			break;
		}
	}
}

static int hex4(parser *p, uint32_t *out)
{
	*out = 0;
	for (int i = 0; i < 4; i++, p->s++) {
		char c = p->s < p->end ? *p->s : '\0';
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return bad(p, "bad \\u escape");
		*out = *out << 4 | (uint32_t)d;
	}
	return 0;
}

/* Writes code point c as UTF-8 at d; returns the byte after it. */
static char *utf8(char *d, uint32_t c)
{
	if (c < 0x80) {
		*d++ = (char)c;
	} else if (c < 0x800) {
		*d++ = (char)(0xc0 | c >> 6);
		*d++ = (char)(0x80 | (c & 0x3f));
	} else if (c < 0x10000) {
		*d++ = (char)(0xe0 | c >> 12);
		*d++ = (char)(0x80 | (c >> 6 & 0x3f));
		*d++ = (char)(0x80 | (c & 0x3f));
	} else {
		*d++ = (char)(0xf0 | c >> 18);
		*d++ = (char)(0x80 | (c >> 12 & 0x3f));
		*d++ = (char)(0x80 | (c >> 6 & 0x3f));
		*d++ = (char)(0x80 | (c & 0x3f));
	}
	return d;
}

/* What the one-letter escape \e stands for, or 0. */
static char escaped(char e)
{
	switch (e) {
	case '"': return '"';
	case '\\': return '\\';
	case '/': return '/';
	case 'b': return '\b';
	case 'f': return '\f';
	case 'n': return '\n';
	case 'r': return '\r';
	case 't': return '\t';
	default: return 0;
	}
}

/* The length of the well-formed UTF-8 sequence at s[0..n) (n >= 1, s[0]
 * >= 0x80), or 0: no overlong forms, no surrogates, nothing above
 * U+10FFFF. The second byte's range carries those rules (Unicode's table
 * of well-formed sequences). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0], lo = 0x80, hi = 0xbf;
	size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (!len || n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

/* The string at p->s (its opening quote), decoded over itself: no escape is
 * shorter than what it stands for, so the writes stay behind the reads, and
 * the NUL lands at the latest on the closing quote. */
static int string(parser *p, const char **out, size_t *len)
{
	char *start = ++p->s, *d = start;
	for (;;) {
		if (p->s == p->end)
			return bad(p, "unterminated string");
		unsigned char c = (unsigned char)*p->s;
		if (c == '"')
			break;
		if (c < 0x20)
			return bad(p, "control character in string");
		if (c >= 0x80) {
			size_t n = utf8_len((const unsigned char *)p->s, (size_t)(p->end - p->s));
			if (!n)
				return bad(p, "invalid UTF-8 in a string");
			memmove(d, p->s, n);
			d += n;
			p->s += n;
			continue;
		}
		p->s++;
		if (c != '\\') {
			*d++ = (char)c;
			continue;
		}
		char e = p->s < p->end ? *p->s++ : '\0';
		char plain = escaped(e);
		if (plain) {
			*d++ = plain;
			continue;
		}
		if (e != 'u')
			return bad(p, "bad escape in string");
		uint32_t cp, lo;
		if (hex4(p, &cp))
			return -1;
		/* A high surrogate pairs with a low one that follows at once;
		 * any other surrogate stands alone and becomes U+FFFD. */
		if (cp >= 0xd800 && cp < 0xdc00 && p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u') {
			char *back = p->s;
			p->s += 2;
			if (hex4(p, &lo))
				return -1;
			if (lo >= 0xdc00 && lo < 0xe000)
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			else
				p->s = back;
		}
		d = utf8(d, cp >= 0xd800 && cp < 0xe000 ? 0xfffd : cp);
	}
	p->s++;
	*d = '\0';
	*out = start;
	*len = (size_t)(d - start);
	return 0;
}

static size_t digits(const char *s, const char *end)
{
	size_t n = 0;
	while (s + n < end && s[n] >= '0' && s[n] <= '9')
		n++;
	return n;
}

/* JSON's number grammar exactly, then strtod over a copy (the text may
 * end right after the number); *text and *len: the number as written. */
static int number(parser *p, double *out, const char **text, size_t *len)
{
	const char *s = p->s, *q = s;
	q += q < p->end && *q == '-';
	size_t n = digits(q, p->end);
	if (!n || (n > 1 && *q == '0'))
		return bad(p, "bad number");
	q += n;
	if (q < p->end && *q == '.') {
		if (!(n = digits(q + 1, p->end)))
			return bad(p, "bad number");
		q += 1 + n;
	}
	if (q < p->end && (*q == 'e' || *q == 'E')) {
		q++;
		q += q < p->end && (*q == '+' || *q == '-');
		if (!(n = digits(q, p->end)))
			return bad(p, "bad number");
		q += n;
	}
	char tmp[64];
	if ((size_t)(q - s) >= sizeof tmp)
		return bad(p, "number longer than 63 characters");
	memcpy(tmp, s, (size_t)(q - s));
	tmp[q - s] = '\0';
	*out = strtod(tmp, NULL);
	*text = s;
	*len = (size_t)(q - s);
	p->s = (char *)q;
	return 0;
}

static int word(parser *p, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(p->end - p->s) < n || memcmp(p->s, w, n))
		return bad(p, "unexpected character");
	p->s += n;
	return 0;
}

static int value(parser *p, const char *key);

/* An object member's name and its colon. */
static int member_key(parser *p, const char **key)
{
	size_t n;
	blanks(p);
	if (p->s == p->end || *p->s != '"')
		return bad(p, "expected a string key");
	if (string(p, key, &n))
		return -1;
	if (strlen(*key) != n)
		return bad(p, "a key holds a NUL character");
	blanks(p);
	if (p->s == p->end || *p->s != ':')
		return bad(p, "expected ':'");
	p->s++;
	return 0;
}

/* The members of the array or object at doc->v[at], whose opening bracket
 * is at p->s. After each member comes a comma and another one, or the close. */
static int members(parser *p, size_t at, int object)
{
	char close = object ? '}' : ']';
	if (++p->depth > DEPTH_MAX)
		return bad(p, "nesting too deep");
	p->s++;
	blanks(p);
	int more = p->s == p->end || *p->s != close;
	while (more) {
		const char *key = NULL;
		if ((object && member_key(p, &key)) || value(p, key))
			return -1;
		p->doc->v[at].len++;
		blanks(p);
		char c = p->s < p->end ? *p->s : '\0';
		if (c != ',' && c != close)
			return bad(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
		more = c == ',';
		p->s += more;
	}
	p->s++;
	p->depth--;
	return 0;
}

static int value(parser *p, const char *key)
{
	blanks(p);
	if (p->s == p->end)
		return bad(p, "unexpected end of text");
	jsonl *doc = p->doc;
	if (p->max && doc->n == p->max)
		return bad(p, "more values than the limit");
	if (doc->n == doc->cap) {
		size_t cap = doc->cap ? 2 * doc->cap : 32;
		cap = p->max && cap > p->max ? p->max : cap;
		jsonl_value *v = realloc(doc->v, cap * sizeof *v);
		if (!v)
			return bad(p, "out of memory");
		doc->v = v;
		doc->cap = cap;
	}
	/* By index: the array moves as members are added. */
	size_t at = doc->n++;
	memset(&doc->v[at], 0, sizeof doc->v[at]);
	doc->v[at].key = key;
	int rc;
	switch (*p->s) {
	case '{':
		doc->v[at].type = JSONL_OBJECT;
		rc = members(p, at, 1);
		break;
	case '[':
		doc->v[at].type = JSONL_ARRAY;
		rc = members(p, at, 0);
		break;
	case '"':
		doc->v[at].type = JSONL_STRING;
		rc = string(p, &doc->v[at].str, &doc->v[at].len);
		break;
	case 't':
		doc->v[at].type = JSONL_TRUE;
		rc = word(p, "true");
		break;
	case 'f':
		doc->v[at].type = JSONL_FALSE;
		rc = word(p, "false");
		break;
	case 'n':
		rc = word(p, "null");
		break;
	default:
		doc->v[at].type = JSONL_NUMBER;
		rc = number(p, &doc->v[at].num, &doc->v[at].str, &doc->v[at].len);
		break;
	}
	doc->v[at].span = doc->n - at;
	return rc;
}

int jsonl_parse_limited(jsonl *doc, char *text, size_t len, size_t max_values)
{
	doc->n = 0;
	doc->line = doc->col = 0;
	doc->err = NULL;
	parser p = { text, text + len, text, 1, 0, max_values, doc };
	if (value(&p, NULL))
		return -1;
	blanks(&p);
	return p.s == p.end ? 0 : bad(&p, "trailing characters after the value");
}

int jsonl_parse(jsonl *doc, char *text, size_t len)
{
	return jsonl_parse_limited(doc, text, len, 0);
}

void jsonl_free(jsonl *doc)
{
	free(doc->v);
	memset(doc, 0, sizeof *doc);
}

const jsonl_value *jsonl_get(const jsonl_value *obj, const char *key)
{
	const jsonl_value *found = NULL;
	if (!obj || obj->type != JSONL_OBJECT)
		return NULL;
	const jsonl_value *m = obj + 1;
	for (size_t i = 0; i < obj->len; i++, m = jsonl_next(m))
		if (!strcmp(m->key, key))
			found = m;
	return found;
}

const char *jsonl_str(const jsonl_value *v, const char *def)
{
	return v && v->type == JSONL_STRING ? v->str : def;
}

double jsonl_num(const jsonl_value *v, double def)
{
	return v && v->type == JSONL_NUMBER ? v->num : def;
}

int jsonl_find_nul(const jsonl_value *v, const char *name, char *where, size_t n)
{
	if (v->type == JSONL_STRING && strlen(v->str) != v->len) {
		snprintf(where, n, "%s", name);
		return 1;
	}
	if (v->type != JSONL_ARRAY && v->type != JSONL_OBJECT)
		return 0;
	const jsonl_value *m = v + 1;
	for (size_t i = 0; i < v->len; i++, m = jsonl_next(m)) {
		char sub[256], key[128];
		if (v->type == JSONL_OBJECT)
			snprintf(sub, sizeof sub, "%s%s%s", name, *name ? "." : "", jsonl_shown(key, sizeof key, m->key));
		else
			snprintf(sub, sizeof sub, "%s[%zu]", name, i);
		if (jsonl_find_nul(m, sub, where, n))
			return 1;
	}
	return 0;
}

const char *jsonl_shown(char *buf, size_t n, const char *s)
{
	const unsigned char *c = (const unsigned char *)s;
	size_t full = 0, at = 0;
	for (size_t i = 0; c[i]; i++)
		full += c[i] < 0x20 || c[i] == 0x7f ? 6 : 1;
	/* cut: room kept for "..." */
	size_t room = full < n ? n - 1 : n - 4;
	for (; *c; c++) {
		int ctl = *c < 0x20 || *c == 0x7f;
		if (at + (ctl ? 6 : 1) > room)
			break;
		if (ctl)
			at += (size_t)snprintf(buf + at, n - at, "\\u%04x", *c);
		else
			buf[at++] = (char)*c;
	}
	snprintf(buf + at, n - at, "%s", *c ? "..." : "");
	return buf;
}

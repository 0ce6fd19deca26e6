#include "util/json.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define MAX_DEPTH 256

typedef struct parser {
	const char *s, *end, *start;
	int depth;
} parser;

static int fail(const parser *p, const char *what)
{
	int line = 1, col = 1;
	for (const char *c = p->start; c < p->s && c < p->end; c++) {
		if (*c == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	return infs__error(INFS_EFORMAT, "JSON line %d column %d: %s", line, col, what);
}

static void skip_ws(parser *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

static void value_free(infs__json *v)
{
	if (v->type == INFS_JSON_STRING) {
		free(v->string);
	} else if (v->type == INFS_JSON_ARRAY || v->type == INFS_JSON_OBJECT) {
		for (size_t i = 0; i < v->len; i++) {
			value_free(&v->items[i]);
			if (v->keys)
				free(v->keys[i]);
		}
		free(v->items);
		free(v->keys);
	}
}

static int hex4(parser *p, uint32_t *out)
{
	if (p->end - p->s < 4)
		return fail(p, "truncated \\u escape");
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		char c = *p->s++;
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return fail(p, "bad hex digit in \\u escape");
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Parses a string at p->s (on the opening quote) into a fresh buffer. */
static int parse_string(parser *p, char **out, size_t *out_len)
{
	p->s++;
	const char *q = p->s;
	while (q < p->end && *q != '"') /* escapes never lengthen the text */
		q += (*q == '\\' && q + 1 < p->end) ? 2 : 1;
	char *buf = malloc((size_t)(q - p->s) + 1);
	if (!buf)
		return infs__error(INFS_ENOMEM, "JSON: out of memory");
	size_t n = 0;
	for (;;) {
		if (p->s >= p->end) {
			free(buf);
			return fail(p, "unterminated string");
		}
		unsigned char c = (unsigned char)*p->s++;
		if (c == '"')
			break;
		if (c < 0x20) {
			free(buf);
			return fail(p, "control character in string");
		}
		if (c != '\\') {
			buf[n++] = (char)c;
			continue;
		}
		if (p->s >= p->end) {
			free(buf);
			return fail(p, "unterminated escape");
		}
		char e = *p->s++;
		uint32_t cp;
		switch (e) {
		case '"': buf[n++] = '"'; break;
		case '\\': buf[n++] = '\\'; break;
		case '/': buf[n++] = '/'; break;
		case 'b': buf[n++] = '\b'; break;
		case 'f': buf[n++] = '\f'; break;
		case 'n': buf[n++] = '\n'; break;
		case 'r': buf[n++] = '\r'; break;
		case 't': buf[n++] = '\t'; break;
		case 'u':
			if (hex4(p, &cp)) {
				free(buf);
				return INFS_EFORMAT;
			}
			if (cp >= 0xd800 && cp < 0xdc00 && p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u') {
				uint32_t lo;
				const char *save = p->s;
				p->s += 2;
				if (hex4(p, &lo)) {
					free(buf);
					return INFS_EFORMAT;
				}
				if (lo >= 0xdc00 && lo < 0xe000)
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				else
					p->s = save;
			}
			if (cp >= 0xd800 && cp < 0xe000)
				cp = 0xfffd; /* lone surrogate */
			n += put_utf8(buf + n, cp);
			break;
		default:
			free(buf);
			return fail(p, "bad escape in string");
		}
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return 0;
}

static int parse_value(parser *p, infs__json *v);

static int push(infs__json **items, char ***keys, size_t *n, size_t *cap, int with_keys)
{
	if (*n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 4;
	infs__json *ni = realloc(*items, nc * sizeof *ni);
	if (!ni)
		return infs__error(INFS_ENOMEM, "JSON: out of memory");
	*items = ni;
	if (with_keys) {
		char **nk = realloc(*keys, nc * sizeof *nk);
		if (!nk)
			return infs__error(INFS_ENOMEM, "JSON: out of memory");
		*keys = nk;
	}
	*cap = nc;
	return 0;
}

static int parse_container(parser *p, infs__json *v, int object)
{
	if (++p->depth > MAX_DEPTH)
		return fail(p, "nesting too deep");
	char close = object ? '}' : ']';
	size_t cap = 0;
	v->type = object ? INFS_JSON_OBJECT : INFS_JSON_ARRAY;
	p->s++;
	skip_ws(p);
	if (p->s < p->end && *p->s == close) {
		p->s++;
		p->depth--;
		return 0;
	}
	for (;;) {
		int rc = push(&v->items, &v->keys, &v->len, &cap, object);
		if (rc)
			return rc;
		char *key = NULL;
		if (object) {
			skip_ws(p);
			size_t klen;
			if (p->s >= p->end || *p->s != '"')
				return fail(p, "expected a string key");
			if ((rc = parse_string(p, &key, &klen)))
				return rc;
			/* Keys are read as C strings: a NUL would cut them. */
			if (strlen(key) != klen) {
				free(key);
				return fail(p, "a key holds a NUL character");
			}
			skip_ws(p);
			if (p->s >= p->end || *p->s != ':') {
				free(key);
				return fail(p, "expected ':'");
			}
			p->s++;
		}
		if ((rc = parse_value(p, &v->items[v->len]))) {
			free(key);
			return rc;
		}
		if (object)
			v->keys[v->len] = key;
		v->len++;
		skip_ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		if (p->s < p->end && *p->s == close) {
			p->s++;
			p->depth--;
			return 0;
		}
		return fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int literal(parser *p, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0)
		return fail(p, "unexpected character");
	p->s += n;
	return 0;
}

static int parse_number(parser *p, infs__json *v)
{
	char tmp[64];
	size_t n = 0;
	const char *q = p->s;
	while (q < p->end && n < sizeof tmp - 1 && strchr("+-0123456789.eE", *q) && *q)
		tmp[n++] = *q++;
	tmp[n] = '\0';
	char *endp;
	v->number = strtod(tmp, &endp);
	if (n == 0 || endp != tmp + n)
		return fail(p, "bad number");
	v->type = INFS_JSON_NUMBER;
	p->s = q;
	return 0;
}

static int parse_value_inner(parser *p, infs__json *v)
{
	skip_ws(p);
	if (p->s >= p->end)
		return fail(p, "unexpected end of text");
	switch (*p->s) {
	case '{': return parse_container(p, v, 1);
	case '[': return parse_container(p, v, 0);
	case '"': v->type = INFS_JSON_STRING; return parse_string(p, &v->string, &v->len);
	case 't': v->type = INFS_JSON_BOOL; v->boolean = 1; return literal(p, "true");
	case 'f': v->type = INFS_JSON_BOOL; return literal(p, "false");
	case 'n': return literal(p, "null");
	default: return parse_number(p, v);
	}
}

/* On failure v holds nothing to free. */
static int parse_value(parser *p, infs__json *v)
{
	memset(v, 0, sizeof *v);
	int rc = parse_value_inner(p, v);
	if (rc) {
		value_free(v);
		memset(v, 0, sizeof *v);
	}
	return rc;
}

int infs__json_parse(infs__json **out, const char *text, size_t len)
{
	*out = NULL;
	infs__json *root = calloc(1, sizeof *root);
	if (!root)
		return infs__error(INFS_ENOMEM, "JSON: out of memory");
	parser p = { text, text + len, text, 0 };
	int rc = parse_value(&p, root);
	if (!rc) {
		skip_ws(&p);
		if (p.s != p.end)
			rc = fail(&p, "trailing characters after the value");
	}
	if (rc) {
		value_free(root);
		free(root);
		return rc;
	}
	*out = root;
	return 0;
}

void infs__json_free(infs__json *root)
{
	if (!root)
		return;
	value_free(root);
	free(root);
}

const infs__json *infs__json_get(const infs__json *obj, const char *key)
{
	if (!obj || obj->type != INFS_JSON_OBJECT)
		return NULL;
	for (size_t i = obj->len; i-- > 0;)
		if (strcmp(obj->keys[i], key) == 0)
			return &obj->items[i];
	return NULL;
}

double infs__json_number(const infs__json *v, double def)
{
	return v && v->type == INFS_JSON_NUMBER ? v->number : def;
}

const char *infs__json_str(const infs__json *v, const char *def)
{
	return v && v->type == INFS_JSON_STRING ? v->string : def;
}

/* The command-line tool's JSON reader (also compiled into the LoCoMo
 * benchmarks): one JSON value parsed in place. Strings are decoded inside
 * the caller's text, which must stay alive and unmoved as long as the
 * document; values lie in one array in document order, each followed by
 * its members, so that a value's next sibling is span values further on.
 * Strings keep their length: a NUL in one (from \u0000) is visible as
 * strlen(str) != len. Keys holding a NUL are refused, and so are raw bytes
 * in strings and keys that are not well-formed UTF-8 (JSON text is UTF-8;
 * the library's rules: no overlong forms, surrogates or code points above
 * U+10FFFF). */
#ifndef JSONL_H
#define JSONL_H

#include <stddef.h>

typedef enum jsonl_type {
	JSONL_NULL,
	JSONL_FALSE,
	JSONL_TRUE,
	JSONL_NUMBER,
	JSONL_STRING,
	JSONL_ARRAY,
	JSONL_OBJECT
} jsonl_type;

typedef struct jsonl_value {
	jsonl_type type;
	const char *key; /* the member's name in an object, else NULL */
	const char *str; /* STRING: the decoded bytes, NUL-terminated; NUMBER:
	                  * the number as written (in the text, not terminated) */
	size_t len;      /* STRING and NUMBER: bytes of str; ARRAY and OBJECT: members */
	size_t span;     /* values from this one to its next sibling */
	double num;      /* NUMBER */
} jsonl_value;

typedef struct jsonl {
	jsonl_value *v; /* v[0] is the document's value */
	size_t n, cap;
	/* After a failed parse: where (1-based) and what. */
	size_t line, col;
	const char *err;
} jsonl;

/* Parses the one JSON value of text[0..len), blanks around it allowed,
 * decoding its strings in place. Returns 0, or -1 with line, col and err
 * set (a malformed text, nesting deeper than 256, or no memory). doc is
 * reset first; free it with jsonl_free in either case. */
int jsonl_parse(jsonl *doc, char *text, size_t len);
/* The same, refusing a text of more than max_values values (err "more
 * values than the limit", at the first one past it): the values' array
 * never grows past max_values, whatever the text. */
int jsonl_parse_limited(jsonl *doc, char *text, size_t len, size_t max_values);
void jsonl_free(jsonl *doc);

/* Whether a string of v, at any depth, holds a NUL (the reader keeps them;
 * everything after it would read the text cut): *where names it, as
 * name.key and name[index] from name, keys as jsonl_shown shows them. */
int jsonl_find_nul(const jsonl_value *v, const char *name, char *where, size_t n);

/* s as a one-line message may quote it, in buf (n >= 8): control
 * characters as \u00XX escapes, and "..." when it is cut to fit. */
const char *jsonl_shown(char *buf, size_t n, const char *s);

/* The member key of object obj (the last one when repeated), or NULL when
 * obj is NULL, not an object or lacks it. */
const jsonl_value *jsonl_get(const jsonl_value *obj, const char *key);

/* The members of an array or object: the first is at v + 1, each next one
 * span values after the last. */
static inline const jsonl_value *jsonl_next(const jsonl_value *member)
{
	return member + member->span;
}

/* v's string, or def when v is NULL or not a string. */
const char *jsonl_str(const jsonl_value *v, const char *def);
/* v's number, or def when v is NULL or not a number. */
double jsonl_num(const jsonl_value *v, double def);

#endif

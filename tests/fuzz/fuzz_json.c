/* libFuzzer target for the JSON reader: any text parses or fails with
 * INFS_EFORMAT, and what parses survives a round trip: written back out and
 * parsed again it gives the same tree. scripts/fuzz.sh builds and runs it. */
#include <math.h>

#include "fuzz_util.h"
#include "inferscale/common.h"
#include "util/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct out {
	char *p;
	size_t n, cap;
} out;

static void put(out *o, const char *s, size_t n)
{
	if (o->n + n + 1 > o->cap) {
		o->cap = (o->n + n + 1) * 2;
		o->p = realloc(o->p, o->cap);
		require(o->p != NULL);
	}
	memcpy(o->p + o->n, s, n);
	o->n += n;
	o->p[o->n] = 0;
}

static void put_string(out *o, const char *s, size_t n)
{
	put(o, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		if (c < 0x20 || c == '"' || c == '\\') {
			snprintf(esc, sizeof esc, "\\u%04x", c);
			put(o, esc, 6);
		} else {
			put(o, s + i, 1);
		}
	}
	put(o, "\"", 1);
}

/* Writes v as JSON; 0 when it holds a number that JSON cannot spell. */
static int write_value(out *o, const infs__json *v)
{
	char num[40];
	switch (v->type) {
	case INFS_JSON_NULL:
		put(o, "null", 4);
		return 1;
	case INFS_JSON_BOOL:
		put(o, v->boolean ? "true" : "false", v->boolean ? 4 : 5);
		return 1;
	case INFS_JSON_NUMBER:
		if (!isfinite(v->number))
			return 0;
		put(o, num, (size_t)snprintf(num, sizeof num, "%.17g", v->number));
		return 1;
	case INFS_JSON_STRING:
		require(v->string && v->string[v->len] == 0);
		put_string(o, v->string, v->len);
		return 1;
	case INFS_JSON_ARRAY:
	case INFS_JSON_OBJECT:
		put(o, v->type == INFS_JSON_ARRAY ? "[" : "{", 1);
		for (size_t i = 0; i < v->len; i++) {
			if (i)
				put(o, ",", 1);
			if (v->type == INFS_JSON_OBJECT) {
				require(v->keys[i] != NULL);
				put_string(o, v->keys[i], strlen(v->keys[i]));
				put(o, ":", 1);
			}
			if (!write_value(o, &v->items[i]))
				return 0;
		}
		put(o, v->type == INFS_JSON_ARRAY ? "]" : "}", 1);
		return 1;
	}
	abort();
}

static int same(const infs__json *a, const infs__json *b)
{
	if (a->type != b->type)
		return 0;
	switch (a->type) {
	case INFS_JSON_NULL:
		return 1;
	case INFS_JSON_BOOL:
		return a->boolean == b->boolean;
	case INFS_JSON_NUMBER:
		return a->number == b->number;
	case INFS_JSON_STRING:
		return a->len == b->len && !memcmp(a->string, b->string, a->len);
	case INFS_JSON_ARRAY:
	case INFS_JSON_OBJECT:
		if (a->len != b->len)
			return 0;
		for (size_t i = 0; i < a->len; i++)
			if ((a->type == INFS_JSON_OBJECT && strcmp(a->keys[i], b->keys[i])) || !same(&a->items[i], &b->items[i]))
				return 0;
		return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	infs__json *j = NULL;
	int rc = infs__json_parse(&j, (const char *)data, size);
	if (rc != INFS_OK) {
		require((rc == INFS_EFORMAT || rc == INFS_ENOMEM) && j == NULL);
		return 0;
	}
	out o = { 0 };
	if (write_value(&o, j)) {
		infs__json *again = NULL;
		require(infs__json_parse(&again, o.p, o.n) == INFS_OK);
		require(same(j, again));
		infs__json_free(again);
	}
	free(o.p);
	infs__json_free(j);
	return 0;
}

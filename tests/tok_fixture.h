/* Helpers for the tokenizer tests: JSON fixtures, hex strings, token lists. */
#ifndef INFS_TEST_TOK_FIXTURE_H
#define INFS_TEST_TOK_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "inferscale/tokenizer.h"
#include "util/json.h"

/* The parsed JSON file dir/name; exits when it cannot be read. */
static inline infs__json *load_fixture(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *text = malloc((size_t)size + 1);
	if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	infs__json *j = NULL;
	if (infs__json_parse(&j, text, (size_t)size) != INFS_OK) {
		fprintf(stderr, "%s: %s\n", path, infs_error_last());
		exit(1);
	}
	free(text);
	return j;
}

/* The messages (at most cap) and flags of case c of a chat fixture; the
 * strings point into c. */
static inline size_t chat_case(infs_chat_message *m, size_t cap, unsigned *flags, const infs__json *c)
{
	const infs__json *msgs = infs__json_get(c, "messages");
	size_t n = msgs->len < cap ? msgs->len : cap;
	for (size_t k = 0; k < n; k++) {
		m[k].role = infs__json_str(infs__json_get(&msgs->items[k], "role"), "");
		m[k].content = infs__json_str(infs__json_get(&msgs->items[k], "content"), "");
	}
	*flags = infs__json_get(c, "add_generation_prompt")->boolean ? INFS_CHAT_ADD_GENERATION_PROMPT : 0;
	return n;
}

/* Decodes the hex string of v into a malloc'd buffer (NUL-terminated). */
static inline char *unhex(const infs__json *v, size_t *len)
{
	const char *h = infs__json_str(v, "");
	size_t n = strlen(h) / 2;
	char *out = malloc(n + 1);
	for (size_t i = 0; i < n; i++) {
		unsigned b;
		sscanf(h + 2 * i, "%2x", &b);
		out[i] = (char)b;
	}
	out[n] = '\0';
	*len = n;
	return out;
}

/* 1 when got[0..n) equals the JSON array of numbers want. */
static inline int ids_equal(const infs_token *got, size_t n, const infs__json *want)
{
	if (!want || want->type != INFS_JSON_ARRAY || want->len != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (got[i] != (infs_token)want->items[i].number)
			return 0;
	return 1;
}

static inline void print_ids(const char *what, const infs_token *ids, size_t n)
{
	fprintf(stderr, "  %s:", what);
	for (size_t i = 0; i < n && i < 60; i++)
		fprintf(stderr, " %d", ids[i]);
	fprintf(stderr, "%s\n", n > 60 ? " ..." : "");
}

static inline void print_json_ids(const char *what, const infs__json *want)
{
	fprintf(stderr, "  %s:", what);
	for (size_t i = 0; want && i < want->len && i < 60; i++)
		fprintf(stderr, " %d", (int)want->items[i].number);
	fprintf(stderr, "\n");
}

/* Tokenizes and compares with want; reports the case on a mismatch. */
static inline int check_tokens(const infs_tokenizer *tok, const char *text, size_t len, unsigned flags,
                        const infs__json *want, const char *name)
{
	size_t n = 0;
	int rc = infs_tokenize(tok, text, len, flags, NULL, 0, &n);
	infs_token *ids = malloc((n ? n : 1) * sizeof *ids);
	size_t n2 = 0;
	if (rc == INFS_OK)
		rc = infs_tokenize(tok, text, len, flags, ids, n, &n2);
	int ok = rc == INFS_OK && n2 == n && ids_equal(ids, n, want);
	if (!ok) {
		fprintf(stderr, "%s (flags %u): rc %d %s\n", name, flags, rc, rc ? infs_error_last() : "");
		print_ids("got ", ids, n2);
		print_json_ids("want", want);
		check_failures++;
	}
	free(ids);
	return ok;
}

#endif

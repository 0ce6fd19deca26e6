/* Reads the golden files of tests/fixtures/model/ (format in golden.py):
 * named arrays of f32 or i32 that transformers computed. */
#ifndef INFS_TEST_GOLDEN_H
#define INFS_TEST_GOLDEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct golden {
	unsigned char *buf;
	size_t len;
} golden;

static int golden_load(golden *g, const char *path)
{
	FILE *f = fopen(path, "rb");
	g->buf = NULL;
	g->len = 0;
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	g->buf = malloc(n > 0 ? (size_t)n : 1);
	if (!g->buf || n < 8 || fread(g->buf, 1, (size_t)n, f) != (size_t)n || memcmp(g->buf, "INFSGLD1", 8)) {
		fprintf(stderr, "%s is not a golden file\n", path);
		fclose(f);
		free(g->buf);
		g->buf = NULL;
		return -1;
	}
	fclose(f);
	g->len = (size_t)n;
	return 0;
}

static void golden_free(golden *g)
{
	free(g->buf);
}

/* The values of section name (NULL when absent), its count in *n. The data
 * is 4-byte values; copy out with memcpy-safe access through the pointer. */
static const void *golden_get(const golden *g, const char *name, uint32_t *n)
{
	size_t off = 8;
	while (off + 24 <= g->len) {
		uint32_t cnt;
		memcpy(&cnt, g->buf + off + 20, 4);
		if (strncmp((const char *)g->buf + off, name, 16) == 0) {
			*n = cnt;
			return g->buf + off + 24;
		}
		off += 24 + (size_t)cnt * 4;
	}
	*n = 0;
	return NULL;
}

/* Copies section name into a new array (f32 or i32 alike). */
static void *golden_copy(const golden *g, const char *name, uint32_t *n)
{
	const void *p = golden_get(g, name, n);
	if (!p)
		return NULL;
	void *out = malloc((size_t)*n * 4 + 4);
	if (out)
		memcpy(out, p, (size_t)*n * 4);
	return out;
}

#endif

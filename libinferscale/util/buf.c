#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

#include "inferscale/common.h"

int infs__buf_put(infs__buf *b, const void *s, size_t n)
{
	if (b->failed)
		return INFS_ENOMEM;
	if (n >= SIZE_MAX - b->n) {
		b->failed = 1;
		return INFS_ENOMEM;
	}
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap = cap > SIZE_MAX / 2 ? b->n + n + 1 : 2 * cap;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->failed = 1;
			return INFS_ENOMEM;
		}
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return INFS_OK;
}

int infs__buf_puts(infs__buf *b, const char *s)
{
	return infs__buf_put(b, s, strlen(s));
}

void infs__buf_free(infs__buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

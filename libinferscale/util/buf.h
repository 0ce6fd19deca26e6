/* A growable byte buffer: appends double the room as needed and keep a NUL
 * after the bytes, so that a buffer of text is a C string. A failed growth
 * is sticky: later appends do nothing, and the owner reports INFS_ENOMEM
 * once at the end (or at once, from the return value). */
#ifndef INFS_BUF_H
#define INFS_BUF_H

#include <stddef.h>

typedef struct infs__buf {
	char *p; /* n bytes and a NUL; NULL until the first append */
	size_t n, cap;
	int failed;
} infs__buf;

/* Appends s[0..n). INFS_OK, or INFS_ENOMEM (no message set) when the
 * buffer cannot grow or failed before. */
int infs__buf_put(infs__buf *b, const void *s, size_t n);
/* Appends the C string s. */
int infs__buf_puts(infs__buf *b, const char *s);
/* Releases the bytes; b is empty again. */
void infs__buf_free(infs__buf *b);

#endif

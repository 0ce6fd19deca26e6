/* Reads a whole file, for the tests (the library does not use it). */
#ifndef INFS_READ_FILE_H
#define INFS_READ_FILE_H

#include <stdio.h>
#include <stdlib.h>

/* The file's bytes, NUL-terminated, with their count in *len; NULL when the
 * file cannot be opened or read (then *len is 0). The caller frees. */
static inline char *read_file(const char *path, size_t *len)
{
	*len = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
	if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (!buf)
		return NULL;
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

#endif

#include "file_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "say.h"

int file_text_read(char **out, size_t *n, const char *path, char *err, size_t n_err)
{
	*out = NULL;
	*n = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return say(err, n_err, "%s: %s", path, strerror(errno));
	size_t cap = 0;
	int rc = 0;
	for (;;) {
		if (*n == cap) {
			char *p = realloc(*out, cap = cap ? 2 * cap : 1 << 16);
			if (!p) {
				rc = say(err, n_err, "out of memory reading %s", path);
				break;
			}
			*out = p;
		}
		size_t got = fread(*out + *n, 1, cap - *n, f);
		*n += got;
		if (!got) {
			if (ferror(f))
				rc = say(err, n_err, "%s: %s", path, strerror(errno));
			break;
		}
	}
	fclose(f);
	return rc;
}

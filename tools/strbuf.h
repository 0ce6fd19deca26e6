/* A growing string, and JSON strings written into it: the tool's JSON
 * output and the metadata it builds. Out of memory ends the process with a
 * message. */
#ifndef STRBUF_H
#define STRBUF_H

#include <stddef.h>

typedef struct str {
	char *p; /* NUL-terminated; NULL while empty; free it */
	size_t n, cap;
} str;

void str_put(str *s, const char *t, size_t n);
void str_puts(str *s, const char *t);
/* t as a JSON string, quoted and escaped. */
void str_json(str *s, const char *t);

#endif

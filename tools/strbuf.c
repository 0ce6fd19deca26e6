#include "strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void str_put(str *s, const char *t, size_t n)
{
	if (s->n + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 128;
		while (cap < s->n + n + 1)
			cap *= 2;
		char *p = realloc(s->p, cap);
		if (!p) {
			fputs("inferscale: out of memory\n", stderr);
			exit(1);
		}
		s->p = p;
		s->cap = cap;
	}
	memcpy(s->p + s->n, t, n);
	s->n += n;
	s->p[s->n] = '\0';
}

void str_puts(str *s, const char *t)
{
	str_put(s, t, strlen(t));
}

void str_json(str *s, const char *t)
{
	str_puts(s, "\"");
	for (const unsigned char *c = (const unsigned char *)t; *c; c++) {
		char buf[8];
		if (*c == '"' || *c == '\\') {
			buf[0] = '\\';
			buf[1] = (char)*c;
			str_put(s, buf, 2);
		} else if (*c < 0x20) {
			snprintf(buf, sizeof buf, "\\u%04x", *c);
			str_puts(s, buf);
		} else {
			str_put(s, (const char *)c, 1);
		}
	}
	str_puts(s, "\"");
}

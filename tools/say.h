/* The tool's readers report one line into the caller's buffer: say()
 * formats it there and returns -1, so that a check fails in one statement. */
#ifndef SAY_H
#define SAY_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline int say(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int say(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return -1;
}

#endif

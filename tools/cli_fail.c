#include "cli_fail.h"

#include <stdarg.h>
#include <stdio.h>

#include "inferscale/inferscale.h"

int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("inferscale: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 1;
}

int lib_fail(const char *what)
{
	return fail("%s: %s", what, infs_error_last());
}

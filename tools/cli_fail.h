/* The tool's errors: one line on stderr, "inferscale: " first. */
#ifndef CLI_FAIL_H
#define CLI_FAIL_H

/* Prints the message and returns 1, so that a check fails in one
 * statement (a usage error adds 1 for status 2). */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* fail("WHAT: the library's last error"). */
int lib_fail(const char *what);

#endif

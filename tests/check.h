/* A minimal assertion harness: every CHECK that fails is reported with its
 * file, line and the library's last error, and the test exits non-zero. */
#ifndef INFS_TEST_CHECK_H
#define INFS_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "inferscale/inferscale.h"

static int check_failures;

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			check_failures++;                                              \
		}                                                                      \
	} while (0)

#define CHECK_OK(expr)                                                                  \
	do {                                                                            \
		int check_rc_ = (expr);                                                 \
		if (check_rc_ != INFS_OK) {                                             \
			fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #expr, \
			        check_rc_, infs_error_last());                           \
			check_failures++;                                               \
		}                                                                       \
	} while (0)

/* expr must fail with code and leave a non-empty message. */
#define CHECK_ERR(expr, code)                                                           \
	do {                                                                            \
		int check_rc_ = (expr);                                                 \
		if (check_rc_ != (code)) {                                              \
			fprintf(stderr, "%s:%d: %s returned %d, expected %d (%s): %s\n", __FILE__, \
			        __LINE__, #expr, check_rc_, (int)(code), #code, infs_error_last()); \
			check_failures++;                                               \
		} else if (infs_error_last()[0] == '\0') {                              \
			fprintf(stderr, "%s:%d: %s gave no message\n", __FILE__, __LINE__, #expr); \
			check_failures++;                                               \
		}                                                                       \
	} while (0)

#define CHECK_DONE()                                                                  \
	do {                                                                          \
		if (check_failures)                                                   \
			fprintf(stderr, "%d check(s) failed\n", check_failures);      \
		return check_failures ? 1 : 0;                                        \
	} while (0)

#endif

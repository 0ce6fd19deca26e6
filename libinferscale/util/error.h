/* Per-thread error state behind infs_error_last(). */
#ifndef INFS_ERROR_H
#define INFS_ERROR_H

#include "inferscale/common.h"

/* Records code and a printf-style message for the calling thread and returns
 * code, so that entry points can `return infs__error(INFS_EINVAL, ...)`. */
int infs__error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes the calling thread's current message with more context and
 * returns code. */
int infs__error_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

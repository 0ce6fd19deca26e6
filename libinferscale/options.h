/* The *_init functions of the public option structs, and how entry points
 * take them. */
#ifndef INFS_OPTIONS_H
#define INFS_OPTIONS_H

#include <string.h>

#include "error.h"

/* Defines `int NAME(TYPE *opts, unsigned version)`: refuses a NULL struct or
 * a version this library does not know, else fills the defaults of INIT. */
#define INFS__DEFINE_INIT(NAME, TYPE, VERSION, INIT)                                          \
	int NAME(TYPE *opts, unsigned version)                                                \
	{                                                                                     \
		if (!opts)                                                                    \
			return infs__error(INFS_EINVAL, #NAME ": the struct is NULL");        \
		if (version != (VERSION))                                                     \
			return infs__error(INFS_EINVAL,                                       \
			                   #NAME ": unknown version %u (this library knows %u)", \
			                   version, (unsigned)(VERSION));                     \
		TYPE init_ = INIT;                                                            \
		*opts = init_;                                                                \
		return INFS_OK;                                                               \
	}

/* Copies the caller's options (opts, of size bytes) over the defaults in o,
 * or leaves those when opts is NULL; refuses a version this library does
 * not know. Every option struct opens with its unsigned version. */
static inline int infs__options_take(void *o, const void *opts, size_t size, unsigned version, const char *fn)
{
	if (!opts)
		return INFS_OK;
	const unsigned got = *(const unsigned *)opts;
	if (got != version)
		return infs__error(INFS_EINVAL, "%s: unknown options version %u (this library knows %u)", fn, got,
		                   version);
	memcpy(o, opts, size);
	return INFS_OK;
}

/* infs__options_take for a struct O and a pointer OPTS to the same type
 * (the comparison, never evaluated, makes the compiler check that). */
#define INFS__OPTIONS_TAKE(O, OPTS, VERSION, FN) \
	infs__options_take(&(O), (OPTS), sizeof(O) + 0 * sizeof(&(O) == (OPTS)), (VERSION), (FN))

#endif

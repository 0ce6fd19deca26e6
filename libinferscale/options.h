/* The *_init functions of the public option structs. */
#ifndef INFS_OPTIONS_H
#define INFS_OPTIONS_H

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

#endif

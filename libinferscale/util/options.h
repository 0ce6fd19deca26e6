/* One compatibility rule for every public struct that opens with `unsigned
 * version` (options, inputs, and outputs the caller versions): the library
 * accepts any version from 1 to the one it knows, reads (or, for an output,
 * writes) only the bytes of the caller's version, and gives the fields past
 * them their defaults. */
#ifndef INFS_OPTIONS_H
#define INFS_OPTIONS_H

#include <assert.h>
#include <string.h>

#include "util/error.h"
#include "inferscale/inferscale.h"

/* The byte size of each version v of a struct, sizes[v] (sizes[0] unused),
 * defined in options.c. The last entry is the current version, the header's
 * INFS_*_VERSION, and is sizeof the struct. A new version appends fields to
 * the struct, bumps the header's number, and in options.c turns the last
 * entry into the offsetof the first new field and appends sizeof:
 *     const size_t infs__sizes_store_stats[] = {
 *             [1] = offsetof(infs_store_stats, first_v2_field),
 *             [2] = sizeof(infs_store_stats),
 *     };
 * A struct that holds another by value (infs_ask_options.generate) needs a
 * new version of its own when the one it holds grows. */
extern const size_t infs__sizes_embedder_options[INFS_EMBEDDER_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_embed_options[INFS_EMBED_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_fact_input[INFS_FACT_INPUT_VERSION + 1];
extern const size_t infs__sizes_encode_options[INFS_ENCODE_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_engine_options[INFS_ENGINE_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_generate_options[INFS_GENERATE_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_ask_options[INFS_ASK_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_geometry[INFS_GEOMETRY_VERSION + 1];
extern const size_t infs__sizes_kv_layout[INFS_KV_LAYOUT_VERSION + 1];
extern const size_t infs__sizes_inject_options[INFS_INJECT_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_injector_options[INFS_INJECTOR_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_model_options[INFS_MODEL_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_model_info[INFS_MODEL_INFO_VERSION + 1];
extern const size_t infs__sizes_forward_options[INFS_FORWARD_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_device_forward_options[INFS_DEVICE_FORWARD_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_retrieve_options[INFS_RETRIEVE_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_searcher_options[INFS_SEARCHER_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_store_options[INFS_STORE_OPTIONS_VERSION + 1];
extern const size_t infs__sizes_store_stats[INFS_STORE_STATS_VERSION + 1];
extern const size_t infs__sizes_fact[INFS_FACT_VERSION + 1];

/* The current version of a struct whose size table is SIZES. */
#define INFS__CURRENT(SIZES) ((unsigned)(sizeof(SIZES) / sizeof((SIZES)[0]) - 1))

/* Sets *size to the bytes of the given version of a struct (table sizes,
 * current version current, of sizeof full), or refuses version 0 and
 * versions above current, naming fn and what. */
static inline int infs__version_size(size_t *size, unsigned version, const size_t *sizes, unsigned current,
                                     size_t full, const char *fn, const char *what)
{
	assert(sizes[current] == full);
	(void)full;
	if (version < 1 || version > current)
		return infs__error(INFS_EINVAL, "%s: unknown %s version %u (this library knows 1 to %u)", fn, what,
		                   version, current);
	*size = sizes[version];
	return INFS_OK;
}

/* Copies the caller's struct in, as far as its version reaches, over o,
 * which holds the defaults; a NULL in leaves them all. */
static inline int infs__struct_take(void *o, const void *in, const size_t *sizes, unsigned current, size_t full,
                                    const char *fn, const char *what)
{
	if (!in)
		return INFS_OK;
	size_t size = 0;
	int rc = infs__version_size(&size, *(const unsigned *)in, sizes, current, full, fn, what);
	if (rc == INFS_OK)
		memcpy(o, in, size);
	return rc;
}

/* infs__struct_take for a struct O and a pointer IN to the same type (the
 * comparison, never evaluated, makes the compiler check that). */
#define INFS__TAKE(O, IN, SIZES, FN, WHAT)                                                                 \
	infs__struct_take(&(O), (IN), (SIZES), INFS__CURRENT(SIZES), sizeof(O) + 0 * sizeof(&(O) == (IN)), \
	                  (FN), (WHAT))

/* Sets *SIZE to the bytes of the version of the struct *OUT, which the
 * caller set and the library fills: it writes no further. */
#define INFS__OUT_SIZE(SIZE, OUT, SIZES, FN) \
	infs__version_size((SIZE), (OUT)->version, (SIZES), INFS__CURRENT(SIZES), sizeof *(OUT), (FN), "struct")

/* Defines `int NAME(TYPE *opts, unsigned version)`: refuses a NULL struct or
 * a version this library does not know, else fills that version's fields,
 * and no more, with the defaults of INIT. */
#define INFS__DEFINE_INIT(NAME, TYPE, SIZES, INIT)                                                           \
	int NAME(TYPE *opts, unsigned version)                                                               \
	{                                                                                                    \
		if (!opts)                                                                                   \
			return infs__error(INFS_EINVAL, #NAME ": the struct is NULL");                       \
		size_t size_ = 0;                                                                            \
		int rc_ = infs__version_size(&size_, version, (SIZES), INFS__CURRENT(SIZES), sizeof(TYPE), \
		                             #NAME, "struct");                                               \
		if (rc_)                                                                                     \
			return rc_;                                                                          \
		TYPE init_ = INIT;                                                                           \
		init_.version = version;                                                                     \
		memcpy(opts, &init_, size_);                                                                 \
		return INFS_OK;                                                                              \
	}

#endif

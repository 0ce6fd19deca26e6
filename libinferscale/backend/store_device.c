/* Where the store and the device backend meet: the store knows nothing of
 * its device copy, and the device copy only reads the store, so opening a
 * store with one is composed here, above both. */
#include "backend/backend.h"

int infs_store_open(infs_store **out, const char *path, const infs_store_options *opts)
{
	return infs__store_open(out, path, opts, infs__cuda ? infs__cuda->attach : NULL, "no CUDA support");
}

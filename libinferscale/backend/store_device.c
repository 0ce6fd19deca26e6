/* Where the store meets its device backend and its remote tier: the store
 * knows nothing of either, and they only use the store through its
 * extension slots, so opening a store with them is composed here, above
 * all three. */
#include "backend/backend.h"
#include "remote/remote.h"

int infs_store_open(infs_store **out, const char *path, const infs_store_options *opts)
{
	infs__remote *r = NULL;
	infs_store_options local;
	if (out)
		*out = NULL;
	/* The server is reached before the file is opened or created: an
	 * unreachable one leaves nothing behind. */
	int rc = opts && out && path ? infs__remote_prepare(&r, &local, path, opts) : INFS_OK;
	if (rc)
		return rc;
	rc = infs__store_open(out, path, r ? &local : opts, infs__cuda ? infs__cuda->attach : NULL, "no CUDA support");
	if (rc) {
		infs__remote_free(r);
		return rc;
	}
	if (r && (rc = infs__remote_attach(r, *out))) {
		infs_store_close(*out);
		*out = NULL;
	}
	return rc;
}

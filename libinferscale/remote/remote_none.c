/* The remote tier's absence: a build without hiredis refuses a remote. */
#include "util/error.h"
#include "util/options.h"
#include "remote/remote.h"

int infs__remote_prepare(infs__remote **out, infs_store_options *local, const char *path,
                         const infs_store_options *opts)
{
	(void)path;
	*out = NULL;
	infs_store_options init = INFS_STORE_OPTIONS_INIT;
	*local = init;
	int rc = INFS__TAKE(*local, opts, infs__sizes_store_options, "infs_store_open", "options");
	if (rc || !local->remote)
		return rc;
	return infs__error(INFS_EUNSUPPORTED,
	                   "infs_store_open: options.remote is \"%s\", but this library was built without the remote "
	                   "tier (install libhiredis-dev and rebuild with -Dremote=enabled)",
	                   local->remote);
}

int infs__remote_attach(infs__remote *r, infs_store *s)
{
	(void)r;
	(void)s;
	return INFS_OK;
}

void infs__remote_free(infs__remote *r)
{
	(void)r;
}

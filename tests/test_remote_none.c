/* A build without the remote tier refuses a remote, clearly, before it
 * opens or creates anything, and still opens stores without one. */
#include <string.h>

#include "test_store_util.h"

int main(void)
{
	infs_geometry geo = small_geometry(INFS_DTYPE_F16);
	char path[600];
	scratch_make("remote-none", path, sizeof path, "s.infs");
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = &geo;
	o.identity = TEST_IDENTITY;
	o.remote = "redis://127.0.0.1:6379";
	infs_store *s = NULL;
	CHECK_ERR(infs_store_open(&s, path, &o), INFS_EUNSUPPORTED);
	CHECK(strstr(infs_error_last(), "without the remote tier") && strstr(infs_error_last(), "-Dremote"));
	CHECK(s == NULL && access(path, F_OK) != 0);
	o.remote = NULL;
	CHECK_OK(infs_store_open(&s, path, &o));
	infs_store_close(s);
	scratch_cleanup();
	return check_failures ? 1 : 0;
}

/* Compiled as strict C99: the public headers must not need C11. */
#include <inferscale/inferscale.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	infs_geometry g = INFS_GEOMETRY_INIT;
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	infs_fact f = INFS_FACT_INIT;
	infs_retrieve_options ro = INFS_RETRIEVE_OPTIONS_INIT;
	infs_kv_layout kv = INFS_KV_LAYOUT_INIT;
	infs_inject_options io = INFS_INJECT_OPTIONS_INIT;
	infs_injector_options jo = INFS_INJECTOR_OPTIONS_INIT;
	(void)f;
	if (g.version != INFS_GEOMETRY_VERSION || so.version != INFS_STORE_OPTIONS_VERSION ||
	    ro.version != INFS_RETRIEVE_OPTIONS_VERSION || kv.version != INFS_KV_LAYOUT_VERSION ||
	    io.version != INFS_INJECT_OPTIONS_VERSION || jo.version != INFS_INJECTOR_OPTIONS_VERSION)
		return 1;
	/* The header's version is the library's. */
	if (infs_version_number() != INFS_VERSION_NUMBER ||
	    strcmp(infs_version_string(), INFS_VERSION_STRING) != 0) {
		fprintf(stderr, "header %s, library %s\n", INFS_VERSION_STRING, infs_version_string());
		return 1;
	}
	return 0;
}

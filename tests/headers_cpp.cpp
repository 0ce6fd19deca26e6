// Compiled as strict C++11: the public headers must be usable from C++.
#include <inferscale/inferscale.h>
#include <cstring>

int main()
{
	infs_geometry g = INFS_GEOMETRY_INIT;
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	infs_fact f = INFS_FACT_INIT;
	infs_retrieve_options ro = INFS_RETRIEVE_OPTIONS_INIT;
	infs_kv_layout kv = INFS_KV_LAYOUT_INIT;
	infs_inject_options io = INFS_INJECT_OPTIONS_INIT;
	(void)so; (void)f; (void)ro; (void)kv; (void)io;
	if (infs_geometry_init(&g, INFS_GEOMETRY_VERSION) != INFS_OK)
		return 1;
	if (std::strcmp(infs_strerror(INFS_EINVAL), "invalid argument") != 0)
		return 1;
	return infs_version_number() == INFS_VERSION_NUMBER ? 0 : 1;
}

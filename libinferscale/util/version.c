#include <stdlib.h>

#include "inferscale/common.h"

unsigned infs_version_number(void)
{
	return INFS_VERSION_NUMBER;
}

const char *infs_version_string(void)
{
	return INFS_VERSION_STRING;
}

void infs_free(void *ptr)
{
	free(ptr);
}

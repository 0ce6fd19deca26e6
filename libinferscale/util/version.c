#include <stdlib.h>

#include "cuda/device.h"
#include "inferscale/common.h"

unsigned infs_version_number(void)
{
	return INFS_VERSION_NUMBER;
}

const char *infs_version_string(void)
{
	return INFS_VERSION_STRING;
}

unsigned infs_features(void)
{
	unsigned f = 0;
	if (infs__cuda)
		f |= INFS_FEATURE_CUDA;
#ifdef INFS_HAVE_FAISS
	f |= INFS_FEATURE_FAISS;
#endif
#ifdef INFS_HAVE_BLAS
	f |= INFS_FEATURE_BLAS;
#endif
	return f;
}

void infs_free(void *ptr)
{
	free(ptr);
}

/* What this build has: CUDA when the backend table is there, FAISS and BLAS
 * when their libraries were found (the INFS_HAVE_* flags of their folders). */
#include "backend/backend.h"
#include "inferscale/common.h"

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

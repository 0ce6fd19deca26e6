/* The device backend as the rest of the library reaches it: one table of
 * the CUDA module's entry points, or none. Which it is is decided by the
 * build alone: device.c defines infs__cuda when CUDA is built in,
 * device_none.c defines it NULL otherwise. */
#ifndef INFS_DEVICE_H
#define INFS_DEVICE_H

#include "inferscale/retrieve.h"
#include "store/store.h"

struct infs__inject_plan;

typedef struct infs__device_backend {
	/* Builds the device copy of every live record of a store opened with
	 * options.device >= 0 and installs its hooks in the INFS_EXT_DEVICE
	 * slot (store.h). Sets the error message on failure. */
	int (*attach)(infs_store *s);
	/* infs__retrieve_device (retrieve.h): a search of the device copy,
	 * under the store's read lock. */
	int (*retrieve)(infs_hit *out, size_t *out_n, infs_store *s, const char *ns, const float *queries,
	                size_t n_queries, size_t k, infs_metric metric);
	/* infs__inject_device (inject.h): an injection into a device cache. */
	int (*inject)(const struct infs__inject_plan *plan);
} infs__device_backend;

/* The CUDA backend, or NULL in a build without CUDA. */
extern const infs__device_backend *const infs__cuda;

#endif

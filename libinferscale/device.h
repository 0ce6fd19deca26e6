/* The store's hooks into its CUDA device copy (built with INFS_HAVE_CUDA). */
#ifndef INFS_DEVICE_H
#define INFS_DEVICE_H

#include "store.h"

/* Weak, so that a build with the CUDA kernels but without the device copy
 * still links: the store then finds infs__device_attach NULL and refuses
 * options.device >= 0. The hooks only run once attach has set the slot. */
#define INFS__DEVICE_HOOK __attribute__((weak))

/* Called by infs_store_open when options.device >= 0: builds the device copy
 * of every live record and sets the INFS_EXT_DEVICE slot. Sets the error
 * message on failure. */
INFS__DEVICE_HOOK int infs__device_attach(infs_store *s);

/* Called under the store's write lock after a record is added or removed,
 * while the INFS_EXT_DEVICE slot is set. */
INFS__DEVICE_HOOK void infs__device_on_put(infs_store *s, const infs__record *r);
INFS__DEVICE_HOOK void infs__device_on_delete(infs_store *s, uint64_t id);

/* Device memory held for the store, for infs_store_stats (under the store's
 * read lock, while the INFS_EXT_DEVICE slot is set). */
INFS__DEVICE_HOOK uint64_t infs__device_bytes(infs_store *s);

#endif

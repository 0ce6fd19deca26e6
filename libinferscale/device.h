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

/* Called under the store's write lock while the INFS_EXT_DEVICE slot is
 * set, so that the store and its device copy change together.
 *
 * on_put runs before the record is written, with r pointing at the
 * caller's data (valid only during the call: copy, do not keep). When it
 * fails (the device budget: INFS_EBUDGET, or a CUDA error) it has set the
 * error message and left the device copy as it was, and the put fails with
 * nothing written. When the write fails after on_put succeeded, the store
 * calls on_delete(id) to take the fact back out.
 *
 * on_delete runs after a delete or namespace drop is written, once per id. */
INFS__DEVICE_HOOK int infs__device_on_put(infs_store *s, const char *ns, const infs__record *r);
INFS__DEVICE_HOOK void infs__device_on_delete(infs_store *s, uint64_t id);

/* Device memory held for the store, for infs_store_stats (under the store's
 * read lock, while the INFS_EXT_DEVICE slot is set). */
INFS__DEVICE_HOOK uint64_t infs__device_bytes(infs_store *s);

#endif

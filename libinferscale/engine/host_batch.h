/* A host engine's block pool for continuous batching (host_batch.c). */
#ifndef INFS_HOST_BATCH_H
#define INFS_HOST_BATCH_H

#include "engine/engine_device.h"

/* The steps of engine_batch.c over a block pool in host memory, on the
 * CPU: the table a host engine with max_seqs > 1 schedules through. */
extern const infs__dengine_ops infs__host_batch_ops;

#endif

/* Internal helpers for infs_geometry. */
#ifndef INFS_GEOMETRY_INTERNAL_H
#define INFS_GEOMETRY_INTERNAL_H

#include "inferscale/geometry.h"

/* Compares the fields that change stored KV. Returns NULL when a and b
 * agree, else the name of the first field that differs. */
const char *infs__geometry_diff(const infs_geometry *a, const infs_geometry *b);

/* Copies the fields of src known to its version into a full-size struct,
 * taking defaults for the rest. */
int infs__geometry_copy(infs_geometry *dst, const infs_geometry *src);

#endif

/* Rows of device tables rewritten: one pointer per row set in place
 * (kernels/tier.cu) for the tiers' moves, and rows gathered into a new
 * table (kernels/retrieve_exact.cu) for compaction and recovery.
 * Conventions: kernels.h. */
#ifndef INFS_ROWS_KERNELS_H
#define INFS_ROWS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A tier move of the store's device copy (kernels/tier.cu): kv[rows[i]] =
 * vals[i] for i < n, each pointer written with one 8-byte store, so that a
 * resolve kernel running meanwhile reads the old pointer or the new one,
 * never a mix. rows and vals in device memory. */
cudaError_t infs_k_set_rows(const char **kv, const uint32_t *rows, const char *const *vals, uint32_t n,
                            cudaStream_t stream);

/* dst row i = src row keep[i], for n rows of row_bytes bytes. */
cudaError_t infs_k_gather_rows(void *dst, const void *src, size_t row_bytes, const uint32_t *keep, uint32_t n,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif

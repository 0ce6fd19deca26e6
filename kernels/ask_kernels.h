/* One question's device path through a device engine (kernels/ask.cu):
 * what joins retrieval, injection and the question's prefill on the device
 * so that the host never waits between them. Conventions: kernels.h. */
#ifndef INFS_ASK_KERNELS_H
#define INFS_ASK_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The injection order of one query's hits: ids[i] = the id of hit
 * *count - 1 - i for i < min(*count, k), the best hit last (nearest the
 * question). A hit is hit_bytes bytes, its id the uint64_t at its start
 * (infs_hit). */
cudaError_t infs_k_ask_order(uint64_t *ids, const void *hits, size_t hit_bytes, const uint32_t *count, uint32_t k,
                             cudaStream_t stream);

/* A question's step after its injection: *n_past = *next_pos (the
 * injection's end), and with calib set, calib[0..4) = by_count[c] (c =
 * min(*count, k), four words a count: lo, on, inv_temp, log2 scale) with
 * its hi set to *next_pos where the entry is on, else lo = hi = 0 (no
 * calibration). */
cudaError_t infs_k_ask_past(int32_t *n_past, int32_t *calib, const uint32_t *next_pos, const uint32_t *count,
                            const int32_t *by_count, uint32_t k, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif

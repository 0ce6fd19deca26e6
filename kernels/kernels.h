/* What the CUDA launchers of every op family share, as C sees them: the
 * element types. The launchers are declared by family: inject_kernels.h
 * (Chunked RoPE into paged caches), retrieve_kernels.h (scores and top-k),
 * rows_kernels.h (rows of device tables rewritten), ask_kernels.h (a
 * question's device path through an engine), model_kernels.h (the
 * model's forward pass), embed_kernels.h (the embedder). Every launcher
 * queues its work on the given stream and returns the launch's
 * cudaError_t; arguments have been validated by the caller
 * (libinferscale/cuda/), so a launcher trusts every index it is given.
 * All pointers are device pointers unless said. */
#ifndef INFS_KERNELS_H
#define INFS_KERNELS_H

/* Element types, numbered as infs_dtype. */
enum { INFS_K_F32 = 0, INFS_K_F16 = 1, INFS_K_BF16 = 2, INFS_K_FP8_E4M3 = 3 /* sources only */ };

#endif

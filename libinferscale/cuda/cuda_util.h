/* CUDA failures as inferscale errors, and the calling thread's device
 * (cuda_util.c): what every file of the CUDA module calls. */
#ifndef INFS_CUDA_UTIL_H
#define INFS_CUDA_UTIL_H

#include <cuda_runtime_api.h>

/* Sets the calling thread's message for a failed CUDA call and returns
 * INFS_EDEVICE (INFS_EBUDGET when the device is out of memory). */
int infs__cuda_error(cudaError_t err, const char *fn, const char *what);

/* Makes dev the calling thread's current device, remembering the previous
 * one in *prev for infs__device_restore. */
int infs__device_enter(int *prev, int dev, const char *fn);
void infs__device_restore(int prev);

#endif

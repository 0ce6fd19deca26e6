/* CUDA failures as inferscale errors, and the calling thread's device
 * selected for a call and given back after it. */
#include "cuda/cuda_util.h"

#include "util/error.h"

int infs__cuda_error(cudaError_t err, const char *fn, const char *what)
{
	cudaGetLastError(); /* clear a sticky launch error for the next call */
	return infs__error(err == cudaErrorMemoryAllocation ? INFS_EBUDGET : INFS_EDEVICE, "%s: %s: CUDA error %d: %s",
	                   fn, what, (int)err, cudaGetErrorString(err));
}

int infs__device_enter(int *prev, int dev, const char *fn)
{
	cudaError_t err = cudaGetDevice(prev);
	if (err == cudaSuccess)
		err = cudaSetDevice(dev);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "selecting the device");
}

void infs__device_restore(int prev)
{
	cudaSetDevice(prev);
}

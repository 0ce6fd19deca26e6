/* For the GPU tests and benchmarks (the library reports CUDA errors as
 * INFS_EDEVICE instead): stops the program at the first failing CUDA call. */
#ifndef INFS_CUDA_OK_H
#define INFS_CUDA_OK_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_OK(expr)                                                                         \
	do {                                                                                  \
		cudaError_t cuda_err_ = (expr);                                               \
		if (cuda_err_ != cudaSuccess) {                                               \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,          \
			        cudaGetErrorString(cuda_err_));                               \
			exit(1);                                                              \
		}                                                                             \
	} while (0)

#endif

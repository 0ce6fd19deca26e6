/* A build without CUDA: no device backend. */
#include "cuda/device.h"

const infs__device_backend *const infs__cuda = NULL;

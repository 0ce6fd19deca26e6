/* A build without CUDA: no device backend. */
#include "backend/backend.h"

const infs__device_backend *const infs__cuda = NULL;

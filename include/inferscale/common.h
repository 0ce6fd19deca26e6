/* inferscale — status codes, errors, versions and element types shared by the
 * whole ABI. Include <inferscale/inferscale.h> rather than this file. */
#ifndef INFERSCALE_COMMON_H
#define INFERSCALE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "inferscale/version.h"

#if defined(_WIN32)
#  define INFS_API __declspec(dllexport)
#elif defined(__GNUC__)
#  define INFS_API __attribute__((visibility("default")))
#else
#  define INFS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Every function that can fail returns one of these as an int.
 * 0 is success, errors are negative. Codes are never renumbered; new ones are
 * only appended. */
typedef enum infs_status {
	INFS_OK = 0,
	INFS_EINVAL = -1,      /* an argument is NULL, malformed or inconsistent */
	INFS_ENOMEM = -2,      /* host memory allocation failed */
	INFS_EIO = -3,         /* a read, write, fsync or mmap failed */
	INFS_ENOTFOUND = -4,   /* no such fact, namespace or file */
	INFS_EMISMATCH = -5,   /* geometry or identity differs from the store's */
	INFS_ECORRUPT = -6,    /* a file failed its checksum or structure checks */
	INFS_EBUSY = -7,       /* another process holds the store for writing */
	INFS_ERANGE = -8,      /* a position, block id, k or size is out of range */
	INFS_EUNSUPPORTED = -9,/* not built in, or not supported for this input */
	INFS_EDEVICE = -10,    /* a CUDA or cuBLAS call failed */
	INFS_EEXISTS = -11,    /* the object already exists */
	INFS_EFORMAT = -12,    /* a model or data file is not in the expected format */
	INFS_EBUDGET = -13,    /* a configured memory budget would be exceeded */
	INFS_ECANCELED = -14,  /* a callback asked to stop */
	INFS_EREADONLY = -15,  /* the store was opened read-only */
	INFS_ENOTRESIDENT = -16 /* a fact's KV is in no memory the call can read (infs_prefetch) */
} infs_status;

/* The message of the last error raised on the calling thread. Never NULL;
 * owned by the library; valid until the thread's next failing call. */
INFS_API const char *infs_error_last(void);

/* The code of the last error raised on the calling thread (INFS_OK if none). */
INFS_API int infs_error_last_code(void);

/* A static description of a status code. Never NULL. */
INFS_API const char *infs_strerror(int code);

/* The library's version, to compare with INFS_VERSION_NUMBER at run time. */
INFS_API unsigned infs_version_number(void);
INFS_API const char *infs_version_string(void);

/* Element types of KV caches and of stored fact KV. */
typedef enum infs_dtype {
	INFS_DTYPE_F32 = 0,
	INFS_DTYPE_F16 = 1,
	INFS_DTYPE_BF16 = 2,
	/* fp8 e4m3 (the "fn" variant: no infinities, NaN 0x7f/0xff, max 448)
	 * with an f32 scale per token and KV head: a store's kv_dtype only,
	 * never a cache's (INFS_EUNSUPPORTED). Layout: infs_kv_convert. */
	INFS_DTYPE_FP8_E4M3 = 3
} infs_dtype;

/* Size in bytes of one element of dtype, or 0 for an unknown dtype (1 for
 * fp8 e4m3, whose scales come on top: infs_geometry_kv_token_bytes). */
INFS_API size_t infs_dtype_size(infs_dtype dtype);

/* Buffers the library allocates for the caller (strings, id lists) are
 * released with this. Accepts NULL. */
INFS_API void infs_free(void *ptr);

/* Features compiled into this build of the library. */
#define INFS_FEATURE_CUDA  (1u << 0)
#define INFS_FEATURE_FAISS (1u << 1)
#define INFS_FEATURE_BLAS  (1u << 2)
INFS_API unsigned infs_features(void);

#ifdef __cplusplus
}
#endif
#endif

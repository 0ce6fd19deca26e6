/* The GGUF container (versions 2 and 3): header, metadata, tensor infos and
 * the aligned data section of a llama.cpp model file, memory-mapped.
 *
 * Opening validates the whole structure against the file size, so that every
 * string, array and tensor the reader hands out lies inside the mapping:
 * callers never re-check bounds. Tensor data is exposed raw (the ggml type
 * id, the dimensions, a pointer and the byte size); turning it into numbers
 * is the model loader's business. All pointers stay valid until
 * infs__gguf_close(). */
#ifndef INFS_GGUF_H
#define INFS_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Metadata value types, as numbered in the file. */
enum {
	INFS_GGUF_U8 = 0,
	INFS_GGUF_I8 = 1,
	INFS_GGUF_U16 = 2,
	INFS_GGUF_I16 = 3,
	INFS_GGUF_U32 = 4,
	INFS_GGUF_I32 = 5,
	INFS_GGUF_F32 = 6,
	INFS_GGUF_BOOL = 7,
	INFS_GGUF_STRING = 8,
	INFS_GGUF_ARRAY = 9,
	INFS_GGUF_U64 = 10,
	INFS_GGUF_I64 = 11,
	INFS_GGUF_F64 = 12
};

/* ggml tensor type ids that the model loader names; the full list of known
 * ids is the table behind infs__gguf_type_traits(). */
enum {
	INFS_GGML_F32 = 0,
	INFS_GGML_F16 = 1,
	INFS_GGML_Q4_0 = 2,
	INFS_GGML_Q4_1 = 3,
	INFS_GGML_Q5_0 = 6,
	INFS_GGML_Q5_1 = 7,
	INFS_GGML_Q8_0 = 8,
	INFS_GGML_Q2_K = 10,
	INFS_GGML_Q3_K = 11,
	INFS_GGML_Q4_K = 12,
	INFS_GGML_Q5_K = 13,
	INFS_GGML_Q6_K = 14,
	INFS_GGML_BF16 = 30
};

#define INFS_GGUF_MAX_DIMS 4
#define INFS_GGUF_DEFAULT_ALIGNMENT 32

/* A string inside the mapping: not NUL-terminated. */
typedef struct infs__gguf_str {
	const char *ptr;
	uint64_t len;
} infs__gguf_str;

typedef struct infs__gguf_value infs__gguf_value;
struct infs__gguf_value {
	uint32_t type;          /* INFS_GGUF_* */
	union {
		uint64_t u;     /* U8..U64, BOOL (0 or 1) */
		int64_t i;      /* I8..I64 */
		double f;       /* F32, F64 */
	} num;
	infs__gguf_str str;     /* STRING */
	/* ARRAY: n elements of elem_type. Fixed-size elements stay in the file
	 * (raw, little-endian, possibly unaligned: read them with the
	 * infs__gguf_arr_* helpers); strings and nested arrays are indexed. */
	uint32_t elem_type;
	uint64_t n;
	const uint8_t *raw;
	infs__gguf_str *strs;
	infs__gguf_value *items;
};

typedef struct infs__gguf_kv {
	infs__gguf_str key;
	infs__gguf_value value;
} infs__gguf_kv;

typedef struct infs__gguf_tensor {
	infs__gguf_str name;
	uint32_t type;          /* raw ggml type id, known to infs__gguf_type_traits() */
	uint32_t n_dims;        /* 0..INFS_GGUF_MAX_DIMS */
	uint64_t ne[INFS_GGUF_MAX_DIMS]; /* ne[0] varies fastest; unused dims are 1 */
	uint64_t n_elements;
	uint64_t offset;        /* of the data, from the start of the file */
	uint64_t nbytes;
	const void *data;
} infs__gguf_tensor;

typedef struct infs__gguf {
	uint32_t version;
	uint64_t alignment;
	uint64_t data_offset;   /* start of the data section in the file */
	uint64_t n_kv;
	infs__gguf_kv *kv;
	uint64_t n_tensors;
	infs__gguf_tensor *tensors;
	const uint8_t *data;    /* the whole file */
	size_t size;
	int mapped;             /* data is an mmap to release on close */
} infs__gguf;

/* Maps and validates the file at path. Errors: INFS_EINVAL (NULL argument),
 * INFS_ENOTFOUND / INFS_EIO (open, stat or mmap failed), INFS_EFORMAT (the
 * message names the path, the byte offset and what is wrong), INFS_ENOMEM. */
int infs__gguf_open(infs__gguf **out, const char *path);

/* Parses a GGUF image already in memory; data must outlive the handle.
 * name labels error messages. Same errors as infs__gguf_open(). */
int infs__gguf_open_memory(infs__gguf **out, const void *data, size_t size, const char *name);

void infs__gguf_close(infs__gguf *g);

/* Block size in elements and bytes per block of a ggml type id. Returns 0
 * for an unknown or removed id. */
int infs__gguf_type_traits(uint32_t type, uint32_t *block_size, uint32_t *type_size);
/* "Q4_1", ... or NULL for an unknown id. */
const char *infs__gguf_type_name(uint32_t type);
/* "u32", "string", ... or "unknown". */
const char *infs__gguf_value_type_name(uint32_t type);

/* Lookups; NULL when absent. */
const infs__gguf_kv *infs__gguf_find(const infs__gguf *g, const char *key);
const infs__gguf_tensor *infs__gguf_tensor_find(const infs__gguf *g, const char *name);

/* Typed metadata readers. They return INFS_ENOTFOUND when the key is absent
 * and INFS_EFORMAT when its type does not fit, with the key in the message.
 * get_int accepts every integer type and bool, get_float every number type. */
int infs__gguf_get_int(const infs__gguf *g, const char *key, int64_t *out);
int infs__gguf_get_float(const infs__gguf *g, const char *key, double *out);
int infs__gguf_get_bool(const infs__gguf *g, const char *key, int *out);
int infs__gguf_get_str(const infs__gguf *g, const char *key, infs__gguf_str *out);
/* An array whose elements have elem_type (or, when elem_type is
 * INFS_GGUF_I64, any integer type; when INFS_GGUF_F64, any number type). */
int infs__gguf_get_arr(const infs__gguf *g, const char *key, uint32_t elem_type,
                       const infs__gguf_value **out);

/* Element i < arr->n of an array of numbers, converted. */
int64_t infs__gguf_arr_int(const infs__gguf_value *arr, uint64_t i);
double infs__gguf_arr_float(const infs__gguf_value *arr, uint64_t i);

/* 1 when s equals the NUL-terminated text. */
int infs__gguf_str_eq(infs__gguf_str s, const char *text);

#endif

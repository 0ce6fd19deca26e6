/* ggml tensor types as GGUF files store them, and their dequantisation to
 * f32. Every type the loader accepts is listed here; the numeric ids are
 * GGUF's and never change. */
#ifndef INFS_QUANT_H
#define INFS_QUANT_H

#include <stddef.h>
#include <stdint.h>

typedef enum infs__ggml_type {
	INFS_GGML_F32 = 0,
	INFS_GGML_F16 = 1,
	INFS_GGML_Q4_0 = 2,
	INFS_GGML_Q4_1 = 3,
	INFS_GGML_Q5_0 = 6,
	INFS_GGML_Q5_1 = 7,
	INFS_GGML_Q8_0 = 8,
	INFS_GGML_Q4_K = 12,
	INFS_GGML_Q5_K = 13,
	INFS_GGML_Q6_K = 14,
	INFS_GGML_BF16 = 30
} infs__ggml_type;

/* A name for any type id ("Q4_1", or "type 17" style text in buf for ids
 * this library does not know). buf needs 24 bytes. */
const char *infs__ggml_type_name(uint32_t type, char buf[24]);

/* Elements per block and bytes per block of a supported type; 0 for a type
 * this library cannot dequantise. */
uint32_t infs__ggml_block_elems(uint32_t type);
uint32_t infs__ggml_block_bytes(uint32_t type);

/* Bytes that n elements of type occupy. INFS_EUNSUPPORTED for an unknown
 * type, INFS_EFORMAT when n is not a whole number of blocks or the size
 * overflows. */
int infs__ggml_nbytes(size_t *out, uint32_t type, uint64_t n);

/* Dequantises n elements (a whole number of blocks, as checked by
 * infs__ggml_nbytes) from src into dst. */
void infs__dequantize(float *dst, const void *src, uint32_t type, size_t n);

#endif

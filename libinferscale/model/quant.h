/* Dequantisation of ggml tensor types (ids as gguf.h names them) to f32:
 * F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K. */
#ifndef INFS_QUANT_H
#define INFS_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

/* A name for any type id: "Q4_1", or "ggml type 99" written into buf for
 * an id unknown to GGUF. buf needs 24 bytes. */
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

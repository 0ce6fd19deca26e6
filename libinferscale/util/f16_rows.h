/* Runs of f16 values to f32, with F16C where the CPU has it (the KV cache's
 * past, converted for every layer of every step). */
#ifndef INFS_F16_ROWS_H
#define INFS_F16_ROWS_H

#include <stddef.h>
#include <stdint.h>

/* dst[i] = src[i] as f32 for i < n, exactly as infs__f16_to_f32. */
void infs__f16_to_f32_n(float *dst, const uint16_t *src, size_t n);

#endif

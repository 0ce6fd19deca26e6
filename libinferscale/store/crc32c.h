/* CRC-32C (Castagnoli), the checksum of the store's header and records. */
#ifndef INFS_CRC32C_H
#define INFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends crc (0 to start) over n bytes of buf: crc32c(a ++ b) ==
 * infs__crc32c(infs__crc32c(0, a), b). Uses SSE4.2 when the CPU has it. */
uint32_t infs__crc32c(uint32_t crc, const void *buf, size_t n);

/* The portable table-driven version, for tests against the hardware one. */
uint32_t infs__crc32c_sw(uint32_t crc, const void *buf, size_t n);

#endif

#include "store/crc32c.h"

#include <pthread.h>
#include <string.h>

/* Reflected Castagnoli polynomial. */
#define POLY 0x82f63b78u

/* Slicing-by-8: table[k][b] is the CRC of byte b followed by k zero bytes,
 * so eight input bytes are folded with eight lookups. */
static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_build(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;
		for (int i = 0; i < 8; i++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][b] = c;
	}
	for (uint32_t b = 0; b < 256; b++)
		for (int k = 1; k < 8; k++)
			table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xff];
}

uint32_t infs__crc32c_sw(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	pthread_once(&table_once, table_build);
	crc = ~crc;
	while (n && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
		n--;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= crc; /* little-endian: the low four bytes carry the running CRC */
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
		      table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		      table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc;
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

uint32_t infs__crc32c(uint32_t crc, const void *buf, size_t n)
{
	if (__builtin_cpu_supports("sse4.2"))
		return crc32c_hw(crc, buf, n);
	return infs__crc32c_sw(crc, buf, n);
}
#else
uint32_t infs__crc32c(uint32_t crc, const void *buf, size_t n)
{
	return infs__crc32c_sw(crc, buf, n);
}
#endif

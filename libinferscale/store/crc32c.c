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
/* The crc32 instruction takes three cycles to give its result and can start
 * one a cycle: three streams of LANE bytes summed side by side run three
 * times faster than one. Each stream's register starts at 0 but the
 * first's; they are joined by advancing a register over LANE zero bytes
 * (a linear map, shift[k][b]: byte b of the register at position k) and
 * adding the next stream's: crc(A B) = advance(crc(A), |B|) ^ crc0(B). */
enum { LANE = 2048 };
static uint32_t shift[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

static void shift_build(void)
{
	pthread_once(&table_once, table_build);
	uint32_t bit[32]; /* the register 1 << i advanced over LANE zero bytes */
	for (int i = 0; i < 32; i++) {
		uint32_t c = 1u << i;
		for (int z = 0; z < LANE; z++)
			c = (c >> 8) ^ table[0][c & 0xff];
		bit[i] = c;
	}
	for (int k = 0; k < 4; k++)
		for (uint32_t b = 0; b < 256; b++) {
			uint32_t c = 0;
			for (int i = 0; i < 8; i++)
				if (b >> i & 1)
					c ^= bit[8 * k + i];
			shift[k][b] = c;
		}
}

static uint32_t advance(uint32_t c)
{
	return shift[0][c & 0xff] ^ shift[1][(c >> 8) & 0xff] ^ shift[2][(c >> 16) & 0xff] ^ shift[3][c >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc;
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
	if (n >= 3 * LANE)
		pthread_once(&shift_once, shift_build);
	for (; n >= 3 * LANE; p += 3 * LANE, n -= 3 * LANE) {
		uint64_t b = 0, d = 0;
		for (size_t i = 0; i < LANE; i += 8) {
			uint64_t w0, w1, w2;
			memcpy(&w0, p + i, 8);
			memcpy(&w1, p + LANE + i, 8);
			memcpy(&w2, p + 2 * LANE + i, 8);
			c = __builtin_ia32_crc32di(c, w0);
			b = __builtin_ia32_crc32di(b, w1);
			d = __builtin_ia32_crc32di(d, w2);
		}
		c = advance(advance((uint32_t)c) ^ (uint32_t)b) ^ (uint32_t)d;
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

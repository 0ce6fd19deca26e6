/* Writes small GGUF images in memory for the reader's tests: a growable
 * byte buffer with little-endian writers, and one sample model. */
#ifndef INFS_TEST_GGUF_BUILDER_H
#define INFS_TEST_GGUF_BUILDER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gbuf {
	uint8_t *p;
	size_t n, cap;
} gbuf;

static inline void gb_put(gbuf *b, const void *src, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->n, src, n);
	b->n += n;
}

static inline void gb_le(gbuf *b, uint64_t v, size_t n)
{
	uint8_t tmp[8];
	for (size_t i = 0; i < n; i++)
		tmp[i] = (uint8_t)(v >> (8 * i));
	gb_put(b, tmp, n);
}

static inline void gb_u32(gbuf *b, uint32_t v) { gb_le(b, v, 4); }
static inline void gb_u64(gbuf *b, uint64_t v) { gb_le(b, v, 8); }

static inline void gb_str(gbuf *b, const char *s)
{
	gb_u64(b, strlen(s));
	gb_put(b, s, strlen(s));
}

static inline void gb_f32(gbuf *b, float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	gb_u32(b, u);
}

static inline void gb_pad(gbuf *b, size_t align)
{
	while (b->n % align)
		gb_le(b, 0, 1);
}

/* Sample: version 3, alignment 64, metadata of every type (including an
 * array of arrays), and three tensors: F32 [4, 3], Q4_1 [64, 2] and Q8_0
 * [32]. Where each tensor's data lands is written to data_off[3]. */
static inline gbuf sample_gguf(size_t data_off[3])
{
	gbuf b = { 0 };
	gb_put(&b, "GGUF", 4);
	gb_u32(&b, 3);
	gb_u64(&b, 3);  /* tensors */
	gb_u64(&b, 16); /* metadata */
	gb_str(&b, "general.architecture"); gb_u32(&b, 8); gb_str(&b, "llama");
	gb_str(&b, "general.alignment"); gb_u32(&b, 4); gb_u32(&b, 64);
	gb_str(&b, "t.u8"); gb_u32(&b, 0); gb_le(&b, 200, 1);
	gb_str(&b, "t.i8"); gb_u32(&b, 1); gb_le(&b, 0xfe, 1);
	gb_str(&b, "t.u16"); gb_u32(&b, 2); gb_le(&b, 65000, 2);
	gb_str(&b, "t.i16"); gb_u32(&b, 3); gb_le(&b, 0x8000, 2);
	gb_str(&b, "t.u32"); gb_u32(&b, 4); gb_u32(&b, 4000000000u);
	gb_str(&b, "t.i32"); gb_u32(&b, 5); gb_u32(&b, (uint32_t)-7);
	gb_str(&b, "t.f32"); gb_u32(&b, 6); gb_f32(&b, 0.5f);
	gb_str(&b, "t.bool"); gb_u32(&b, 7); gb_le(&b, 1, 1);
	gb_str(&b, "t.u64"); gb_u32(&b, 10); gb_u64(&b, 1ull << 40);
	gb_str(&b, "t.i64"); gb_u32(&b, 11); gb_u64(&b, (uint64_t)-5);
	gb_str(&b, "t.f64"); gb_u32(&b, 12); gb_u64(&b, 0x400921fb54442d18ull); /* pi */
	gb_str(&b, "t.strs"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 3);
	gb_str(&b, "a"); gb_str(&b, ""); gb_str(&b, "hello");
	gb_str(&b, "t.i32s"); gb_u32(&b, 9); gb_u32(&b, 5); gb_u64(&b, 3);
	gb_u32(&b, 1); gb_u32(&b, (uint32_t)-2); gb_u32(&b, 3);
	gb_str(&b, "t.nested"); gb_u32(&b, 9); gb_u32(&b, 9); gb_u64(&b, 2);
	gb_u32(&b, 6); gb_u64(&b, 2); gb_f32(&b, 1.5f); gb_f32(&b, -2.0f);
	gb_u32(&b, 8); gb_u64(&b, 1); gb_str(&b, "x");

	gb_str(&b, "w.f32"); gb_u32(&b, 2); gb_u64(&b, 4); gb_u64(&b, 3); gb_u32(&b, 0); gb_u64(&b, 0);
	gb_str(&b, "w.q4_1"); gb_u32(&b, 2); gb_u64(&b, 64); gb_u64(&b, 2); gb_u32(&b, 3); gb_u64(&b, 64);
	gb_str(&b, "w.q8_0"); gb_u32(&b, 1); gb_u64(&b, 32); gb_u32(&b, 8); gb_u64(&b, 256);
	gb_pad(&b, 64);
	size_t base = b.n;
	for (int i = 0; i < 12; i++)
		gb_f32(&b, (float)i);
	gb_pad(&b, 64);
	for (int i = 0; i < 4 * 20; i++) /* 4 Q4_1 blocks */
		gb_le(&b, (uint64_t)i, 1);
	while (b.n < base + 256)
		gb_le(&b, 0, 1);
	for (int i = 0; i < 34; i++)
		gb_le(&b, (uint64_t)(255 - i), 1);
	data_off[0] = base;
	data_off[1] = base + 64;
	data_off[2] = base + 256;
	return b;
}

#endif

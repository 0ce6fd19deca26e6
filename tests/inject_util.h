/* Shared by the injection tests: random records, paged caches in the
 * engines' layouts with canary bytes around everything, and the expected
 * cache contents computed independently of the strides. */
#ifndef INFS_TEST_INJECT_UTIL_H
#define INFS_TEST_INJECT_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "test_util.h"
#include "util/dtype.h"
#include "inject/inject.h"
#include "util/rope.h"

/* One record with its own K and V buffers (pre-RoPE, store dtype). */
typedef struct test_rec {
	infs__record r;
	void *k, *v;
} test_rec;

static inline void rec_make(test_rec *t, const infs_geometry *g, uint64_t id, uint32_t n_tokens)
{
	size_t n = (size_t)g->n_layers * n_tokens * g->n_kv_heads * g->head_dim, esz = infs_dtype_size(g->kv_dtype);
	t->k = malloc(n * esz);
	t->v = malloc(n * esz);
	for (size_t i = 0; i < n; i++) {
		infs__store(t->k, g->kv_dtype, i, 2 * frnd());
		infs__store(t->v, g->kv_dtype, i, 2 * frnd());
	}
	memset(&t->r, 0, sizeof t->r);
	t->r.id = id;
	t->r.n_tokens = n_tokens;
	t->r.k = t->k;
	t->r.v = t->v;
}

static inline void rec_free(test_rec *t)
{
	free(t->k);
	free(t->v);
}

/* The layouts engines use, each with its stride recipe (docs/injection.md). */
enum layout_kind {
	L_VLLM,     /* (2, blocks, bs, heads, dim) */
	L_NHD,      /* FlashInfer NHD: (blocks, 2, bs, heads, dim) */
	L_HND,      /* FlashInfer HND: (blocks, 2, heads, bs, dim) */
	L_PACKED,   /* K|V packed in the last dim: (blocks, bs, heads, 2*dim) */
	L_ELEMENTS, /* K and V alternating per element: (blocks, bs, heads, dim, 2) */
	L_COUNT
};

#define GUARD 64 /* canary bytes before and after each layer's tensor */
#define CANARY 0xA5

typedef struct test_cache {
	enum layout_kind kind;
	uint32_t L, H, D, nb, bs;
	infs_dtype dt;
	size_t bytes;          /* per layer, K and V together, without guards */
	unsigned char **buf;   /* per layer: GUARD + bytes + GUARD */
	void **k, **v;
	infs_kv_layout lay;
} test_cache;

static inline void cache_make(test_cache *c, enum layout_kind kind, const infs_geometry *g, uint32_t n_blocks,
                       uint32_t block_size, infs_dtype dt)
{
	memset(c, 0, sizeof *c);
	c->kind = kind;
	c->L = g->n_layers;
	c->H = g->n_kv_heads;
	c->D = g->head_dim;
	c->nb = n_blocks;
	c->bs = block_size;
	c->dt = dt;
	size_t esz = infs_dtype_size(dt), per = (size_t)c->bs * c->H * c->D;
	c->bytes = 2 * (size_t)n_blocks * per * esz;
	c->buf = calloc(c->L, sizeof *c->buf);
	c->k = calloc(c->L, sizeof *c->k);
	c->v = calloc(c->L, sizeof *c->v);
	int64_t H = c->H, D = c->D, bs = c->bs, P = (int64_t)per;
	infs_kv_layout l = INFS_KV_LAYOUT_INIT;
	l.dtype = dt;
	l.n_layers = c->L;
	l.n_kv_heads = c->H;
	l.head_dim = c->D;
	l.n_blocks = n_blocks;
	l.block_size = block_size;
	size_t v_off = 0; /* elements from k to v */
	switch (kind) {
	case L_VLLM:
		l.stride_block = P, l.stride_slot = H * D, l.stride_head = D, l.stride_dim = 1;
		v_off = (size_t)n_blocks * per;
		break;
	case L_NHD:
		l.stride_block = 2 * P, l.stride_slot = H * D, l.stride_head = D, l.stride_dim = 1;
		v_off = per;
		break;
	case L_HND:
		l.stride_block = 2 * P, l.stride_head = bs * D, l.stride_slot = D, l.stride_dim = 1;
		v_off = per;
		break;
	case L_PACKED:
		l.stride_block = 2 * P, l.stride_slot = H * 2 * D, l.stride_head = 2 * D, l.stride_dim = 1;
		v_off = (size_t)D;
		break;
	default:
		l.stride_block = 2 * P, l.stride_slot = H * 2 * D, l.stride_head = 2 * D, l.stride_dim = 2;
		v_off = 1;
		break;
	}
	for (uint32_t i = 0; i < c->L; i++) {
		c->buf[i] = malloc(c->bytes + 2 * GUARD);
		memset(c->buf[i], CANARY, c->bytes + 2 * GUARD);
		c->k[i] = c->buf[i] + GUARD;
		c->v[i] = (unsigned char *)c->k[i] + v_off * esz;
	}
	l.k_layers = c->k;
	l.v_layers = c->v;
	c->lay = l;
}

static inline void cache_free(test_cache *c)
{
	for (uint32_t i = 0; i < c->L; i++)
		free(c->buf[i]);
	free(c->buf);
	free(c->k);
	free(c->v);
}

/* Element offset (in dtype elements, from k) of (block, slot, head, dim),
 * written from the shapes, not from the strides under test. */
static inline size_t cache_offset(const test_cache *c, int is_v, size_t b, size_t s, size_t h, size_t d)
{
	size_t nb = c->nb, bs = c->bs, H = c->H, D = c->D;
	switch (c->kind) {
	case L_VLLM: return (((is_v * nb + b) * bs + s) * H + h) * D + d;
	case L_NHD: return (((b * 2 + is_v) * bs + s) * H + h) * D + d;
	case L_HND: return (((b * 2 + is_v) * H + h) * bs + s) * D + d;
	case L_PACKED: return ((b * bs + s) * H + h) * 2 * D + is_v * D + d;
	default: return (((b * bs + s) * H + h) * D + d) * 2 + is_v;
	}
}

/* A copy of every layer's bytes, guards included. */
static inline unsigned char *cache_snapshot(const test_cache *c)
{
	size_t per = c->bytes + 2 * GUARD;
	unsigned char *s = malloc(per * c->L);
	for (uint32_t i = 0; i < c->L; i++)
		memcpy(s + i * per, c->buf[i], per);
	return s;
}

static inline int cache_equals(const test_cache *c, const unsigned char *snap)
{
	size_t per = c->bytes + 2 * GUARD;
	for (uint32_t i = 0; i < c->L; i++)
		if (memcmp(snap + i * per, c->buf[i], per) != 0)
			return 0;
	return 1;
}

/* What injecting records[0..n) at start_pos must leave in the cache, built
 * on a snapshot: keys through infs_rope_rotate (in the cache dtype when it
 * is the store's, else in f32 and then converted), V copied. */
static inline unsigned char *cache_expected(const test_cache *c, const infs_geometry *g, const infs__record *recs, size_t n,
                                     uint32_t start_pos, const int32_t *bt)
{
	unsigned char *exp = cache_snapshot(c);
	size_t per = c->bytes + 2 * GUARD, ssz = infs_dtype_size(g->kv_dtype), csz = infs_dtype_size(c->dt);
	uint32_t D = g->head_dim, H = g->n_kv_heads;
	float *f = malloc(D * sizeof *f);
	unsigned char *raw = malloc(D * 4);
	int64_t pos = start_pos;
	for (size_t ri = 0; ri < n; ri++) {
		const infs__record *r = &recs[ri];
		for (uint32_t t = 0; t < r->n_tokens; t++, pos++) {
			size_t blk = (size_t)bt[pos / c->bs], slot = (size_t)(pos % c->bs);
			int32_t p32 = (int32_t)pos;
			for (uint32_t l = 0; l < g->n_layers; l++) {
				unsigned char *k0 = exp + l * per + GUARD;
				for (uint32_t h = 0; h < H; h++) {
					size_t row = (((size_t)l * r->n_tokens + t) * H + h) * D;
					const unsigned char *ks = (const unsigned char *)r->k + row * ssz;
					const unsigned char *vs = (const unsigned char *)r->v + row * ssz;
					if (g->kv_dtype == c->dt) {
						memcpy(raw, ks, D * ssz);
						CHECK_OK(infs_rope_rotate(raw, c->dt, 1, 1, &p32, g));
					} else {
						for (uint32_t d = 0; d < D; d++)
							f[d] = infs__load(ks, g->kv_dtype, d);
						CHECK_OK(infs_rope_rotate(f, INFS_DTYPE_F32, 1, 1, &p32, g));
						for (uint32_t d = 0; d < D; d++)
							infs__store(raw, c->dt, d, f[d]);
					}
					for (uint32_t d = 0; d < D; d++)
						memcpy(k0 + cache_offset(c, 0, blk, slot, h, d) * csz, raw + d * csz, csz);
					for (uint32_t d = 0; d < D; d++) {
						unsigned char *dst = k0 + cache_offset(c, 1, blk, slot, h, d) * csz;
						if (g->kv_dtype == c->dt)
							memcpy(dst, vs + d * ssz, csz);
						else
							infs__store(dst, c->dt, 0, infs__load(vs, g->kv_dtype, d));
					}
				}
			}
		}
	}
	free(f);
	free(raw);
	return exp;
}

#endif

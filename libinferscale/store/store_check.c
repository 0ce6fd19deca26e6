/* Argument checks of the store's entry points: namespaces, facts, strings. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "util/rope.h"
#include "util/dtype.h"
#include "util/error.h"
#include "util/options.h"
#include "store/store_impl.h"

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
static bool utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t len;
		unsigned cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		i += len;
	}
	return true;
}

int infs__check_namespace(const char *ns)
{
	if (!ns)
		return infs__error(INFS_EINVAL, "namespace is NULL");
	size_t n = strnlen(ns, INFS_NAMESPACE_MAX + 1);
	if (n == 0)
		return infs__error(INFS_EINVAL, "namespace is empty");
	if (n > INFS_NAMESPACE_MAX)
		return infs__error(INFS_EINVAL, "namespace is longer than %u bytes", INFS_NAMESPACE_MAX);
	if (!utf8_valid(ns, n))
		return infs__error(INFS_EINVAL, "namespace is not valid UTF-8");
	const unsigned char *s = (const unsigned char *)ns;
	for (size_t i = 0; i < n; i++) {
		/* C0 controls, DEL, and C1 controls (U+0080..U+009F, encoded C2 80..C2 9F). */
		if (s[i] < 0x20 || s[i] == 0x7f || (s[i] == 0xc2 && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f))
			return infs__error(INFS_EINVAL, "namespace contains a control character at byte %zu", i);
	}
	return INFS_OK;
}

/* The index of the first NaN or Inf among n elements of dtype, or n. */
static size_t first_nonfinite(const void *p, size_t n, infs_dtype dtype)
{
	if (dtype == INFS_DTYPE_F32) {
		const unsigned char *b = p;
		for (size_t i = 0; i < n; i++) {
			uint32_t u;
			memcpy(&u, b + 4 * i, 4);
			if ((u & 0x7f800000u) == 0x7f800000u)
				return i;
		}
		return n;
	}
	/* f16: exponent bits 0x7c00; bf16: 0x7f80. */
	uint16_t mask = dtype == INFS_DTYPE_F16 ? 0x7c00 : 0x7f80;
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		uint16_t u;
		memcpy(&u, b + 2 * i, 2);
		if ((u & mask) == mask)
			return i;
	}
	return n;
}

/* The largest magnitude a key element may have: half its dtype's largest
 * value (f32's for fp8, which is dequantized into f32), over the rope's
 * attention factor. A rotated pair's members stay within 2 x attn_scale x
 * the larger of the two, so any key within the bound, rotated to any
 * position, stays finite in its dtype (docs/injection.md). */
static float key_bound(const infs_geometry *g)
{
	return infs__dtype_max(g->kv_dtype) / (2 * infs__rope_attn_scale(g));
}

/* The bit pattern, sign cleared, of the largest value of f16, bf16 or f32
 * not above x > 0: magnitudes compare as their patterns do. */
static uint32_t bits_at_most(infs_dtype t, float x)
{
	uint32_t u;
	if (t == INFS_DTYPE_F32) {
		memcpy(&u, &x, sizeof u);
		return u & 0x7fffffffu;
	}
	uint16_t h = (t == INFS_DTYPE_F16 ? infs__f32_to_f16(x) : infs__f32_to_bf16(x)) & 0x7fff;
	float back = t == INFS_DTYPE_F16 ? infs__f16_to_f32(h) : infs__bf16_to_f32(h);
	return back > x ? h - 1u : h;
}

static int beyond_bound(const char *name, size_t i, double x, const infs_geometry *g)
{
	const char *t = g->kv_dtype == INFS_DTYPE_F16 ? "f16" : g->kv_dtype == INFS_DTYPE_BF16 ? "bf16" : "f32";
	return infs__error(INFS_ERANGE, "fact: %s element %zu is %g; a key is at most %g in magnitude (half of %s's largest "
	                   "value, over the rope's attention factor %g), so that rotated to any position it stays finite",
	                   name, i, x, (double)key_bound(g), t, (double)infs__rope_attn_scale(g));
}

/* f16, bf16, f32: every element finite, and a key's rotated dims (the
 * first rotary_dim of each head) within key_bound. */
static int check_plain(const void *kv, const char *name, size_t n, const infs_geometry *g, bool key)
{
	const bool wide = g->kv_dtype == INFS_DTYPE_F32;
	const uint32_t inf = wide ? 0x7f800000u : g->kv_dtype == INFS_DTYPE_F16 ? 0x7c00u : 0x7f80u;
	const uint32_t limit = key ? bits_at_most(g->kv_dtype, key_bound(g)) : inf;
	const uint32_t D = g->head_dim, R = g->rotary_dim;
	const unsigned char *b = kv;
	for (size_t i = 0; i < n; i++) {
		uint32_t mag;
		if (wide) {
			memcpy(&mag, b + 4 * i, 4);
			mag &= 0x7fffffffu;
		} else {
			uint16_t h;
			memcpy(&h, b + 2 * i, 2);
			mag = h & 0x7fffu;
		}
		if (mag >= inf)
			return infs__error(INFS_EINVAL, "fact: %s element %zu is NaN or infinite", name, i);
		if (mag > limit && i % D < R)
			return beyond_bound(name, i, infs__load(kv, g->kv_dtype, i), g);
	}
	return INFS_OK;
}

/* fp8 e4m3: no NaN code (0x7f, 0xff), every scale finite and not negative
 * (it is amax / 448), and code times scale finite in f32, within key_bound
 * for a key's rotated dims. */
static int check_fp8(const void *kv, const char *name, size_t rows, const infs_geometry *g, bool key)
{
	const uint32_t D = g->head_dim, R = key ? g->rotary_dim : 0;
	const size_t n = rows * D;
	const double bound = key_bound(g);
	const unsigned char *b = kv;
	for (size_t i = 0; i < n; i++)
		if ((b[i] & 0x7f) == 0x7f)
			return infs__error(INFS_EINVAL, "fact: %s element %zu is an fp8 NaN (0x%02x)", name, i, b[i]);
	size_t bad = first_nonfinite(b + n, rows, INFS_DTYPE_F32);
	if (bad < rows)
		return infs__error(INFS_EINVAL, "fact: %s scale %zu is NaN or infinite", name, bad);
	for (size_t r = 0; r < rows; r++) {
		float scale;
		memcpy(&scale, b + n + r * sizeof scale, sizeof scale);
		if (scale < 0)
			return infs__error(INFS_EINVAL, "fact: %s scale %zu is negative (%g)", name, r, (double)scale);
		float rot = 0, all = 0;
		for (uint32_t d = 0; d < D; d++) {
			float c = fabsf(infs__e4m3_to_f32(b[r * D + d]));
			all = c > all ? c : all;
			rot = d < R && c > rot ? c : rot;
		}
		if ((double)rot * scale > bound)
			return infs__error(INFS_ERANGE, "fact: %s row %zu: code %g times scale %g is %g; a key is at most %g in "
			                   "magnitude (half of f32's largest value, over the rope's attention factor %g), so that "
			                   "rotated to any position it stays finite", name, r, (double)rot, (double)scale,
			                   (double)rot * scale, bound, (double)infs__rope_attn_scale(g));
		if ((double)all * scale > FLT_MAX)
			return infs__error(INFS_ERANGE, "fact: %s row %zu: code %g times scale %g is past f32's largest value",
			                   name, r, (double)all, (double)scale);
	}
	return INFS_OK;
}

/* Every element finite, and within the range that keeps it finite in the
 * cache (docs/injection.md, "The range of KV values"). */
static int check_kv(const void *kv, const char *name, uint32_t n_tokens, const infs_geometry *g)
{
	size_t rows = (size_t)n_tokens * g->n_layers * g->n_kv_heads;
	bool key = name[0] == 'k';
	if (g->kv_dtype == INFS_DTYPE_FP8_E4M3)
		return check_fp8(kv, name, rows, g, key);
	return check_plain(kv, name, rows * g->head_dim, g, key);
}

static int check_text(const char *s, size_t max, const char *what, size_t *len)
{
	*len = 0;
	if (!s)
		return INFS_OK;
	size_t n = strnlen(s, max);
	if (n >= max)
		return infs__error(INFS_ERANGE, "%s is %u bytes or longer (the limit is %u)", what, (unsigned)max,
		                   (unsigned)max - 1);
	if (!utf8_valid(s, n))
		return infs__error(INFS_EINVAL, "%s is not valid UTF-8", what);
	*len = n;
	return INFS_OK;
}

int infs__check_fact(infs_fact *dst, const infs_fact *in, const infs_geometry *g, size_t *text_len,
                     size_t *meta_len)
{
	if (!in)
		return infs__error(INFS_EINVAL, "fact is NULL");
	*dst = (infs_fact)INFS_FACT_INIT;
	int rc = INFS__TAKE(*dst, in, infs__sizes_fact, "fact", "struct");
	if (rc)
		return rc;
	const infs_fact *f = dst;
	if (f->flags & ~(unsigned)INFS_FACT_SEGMENT)
		return infs__error(INFS_EINVAL, "fact: unknown flags 0x%x", f->flags & ~(unsigned)INFS_FACT_SEGMENT);
	if (f->n_tokens == 0 || f->n_tokens > INFS_FACT_TOKENS_MAX)
		return infs__error(INFS_ERANGE, "fact: n_tokens %u is not in 1..%u", f->n_tokens, INFS_FACT_TOKENS_MAX);
	if (!f->tokens)
		return infs__error(INFS_EINVAL, "fact: tokens is NULL");
	if (!f->k || !f->v)
		return infs__error(INFS_EINVAL, "fact: %s is NULL", f->k ? "v" : "k");
	for (uint32_t i = 0; i < f->n_tokens; i++)
		if (f->tokens[i] < 0)
			return infs__error(INFS_EINVAL, "fact: token %u is negative (%d)", i, (int)f->tokens[i]);
	bool segment = f->flags & INFS_FACT_SEGMENT;
	if (segment && f->embedding)
		return infs__error(INFS_EINVAL, "fact: a segment has no embedding; pass NULL");
	if (!segment && g->embed_dim == 0 && f->embedding)
		return infs__error(INFS_EINVAL, "fact: the store has embed_dim 0; pass a NULL embedding");
	if (!segment && g->embed_dim) {
		if (!f->embedding)
			return infs__error(INFS_EINVAL, "fact: embedding is NULL (the store has embed_dim %u)", g->embed_dim);
		size_t bad = first_nonfinite(f->embedding, g->embed_dim, INFS_DTYPE_F32);
		if (bad < g->embed_dim)
			return infs__error(INFS_EINVAL, "fact: embedding[%zu] is NaN or infinite", bad);
	}
	if ((rc = check_kv(f->k, "k", f->n_tokens, g)) || (rc = check_kv(f->v, "v", f->n_tokens, g)))
		return rc;
	rc = check_text(f->text, INFS_TEXT_MAX, "fact: text", text_len);
	if (!rc)
		rc = check_text(f->metadata, INFS_METADATA_MAX, "fact: metadata", meta_len);
	return rc;
}

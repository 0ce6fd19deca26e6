/* Argument checks of the store's entry points: namespaces, facts, strings. */
#include <string.h>

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

/* Every element finite; for fp8 e4m3 no NaN code (0x7f, 0xff) and every
 * scale finite and not negative (it is amax / 448). */
static int check_kv(const void *kv, const char *name, uint32_t n_tokens, const infs_geometry *g)
{
	size_t rows = (size_t)n_tokens * g->n_layers * g->n_kv_heads, n = rows * g->head_dim;
	if (g->kv_dtype != INFS_DTYPE_FP8_E4M3) {
		size_t bad = first_nonfinite(kv, n, g->kv_dtype);
		return bad < n ? infs__error(INFS_EINVAL, "fact: %s element %zu is NaN or infinite", name, bad) : INFS_OK;
	}
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
	}
	return INFS_OK;
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

/* Chunked RoPE injection: each fact's pre-RoPE keys are rotated to the
 * positions they land at and written, with the values, into an engine's
 * paged KV cache described by strides. Everything is checked before the
 * first byte is written, so a failed call leaves the cache untouched. */
#include "inject/inject.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "util/dtype.h"
#include "util/error.h"
#include "util/options.h"
#include "util/rope.h"

INFS__DEFINE_INIT(infs_kv_layout_init, infs_kv_layout, infs__sizes_kv_layout, INFS_KV_LAYOUT_INIT)

INFS__DEFINE_INIT(infs_inject_options_init, infs_inject_options, infs__sizes_inject_options, INFS_INJECT_OPTIONS_INIT)

INFS__DEFINE_INIT(infs_injector_options_init, infs_injector_options, infs__sizes_injector_options,
                  INFS_INJECTOR_OPTIONS_INIT)

/* The four indexed dimensions of one layer's K (or V). Slots of distinct
 * (block, slot, head, dim) must be distinct elements: sorted by stride, each
 * stride must step over everything the smaller ones span. */
static int check_strides(const infs_kv_layout *l, const char *fn)
{
	struct { const char *name; int64_t stride; uint64_t extent; } d[4] = {
		{ "stride_block", l->stride_block, l->n_blocks },
		{ "stride_slot", l->stride_slot, l->block_size },
		{ "stride_head", l->stride_head, l->n_kv_heads },
		{ "stride_dim", l->stride_dim, l->head_dim },
	};
	for (int i = 0; i < 4; i++)
		if (d[i].stride <= 0)
			return infs__error(INFS_EINVAL, "%s: layout %s is %lld: strides must be positive", fn,
			                   d[i].name, (long long)d[i].stride);
	for (int i = 1; i < 4; i++) /* insertion sort by stride */
		for (int j = i; j > 0 && d[j].stride < d[j - 1].stride; j--) {
			__typeof__(d[0]) t = d[j];
			d[j] = d[j - 1];
			d[j - 1] = t;
		}
	/* span: elements from the first to one past the last, in int64 */
	int64_t span = 1;
	const char *prev = NULL;
	for (int i = 0; i < 4; i++) {
		if (d[i].extent == 1)
			continue;
		if (prev && d[i].stride < span)
			return infs__error(INFS_EINVAL,
			                   "%s: layout %s (%lld) is smaller than the %lld elements that %s spans: slots would overlap",
			                   fn, d[i].name, (long long)d[i].stride, (long long)span, prev);
		int64_t ext;
		if (__builtin_mul_overflow(d[i].stride, (int64_t)(d[i].extent - 1), &ext) ||
		    __builtin_add_overflow(span, ext, &span))
			return infs__error(INFS_ERANGE, "%s: layout strides overflow: the cache would span more than 2^63 elements",
			                   fn);
		prev = d[i].name;
	}
	size_t bytes;
	if ((uint64_t)span > PTRDIFF_MAX / 4 ||
	    __builtin_mul_overflow((size_t)span, infs_dtype_size(l->dtype), &bytes) || bytes > PTRDIFF_MAX)
		return infs__error(INFS_ERANGE, "%s: layout strides span %lld elements: more than memory can address", fn,
		                   (long long)span);
	return INFS_OK;
}

int infs__inject_take_layout(infs_kv_layout *dst, const infs_kv_layout *in, const infs_geometry *g, const char *fn)
{
	if (!in)
		return infs__error(INFS_EINVAL, "%s: cache layout is NULL", fn);
	*dst = (infs_kv_layout)INFS_KV_LAYOUT_INIT;
	int rc = INFS__TAKE(*dst, in, infs__sizes_kv_layout, fn, "cache layout");
	if (rc)
		return rc;
	const infs_kv_layout *l = dst;
	if (l->device < -1)
		return infs__error(INFS_EINVAL, "%s: layout device %d is not -1 (host) or a CUDA device ordinal", fn,
		                   l->device);
	if (infs_dtype_size(l->dtype) == 0)
		return infs__error(INFS_EINVAL, "%s: layout dtype %d is not a known dtype", fn, (int)l->dtype);
	if (!infs__dtype_cache_ok(l->dtype))
		return infs__error(INFS_EUNSUPPORTED, "%s: layout dtype %s", fn, INFS__FP8_CACHE_MSG);
	if (l->n_layers != g->n_layers)
		return infs__error(INFS_EMISMATCH, "%s: the cache has %u layers, the store %u", fn, l->n_layers,
		                   g->n_layers);
	if (l->n_kv_heads != g->n_kv_heads)
		return infs__error(INFS_EMISMATCH, "%s: the cache has %u KV heads, the store %u", fn, l->n_kv_heads,
		                   g->n_kv_heads);
	if (l->head_dim != g->head_dim)
		return infs__error(INFS_EMISMATCH, "%s: the cache has head_dim %u, the store %u", fn, l->head_dim,
		                   g->head_dim);
	if (l->n_blocks == 0 || l->n_blocks > INT32_MAX)
		return infs__error(INFS_EINVAL, "%s: layout n_blocks %u is not in 1..%d", fn, l->n_blocks, INT32_MAX);
	if (l->block_size == 0)
		return infs__error(INFS_EINVAL, "%s: layout block_size is 0", fn);
	if (!l->k_layers || !l->v_layers)
		return infs__error(INFS_EINVAL, "%s: layout %s is NULL", fn, !l->k_layers ? "k_layers" : "v_layers");
	size_t esz = infs_dtype_size(l->dtype);
	for (uint32_t i = 0; i < l->n_layers; i++) {
		if (!l->k_layers[i] || !l->v_layers[i])
			return infs__error(INFS_EINVAL, "%s: layout %s[%u] is NULL", fn,
			                   !l->k_layers[i] ? "k_layers" : "v_layers", i);
		if ((uintptr_t)l->k_layers[i] % esz || (uintptr_t)l->v_layers[i] % esz)
			return infs__error(INFS_EINVAL, "%s: layout %s[%u] is not aligned to its %zu-byte elements", fn,
			                   (uintptr_t)l->k_layers[i] % esz ? "k_layers" : "v_layers", i, esz);
	}
	return check_strides(l, fn);
}

int infs__inject_plan_init(infs__inject_plan *plan, const infs_geometry *g, const infs__record *records,
                           size_t n_records, uint32_t start_pos, const int32_t *block_table,
                           size_t block_table_len, const infs_kv_layout *layout, const char *fn)
{
	if (!records || n_records == 0)
		return infs__error(INFS_EINVAL, "%s: no records to inject", fn);
	if (!block_table)
		return infs__error(INFS_EINVAL, "%s: block_table is NULL", fn);
	uint64_t n_tokens = 0;
	for (size_t i = 0; i < n_records; i++) {
		const infs__record *r = &records[i];
		if (r->n_tokens == 0 || !r->k || !r->v)
			return infs__error(INFS_EINVAL, "%s: record %llu has no KV", fn, (unsigned long long)r->id);
		n_tokens += r->n_tokens;
		if (n_tokens > UINT32_MAX - (uint64_t)start_pos)
			return infs__error(INFS_ERANGE,
			                   "%s: positions from start_pos %u overflow: the records hold more tokens than fit below position %u",
			                   fn, start_pos, UINT32_MAX);
	}
	uint64_t bs = layout->block_size, last = start_pos + n_tokens - 1;
	uint64_t first_blk = start_pos / bs, last_blk = last / bs;
	if (last_blk >= block_table_len)
		return infs__error(INFS_ERANGE,
		                   "%s: block table has %zu entries but positions %u..%llu need %llu (block_size %u)", fn,
		                   block_table_len, start_pos, (unsigned long long)last,
		                   (unsigned long long)last_blk + 1, layout->block_size);
	for (uint64_t b = first_blk; b <= last_blk; b++)
		if (block_table[b] < 0 || (uint32_t)block_table[b] >= layout->n_blocks)
			return infs__error(INFS_ERANGE, "%s: block_table[%llu] = %d is not a block id in [0, %u)", fn,
			                   (unsigned long long)b, block_table[b], layout->n_blocks);
	*plan = (infs__inject_plan){
		.geom = g,
		.layout = layout,
		.records = records,
		.n_records = n_records,
		.n_tokens = (uint32_t)n_tokens,
		.start_pos = start_pos,
		.block_table = block_table,
		.block_table_len = block_table_len,
	};
	return INFS_OK;
}

/* Row loops with the dtype dispatch hoisted out: the writer's inner loops.
 * An fp8 row is dequantized with its scale, in f32, as infs_kv_convert and
 * the device kernel do it. */
static void load_row(float *x, const char *src, infs_dtype t, float scale, uint32_t n)
{
	const uint16_t *h = (const uint16_t *)src;
	switch (t) {
	case INFS_DTYPE_FP8_E4M3:
		for (uint32_t i = 0; i < n; i++)
			x[i] = infs__e4m3_to_f32((uint8_t)src[i]) * scale;
		break;
	case INFS_DTYPE_F16:
		for (uint32_t i = 0; i < n; i++)
			x[i] = infs__f16_to_f32(h[i]);
		break;
	case INFS_DTYPE_BF16:
		for (uint32_t i = 0; i < n; i++)
			x[i] = infs__bf16_to_f32(h[i]);
		break;
	default:
		memcpy(x, src, n * sizeof *x);
		break;
	}
}

/* Stores n floats to dst, stride elements apart, saturated to the
 * dtype's range (infs__saturate). */
static void store_row(char *dst, infs_dtype t, int64_t stride, const float *x, uint32_t n)
{
	uint16_t *h = (uint16_t *)dst;
	float *f = (float *)dst;
	const float max = infs__dtype_max(t);
	switch (t) {
	case INFS_DTYPE_F16:
		for (uint32_t i = 0; i < n; i++)
			h[i * stride] = infs__f32_to_f16(infs__saturate(x[i], max));
		break;
	case INFS_DTYPE_BF16:
		for (uint32_t i = 0; i < n; i++)
			h[i * stride] = infs__f32_to_bf16(infs__saturate(x[i], max));
		break;
	default:
		for (uint32_t i = 0; i < n; i++)
			f[i * stride] = infs__saturate(x[i], max);
		break;
	}
}

/* Copies n elements from src (contiguous, dtype s, an fp8 row's scale) to
 * dst (stride elements apart, dtype d): raw bits when the dtypes agree, so V
 * stays bit-exact; otherwise through float, in tmp. */
static void copy_row(char *dst, infs_dtype d, int64_t stride, const char *src, infs_dtype s, float scale, uint32_t n,
                     float *tmp)
{
	size_t sz = infs_dtype_size(d);
	if (d != s) {
		load_row(tmp, src, s, scale, n);
		store_row(dst, d, stride, tmp, n);
	} else if (stride == 1) {
		memcpy(dst, src, n * sz);
	} else if (sz == 2) {
		for (uint32_t i = 0; i < n; i++)
			((uint16_t *)dst)[i * stride] = ((const uint16_t *)src)[i];
	} else {
		for (uint32_t i = 0; i < n; i++)
			((uint32_t *)dst)[i * stride] = ((const uint32_t *)src)[i];
	}
}

/* Tokens whose cos/sin are computed together: the table stays small however
 * long a record is, and is reused across every layer and head. */
#define CHUNK 64

int infs__inject_host(const infs__inject_plan *p)
{
	const infs_geometry *g = p->geom;
	const infs_kv_layout *l = p->layout;
	infs__rope rope;
	infs__rope_init(&rope, g);
	uint32_t H = g->n_kv_heads, D = g->head_dim, R = g->rotary_dim, np = rope.n_pairs;
	size_t ssz = infs_dtype_size(g->kv_dtype), dsz = infs_dtype_size(l->dtype);
	/* cos of chunk token t at cs + 2*t*np, its sin right after; then x */
	float *cs = malloc((2 * (size_t)CHUNK * np + D) * sizeof *cs);
	if (!cs)
		return infs__error(INFS_ENOMEM, "inject: out of memory for the rotation table");
	float *x = cs + 2 * (size_t)CHUNK * np;

	uint64_t pos = p->start_pos;
	for (size_t ri = 0; ri < p->n_records; ri++) {
		const infs__record *r = &p->records[ri];
		const bool fp8 = g->kv_dtype == INFS_DTYPE_FP8_E4M3;
		const size_t scales = (size_t)g->n_layers * r->n_tokens * H * D; /* fp8: offset of the scales */
		for (uint32_t t0 = 0; t0 < r->n_tokens; t0 += CHUNK) {
			uint32_t nt = r->n_tokens - t0 < CHUNK ? r->n_tokens - t0 : CHUNK;
			int64_t slot_off[CHUNK];
			for (uint32_t t = 0; t < nt; t++) {
				uint64_t q = pos + t0 + t;
				infs__rope_cos_sin(&rope, (int64_t)q, cs + 2 * t * np, cs + (2 * t + 1) * np);
				slot_off[t] = (int64_t)p->block_table[q / l->block_size] * l->stride_block +
				              (int64_t)(q % l->block_size) * l->stride_slot;
			}
			for (uint32_t li = 0; li < g->n_layers; li++) {
				size_t row = ((size_t)li * r->n_tokens + t0) * H * D;
				const char *ks = (const char *)r->k + row * ssz, *vs = (const char *)r->v + row * ssz;
				/* fp8: the rows' scales follow the fact's e4m3 bytes */
				const char *kss = fp8 ? (const char *)r->k + scales + row / D * sizeof(float) : NULL;
				const char *vss = fp8 ? (const char *)r->v + scales + row / D * sizeof(float) : NULL;
				char *kd = l->k_layers[li], *vd = l->v_layers[li];
				for (uint32_t t = 0; t < nt; t++) {
					for (uint32_t h = 0; h < H; h++, ks += D * ssz, vs += D * ssz) {
						int64_t off = slot_off[t] + (int64_t)h * l->stride_head;
						char *kh = kd + off * (int64_t)dsz;
						float kscale = 1, vscale = 1;
						if (fp8) {
							memcpy(&kscale, kss + ((size_t)t * H + h) * sizeof kscale, sizeof kscale);
							memcpy(&vscale, vss + ((size_t)t * H + h) * sizeof vscale, sizeof vscale);
						}
						load_row(x, ks, g->kv_dtype, kscale, R);
						infs__rope_apply(&rope, x, cs + 2 * t * np, cs + (2 * t + 1) * np);
						store_row(kh, l->dtype, l->stride_dim, x, R);
						/* partial rotary: the rest of the head passes through */
						copy_row(kh + (int64_t)R * l->stride_dim * (int64_t)dsz, l->dtype, l->stride_dim,
						         ks + R * ssz, g->kv_dtype, kscale, D - R, x);
						copy_row(vd + off * (int64_t)dsz, l->dtype, l->stride_dim, vs, g->kv_dtype, vscale, D, x);
					}
				}
			}
		}
		pos += r->n_tokens;
	}
	free(cs);
	return INFS_OK;
}

int infs__inject_records(uint32_t *out_next_pos, const infs_geometry *g, const infs__record *records,
                         size_t n_records, uint32_t start_pos, const int32_t *block_table,
                         size_t block_table_len, const infs_kv_layout *layout, infs_store *store,
                         void *stream, const char *fn)
{
	infs_kv_layout lay;
	int rc = infs__inject_take_layout(&lay, layout, g, fn);
	if (rc)
		return rc;
	layout = &lay;
	infs__inject_plan plan;
	rc = infs__inject_plan_init(&plan, g, records, n_records, start_pos, block_table, block_table_len, layout, fn);
	if (rc)
		return rc;
	plan.store = store;
	plan.stream = stream;
	if (layout->device >= 0) {
		if (!infs__cuda)
			return infs__error(INFS_EUNSUPPORTED,
			                   "%s: layout device is %d but this build has no CUDA support (host caches use device = -1)",
			                   fn, layout->device);
		rc = infs__cuda->inject(&plan);
		if (rc)
			return rc;
	} else {
		rc = infs__inject_host(&plan);
		if (rc)
			return rc;
	}
	*out_next_pos = start_pos + plan.n_tokens;
	return INFS_OK;
}

int infs_inject_into_blocks(uint32_t *out_next_pos, infs_store *store, const char *ns, const uint64_t *ids,
                            size_t n_ids, uint32_t start_pos, const int32_t *block_table, size_t block_table_len,
                            const infs_kv_layout *cache, const infs_inject_options *opts)
{
	static const char fn[] = "infs_inject_into_blocks";
	if (!out_next_pos)
		return infs__error(INFS_EINVAL, "%s: out_next_pos is NULL", fn);
	if (!store)
		return infs__error(INFS_EINVAL, "%s: store is NULL", fn);
	int rc = infs__check_namespace(ns);
	if (rc)
		return infs__error_wrap(rc, "%s", fn);
	if (!ids)
		return infs__error(INFS_EINVAL, "%s: ids is NULL", fn);
	if (n_ids == 0)
		return infs__error(INFS_EINVAL, "%s: n_ids is 0: nothing to inject", fn);
	if (n_ids > SIZE_MAX / sizeof(infs__record))
		return infs__error(INFS_ERANGE, "%s: n_ids %zu is too large", fn, n_ids);
	if (!block_table)
		return infs__error(INFS_EINVAL, "%s: block_table is NULL", fn);
	infs_inject_options o = INFS_INJECT_OPTIONS_INIT;
	rc = INFS__TAKE(o, opts, infs__sizes_inject_options, fn, "options");
	if (rc)
		return rc;
	const infs_geometry *g = infs__store_geom(store);
	infs_kv_layout lay;
	rc = infs__inject_take_layout(&lay, cache, g, fn);
	if (rc)
		return rc;

	if ((rc = infs__store_use(store, ns))) /* a remote tier's namespace, on first use */
		return infs__error_wrap(rc, "%s", fn);
	infs__record *recs = malloc(n_ids * sizeof *recs);
	if (!recs)
		return infs__error(INFS_ENOMEM, "%s: out of memory for %zu records", fn, n_ids);
	infs__store_read_lock(store);
	for (size_t i = 0; i < n_ids && rc == INFS_OK; i++) {
		rc = infs__store_find(&recs[i], store, ns, ids[i]);
		if (rc == INFS_ENOTFOUND)
			rc = infs__error(INFS_ENOTFOUND, "%s: ids[%zu] = %llu is not a record of namespace '%s'", fn, i,
			                 (unsigned long long)ids[i], ns);
		else if (rc)
			rc = infs__error_wrap(rc, "%s: ids[%zu] = %llu", fn, i, (unsigned long long)ids[i]);
	}
	if (rc == INFS_OK)
		rc = infs__inject_records(out_next_pos, g, recs, n_ids, start_pos, block_table, block_table_len, &lay,
		                          store, o.stream, fn);
	infs__store_read_unlock(store);
	free(recs);
	return rc;
}

int infs_injector_create(infs_injector **out, infs_store *store, const infs_kv_layout *cache,
                         const infs_injector_options *opts)
{
	static const char fn[] = "infs_injector_create";
	if (!out)
		return infs__error(INFS_EINVAL, "%s: out is NULL", fn);
	*out = NULL;
	if (!store)
		return infs__error(INFS_EINVAL, "%s: store is NULL", fn);
	infs_injector_options o = INFS_INJECTOR_OPTIONS_INIT;
	int rc = INFS__TAKE(o, opts, infs__sizes_injector_options, fn, "options");
	if (rc)
		return rc;
	if (o.max_ids < 1 || o.max_ids > INFS_RETRIEVE_K_MAX)
		return infs__error(INFS_ERANGE, "%s: max_ids %u is not in 1..%u", fn, o.max_ids, INFS_RETRIEVE_K_MAX);
	/* the injection kernel's grid has a block per token */
	if (o.max_tokens < 1 || o.max_tokens > INT32_MAX)
		return infs__error(INFS_ERANGE, "%s: max_tokens %u is not in 1..%d", fn, o.max_tokens, INT32_MAX);
	infs_kv_layout lay;
	rc = infs__inject_take_layout(&lay, cache, infs__store_geom(store), fn);
	if (rc)
		return rc;
	if (lay.device < 0)
		return infs__error(INFS_EINVAL,
		                   "%s: the cache is in host memory (layout device -1): an injector writes a device cache "
		                   "(host caches take infs_inject_into_blocks)",
		                   fn);
	if (!infs__cuda)
		return infs__error(INFS_EUNSUPPORTED, "%s: layout device is %d but this build has no CUDA support", fn,
		                   lay.device);
	if (!infs__store_ext(store, INFS_EXT_DEVICE)->data)
		return infs__error(INFS_EUNSUPPORTED, "%s: the store has no device copy (open it with options.device >= 0)",
		                   fn);
	if (infs__store_geom(store)->embed_dim == 0)
		return infs__error(INFS_EUNSUPPORTED,
		                   "%s: the store has no embeddings (its embed_dim is 0): its device copy holds no fact rows",
		                   fn);
	return infs__cuda->injector_create(out, store, &lay, &o);
}

void infs_injector_free(infs_injector *injector)
{
	if (injector && infs__cuda)
		infs__cuda->injector_free(injector);
}

int infs_inject_device(infs_injector *injector, const char *ns, const void *ids, size_t id_stride,
                       const uint32_t *n_ids, uint32_t start_pos, const int32_t *block_table, size_t block_table_len,
                       uint32_t *next_pos, int32_t *status, void *stream)
{
	static const char fn[] = "infs_inject_device";
	if (!injector)
		return infs__error(INFS_EINVAL, "%s: injector is NULL", fn);
	int rc = infs__check_namespace(ns);
	if (rc)
		return infs__error_wrap(rc, "%s", fn);
	if (!ids || !n_ids || !block_table)
		return infs__error(INFS_EINVAL, "%s: %s is NULL", fn, !ids ? "ids" : !n_ids ? "n_ids" : "block_table");
	if (id_stride < 8 || id_stride % 8)
		return infs__error(INFS_EINVAL, "%s: id_stride %zu is not a multiple of 8 bytes of at least 8", fn,
		                   id_stride);
	if (block_table_len == 0)
		return infs__error(INFS_EINVAL, "%s: block_table_len is 0", fn);
	/* the kernels read and write whole words: a misaligned one would fault */
	const char *crooked = (uintptr_t)ids % 8          ? "ids"
	                      : (uintptr_t)n_ids % 4       ? "n_ids"
	                      : (uintptr_t)block_table % 4 ? "block_table"
	                      : (uintptr_t)next_pos % 4    ? "next_pos"
	                      : (uintptr_t)status % 4      ? "status"
	                                                   : NULL;
	if (crooked)
		return infs__error(INFS_EINVAL, "%s: %s is not aligned to its elements", fn, crooked);
	return infs__cuda->inject_on_device(injector, ns, ids, id_stride, n_ids, start_pos, block_table,
	                                    block_table_len, next_pos, status, stream);
}

int infs_rope_rotate(void *x, infs_dtype dtype, uint32_t n_tokens, uint32_t n_heads, const int32_t *positions,
                     const infs_geometry *g)
{
	static const char fn[] = "infs_rope_rotate";
	int rc = infs_geometry_validate(g);
	if (rc)
		return infs__error_wrap(rc, "%s", fn);
	if (!x)
		return infs__error(INFS_EINVAL, "%s: x is NULL", fn);
	if (!positions)
		return infs__error(INFS_EINVAL, "%s: positions is NULL", fn);
	size_t esz = infs_dtype_size(dtype);
	if (esz == 0)
		return infs__error(INFS_EINVAL, "%s: dtype %d is not a known dtype", fn, (int)dtype);
	if (!infs__dtype_cache_ok(dtype))
		return infs__error(INFS_EUNSUPPORTED, "%s: dtype %s", fn, INFS__FP8_CACHE_MSG);
	if (n_heads == 0)
		return infs__error(INFS_EINVAL, "%s: n_heads is 0", fn);
	for (uint32_t t = 0; t < n_tokens; t++)
		if (positions[t] < 0)
			return infs__error(INFS_ERANGE, "%s: positions[%u] = %d is negative", fn, t, positions[t]);

	infs__rope rope;
	infs__rope_init(&rope, g);
	float cs[2][INFS_ROPE_MAX_PAIRS], v[2 * INFS_ROPE_MAX_PAIRS];
	uint32_t D = g->head_dim, R = g->rotary_dim;
	char *row = x;
	for (uint32_t t = 0; t < n_tokens; t++) {
		infs__rope_cos_sin(&rope, positions[t], cs[0], cs[1]);
		for (uint32_t h = 0; h < n_heads; h++, row += (size_t)D * esz) {
			for (uint32_t d = 0; d < R; d++)
				v[d] = infs__load(row, dtype, d);
			infs__rope_apply(&rope, v, cs[0], cs[1]);
			for (uint32_t d = 0; d < R; d++)
				infs__store(row, dtype, d, v[d]);
		}
	}
	return INFS_OK;
}

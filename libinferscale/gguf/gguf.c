#include "gguf/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/error.h"
#include "util/file.h"

/* Arrays may nest; a crafted file could nest them deeply enough to exhaust
 * the stack, and no real model nests more than twice. */
#define MAX_ARRAY_DEPTH 16

static const struct {
	const char *name;
	uint32_t block_size, type_size;
} ggml_types[] = {
	[0] = { "F32", 1, 4 },       [1] = { "F16", 1, 2 },       [2] = { "Q4_0", 32, 18 },
	[3] = { "Q4_1", 32, 20 },    [6] = { "Q5_0", 32, 22 },    [7] = { "Q5_1", 32, 24 },
	[8] = { "Q8_0", 32, 34 },    [9] = { "Q8_1", 32, 40 },    [10] = { "Q2_K", 256, 84 },
	[11] = { "Q3_K", 256, 110 }, [12] = { "Q4_K", 256, 144 }, [13] = { "Q5_K", 256, 176 },
	[14] = { "Q6_K", 256, 210 }, [15] = { "Q8_K", 256, 292 }, [16] = { "IQ2_XXS", 256, 66 },
	[17] = { "IQ2_XS", 256, 74 }, [18] = { "IQ3_XXS", 256, 98 }, [19] = { "IQ1_S", 256, 50 },
	[20] = { "IQ4_NL", 32, 18 }, [21] = { "IQ3_S", 256, 110 }, [22] = { "IQ2_S", 256, 82 },
	[23] = { "IQ4_XS", 256, 136 }, [24] = { "I8", 1, 1 },     [25] = { "I16", 1, 2 },
	[26] = { "I32", 1, 4 },      [27] = { "I64", 1, 8 },      [28] = { "F64", 1, 8 },
	[29] = { "IQ1_M", 256, 56 }, [30] = { "BF16", 1, 2 },     [34] = { "TQ1_0", 256, 54 },
	[35] = { "TQ2_0", 256, 66 }, [39] = { "MXFP4", 32, 17 },
};

int infs__gguf_type_traits(uint32_t type, uint32_t *block_size, uint32_t *type_size)
{
	if (type >= sizeof ggml_types / sizeof *ggml_types || !ggml_types[type].name)
		return 0;
	if (block_size)
		*block_size = ggml_types[type].block_size;
	if (type_size)
		*type_size = ggml_types[type].type_size;
	return 1;
}

const char *infs__gguf_type_name(uint32_t type)
{
	return infs__gguf_type_traits(type, NULL, NULL) ? ggml_types[type].name : NULL;
}

static const char *const value_type_names[] = {
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *infs__gguf_value_type_name(uint32_t type)
{
	return type < sizeof value_type_names / sizeof *value_type_names ? value_type_names[type]
	                                                                 : "unknown";
}

/* Bytes of one element of a fixed-size value type, 0 for string, array or
 * unknown types. */
static size_t value_size(uint32_t type)
{
	switch (type) {
	case INFS_GGUF_U8: case INFS_GGUF_I8: case INFS_GGUF_BOOL: return 1;
	case INFS_GGUF_U16: case INFS_GGUF_I16: return 2;
	case INFS_GGUF_U32: case INFS_GGUF_I32: case INFS_GGUF_F32: return 4;
	case INFS_GGUF_U64: case INFS_GGUF_I64: case INFS_GGUF_F64: return 8;
	default: return 0;
	}
}

static uint64_t load_le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = n; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* Decodes one fixed-size little-endian element into v->num. */
static void decode_scalar(uint32_t type, const uint8_t *p, infs__gguf_value *v)
{
	uint64_t bits = load_le(p, value_size(type));
	switch (type) {
	case INFS_GGUF_I8: v->num.i = (int8_t)bits; break;
	case INFS_GGUF_I16: v->num.i = (int16_t)bits; break;
	case INFS_GGUF_I32: v->num.i = (int32_t)bits; break;
	case INFS_GGUF_I64: v->num.i = (int64_t)bits; break;
	case INFS_GGUF_F32: {
		uint32_t b32 = (uint32_t)bits;
		float f;
		memcpy(&f, &b32, 4);
		v->num.f = f;
		break;
	}
	case INFS_GGUF_F64: memcpy(&v->num.f, &bits, 8); break;
	default: v->num.u = bits; break;
	}
}

typedef struct cursor {
	const uint8_t *data;
	size_t size;
	size_t pos;
	const char *name;
	char what[160]; /* what is being read, for messages */
} cursor;

static int truncated(const cursor *c, size_t need)
{
	return infs__error(INFS_EFORMAT,
	                   "gguf: %s: truncated: %s needs %zu bytes at offset %zu but the file is %zu bytes",
	                   c->name, c->what, need, c->pos, c->size);
}

static int take(cursor *c, size_t n, const uint8_t **out)
{
	*out = c->data + c->pos;
	if (n > c->size - c->pos)
		return truncated(c, n);
	c->pos += n;
	return INFS_OK;
}

static int take_u32(cursor *c, uint32_t *v)
{
	const uint8_t *p;
	int rc = take(c, 4, &p);
	if (rc == INFS_OK)
		*v = (uint32_t)load_le(p, 4);
	return rc;
}

static int take_u64(cursor *c, uint64_t *v)
{
	const uint8_t *p;
	int rc = take(c, 8, &p);
	if (rc == INFS_OK)
		*v = load_le(p, 8);
	return rc;
}

static int take_str(cursor *c, infs__gguf_str *s)
{
	uint64_t len;
	int rc = take_u64(c, &len);
	if (rc != INFS_OK)
		return rc;
	if (len > c->size - c->pos) {
		c->pos -= 8;
		return infs__error(INFS_EFORMAT,
		                   "gguf: %s: truncated: %s has length %llu at offset %zu but the file is %zu bytes",
		                   c->name, c->what, (unsigned long long)len, c->pos, c->size);
	}
	s->ptr = (const char *)c->data + c->pos;
	s->len = len;
	c->pos += (size_t)len;
	return INFS_OK;
}

static void value_free(infs__gguf_value *v)
{
	if (v->type != INFS_GGUF_ARRAY)
		return;
	if (v->items)
		for (uint64_t i = 0; i < v->n; i++)
			value_free(&v->items[i]);
	free(v->items);
	free(v->strs);
	v->items = NULL;
	v->strs = NULL;
}

static int parse_value(cursor *c, uint32_t type, infs__gguf_value *v, int depth)
{
	memset(v, 0, sizeof *v);
	v->type = type;
	size_t sz = value_size(type);
	if (sz) {
		const uint8_t *p;
		int rc = take(c, sz, &p);
		if (rc != INFS_OK)
			return rc;
		decode_scalar(type, p, v);
		if (type == INFS_GGUF_BOOL && v->num.u > 1)
			return infs__error(INFS_EFORMAT, "gguf: %s: %s: bool value %u at offset %zu is not 0 or 1",
			                   c->name, c->what, (unsigned)v->num.u, c->pos - 1);
		return INFS_OK;
	}
	if (type == INFS_GGUF_STRING)
		return take_str(c, &v->str);
	if (type != INFS_GGUF_ARRAY)
		return infs__error(INFS_EFORMAT, "gguf: %s: %s: unknown metadata value type %u before offset %zu",
		                   c->name, c->what, type, c->pos);
	if (depth >= MAX_ARRAY_DEPTH)
		return infs__error(INFS_EFORMAT, "gguf: %s: %s: arrays nested deeper than %d levels",
		                   c->name, c->what, MAX_ARRAY_DEPTH);
	int rc = take_u32(c, &v->elem_type);
	if (rc == INFS_OK)
		rc = take_u64(c, &v->n);
	if (rc != INFS_OK)
		return rc;
	size_t left = c->size - c->pos;
	/* Each element occupies at least min bytes of the file, which bounds
	 * both the loop and the index allocated below by the file size. */
	size_t esz = value_size(v->elem_type);
	size_t min = esz ? esz : v->elem_type == INFS_GGUF_STRING ? 8 : v->elem_type == INFS_GGUF_ARRAY ? 12 : 0;
	if (!min)
		return infs__error(INFS_EFORMAT, "gguf: %s: %s: array of unknown metadata value type %u at offset %zu",
		                   c->name, c->what, v->elem_type, c->pos - 12);
	if (v->n > left / min)
		return infs__error(INFS_EFORMAT,
		                   "gguf: %s: truncated: %s: array of %llu %s at offset %zu needs at least %llu bytes, %zu are left",
		                   c->name, c->what, (unsigned long long)v->n, infs__gguf_value_type_name(v->elem_type),
		                   c->pos - 12, (unsigned long long)v->n * min, left);
	if (esz) {
		v->raw = c->data + c->pos;
		c->pos += (size_t)v->n * esz;
		return INFS_OK;
	}
	if (v->n == 0)
		return INFS_OK;
	if (v->elem_type == INFS_GGUF_STRING) {
		v->strs = malloc((size_t)v->n * sizeof *v->strs);
		if (!v->strs)
			return infs__error(INFS_ENOMEM, "gguf: %s: no memory for %llu strings", c->name,
			                   (unsigned long long)v->n);
		for (uint64_t i = 0; i < v->n; i++)
			if ((rc = take_str(c, &v->strs[i])) != INFS_OK)
				return rc;
		return INFS_OK;
	}
	v->items = calloc((size_t)v->n, sizeof *v->items);
	if (!v->items)
		return infs__error(INFS_ENOMEM, "gguf: %s: no memory for %llu arrays", c->name,
		                   (unsigned long long)v->n);
	/* An element of an array of arrays is an array without its type tag. */
	for (uint64_t i = 0; i < v->n; i++)
		if ((rc = parse_value(c, INFS_GGUF_ARRAY, &v->items[i], depth + 1)) != INFS_OK)
			return rc;
	return INFS_OK;
}

static int cmp_str(infs__gguf_str a, infs__gguf_str b)
{
	size_t n = a.len < b.len ? (size_t)a.len : (size_t)b.len;
	int r = n ? memcmp(a.ptr, b.ptr, n) : 0;
	return r ? r : (a.len > b.len) - (a.len < b.len);
}

static int cmp_str_p(const void *a, const void *b)
{
	return cmp_str(**(infs__gguf_str *const *)a, **(infs__gguf_str *const *)b);
}

/* Finds a name that occurs twice among n strings (each at base + i*stride),
 * in O(n log n) so that a file with many entries cannot stall the reader. */
static int find_duplicate(const void *base, size_t n, size_t stride, infs__gguf_str *dup)
{
	if (n < 2)
		return 0;
	const infs__gguf_str **v = malloc(n * sizeof *v);
	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++)
		v[i] = (const infs__gguf_str *)((const char *)base + i * stride);
	qsort(v, n, sizeof *v, cmp_str_p);
	int found = 0;
	for (size_t i = 1; i < n && !found; i++)
		if (cmp_str(*v[i - 1], *v[i]) == 0) {
			*dup = *v[i];
			found = 1;
		}
	free(v);
	return found;
}

/* At most 64 bytes of s, printable, for messages. */
static const char *shown(infs__gguf_str s, char buf[80])
{
	size_t n = s.len < 64 ? (size_t)s.len : 64, j = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s.ptr[i];
		buf[j++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	if (s.len > 64) {
		memcpy(buf + j, "...", 3);
		j += 3;
	}
	buf[j] = '\0';
	return buf;
}

void infs__gguf_close(infs__gguf *g)
{
	if (!g)
		return;
	if (g->kv)
		for (uint64_t i = 0; i < g->n_kv; i++)
			value_free(&g->kv[i].value);
	free(g->kv);
	free(g->tensors);
	if (g->mapped)
		munmap((void *)g->data, g->size);
	free(g);
}

static int parse_header(cursor *c, infs__gguf *g, uint64_t *n_kv_out)
{
	const uint8_t *p;
	snprintf(c->what, sizeof c->what, "the magic");
	int rc = take(c, 4, &p);
	if (rc != INFS_OK)
		return rc;
	if (memcmp(p, "GGUF", 4) != 0)
		return infs__error(INFS_EFORMAT,
		                   "gguf: %s: not a GGUF file: wrong magic %02x %02x %02x %02x (expected \"GGUF\")",
		                   c->name, p[0], p[1], p[2], p[3]);
	snprintf(c->what, sizeof c->what, "the version");
	if ((rc = take_u32(c, &g->version)) != INFS_OK)
		return rc;
	uint32_t v = g->version, swapped = (v >> 24) | (v >> 8 & 0xff00) | (v << 8 & 0xff0000) | (v << 24);
	if (v != 2 && v != 3) {
		if (swapped == 2 || swapped == 3)
			return infs__error(INFS_EFORMAT, "gguf: %s: big-endian GGUF files are not supported", c->name);
		return infs__error(INFS_EFORMAT, "gguf: %s: unsupported GGUF version %u (versions 2 and 3 are read)",
		                   c->name, v);
	}
	snprintf(c->what, sizeof c->what, "the tensor count");
	if ((rc = take_u64(c, &g->n_tensors)) != INFS_OK)
		return rc;
	snprintf(c->what, sizeof c->what, "the metadata count");
	uint64_t n_kv;
	if ((rc = take_u64(c, &n_kv)) != INFS_OK)
		return rc;
	/* A key/value pair takes at least 13 bytes and a tensor info 24. */
	size_t left = c->size - c->pos;
	if (n_kv > left / 13)
		return infs__error(INFS_EFORMAT, "gguf: %s: truncated: %llu metadata entries cannot fit in %zu bytes",
		                   c->name, (unsigned long long)n_kv, left);
	if (g->n_tensors > left / 24)
		return infs__error(INFS_EFORMAT, "gguf: %s: truncated: %llu tensor infos cannot fit in %zu bytes",
		                   c->name, (unsigned long long)g->n_tensors, left);
	if (n_kv && !(g->kv = calloc((size_t)n_kv, sizeof *g->kv)))
		return infs__error(INFS_ENOMEM, "gguf: %s: no memory for %llu metadata entries", c->name,
		                   (unsigned long long)n_kv);
	if (g->n_tensors && !(g->tensors = calloc((size_t)g->n_tensors, sizeof *g->tensors)))
		return infs__error(INFS_ENOMEM, "gguf: %s: no memory for %llu tensor infos", c->name,
		                   (unsigned long long)g->n_tensors);
	*n_kv_out = n_kv;
	return INFS_OK;
}

static int parse_metadata(cursor *c, infs__gguf *g, uint64_t n_kv)
{
	char buf[80];
	for (uint64_t i = 0; i < n_kv; i++) {
		infs__gguf_kv *kv = &g->kv[i];
		snprintf(c->what, sizeof c->what, "the key of metadata entry %llu", (unsigned long long)i);
		int rc = take_str(c, &kv->key);
		uint32_t type = 0;
		if (rc == INFS_OK) {
			snprintf(c->what, sizeof c->what, "metadata '%s'", shown(kv->key, buf));
			rc = take_u32(c, &type);
		}
		if (rc == INFS_OK)
			rc = parse_value(c, type, &kv->value, 0);
		g->n_kv = i + 1;
		if (rc != INFS_OK)
			return rc;
	}
	infs__gguf_str dup;
	int d = find_duplicate(g->kv, (size_t)g->n_kv, sizeof *g->kv, &dup);
	if (d < 0)
		return infs__error(INFS_ENOMEM, "gguf: %s: no memory to check the metadata keys", c->name);
	if (d)
		return infs__error(INFS_EFORMAT, "gguf: %s: metadata key '%s' appears twice", c->name, shown(dup, buf));

	g->alignment = INFS_GGUF_DEFAULT_ALIGNMENT;
	const infs__gguf_kv *al = infs__gguf_find(g, "general.alignment");
	if (al) {
		if (al->value.type != INFS_GGUF_U32)
			return infs__error(INFS_EFORMAT, "gguf: %s: general.alignment has type %s, expected u32",
			                   c->name, infs__gguf_value_type_name(al->value.type));
		uint64_t a = al->value.num.u;
		if (a == 0 || (a & (a - 1)) != 0)
			return infs__error(INFS_EFORMAT, "gguf: %s: general.alignment %llu is not a power of two",
			                   c->name, (unsigned long long)a);
		g->alignment = a;
	}
	return INFS_OK;
}

static int parse_tensor_info(cursor *c, infs__gguf *g, uint64_t i)
{
	char buf[80];
	infs__gguf_tensor *t = &g->tensors[i];
	snprintf(c->what, sizeof c->what, "the name of tensor %llu", (unsigned long long)i);
	int rc = take_str(c, &t->name);
	if (rc != INFS_OK)
		return rc;
	const char *nm = shown(t->name, buf);
	snprintf(c->what, sizeof c->what, "tensor '%s'", nm);
	if ((rc = take_u32(c, &t->n_dims)) != INFS_OK)
		return rc;
	if (t->n_dims > INFS_GGUF_MAX_DIMS)
		return infs__error(INFS_EFORMAT, "gguf: %s: tensor '%s' has %u dimensions (at most %d)", c->name, nm,
		                   t->n_dims, INFS_GGUF_MAX_DIMS);
	t->n_elements = 1;
	for (uint32_t d = 0; d < INFS_GGUF_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d < t->n_dims && (rc = take_u64(c, &t->ne[d])) != INFS_OK)
			return rc;
		/* ggml keeps dimensions as int64_t. */
		if (t->ne[d] > INT64_MAX || (t->ne[d] && t->n_elements > (uint64_t)INT64_MAX / t->ne[d]))
			return infs__error(INFS_EFORMAT, "gguf: %s: tensor '%s': element count overflows", c->name, nm);
		t->n_elements *= t->ne[d];
	}
	if ((rc = take_u32(c, &t->type)) != INFS_OK || (rc = take_u64(c, &t->offset)) != INFS_OK)
		return rc;
	uint32_t bs, ts;
	if (!infs__gguf_type_traits(t->type, &bs, &ts))
		return infs__error(INFS_EFORMAT, "gguf: %s: tensor '%s' has unknown tensor type id %u", c->name, nm,
		                   t->type);
	if (t->ne[0] % bs != 0)
		return infs__error(INFS_EFORMAT,
		                   "gguf: %s: tensor '%s': row of %llu elements is not a whole number of %s blocks of %u",
		                   c->name, nm, (unsigned long long)t->ne[0], ggml_types[t->type].name, bs);
	if (t->offset % g->alignment != 0)
		return infs__error(INFS_EFORMAT, "gguf: %s: tensor '%s': data offset %llu is not a multiple of the alignment %llu",
		                   c->name, nm, (unsigned long long)t->offset, (unsigned long long)g->alignment);
	uint64_t rows = t->ne[0] ? t->n_elements / t->ne[0] : 0;
	uint64_t row_bytes = t->ne[0] / bs * ts;
	if (rows && row_bytes > UINT64_MAX / rows)
		return infs__error(INFS_EFORMAT, "gguf: %s: tensor '%s': byte size overflows", c->name, nm);
	t->nbytes = row_bytes * rows;
	return INFS_OK;
}

static int parse(cursor *c, infs__gguf *g)
{
	/* g->n_kv counts the entries parsed so far, for close() to free. */
	uint64_t n_kv = 0;
	int rc = parse_header(c, g, &n_kv);
	if (rc != INFS_OK)
		return rc;
	if ((rc = parse_metadata(c, g, n_kv)) != INFS_OK)
		return rc;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if ((rc = parse_tensor_info(c, g, i)) != INFS_OK)
			return rc;
	char buf[80];
	infs__gguf_str dup;
	int d = find_duplicate(g->tensors, (size_t)g->n_tensors, sizeof *g->tensors, &dup);
	if (d < 0)
		return infs__error(INFS_ENOMEM, "gguf: %s: no memory to check the tensor names", c->name);
	if (d)
		return infs__error(INFS_EFORMAT, "gguf: %s: tensor name '%s' appears twice", c->name, shown(dup, buf));

	uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
	g->data_offset = (uint64_t)c->pos + pad;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		infs__gguf_tensor *t = &g->tensors[i];
		if (g->data_offset > c->size || t->offset > c->size - g->data_offset ||
		    t->nbytes > c->size - g->data_offset - t->offset)
			return infs__error(INFS_EFORMAT,
			                   "gguf: %s: tensor '%s' data out of bounds: %llu bytes at offset %llu + %llu, file is %zu bytes",
			                   c->name, shown(t->name, buf), (unsigned long long)t->nbytes,
			                   (unsigned long long)g->data_offset, (unsigned long long)t->offset, c->size);
		t->offset += g->data_offset;
		t->data = c->data + t->offset;
	}
	return INFS_OK;
}

int infs__gguf_open_memory(infs__gguf **out, const void *data, size_t size, const char *name)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs__gguf_open_memory: out is NULL");
	*out = NULL;
	if (!data && size)
		return infs__error(INFS_EINVAL, "infs__gguf_open_memory: data is NULL");
	infs__gguf *g = calloc(1, sizeof *g);
	if (!g)
		return infs__error(INFS_ENOMEM, "gguf: no memory");
	g->data = data;
	g->size = size;
	cursor c = { .data = data, .size = size, .name = name ? name : "<memory>" };
	int rc = parse(&c, g);
	if (rc != INFS_OK) {
		infs__gguf_close(g);
		return rc;
	}
	*out = g;
	return INFS_OK;
}

int infs__gguf_open(infs__gguf **out, const char *path)
{
	if (!out || !path)
		return infs__error(INFS_EINVAL, "infs__gguf_open: %s is NULL", out ? "path" : "out");
	*out = NULL;
	int fd;
	size_t size;
	int rc = infs__file_open(&fd, &size, path, UINT64_MAX);
	if (rc != INFS_OK)
		return infs__error_wrap(rc, "gguf");
	void *map = NULL;
	if (size) {
		map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			int e = errno;
			close(fd);
			return infs__error(INFS_EIO, "gguf: cannot map %s: %s", path, strerror(e));
		}
	}
	close(fd);
	infs__gguf *g;
	rc = infs__gguf_open_memory(&g, map ? map : "", size, path);
	if (rc != INFS_OK) {
		if (map)
			munmap(map, size);
		return rc;
	}
	g->mapped = map != NULL;
	*out = g;
	return INFS_OK;
}

int infs__gguf_str_eq(infs__gguf_str s, const char *text)
{
	size_t n = strlen(text);
	return s.len == n && memcmp(s.ptr, text, n) == 0;
}

const infs__gguf_kv *infs__gguf_find(const infs__gguf *g, const char *key)
{
	if (!g || !key)
		return NULL;
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (infs__gguf_str_eq(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

const infs__gguf_tensor *infs__gguf_tensor_find(const infs__gguf *g, const char *name)
{
	if (!g || !name)
		return NULL;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (infs__gguf_str_eq(g->tensors[i].name, name))
			return &g->tensors[i];
	return NULL;
}

static int is_int_type(uint32_t t)
{
	return t <= INFS_GGUF_I32 || t == INFS_GGUF_BOOL || t == INFS_GGUF_U64 || t == INFS_GGUF_I64;
}

static int is_signed_type(uint32_t t)
{
	return t == INFS_GGUF_I8 || t == INFS_GGUF_I16 || t == INFS_GGUF_I32 || t == INFS_GGUF_I64;
}

static int is_float_type(uint32_t t)
{
	return t == INFS_GGUF_F32 || t == INFS_GGUF_F64;
}

static int lookup(const infs__gguf *g, const char *key, const infs__gguf_kv **kv)
{
	if (!g || !key)
		return infs__error(INFS_EINVAL, "gguf: NULL handle or key");
	*kv = infs__gguf_find(g, key);
	if (!*kv)
		return infs__error(INFS_ENOTFOUND, "gguf: metadata '%s' is missing", key);
	return INFS_OK;
}

static int wrong_type(const char *key, uint32_t type, const char *expected)
{
	return infs__error(INFS_EFORMAT, "gguf: metadata '%s' has type %s, expected %s", key,
	                   infs__gguf_value_type_name(type), expected);
}

int infs__gguf_get_int(const infs__gguf *g, const char *key, int64_t *out)
{
	const infs__gguf_kv *kv;
	int rc = lookup(g, key, &kv);
	if (rc != INFS_OK)
		return rc;
	const infs__gguf_value *v = &kv->value;
	if (!is_int_type(v->type))
		return wrong_type(key, v->type, "an integer");
	if (!is_signed_type(v->type) && v->num.u > (uint64_t)INT64_MAX)
		return infs__error(INFS_EFORMAT, "gguf: metadata '%s' value %llu is out of range", key,
		                   (unsigned long long)v->num.u);
	*out = is_signed_type(v->type) ? v->num.i : (int64_t)v->num.u;
	return INFS_OK;
}

int infs__gguf_get_float(const infs__gguf *g, const char *key, double *out)
{
	const infs__gguf_kv *kv;
	int rc = lookup(g, key, &kv);
	if (rc != INFS_OK)
		return rc;
	const infs__gguf_value *v = &kv->value;
	if (is_float_type(v->type))
		*out = v->num.f;
	else if (is_int_type(v->type) && v->type != INFS_GGUF_BOOL)
		*out = is_signed_type(v->type) ? (double)v->num.i : (double)v->num.u;
	else
		return wrong_type(key, v->type, "a number");
	return INFS_OK;
}

int infs__gguf_get_bool(const infs__gguf *g, const char *key, int *out)
{
	const infs__gguf_kv *kv;
	int rc = lookup(g, key, &kv);
	if (rc != INFS_OK)
		return rc;
	if (kv->value.type != INFS_GGUF_BOOL)
		return wrong_type(key, kv->value.type, "bool");
	*out = (int)kv->value.num.u;
	return INFS_OK;
}

int infs__gguf_get_str(const infs__gguf *g, const char *key, infs__gguf_str *out)
{
	const infs__gguf_kv *kv;
	int rc = lookup(g, key, &kv);
	if (rc != INFS_OK)
		return rc;
	if (kv->value.type != INFS_GGUF_STRING)
		return wrong_type(key, kv->value.type, "string");
	*out = kv->value.str;
	return INFS_OK;
}

int infs__gguf_get_arr(const infs__gguf *g, const char *key, uint32_t elem_type,
                       const infs__gguf_value **out)
{
	const infs__gguf_kv *kv;
	int rc = lookup(g, key, &kv);
	if (rc != INFS_OK)
		return rc;
	const infs__gguf_value *v = &kv->value;
	if (v->type != INFS_GGUF_ARRAY)
		return wrong_type(key, v->type, "array");
	int ok = elem_type == INFS_GGUF_I64 ? is_int_type(v->elem_type)
	       : elem_type == INFS_GGUF_F64 ? is_int_type(v->elem_type) || is_float_type(v->elem_type)
	       : v->elem_type == elem_type;
	if (!ok)
		return infs__error(INFS_EFORMAT, "gguf: metadata '%s' is an array of %s, expected %s", key,
		                   infs__gguf_value_type_name(v->elem_type),
		                   elem_type == INFS_GGUF_I64 ? "integers"
		                   : elem_type == INFS_GGUF_F64 ? "numbers" : infs__gguf_value_type_name(elem_type));
	*out = v;
	return INFS_OK;
}

static infs__gguf_value element(const infs__gguf_value *arr, uint64_t i)
{
	infs__gguf_value e;
	memset(&e, 0, sizeof e);
	size_t sz = value_size(arr->elem_type);
	e.type = arr->elem_type;
	decode_scalar(arr->elem_type, arr->raw + i * sz, &e);
	return e;
}

int64_t infs__gguf_arr_int(const infs__gguf_value *arr, uint64_t i)
{
	infs__gguf_value e = element(arr, i);
	return is_signed_type(e.type) ? e.num.i : (int64_t)e.num.u;
}

double infs__gguf_arr_float(const infs__gguf_value *arr, uint64_t i)
{
	infs__gguf_value e = element(arr, i);
	return is_float_type(e.type) ? e.num.f : is_signed_type(e.type) ? (double)e.num.i : (double)e.num.u;
}

/* The GGUF reader on generated images: every metadata type, tensor infos,
 * alignment, and a clear INFS_EFORMAT for each kind of damage. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gguf/gguf.h"
#include "gguf_builder.h"

static int open_buf(infs__gguf **g, const gbuf *b)
{
	return infs__gguf_open_memory(g, b->p, b->n, "test.gguf");
}

/* Opening damaged must fail with INFS_EFORMAT and a message holding want. */
static void expect_format_error(const gbuf *damaged, const char *want, int line)
{
	infs__gguf *g = (infs__gguf *)1;
	int rc = open_buf(&g, damaged);
	if (rc != INFS_EFORMAT || g != NULL || !strstr(infs_error_last(), want)) {
		fprintf(stderr, "line %d: rc %d, message '%s', expected '%s'\n", line, rc, infs_error_last(), want);
		check_failures++;
	}
}

static gbuf copy(const gbuf *b)
{
	gbuf c = { malloc(b->n), b->n, b->n };
	memcpy(c.p, b->p, b->n);
	return c;
}

/* Offset of the first occurrence of s in b. */
static size_t find(const gbuf *b, const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i + n <= b->n; i++)
		if (memcmp(b->p + i, s, n) == 0)
			return i;
	abort();
}

static void put_u32(gbuf *b, size_t at, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b->p[at + i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(gbuf *b, size_t at, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b->p[at + i] = (uint8_t)(v >> (8 * i));
}

static void test_sample(const gbuf *b, const size_t off[3])
{
	infs__gguf *g;
	CHECK_OK(open_buf(&g, b));
	if (!g)
		return;
	CHECK(g->version == 3 && g->alignment == 64 && g->n_kv == 16 && g->n_tensors == 3);
	CHECK(g->data_offset == off[0]);

	int64_t iv;
	double fv;
	int bv;
	infs__gguf_str s;
	CHECK_OK(infs__gguf_get_str(g, "general.architecture", &s));
	CHECK(infs__gguf_str_eq(s, "llama"));
	CHECK_OK(infs__gguf_get_int(g, "t.u8", &iv)); CHECK(iv == 200);
	CHECK_OK(infs__gguf_get_int(g, "t.i8", &iv)); CHECK(iv == -2);
	CHECK_OK(infs__gguf_get_int(g, "t.u16", &iv)); CHECK(iv == 65000);
	CHECK_OK(infs__gguf_get_int(g, "t.i16", &iv)); CHECK(iv == -32768);
	CHECK_OK(infs__gguf_get_int(g, "t.u32", &iv)); CHECK(iv == 4000000000);
	CHECK_OK(infs__gguf_get_int(g, "t.i32", &iv)); CHECK(iv == -7);
	CHECK_OK(infs__gguf_get_int(g, "t.u64", &iv)); CHECK(iv == 1ll << 40);
	CHECK_OK(infs__gguf_get_int(g, "t.i64", &iv)); CHECK(iv == -5);
	CHECK_OK(infs__gguf_get_float(g, "t.f32", &fv)); CHECK(fv == 0.5);
	CHECK_OK(infs__gguf_get_float(g, "t.f64", &fv)); CHECK(fabs(fv - 3.14159265358979) < 1e-12);
	CHECK_OK(infs__gguf_get_float(g, "t.i32", &fv)); CHECK(fv == -7);
	CHECK_OK(infs__gguf_get_bool(g, "t.bool", &bv)); CHECK(bv == 1);
	CHECK_ERR(infs__gguf_get_int(g, "t.f32", &iv), INFS_EFORMAT);
	CHECK(strstr(infs_error_last(), "t.f32") != NULL);
	CHECK_ERR(infs__gguf_get_str(g, "t.u8", &s), INFS_EFORMAT);
	CHECK_ERR(infs__gguf_get_bool(g, "t.u8", &bv), INFS_EFORMAT);
	CHECK_ERR(infs__gguf_get_int(g, "nope", &iv), INFS_ENOTFOUND);
	CHECK(strstr(infs_error_last(), "nope") != NULL);

	const infs__gguf_value *a;
	CHECK_OK(infs__gguf_get_arr(g, "t.strs", INFS_GGUF_STRING, &a));
	CHECK(a && a->n == 3 && infs__gguf_str_eq(a->strs[0], "a") && a->strs[1].len == 0 &&
	      infs__gguf_str_eq(a->strs[2], "hello"));
	CHECK_OK(infs__gguf_get_arr(g, "t.i32s", INFS_GGUF_I64, &a));
	CHECK(a && a->n == 3 && infs__gguf_arr_int(a, 0) == 1 && infs__gguf_arr_int(a, 1) == -2 &&
	      infs__gguf_arr_int(a, 2) == 3);
	CHECK_OK(infs__gguf_get_arr(g, "t.i32s", INFS_GGUF_F64, &a));
	CHECK(a && infs__gguf_arr_float(a, 1) == -2.0);
	CHECK_ERR(infs__gguf_get_arr(g, "t.i32s", INFS_GGUF_STRING, &a), INFS_EFORMAT);
	CHECK_ERR(infs__gguf_get_arr(g, "t.u8", INFS_GGUF_U8, &a), INFS_EFORMAT);
	CHECK_OK(infs__gguf_get_arr(g, "t.nested", INFS_GGUF_ARRAY, &a));
	CHECK(a && a->n == 2 && a->items[0].elem_type == INFS_GGUF_F32 && a->items[0].n == 2 &&
	      infs__gguf_arr_float(&a->items[0], 0) == 1.5 && infs__gguf_arr_float(&a->items[0], 1) == -2.0 &&
	      a->items[1].elem_type == INFS_GGUF_STRING && infs__gguf_str_eq(a->items[1].strs[0], "x"));

	const infs__gguf_tensor *t = infs__gguf_tensor_find(g, "w.f32");
	CHECK(t && t->type == INFS_GGML_F32 && t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 3 &&
	      t->ne[2] == 1 && t->n_elements == 12 && t->nbytes == 48 && t->offset == off[0] &&
	      t->data == b->p + off[0]);
	if (t) {
		float f;
		memcpy(&f, (const char *)t->data + 4 * 7, 4);
		CHECK(f == 7.0f);
	}
	t = infs__gguf_tensor_find(g, "w.q4_1");
	CHECK(t && t->type == INFS_GGML_Q4_1 && t->nbytes == 80 && t->offset == off[1]);
	t = infs__gguf_tensor_find(g, "w.q8_0");
	CHECK(t && t->type == INFS_GGML_Q8_0 && t->nbytes == 34 && t->offset == off[2] &&
	      ((const uint8_t *)t->data)[0] == 255);
	CHECK(infs__gguf_tensor_find(g, "w") == NULL);
	infs__gguf_close(g);
}

static void test_types(void)
{
	uint32_t bs, ts;
	CHECK(infs__gguf_type_traits(INFS_GGML_Q4_K, &bs, &ts) && bs == 256 && ts == 144);
	CHECK(infs__gguf_type_traits(INFS_GGML_BF16, &bs, &ts) && bs == 1 && ts == 2);
	CHECK(!infs__gguf_type_traits(4, &bs, &ts));   /* removed Q4_2 */
	CHECK(!infs__gguf_type_traits(1000, &bs, &ts));
	CHECK(strcmp(infs__gguf_type_name(INFS_GGML_Q6_K), "Q6_K") == 0);
	CHECK(infs__gguf_type_name(31) == NULL);
}

/* Each kind of damage named in the message. */
static void test_errors(const gbuf *b, const size_t off[3])
{
	gbuf d = copy(b);
	d.p[0] = 'X';
	expect_format_error(&d, "wrong magic", __LINE__);
	free(d.p);

	d = copy(b);
	put_u32(&d, 4, 1);
	expect_format_error(&d, "unsupported GGUF version 1", __LINE__);
	put_u32(&d, 4, 0x03000000);
	expect_format_error(&d, "big-endian", __LINE__);
	put_u32(&d, 4, 2); /* version 2 has the same layout */
	infs__gguf *g;
	CHECK_OK(open_buf(&g, &d));
	infs__gguf_close(g);
	free(d.p);

	d = copy(b);
	put_u32(&d, find(&d, "t.u8") + 4, 13);
	expect_format_error(&d, "unknown metadata value type 13", __LINE__);
	free(d.p);

	d = copy(b);
	put_u32(&d, find(&d, "t.i32s") + 6 + 4, 77);
	expect_format_error(&d, "array of unknown metadata value type 77", __LINE__);
	free(d.p);

	d = copy(b);
	put_u32(&d, find(&d, "w.q4_1") + 6 + 4 + 16, 4);
	expect_format_error(&d, "'w.q4_1' has unknown tensor type id 4", __LINE__);
	free(d.p);

	d = copy(b);
	put_u64(&d, find(&d, "w.q8_0") + 6 + 4 + 8 + 4, 1024);
	expect_format_error(&d, "'w.q8_0' data out of bounds", __LINE__);
	put_u64(&d, find(&d, "w.q8_0") + 6 + 4 + 8 + 4, UINT64_MAX - 63);
	expect_format_error(&d, "out of bounds", __LINE__);
	put_u64(&d, find(&d, "w.q8_0") + 6 + 4 + 8 + 4, 260);
	expect_format_error(&d, "not a multiple of the alignment 64", __LINE__);
	free(d.p);

	d = copy(b);
	put_u64(&d, find(&d, "w.q8_0") + 6 + 4, 33);
	expect_format_error(&d, "not a whole number of Q8_0 blocks", __LINE__);
	put_u64(&d, find(&d, "w.q8_0") + 6 + 4, 1ull << 62);
	expect_format_error(&d, "out of bounds", __LINE__);
	free(d.p);

	d = copy(b);
	put_u64(&d, find(&d, "w.f32") + 5 + 4, 1ull << 40);
	put_u64(&d, find(&d, "w.f32") + 5 + 4 + 8, 1ull << 40);
	expect_format_error(&d, "element count overflows", __LINE__);
	put_u32(&d, find(&d, "w.f32") + 5, 5);
	expect_format_error(&d, "has 5 dimensions", __LINE__);
	free(d.p);

	d = copy(b);
	put_u32(&d, find(&d, "general.alignment") + 17 + 4, 48);
	expect_format_error(&d, "general.alignment 48 is not a power of two", __LINE__);
	put_u32(&d, find(&d, "general.alignment") + 17, 5);
	expect_format_error(&d, "general.alignment has type i32", __LINE__);
	free(d.p);

	d = copy(b);
	memcpy(d.p + find(&d, "t.i16"), "t.u16", 5);
	expect_format_error(&d, "metadata key 't.u16' appears twice", __LINE__);
	free(d.p);

	d = copy(b);
	memcpy(d.p + find(&d, "w.q4_1"), "w.q8_0", 6);
	expect_format_error(&d, "tensor name 'w.q8_0' appears twice", __LINE__);
	free(d.p);

	d = copy(b);
	d.p[find(&d, "t.bool") + 6 + 4] = 2;
	expect_format_error(&d, "bool value 2", __LINE__);
	free(d.p);

	d = copy(b);
	put_u64(&d, 8, 1ull << 60);
	expect_format_error(&d, "tensor infos cannot fit", __LINE__);
	put_u64(&d, 8, 3);
	put_u64(&d, 16, UINT64_MAX);
	expect_format_error(&d, "metadata entries cannot fit", __LINE__);
	free(d.p);

	d = copy(b);
	put_u64(&d, find(&d, "t.strs") + 6 + 4 + 4, 1ull << 61);
	expect_format_error(&d, "truncated", __LINE__);
	put_u64(&d, find(&d, "t.strs") + 6 + 4 + 4, 3);
	put_u64(&d, find(&d, "hello") - 8, 1ull << 50);
	expect_format_error(&d, "has length", __LINE__);
	free(d.p);

	d.n = off[2] + 33;
	d.p = b->p;
	expect_format_error(&d, "'w.q8_0' data out of bounds", __LINE__);
	d.n = 3;
	expect_format_error(&d, "truncated: the magic needs 4 bytes", __LINE__);
	d.n = 0;
	expect_format_error(&d, "truncated", __LINE__);

	/* Arrays of arrays nested 20 deep. */
	gbuf n = { 0 };
	gb_put(&n, "GGUF", 4);
	gb_u32(&n, 3); gb_u64(&n, 0); gb_u64(&n, 1);
	gb_str(&n, "deep"); gb_u32(&n, 9);
	for (int i = 0; i < 20; i++) {
		gb_u32(&n, 9);
		gb_u64(&n, 1);
	}
	gb_u32(&n, 0);
	gb_u64(&n, 0);
	expect_format_error(&n, "nested deeper than 16", __LINE__);
	free(n.p);

	/* No tensors, no data section: valid. */
	gbuf e = { 0 };
	gb_put(&e, "GGUF", 4);
	gb_u32(&e, 2); gb_u64(&e, 0); gb_u64(&e, 0);
	CHECK_OK(open_buf(&g, &e));
	CHECK(g && g->n_kv == 0 && g->n_tensors == 0);
	infs__gguf_close(g);
	free(e.p);
}

/* Truncation at every length and corruption of every byte with a few values:
 * each open either succeeds or fails with INFS_EFORMAT and a message, never
 * crashes or reads outside the image (the ASan build checks the latter). A
 * copy of exactly the truncated length is parsed so overreads are caught. */
static void test_mutations(const gbuf *b, const size_t off[3])
{
	size_t end = off[2] + 34;
	int oks = 0, errs = 0;
	for (size_t len = 0; len < b->n; len++) {
		uint8_t *p = malloc(len ? len : 1);
		memcpy(p, b->p, len);
		infs__gguf *g = (infs__gguf *)1;
		int rc = infs__gguf_open_memory(&g, p, len, "cut");
		if (len < end) {
			if (rc != INFS_EFORMAT || g || !strstr(infs_error_last(), "cut")) {
				fprintf(stderr, "truncated to %zu: rc %d %s\n", len, rc, infs_error_last());
				check_failures++;
			}
		} else {
			CHECK(rc == INFS_OK);
			infs__gguf_close(g);
		}
		free(p);
	}
	static const uint8_t vals[] = { 0x00, 0x01, 0x07, 0x09, 0x0d, 0x20, 0x7f, 0x80, 0xff };
	for (size_t i = 0; i < off[0]; i++) {
		for (size_t k = 0; k < sizeof vals; k++) {
			gbuf d = copy(b);
			if (d.p[i] == vals[k]) {
				free(d.p);
				continue;
			}
			d.p[i] = vals[k];
			infs__gguf *g = (infs__gguf *)1;
			int rc = open_buf(&g, &d);
			if (rc == INFS_OK) {
				oks++;
				/* Whatever parsed must lie inside the image. */
				for (uint64_t t = 0; t < g->n_tensors; t++) {
					const infs__gguf_tensor *ti = &g->tensors[t];
					CHECK(ti->offset + ti->nbytes <= d.n);
					CHECK((const uint8_t *)ti->name.ptr >= d.p &&
					      (const uint8_t *)ti->name.ptr + ti->name.len <= d.p + d.n);
				}
				infs__gguf_close(g);
			} else {
				errs++;
				if (rc != INFS_EFORMAT || g != NULL || infs_error_last()[0] == '\0') {
					fprintf(stderr, "byte %zu = %02x: rc %d %s\n", i, vals[k], rc, infs_error_last());
					check_failures++;
				}
			}
			free(d.p);
		}
	}
	CHECK(oks > 0 && errs > 0);
}

static void test_file(const gbuf *b, const size_t off[3])
{
	char path[] = "/tmp/infs_gguf_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, b->p, b->n) == (ssize_t)b->n);
	close(fd);
	infs__gguf *g;
	CHECK_OK(infs__gguf_open(&g, path));
	const infs__gguf_tensor *t = infs__gguf_tensor_find(g, "w.q8_0");
	CHECK(g && g->mapped && t && ((const uint8_t *)t->data)[33] == 255 - 33 && t->offset == off[2]);
	infs__gguf_close(g);
	CHECK(truncate(path, (off_t)off[1]) == 0);
	CHECK_ERR(infs__gguf_open(&g, path), INFS_EFORMAT);
	CHECK(strstr(infs_error_last(), path) != NULL);
	CHECK(truncate(path, 0) == 0);
	CHECK_ERR(infs__gguf_open(&g, path), INFS_EFORMAT);
	unlink(path);
	CHECK_ERR(infs__gguf_open(&g, path), INFS_ENOTFOUND);
	CHECK_ERR(infs__gguf_open(&g, "/tmp"), INFS_EINVAL); /* a directory */
	CHECK_ERR(infs__gguf_open(NULL, path), INFS_EINVAL);
	CHECK_ERR(infs__gguf_open(&g, NULL), INFS_EINVAL);
	infs__gguf_close(NULL);
}

int main(void)
{
	size_t off[3];
	gbuf b = sample_gguf(off);
	test_types();
	test_sample(&b, off);
	test_errors(&b, off);
	test_mutations(&b, off);
	test_file(&b, off);
	free(b.p);
	CHECK_DONE();
}

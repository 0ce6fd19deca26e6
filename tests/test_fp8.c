/* fp8 e4m3 fact KV: the codec against ml_dtypes (tests/fixtures/fp8) and
 * against its own rules on every code; infs_kv_convert; fp8 stores (put,
 * get, reopen, verify, a torn tail, refused NaN codes and scales); injection
 * from an fp8 store against injection of the dequantized values from an f32
 * store, bit for bit, and against the unquantized KV within the documented
 * bound; fp8 refused as a cache dtype; infs_fact_encode into an fp8 store
 * against quantizing what it stores into an f32 store.
 * argv: e4m3.txt, then the model fixtures directory. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inject_util.h"
#include "scratch_util.h"

static uint32_t f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* The golden file's decode table and conversions, all of them. */
static void codec_golden(const char *path)
{
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	if (!f)
		return;
	char line[128], kind[16];
	unsigned a, b;
	size_t n_dec = 0, n_enc = 0;
	while (fgets(line, sizeof line, f)) {
		if (line[0] == '#' || sscanf(line, "%15s %x %x", kind, &a, &b) != 3)
			continue;
		if (!strcmp(kind, "decode")) {
			float v = infs__e4m3_to_f32((uint8_t)a);
			if (b == 0x7fc00000u ? !isnan(v) : f2u(v) != b) {
				fprintf(stderr, "decode %02x: %08x, ml_dtypes %08x\n", a, f2u(v), b);
				check_failures++;
			}
			n_dec++;
		} else {
			uint8_t c = infs__f32_to_e4m3(u2f(a));
			if (c != b) {
				fprintf(stderr, "encode %08x (%.9g): %02x, ml_dtypes %02x\n", a, (double)u2f(a), c, b);
				check_failures++;
			}
			n_enc++;
		}
	}
	fclose(f);
	CHECK(n_dec == 256);
	CHECK(n_enc > 2000);
	printf("e4m3 against ml_dtypes: %zu codes decoded, %zu values encoded\n", n_dec, n_enc);
}

/* The format's definition, written independently of the library's bit
 * manipulation: sign, exponent (bias 7), mantissa / 8; exponent 0 subnormal. */
static double e4m3_value(unsigned c)
{
	unsigned e = (c >> 3) & 15, m = c & 7;
	double v = e ? ldexp(1.0 + m / 8.0, (int)e - 7) : ldexp(m / 8.0, -6);
	return c & 0x80 ? -v : v;
}

static void codec_rules(void)
{
	for (unsigned c = 0; c < 256; c++) {
		float v = infs__e4m3_to_f32((uint8_t)c);
		if ((c & 0x7f) == 0x7f) {
			CHECK(isnan(v));
			continue;
		}
		CHECK((double)v == e4m3_value(c));
		CHECK(!!signbit(v) == !!(c & 0x80));
		CHECK(infs__f32_to_e4m3(v) == c); /* every value round-trips, -0 included */
	}
	CHECK(infs__e4m3_to_f32(0x7e) == 448.0f && infs__e4m3_to_f32(0x01) == 0x1p-9f);
	/* ties between neighbours go to the even code, both signs */
	for (unsigned c = 0; c < 0x7e; c++) {
		float mid = (infs__e4m3_to_f32((uint8_t)c) + infs__e4m3_to_f32((uint8_t)(c + 1))) / 2; /* exact */
		unsigned even = c & 1 ? c + 1 : c;
		CHECK(infs__f32_to_e4m3(mid) == even);
		CHECK(infs__f32_to_e4m3(-mid) == (even | 0x80));
		CHECK(infs__f32_to_e4m3(nextafterf(mid, 0)) == c);
		CHECK(infs__f32_to_e4m3(nextafterf(mid, 1000)) == c + 1);
	}
	/* saturation, never NaN */
	const float big[] = { 448.0f, 448.5f, 463.99f, 464.0f, 480.0f, 1e6f, FLT_MAX };
	for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
		CHECK(infs__f32_to_e4m3(big[i]) == 0x7e);
		CHECK(infs__f32_to_e4m3(-big[i]) == 0xfe);
	}
	CHECK(infs__f32_to_e4m3(0x1p-10f) == 0 && infs__f32_to_e4m3(-0x1p-10f) == 0x80);
	CHECK(infs__f32_to_e4m3(FLT_MIN / 4) == 0 && infs__f32_to_e4m3(0x1p-9f * 1.5f) == 2);
	/* random finite floats: the nearest code, never a NaN code */
	for (int i = 0; i < 1000000; i++) {
		uint32_t u = (uint32_t)rnd();
		if ((u & 0x7f800000u) == 0x7f800000u)
			continue;
		float x = u2f(u);
		uint8_t c = infs__f32_to_e4m3(x);
		CHECK((c & 0x7f) != 0x7f);
		double ax = fabs((double)x), q = fabs(e4m3_value(c));
		if (ax <= 448) {
			/* no code is nearer than the chosen one */
			unsigned m = c & 0x7f;
			if (m > 0 && fabs(e4m3_value(m - 1) - ax) < fabs(q - ax))
				check_failures++, fprintf(stderr, "%.9g: code %02x, %02x is nearer\n", (double)x, c, m - 1);
			if (m < 0x7e && fabs(e4m3_value(m + 1) - ax) < fabs(q - ax))
				check_failures++, fprintf(stderr, "%.9g: code %02x, %02x is nearer\n", (double)x, c, m + 1);
		} else {
			CHECK((c & 0x7f) == 0x7e);
		}
		if (x != 0)
			CHECK(!!(c & 0x80) == (x < 0));
	}
}

static infs_geometry fp8_geometry(uint32_t rotary)
{
	infs_geometry g = test_geometry(2, 3, 16, INFS_DTYPE_FP8_E4M3);
	g.rotary_dim = rotary;
	return g;
}

/* n tokens of random K in f32 with, per token, rows of other magnitudes:
 * one row of zeros, one of tiny values, one of large ones. */
static float *random_kv(const infs_geometry *g, uint32_t n)
{
	size_t rows = (size_t)g->n_layers * n * g->n_kv_heads, D = g->head_dim;
	float *x = malloc(rows * D * sizeof *x);
	for (size_t r = 0; r < rows; r++)
		for (size_t i = 0; i < D; i++) {
			float s = r % 7 == 3 ? 0 : r % 7 == 5 ? 1e-6f : r % 7 == 6 ? 300 : 2;
			x[r * D + i] = s * frnd();
		}
	return x;
}

static void convert(void)
{
	infs_geometry g = fp8_geometry(16);
	const uint32_t n = 5, D = g.head_dim;
	const size_t rows = (size_t)g.n_layers * n * g.n_kv_heads, bytes = n * infs_geometry_kv_token_bytes(&g);
	CHECK(infs_geometry_kv_token_bytes(&g) == (size_t)g.n_layers * g.n_kv_heads * (D + 4));
	CHECK(bytes == rows * D + rows * 4);
	float *x = random_kv(&g, n), *back = malloc(rows * D * sizeof *back);
	unsigned char *q = malloc(bytes);
	uint16_t *h = malloc(rows * D * 2);
	CHECK_OK(infs_kv_convert(q, INFS_DTYPE_FP8_E4M3, x, INFS_DTYPE_F32, &g, n));
	CHECK_OK(infs_kv_convert(back, INFS_DTYPE_F32, q, INFS_DTYPE_FP8_E4M3, &g, n));
	CHECK_OK(infs_kv_convert(h, INFS_DTYPE_BF16, q, INFS_DTYPE_FP8_E4M3, &g, n));
	size_t zero_rows = 0;
	for (size_t r = 0; r < rows; r++) {
		float amax = 0, scale;
		for (uint32_t i = 0; i < D; i++)
			amax = fmaxf(amax, fabsf(x[r * D + i]));
		memcpy(&scale, q + rows * D + r * 4, 4);
		CHECK(f2u(scale) == f2u(amax / 448.0f));
		zero_rows += amax == 0;
		for (uint32_t i = 0; i < D; i++) {
			uint8_t c = q[r * D + i];
			float xi = x[r * D + i], v = infs__e4m3_to_f32(c) * scale;
			CHECK(c == (amax ? infs__f32_to_e4m3(xi / scale) : 0));
			CHECK(f2u(back[r * D + i]) == f2u(v));
			CHECK(h[r * D + i] == infs__f32_to_bf16(v));
			/* half a step: 1/16 of a normal value, 2^-10 of the scale below 2^-6 */
			CHECK(fabsf(v - xi) <= fmaxf(fabsf(xi) / 16, 0x1p-10f * scale) * 1.0001f);
			CHECK(fabsf(v - xi) <= amax * 16 / 448);
		}
		/* the row's largest value comes back as 448 * scale */
		if (amax > 0) {
			int hit = 0;
			for (uint32_t i = 0; i < D; i++)
				hit |= (q[r * D + i] & 0x7f) == 0x7e;
			CHECK(hit);
		}
	}
	CHECK(zero_rows > 0);

	/* f32 to f16 and back through the same entry point */
	CHECK_OK(infs_kv_convert(h, INFS_DTYPE_F16, x, INFS_DTYPE_F32, &g, n));
	CHECK(h[7] == infs__f32_to_f16(x[7]));

	/* refusals: nothing written */
	memset(back, 0x5a, rows * D * sizeof *back);
	float keep = back[0];
	x[37] = NAN;
	CHECK_ERR(infs_kv_convert(back, INFS_DTYPE_F32, x, INFS_DTYPE_F32, &g, n), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "element 37") != NULL);
	x[37] = INFINITY;
	CHECK_ERR(infs_kv_convert(q, INFS_DTYPE_FP8_E4M3, x, INFS_DTYPE_F32, &g, n), INFS_EINVAL);
	x[37] = 0;
	unsigned char saved = q[5];
	q[5] = 0x7f;
	CHECK_ERR(infs_kv_convert(back, INFS_DTYPE_F32, q, INFS_DTYPE_FP8_E4M3, &g, n), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "element 5 ") != NULL);
	q[5] = saved;
	CHECK(f2u(back[0]) == f2u(keep));
	CHECK_ERR(infs_kv_convert(NULL, INFS_DTYPE_F32, x, INFS_DTYPE_F32, &g, n), INFS_EINVAL);
	CHECK_ERR(infs_kv_convert(back, (infs_dtype)9, x, INFS_DTYPE_F32, &g, n), INFS_EINVAL);
	CHECK_ERR(infs_kv_convert(q + 2, INFS_DTYPE_FP8_E4M3, x, INFS_DTYPE_F32, &g, n), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "aligned") != NULL);
	CHECK_ERR(infs_kv_convert(x + 1, INFS_DTYPE_F32, x, INFS_DTYPE_F32, &g, n), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "overlap") != NULL);
	CHECK_ERR(infs_kv_convert(back, INFS_DTYPE_F32, x, INFS_DTYPE_F32, NULL, n), INFS_EINVAL);
	infs_geometry g6 = test_geometry(2, 3, 6, INFS_DTYPE_F32);
	CHECK_ERR(infs_kv_convert(q, INFS_DTYPE_FP8_E4M3, x, INFS_DTYPE_F32, &g6, 1), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "divisible by 4") != NULL);
	g6.kv_dtype = INFS_DTYPE_FP8_E4M3;
	CHECK_ERR(infs_geometry_validate(&g6), INFS_EINVAL);
	free(x);
	free(back);
	free(q);
	free(h);
}

static infs_store *store_create(const char *path, const infs_geometry *g)
{
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = g;
	o.identity = "fp8-test";
	o.sync = INFS_SYNC_OFF;
	infs_store *s = NULL;
	CHECK_OK(infs_store_open(&s, path, &o));
	return s;
}

static infs_store *store_reopen(const char *path)
{
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	infs_store *s = NULL;
	CHECK_OK(infs_store_open(&s, path, &o));
	return s;
}

/* Puts fact i of an fp8 store (its K and V quantized from f32), returns its id. */
static uint64_t put_fp8(infs_store *s, const infs_geometry *g, uint32_t n, unsigned char *k, unsigned char *v)
{
	float *kx = random_kv(g, n), *vx = random_kv(g, n);
	CHECK_OK(infs_kv_convert(k, INFS_DTYPE_FP8_E4M3, kx, INFS_DTYPE_F32, g, n));
	CHECK_OK(infs_kv_convert(v, INFS_DTYPE_FP8_E4M3, vx, INFS_DTYPE_F32, g, n));
	int32_t tokens[64] = { 0 };
	float emb[8] = { 1, 0, 0, 0, 0, 0, 0, 0 };
	infs_fact f = INFS_FACT_INIT;
	f.n_tokens = n;
	f.tokens = tokens;
	f.embedding = emb;
	f.k = k;
	f.v = v;
	uint64_t id = 0;
	CHECK_OK(infs_fact_put(&id, s, "u", &f));
	free(kx);
	free(vx);
	return id;
}

static void check_fact(infs_store *s, uint64_t id, const unsigned char *k, const unsigned char *v, size_t bytes)
{
	infs_fact_record *r = NULL;
	CHECK_OK(infs_fact_get(&r, s, "u", id));
	CHECK(r && !memcmp(r->k, k, bytes) && !memcmp(r->v, v, bytes));
	infs_fact_record_free(r);
}

static void store(void)
{
	infs_geometry g = fp8_geometry(16);
	char path[600];
	scratch_make("fp8-store", path, sizeof path, "m.infs");
	infs_store *s = store_create(path, &g);
	const size_t tb = infs_geometry_kv_token_bytes(&g);
	enum { N = 4 };
	const uint32_t nt[N] = { 1, 5, 17, 3 };
	unsigned char *k[N], *v[N];
	uint64_t ids[N];
	for (int i = 0; i < N; i++) {
		k[i] = malloc(nt[i] * tb);
		v[i] = malloc(nt[i] * tb);
		ids[i] = put_fp8(s, &g, nt[i], k[i], v[i]);
		check_fact(s, ids[i], k[i], v[i], nt[i] * tb);
	}

	/* NaN codes and bad scales are refused; nothing is written */
	infs_store_stats st0 = { .version = INFS_STORE_STATS_VERSION }, st1 = st0;
	CHECK_OK(infs_store_stats_get(&st0, s));
	unsigned char *bad = malloc(nt[1] * tb);
	int32_t tokens[8] = { 0 };
	float emb[8] = { 0 };
	infs_fact f = INFS_FACT_INIT;
	f.n_tokens = nt[1];
	f.tokens = tokens;
	f.embedding = emb;
	f.k = bad;
	f.v = v[1];
	const size_t scales = (size_t)g.n_layers * nt[1] * g.n_kv_heads * g.head_dim;
	const struct { size_t off; float scale; unsigned char code; const char *needle; } cases[] = {
		{ 9, 0, 0xff, "fp8 NaN" },
		{ 10, 0, 0x7f, "fp8 NaN" },
		{ scales + 4, NAN, 0, "scale 1 is NaN" },
		{ scales + 8, INFINITY, 0, "scale 2 is NaN or infinite" },
		{ scales + 12, -1.0f, 0, "scale 3 is negative" },
	};
	uint64_t id = 0;
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		memcpy(bad, k[1], nt[1] * tb);
		if (cases[i].off < scales)
			bad[cases[i].off] = cases[i].code;
		else
			memcpy(bad + cases[i].off, &cases[i].scale, 4);
		CHECK_ERR(infs_fact_put(&id, s, "u", &f), INFS_EINVAL);
		if (!strstr(infs_error_last(), cases[i].needle))
			check_failures++, fprintf(stderr, "message '%s' lacks '%s'\n", infs_error_last(), cases[i].needle);
	}
	CHECK_OK(infs_store_stats_get(&st1, s));
	CHECK(st1.file_bytes == st0.file_bytes && st1.n_facts == N);
	free(bad);

	/* reopen: the same bytes; verify; a caller's other dtype is named */
	infs_store_close(s);
	s = store_reopen(path);
	infs_geometry sg;
	CHECK_OK(infs_store_geometry(&sg, s));
	CHECK(sg.kv_dtype == INFS_DTYPE_FP8_E4M3);
	for (int i = 0; i < N; i++)
		check_fact(s, ids[i], k[i], v[i], nt[i] * tb);
	uint64_t bad_off = 1, bad_id = 1;
	CHECK_OK(infs_store_verify(s, &bad_off, &bad_id));
	CHECK(bad_off == 0 && bad_id == 0);
	infs_store_close(s);
	infs_geometry g16 = g;
	g16.kv_dtype = INFS_DTYPE_F16;
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.geometry = &g16;
	CHECK_ERR(infs_store_open(&s, path, &o), INFS_EMISMATCH);
	CHECK(strstr(infs_error_last(), "kv_dtype fp8_e4m3, caller gave f16") != NULL);

	/* a torn last record: dropped, the others intact */
	struct stat stt;
	CHECK(stat(path, &stt) == 0);
	CHECK(truncate(path, stt.st_size - 13) == 0);
	s = store_reopen(path);
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.n_facts == N - 1 && st.dropped_tail_bytes > 0);
	for (int i = 0; i < N - 1; i++)
		check_fact(s, ids[i], k[i], v[i], nt[i] * tb);
	infs_fact_record *r = NULL;
	CHECK_ERR(infs_fact_get(&r, s, "u", ids[N - 1]), INFS_ENOTFOUND);
	CHECK_OK(infs_store_compact(s));
	for (int i = 0; i < N - 1; i++)
		check_fact(s, ids[i], k[i], v[i], nt[i] * tb);
	infs_store_close(s);
	for (int i = 0; i < N; i++) {
		free(k[i]);
		free(v[i]);
	}
	scratch_cleanup();
}

/* Facts put into an fp8 store, their dequantized values into an f32 store
 * and their unquantized values into another: injecting from the first two
 * gives the same cache bytes in every cache dtype and layout, and from the
 * first and the third caches within the bound of test_gate.c. */
static void inject(void)
{
	infs_geometry g = fp8_geometry(12); /* partial rotary: the rest of a head passes through */
	infs_geometry gf = g;
	gf.kv_dtype = INFS_DTYPE_F32;
	char p8[600], pf[600], px[600];
	scratch_make("fp8-inject", p8, sizeof p8, "fp8.infs");
	scratch_path(pf, sizeof pf, "f32.infs");
	scratch_path(px, sizeof px, "exact.infs");
	infs_store *s8 = store_create(p8, &g), *sf = store_create(pf, &gf), *sx = store_create(px, &gf);
	enum { N = 3 };
	const uint32_t nt[N] = { 4, 9, 2 };
	uint64_t id8[N], idf[N], idx[N];
	uint32_t total = 0;
	for (int i = 0; i < N; i++) {
		size_t tb = infs_geometry_kv_token_bytes(&g), fb = infs_geometry_kv_token_bytes(&gf);
		unsigned char *k = malloc(nt[i] * tb), *v = malloc(nt[i] * tb);
		float *kf = malloc(nt[i] * fb), *vf = malloc(nt[i] * fb);
		float *kx = random_kv(&g, nt[i]), *vx = random_kv(&g, nt[i]);
		CHECK_OK(infs_kv_convert(k, INFS_DTYPE_FP8_E4M3, kx, INFS_DTYPE_F32, &g, nt[i]));
		CHECK_OK(infs_kv_convert(v, INFS_DTYPE_FP8_E4M3, vx, INFS_DTYPE_F32, &g, nt[i]));
		CHECK_OK(infs_kv_convert(kf, INFS_DTYPE_F32, k, INFS_DTYPE_FP8_E4M3, &g, nt[i]));
		CHECK_OK(infs_kv_convert(vf, INFS_DTYPE_F32, v, INFS_DTYPE_FP8_E4M3, &g, nt[i]));
		int32_t tokens[16] = { 0 };
		float emb[8] = { 1 };
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = nt[i];
		f.tokens = tokens;
		f.embedding = emb;
		f.k = k, f.v = v;
		CHECK_OK(infs_fact_put(&id8[i], s8, "u", &f));
		f.k = kf, f.v = vf;
		CHECK_OK(infs_fact_put(&idf[i], sf, "u", &f));
		f.k = kx, f.v = vx;
		CHECK_OK(infs_fact_put(&idx[i], sx, "u", &f));
		total += nt[i];
		free(k), free(v), free(kf), free(vf), free(kx), free(vx);
	}
	const infs_dtype dts[3] = { INFS_DTYPE_F32, INFS_DTYPE_BF16, INFS_DTYPE_F16 };
	int32_t bt[8] = { 5, 2, 7, 0, 3, 1, 6, 4 };
	const uint32_t start = 11;
	for (int d = 0; d < 3; d++)
		for (int kind = 0; kind < L_COUNT; kind++) {
			test_cache c8, cf;
			cache_make(&c8, (enum layout_kind)kind, &g, 8, 4, dts[d]);
			cache_make(&cf, (enum layout_kind)kind, &g, 8, 4, dts[d]);
			uint32_t n8 = 0, nf = 0;
			CHECK_OK(infs_inject_into_blocks(&n8, s8, "u", id8, N, start, bt, 8, &c8.lay, NULL));
			CHECK_OK(infs_inject_into_blocks(&nf, sf, "u", idf, N, start, bt, 8, &cf.lay, NULL));
			CHECK(n8 == start + total && nf == n8);
			for (uint32_t l = 0; l < c8.L; l++)
				CHECK(!memcmp(c8.buf[l], cf.buf[l], c8.bytes + 2 * GUARD));
			if (dts[d] == INFS_DTYPE_F32 && kind == L_VLLM) {
				test_cache cx;
				cache_make(&cx, L_VLLM, &g, 8, 4, INFS_DTYPE_F32);
				uint32_t nx = 0;
				CHECK_OK(infs_inject_into_blocks(&nx, sx, "u", idx, N, start, bt, 8, &cx.lay, NULL));
				float worst = 0, big = 0;
				for (uint32_t l = 0; l < c8.L; l++)
					for (size_t i = 0; i < c8.bytes / 4; i++) {
						float a = ((const float *)c8.k[l])[i], b = ((const float *)cx.k[l])[i];
						if (f2u(b) == 0xa5a5a5a5u) /* a slot nothing was injected into */
							continue;
						worst = fmaxf(worst, fabsf(a - b));
						big = fmaxf(big, fabsf(b));
					}
				printf("fp8 inject against unquantized KV: max |diff| %.3g of %.3g\n", worst, big);
				CHECK(big > 0 && worst <= big / 14);
				cache_free(&cx);
			}
			cache_free(&c8);
			cache_free(&cf);
		}

	/* fp8 is a store dtype only */
	test_cache c;
	cache_make(&c, L_VLLM, &g, 8, 4, INFS_DTYPE_F32);
	c.lay.dtype = INFS_DTYPE_FP8_E4M3;
	uint32_t next = 0;
	CHECK_ERR(infs_inject_into_blocks(&next, s8, "u", id8, N, start, bt, 8, &c.lay, NULL), INFS_EUNSUPPORTED);
	CHECK(strstr(infs_error_last(), "store kv_dtype only") != NULL);
	int32_t pos[1] = { 3 };
	CHECK_ERR(infs_rope_rotate(c.k[0], INFS_DTYPE_FP8_E4M3, 1, 1, pos, &g), INFS_EUNSUPPORTED);
	cache_free(&c);
	infs_store_close(s8);
	infs_store_close(sf);
	infs_store_close(sx);
	scratch_cleanup();
}

/* infs_fact_encode into an fp8 store stores what it stores into an f32
 * store, quantized; an engine refuses an fp8 cache. */
static void encode(const char *model_dir)
{
	char mpath[1024];
	snprintf(mpath, sizeof mpath, "%s/llama", model_dir);
	infs_model *m = NULL;
	CHECK_OK(infs_model_load(&m, mpath, NULL));
	if (!m)
		return;
	infs_geometry g8, gf;
	CHECK_OK(infs_model_geometry(&g8, m, INFS_DTYPE_FP8_E4M3));
	CHECK_OK(infs_model_geometry(&gf, m, INFS_DTYPE_F32));
	g8.embed_dim = gf.embed_dim = 4;
	char *id8 = NULL, *idf = NULL;
	CHECK_OK(infs_model_identity(&id8, m, INFS_DTYPE_FP8_E4M3));
	CHECK_OK(infs_model_identity(&idf, m, INFS_DTYPE_F32));
	CHECK(id8 && strstr(id8, "kv=fp8_e4m3"));
	char p8[600], pf[600];
	scratch_make("fp8-encode", p8, sizeof p8, "fp8.infs");
	scratch_path(pf, sizeof pf, "f32.infs");
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.sync = INFS_SYNC_OFF;
	infs_store *s8 = NULL, *sf = NULL;
	o.geometry = &g8, o.identity = id8;
	CHECK_OK(infs_store_open(&s8, p8, &o));
	o.geometry = &gf, o.identity = idf;
	CHECK_OK(infs_store_open(&sf, pf, &o));
	int32_t tokens[2][6] = { { 5, 9, 33, 2, 71, 8 }, { 40, 41, 3 } };
	int32_t ctx[3] = { 12, 13, 14 };
	float emb[4] = { 0, 1, 0, 0 };
	infs_fact_input in[2] = { INFS_FACT_INPUT_INIT, INFS_FACT_INPUT_INIT };
	in[0].tokens = tokens[0], in[0].n_tokens = 6, in[0].embedding = emb;
	in[1].tokens = tokens[1], in[1].n_tokens = 3, in[1].embedding = emb;
	in[1].context = ctx, in[1].n_context = 3;
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = ctx;
	eo.n_context = 2;
	uint64_t i8[2], i_f[2];
	CHECK_OK(infs_fact_encode(i8, s8, "u", m, in, 2, &eo));
	CHECK_OK(infs_fact_encode(i_f, sf, "u", m, in, 2, &eo));
	for (int i = 0; i < 2; i++) {
		infs_fact_record *r8 = NULL, *rf = NULL;
		CHECK_OK(infs_fact_get(&r8, s8, "u", i8[i]));
		CHECK_OK(infs_fact_get(&rf, sf, "u", i_f[i]));
		if (!r8 || !rf)
			continue;
		size_t bytes = r8->n_tokens * infs_geometry_kv_token_bytes(&g8);
		unsigned char *q = malloc(bytes);
		CHECK_OK(infs_kv_convert(q, INFS_DTYPE_FP8_E4M3, rf->k, INFS_DTYPE_F32, &gf, rf->n_tokens));
		CHECK(!memcmp(q, r8->k, bytes));
		CHECK_OK(infs_kv_convert(q, INFS_DTYPE_FP8_E4M3, rf->v, INFS_DTYPE_F32, &gf, rf->n_tokens));
		CHECK(!memcmp(q, r8->v, bytes));
		free(q);
		infs_fact_record_free(r8);
		infs_fact_record_free(rf);
	}
	infs_engine_options en = INFS_ENGINE_OPTIONS_INIT;
	en.kv_dtype = INFS_DTYPE_FP8_E4M3;
	infs_engine *e = NULL;
	CHECK_ERR(infs_engine_create(&e, m, &en), INFS_EUNSUPPORTED);
	infs_store_close(s8);
	infs_store_close(sf);
	infs_free(id8);
	infs_free(idf);
	infs_model_free(m);
	scratch_cleanup();
}

int main(int argc, char **argv)
{
	CHECK(argc == 3);
	if (argc != 3)
		return 1;
	codec_golden(argv[1]);
	codec_rules();
	convert();
	store();
	inject();
	encode(argv[2]);
	if (check_failures)
		fprintf(stderr, "%d check(s) failed\n", check_failures);
	return check_failures != 0;
}

/* The range of stored KV (docs/injection.md, "The range of KV values"): a
 * put refuses a key element beyond half its dtype's largest value (an fp8
 * one: code times scale, against f32's), divided by YaRN's attention
 * factor, and a value that does not stay finite (fp8: code times scale past
 * f32's largest), naming the element; what it accepts, injected at any
 * position into any cache dtype, is finite, and what overflows a narrower
 * cache on the way (an f32 store into an f16 cache) lands on the cache's
 * largest value, never on infinity or NaN. */
#include <float.h>
#include <math.h>

#include "scratch_util.h"
#include "test_store_util.h"
#include "util/dtype.h"

enum { L = 2, H = 2, D = 8, N = 3, BS = 16 };
#define ELEMS ((size_t)L * N * H * D)

/* A store of dtype t (rotary dims rot of D; YaRN when yarn is set). */
static infs_store *open_new(const char *name, infs_dtype t, uint32_t rot, int yarn)
{
	char path[600];
	scratch_path(path, sizeof path, name);
	infs_geometry g = test_geometry(L, H, D, t);
	g.rotary_dim = rot;
	g.embed_dim = 0;
	if (yarn) {
		g.rope_scaling = INFS_ROPE_SCALING_YARN;
		g.rope_factor = 40;
		g.rope_original_max_pos = 4096;
		g.rope_beta_fast = 32;
		g.rope_beta_slow = 1;
	}
	infs_store *s = NULL;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	return s;
}

/* K and V of one fact: every element small, then k[ki] = kx and v[vi] = vx
 * (negative index: none). fp8: code 1 at scale 1 everywhere, element ki's
 * row has its code and scale (kx code, kscale). */
typedef struct kv {
	unsigned char k[ELEMS * 4 + L * N * H * 4], v[ELEMS * 4 + L * N * H * 4];
} kv;

static void fill(kv *x, infs_dtype t, long ki, float kx, long vi, float vx)
{
	for (size_t i = 0; i < ELEMS; i++) {
		if (t == INFS_DTYPE_FP8_E4M3) {
			x->k[i] = x->v[i] = 0x38; /* 1.0 */
			continue;
		}
		infs__store(x->k, t, i, 0.25f);
		infs__store(x->v, t, i, -0.5f);
	}
	if (t == INFS_DTYPE_FP8_E4M3) {
		for (size_t r = 0; r < ELEMS / D; r++) {
			float one = 1;
			memcpy(x->k + ELEMS + 4 * r, &one, 4);
			memcpy(x->v + ELEMS + 4 * r, &one, 4);
		}
		return;
	}
	if (ki >= 0)
		infs__store(x->k, t, (size_t)ki, kx);
	if (vi >= 0)
		infs__store(x->v, t, (size_t)vi, vx);
}

/* An fp8 row's code c (at element i) and scale. */
static void fp8_row(unsigned char *buf, size_t i, unsigned char c, float scale)
{
	buf[i] = c;
	memcpy(buf + ELEMS + 4 * (i / D), &scale, 4);
}

static int put(uint64_t *id, infs_store *s, const kv *x)
{
	int32_t tokens[N] = { 1, 2, 3 };
	infs_fact f = INFS_FACT_INIT;
	f.n_tokens = N;
	f.tokens = tokens;
	f.k = x->k;
	f.v = x->v;
	return infs_fact_put(id, s, "ns", &f);
}

/* Injects fact id at start into a fresh cache of dtype dt; returns how
 * many elements of it are not finite, and the largest magnitude in *amax. */
static size_t inject(infs_store *s, uint64_t id, infs_dtype dt, uint32_t start, float *amax)
{
	size_t per = (size_t)BS * H * D, esz = infs_dtype_size(dt);
	void *kb[L], *vb[L];
	size_t n_table = (start + N) / BS + 1;
	int32_t *table = calloc(n_table, sizeof *table); /* every position in block 0 */
	for (int l = 0; l < L; l++) {
		kb[l] = calloc(per, esz);
		vb[l] = calloc(per, esz);
	}
	infs_kv_layout lay = INFS_KV_LAYOUT_INIT;
	lay.dtype = dt;
	lay.n_layers = L;
	lay.n_kv_heads = H;
	lay.head_dim = D;
	lay.n_blocks = 1;
	lay.block_size = BS;
	lay.k_layers = kb;
	lay.v_layers = vb;
	lay.stride_block = (int64_t)per;
	lay.stride_slot = H * D;
	lay.stride_head = D;
	lay.stride_dim = 1;
	uint32_t next;
	CHECK_OK(infs_inject_into_blocks(&next, s, "ns", &id, 1, start, table, n_table, &lay, NULL));
	free(table);
	size_t bad = 0;
	*amax = 0;
	for (int l = 0; l < L; l++) {
		for (size_t i = 0; i < per; i++) {
			float a = infs__load(kb[l], dt, i), b = infs__load(vb[l], dt, i);
			bad += !isfinite(a) + !isfinite(b);
			*amax = fmaxf(*amax, fmaxf(fabsf(a), fabsf(b)));
		}
		free(kb[l]);
		free(vb[l]);
	}
	return bad;
}

static const infs_dtype caches[] = { INFS_DTYPE_F16, INFS_DTYPE_BF16, INFS_DTYPE_F32 };
static const uint32_t starts[] = { 0, 5, 1000, 65531, 1000003 };

/* Every cache dtype, several positions: all finite. */
static void injects_finite(infs_store *s, uint64_t id)
{
	for (size_t c = 0; c < 3; c++)
		for (size_t p = 0; p < sizeof starts / sizeof starts[0]; p++) {
			float amax;
			CHECK(inject(s, id, caches[c], starts[p], &amax) == 0);
		}
}

static float largest(infs_dtype t)
{
	return t == INFS_DTYPE_F16 ? 65504.0f : t == INFS_DTYPE_BF16 ? 0x1.fep127f : FLT_MAX;
}

/* The largest value of t not above x, and the next one up. */
static float down(infs_dtype t, float x)
{
	float v = infs__load(&(uint32_t){ 0 }, t, 0);
	unsigned char b[4];
	infs__store(b, t, 0, x);
	v = infs__load(b, t, 0);
	if (v > x) {
		if (t == INFS_DTYPE_F32) {
			v = nextafterf(v, 0);
		} else {
			uint16_t u;
			memcpy(&u, b, 2);
			u--;
			memcpy(b, &u, 2);
			v = infs__load(b, t, 0);
		}
	}
	return v;
}

static float up(infs_dtype t, float x)
{
	if (t == INFS_DTYPE_F32)
		return nextafterf(x, INFINITY);
	unsigned char b[4];
	infs__store(b, t, 0, x);
	uint16_t u;
	memcpy(&u, b, 2);
	u++;
	memcpy(b, &u, 2);
	return infs__load(b, t, 0);
}

static void plain_dtypes(void)
{
	static const infs_dtype ts[] = { INFS_DTYPE_F16, INFS_DTYPE_BF16, INFS_DTYPE_F32 };
	for (size_t ti = 0; ti < 3; ti++) {
		for (int yarn = 0; yarn < 2; yarn++) {
			infs_dtype t = ts[ti];
			char name[32];
			snprintf(name, sizeof name, "plain-%zu-%d.infs", ti, yarn);
			infs_store *s = open_new(name, t, D / 2, yarn);
			/* YaRN at factor 40 scales cos and sin by 0.1 ln 40 + 1 */
			const float attn = yarn ? (float)(0.1 * log(40.0) + 1.0) : 1.0f;
			const float bound = largest(t) / (2 * attn), at = down(t, bound), past = up(t, at);
			kv x;
			uint64_t id = 0;
			/* A key at the bound, in a rotated dim (1) of the last row. */
			const long rot_i = (long)ELEMS - D + 1, pass_i = (long)ELEMS - 1;
			fill(&x, t, rot_i, -at, -1, 0);
			CHECK_OK(put(&id, s, &x));
			injects_finite(s, id);
			/* Past it, either sign: refused, naming the element and the bound. */
			fill(&x, t, rot_i, past, -1, 0);
			CHECK_ERR(put(&id, s, &x), INFS_ERANGE);
			char want[64];
			snprintf(want, sizeof want, "k element %ld", rot_i);
			CHECK(strstr(infs_error_last(), want) && strstr(infs_error_last(), "at most"));
			fill(&x, t, rot_i, -largest(t), -1, 0);
			CHECK_ERR(put(&id, s, &x), INFS_ERANGE);
			/* A dim past rotary_dim is not rotated: any finite key, and any
			 * finite value, is stored and injected finite. */
			fill(&x, t, pass_i, largest(t), 0, -largest(t));
			CHECK_OK(put(&id, s, &x));
			injects_finite(s, id);
			infs_store_close(s);
		}
	}
}

static void fp8(void)
{
	infs_store *s = open_new("fp8.infs", INFS_DTYPE_FP8_E4M3, D, 0);
	kv x;
	uint64_t id;
	const size_t row = ELEMS - D; /* the last row's first element */
	/* The reported cases: scales from 1e36 to FLT_MAX with code 448. */
	static const float huge[] = { 1e36f, 1e37f, 1e38f, FLT_MAX };
	for (size_t i = 0; i < 4; i++) {
		fill(&x, INFS_DTYPE_FP8_E4M3, -1, 0, -1, 0);
		fp8_row(x.k, row, 0x7e, huge[i]); /* 448 */
		CHECK_ERR(put(&id, s, &x), INFS_ERANGE);
		CHECK(strstr(infs_error_last(), "k row") && strstr(infs_error_last(), "at most"));
		fill(&x, INFS_DTYPE_FP8_E4M3, -1, 0, -1, 0);
		fp8_row(x.v, row, 0xfe, huge[i]); /* -448: past f32 from 1e36 on */
		CHECK_ERR(put(&id, s, &x), INFS_ERANGE);
		CHECK(strstr(infs_error_last(), "v row"));
	}
	/* At the bound: 448 x scale = FLT_MAX / 2, for a key; a value of
	 * code 1 at FLT_MAX. */
	fill(&x, INFS_DTYPE_FP8_E4M3, -1, 0, -1, 0);
	fp8_row(x.k, row, 0x7e, FLT_MAX / 2 / 448);
	fp8_row(x.v, row, 0x38, FLT_MAX);
	CHECK_OK(put(&id, s, &x));
	injects_finite(s, id);
	fill(&x, INFS_DTYPE_FP8_E4M3, -1, 0, -1, 0);
	fp8_row(x.k, row, 0x7e, nextafterf(FLT_MAX / 2 / 448, INFINITY) * 1.01f);
	CHECK_ERR(put(&id, s, &x), INFS_ERANGE);
	infs_store_close(s);
}

/* Accepted values that a narrower cache cannot hold: they land on its
 * largest value, with their sign. */
static void saturation(void)
{
	infs_store *s = open_new("sat.infs", INFS_DTYPE_F32, D, 0);
	kv x;
	uint64_t id;
	fill(&x, INFS_DTYPE_F32, 0, 1e6f, 3, -FLT_MAX);
	CHECK_OK(put(&id, s, &x));
	float amax;
	CHECK(inject(s, id, INFS_DTYPE_F16, 7, &amax) == 0 && amax == 65504.0f);
	CHECK(inject(s, id, INFS_DTYPE_BF16, 7, &amax) == 0 && amax == 0x1.fep127f);
	CHECK(inject(s, id, INFS_DTYPE_F32, 7, &amax) == 0 && amax == FLT_MAX);
	infs_store_close(s);
}

int main(void)
{
	scratch_init("kv-range");
	plain_dtypes();
	fp8();
	saturation();
	scratch_cleanup();
	CHECK_DONE();
}

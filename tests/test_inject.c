/* Chunked RoPE injection from records (the core under
 * infs_inject_into_blocks): the property that injection at position p equals
 * rotation at p for every style, scaling, partial rotary and dtype pair;
 * round trips through every engine layout with canaries proving nothing
 * else is written; and every bad input refused with the cache untouched. */
#include "inject_util.h"

static const char *const dtn[] = { "f32", "f16", "bf16" };
static const char *const layout_names[L_COUNT] = { "vllm", "nhd", "hnd", "packed", "elements" };

/* Injection at random positions equals infs_rope_rotate bit for bit, and a
 * textbook double-precision rotation within the cache dtype's precision. */
static void property(void)
{
	static const infs_rope_scaling scalings[] = { INFS_ROPE_SCALING_NONE, INFS_ROPE_SCALING_LINEAR,
		                                      INFS_ROPE_SCALING_LLAMA3, INFS_ROPE_SCALING_YARN };
	int cases = 0;
	for (int style = 0; style < 2; style++)
	for (int sc = 0; sc < 4; sc++)
	for (int partial = 0; partial < 2; partial++)
	for (int sd = 0; sd < 3; sd++)
	for (int cd = 0; cd < 3; cd++) {
		infs_geometry g = test_geometry(2, 2, 32, (infs_dtype)sd);
		g.rope_style = style ? INFS_ROPE_GPTJ : INFS_ROPE_NEOX;
		g.rotary_dim = partial ? 12 : 32;
		g.rope_scaling = scalings[sc];
		g.rope_factor = 8.0;
		g.rope_original_max_pos = 4096;
		CHECK_OK(infs_geometry_validate(&g));
		uint32_t start = (uint32_t)(rnd() % 200000);
		test_rec rec[2];
		rec_make(&rec[0], &g, 1, 5);
		rec_make(&rec[1], &g, 2, 3);
		infs__record recs[2] = { rec[0].r, rec[1].r };
		uint32_t bs = 16, nb = 4;
		test_cache c;
		cache_make(&c, L_VLLM, &g, nb, bs, (infs_dtype)cd);
		int32_t *bt = malloc(((start + 8) / bs + 1) * sizeof *bt);
		for (uint32_t i = 0; i <= (start + 8) / bs; i++)
			bt[i] = (int32_t)(i % nb);
		unsigned char *exp = cache_expected(&c, &g, recs, 2, start, bt);
		uint32_t next = 0;
		CHECK_OK(infs__inject_records(&next, &g, recs, 2, start, bt, (start + 8) / bs + 1, &c.lay, NULL, NULL,
		                              "test"));
		CHECK(next == start + 8);
		if (!cache_equals(&c, exp)) {
			fprintf(stderr, "property: style %d scaling %d partial %d %s -> %s at %u differs from infs_rope_rotate\n",
			        style, sc, partial, dtn[sd], dtn[cd], start);
			check_failures++;
		}

		/* against the textbook rotation in double, from the stored values */
		infs__rope r;
		infs__rope_init(&r, &g);
		double tol = cd == INFS_DTYPE_F32 ? 2e-6 : cd == INFS_DTYPE_F16 ? 2e-3 : 1.6e-2;
		size_t csz = infs_dtype_size(c.dt);
		for (int ri = 0; ri < 2; ri++)
		for (uint32_t t = 0; t < recs[ri].n_tokens; t++) {
			int64_t pos = start + (ri ? 5 : 0) + t;
			size_t blk = (size_t)bt[pos / bs], slot = (size_t)(pos % bs);
			for (uint32_t l = 0; l < g.n_layers; l++)
			for (uint32_t h = 0; h < g.n_kv_heads; h++) {
				size_t row = (((size_t)l * recs[ri].n_tokens + t) * g.n_kv_heads + h) * g.head_dim;
				double x[32], y[32];
				for (uint32_t d = 0; d < 32; d++)
					x[d] = y[d] = infs__load(recs[ri].k, g.kv_dtype, row + d);
				for (uint32_t i = 0; i < r.n_pairs; i++) {
					uint32_t a = style ? 2 * i : i, b = style ? 2 * i + 1 : i + r.n_pairs;
					double th = (double)pos * r.inv_freq[i];
					y[a] = (x[a] * cos(th) - x[b] * sin(th)) * r.attn_scale;
					y[b] = (x[b] * cos(th) + x[a] * sin(th)) * r.attn_scale;
				}
				for (uint32_t d = 0; d < 32; d++) {
					const unsigned char *kc = c.k[l];
					double got = infs__load(kc + cache_offset(&c, 0, blk, slot, h, d) * csz, c.dt, 0);
					double v_got = infs__load(kc + cache_offset(&c, 1, blk, slot, h, d) * csz, c.dt, 0);
					double v_ref = infs__load(recs[ri].v, g.kv_dtype, row + d);
					if (fabs(got - y[d]) > tol * (1 + fabs(y[d])) || fabs(v_got - v_ref) > tol * (1 + fabs(v_ref))) {
						fprintf(stderr, "property: %s -> %s style %d scaling %d pos %lld dim %u: k %g vs %g, v %g vs %g\n",
						        dtn[sd], dtn[cd], style, sc, (long long)pos, d, got, y[d], v_got, v_ref);
						check_failures++;
						goto next;
					}
				}
			}
		}
	next:
		cases++;
		free(exp);
		free(bt);
		cache_free(&c);
		rec_free(&rec[0]);
		rec_free(&rec[1]);
	}
	printf("property: %d cases\n", cases);
}

/* Several records back to back through a scattered block table, in every
 * layout and block size, with out_next_pos chaining calls. */
static void round_trips(void)
{
	static const uint32_t sizes[] = { 1, 16, 17 };
	for (int kind = 0; kind < L_COUNT; kind++)
	for (int si = 0; si < 3; si++)
	for (int mixed = 0; mixed < 2; mixed++) {
		infs_geometry g = test_geometry(3, 2, 8, INFS_DTYPE_F16);
		g.rotary_dim = 6;
		uint32_t bs = sizes[si];
		test_rec rec[4];
		uint32_t lens[4] = { 1, 19, 7, 33 };
		uint64_t total = 0;
		for (int i = 0; i < 4; i++) {
			rec_make(&rec[i], &g, 10 + (uint64_t)i, lens[i]);
			total += lens[i];
		}
		infs__record recs[4] = { rec[0].r, rec[1].r, rec[2].r, rec[3].r };
		uint32_t start = 5, end = start + (uint32_t)total + 7;
		uint32_t n_logical = (end + bs - 1) / bs, nb = n_logical + 3;
		/* a scattered table: logical block i -> a permutation of the physical ones */
		int32_t *bt = malloc(n_logical * sizeof *bt), *perm = malloc(nb * sizeof *perm);
		for (uint32_t i = 0; i < nb; i++)
			perm[i] = (int32_t)i;
		for (uint32_t i = nb - 1; i > 0; i--) {
			uint32_t j = (uint32_t)(rnd() % (i + 1));
			int32_t t = perm[i];
			perm[i] = perm[j];
			perm[j] = t;
		}
		for (uint32_t i = 0; i < n_logical; i++)
			bt[i] = perm[i];
		test_cache c;
		cache_make(&c, (enum layout_kind)kind, &g, nb, bs, mixed ? INFS_DTYPE_BF16 : INFS_DTYPE_F16);
		unsigned char *exp = cache_expected(&c, &g, recs, 4, start, bt);

		/* one call for the first two records, one for the other two */
		uint32_t next = 0, next2 = 0;
		CHECK_OK(infs__inject_records(&next, &g, recs, 2, start, bt, n_logical, &c.lay, NULL, NULL, "test"));
		CHECK(next == start + lens[0] + lens[1]);
		CHECK_OK(infs__inject_records(&next2, &g, recs + 2, 2, next, bt, n_logical, &c.lay, NULL, NULL, "test"));
		CHECK(next2 == start + total);
		if (!cache_equals(&c, exp)) {
			fprintf(stderr, "round trip: layout %s block_size %u %s differs (or wrote outside its slots)\n",
			        layout_names[kind], bs, mixed ? "f16->bf16" : "f16");
			check_failures++;
		}
		free(exp);
		free(bt);
		free(perm);
		cache_free(&c);
		for (int i = 0; i < 4; i++)
			rec_free(&rec[i]);
	}
}

/* Each bad input gets its code and a message naming the problem, and the
 * cache keeps every byte. */
static void bad_inputs(void)
{
	infs_geometry g = test_geometry(2, 2, 8, INFS_DTYPE_F16);
	test_rec rec;
	rec_make(&rec, &g, 7, 20);
	test_cache c;
	cache_make(&c, L_NHD, &g, 4, 16, INFS_DTYPE_F16);
	int32_t bt[4] = { 3, 0, 2, 1 };
	unsigned char *snap = cache_snapshot(&c);
	uint32_t next = 12345;
	infs_kv_layout l;
	const infs__record *r = &rec.r;

#define BAD(code, needle, ...)                                                                  \
	do {                                                                                    \
		CHECK_ERR(infs__inject_records(&next, &g, __VA_ARGS__, NULL, NULL, "test"), code); \
		if (!strstr(infs_error_last(), needle)) {                                       \
			fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__,   \
			        infs_error_last(), needle);                                     \
			check_failures++;                                                       \
		}                                                                               \
		CHECK(cache_equals(&c, snap));                                                  \
		CHECK(next == 12345);                                                           \
	} while (0)

	BAD(INFS_EINVAL, "layout is NULL", r, 1, 0, bt, 4, NULL);
	BAD(INFS_EINVAL, "no records", NULL, 1, 0, bt, 4, &c.lay);
	BAD(INFS_EINVAL, "no records", r, 0, 0, bt, 4, &c.lay);
	BAD(INFS_EINVAL, "block_table is NULL", r, 1, 0, NULL, 4, &c.lay);
	l = c.lay, l.version = 2;
	BAD(INFS_EINVAL, "version", r, 1, 0, bt, 4, &l);
	l = c.lay, l.device = -2;
	BAD(INFS_EINVAL, "device", r, 1, 0, bt, 4, &l);
	if (!(infs_features() & INFS_FEATURE_CUDA)) {
		l = c.lay, l.device = 0;
		BAD(INFS_EUNSUPPORTED, "no CUDA", r, 1, 0, bt, 4, &l);
	}
	l = c.lay, l.dtype = (infs_dtype)4;
	BAD(INFS_EINVAL, "dtype", r, 1, 0, bt, 4, &l);
	l = c.lay, l.dtype = INFS_DTYPE_FP8_E4M3;
	BAD(INFS_EUNSUPPORTED, "store kv_dtype only", r, 1, 0, bt, 4, &l);
	l = c.lay, l.n_layers = 3;
	BAD(INFS_EMISMATCH, "layers", r, 1, 0, bt, 4, &l);
	l = c.lay, l.n_kv_heads = 1;
	BAD(INFS_EMISMATCH, "KV heads", r, 1, 0, bt, 4, &l);
	l = c.lay, l.head_dim = 16;
	BAD(INFS_EMISMATCH, "head_dim", r, 1, 0, bt, 4, &l);
	l = c.lay, l.n_blocks = 0;
	BAD(INFS_EINVAL, "n_blocks", r, 1, 0, bt, 4, &l);
	l = c.lay, l.block_size = 0;
	BAD(INFS_EINVAL, "block_size", r, 1, 0, bt, 4, &l);
	l = c.lay, l.k_layers = NULL;
	BAD(INFS_EINVAL, "k_layers is NULL", r, 1, 0, bt, 4, &l);
	l = c.lay, l.v_layers = NULL;
	BAD(INFS_EINVAL, "v_layers is NULL", r, 1, 0, bt, 4, &l);
	void *holes[2] = { c.k[0], NULL };
	l = c.lay, l.v_layers = holes;
	BAD(INFS_EINVAL, "v_layers[1]", r, 1, 0, bt, 4, &l);
	void *crooked[2] = { (char *)c.v[0] + 1, c.v[1] };
	l = c.lay, l.v_layers = crooked;
	BAD(INFS_EINVAL, "v_layers[0] is not aligned", r, 1, 0, bt, 4, &l);
	l = c.lay, l.stride_slot = 0;
	BAD(INFS_EINVAL, "stride_slot is 0", r, 1, 0, bt, 4, &l);
	l = c.lay, l.stride_block = -256;
	BAD(INFS_EINVAL, "stride_block is -256", r, 1, 0, bt, 4, &l);
	l = c.lay, l.stride_dim = -1;
	BAD(INFS_EINVAL, "stride_dim", r, 1, 0, bt, 4, &l);
	l = c.lay, l.stride_head = 4; /* heads 4 apart but 8 dims wide: overlap */
	BAD(INFS_EINVAL, "overlap", r, 1, 0, bt, 4, &l);
	l = c.lay, l.stride_block = INT64_MAX / 2;
	BAD(INFS_ERANGE, "overflow", r, 1, 0, bt, 4, &l);

	/* records, block table, positions */
	infs__record empty = rec.r;
	empty.n_tokens = 0;
	BAD(INFS_EINVAL, "record 7", &empty, 1, 0, bt, 4, &c.lay);
	empty = rec.r, empty.v = NULL;
	BAD(INFS_EINVAL, "record 7", &empty, 1, 0, bt, 4, &c.lay);
	BAD(INFS_ERANGE, "block table has 1 entries", r, 1, 0, bt, 1, &c.lay);
	BAD(INFS_ERANGE, "need 4", r, 1, 30, bt, 2, &c.lay);
	int32_t bad_hi[4] = { 0, 4, 1, 2 }, bad_neg[4] = { 0, 1, -1, 2 };
	BAD(INFS_ERANGE, "block_table[1] = 4", r, 1, 0, bad_hi, 4, &c.lay);
	BAD(INFS_ERANGE, "block_table[2] = -1", r, 1, 16, bad_neg, 4, &c.lay);
	BAD(INFS_ERANGE, "overflow", r, 1, UINT32_MAX - 10, bt, 4, &c.lay);
	infs__record many[3] = { rec.r, rec.r, rec.r };
	BAD(INFS_ERANGE, "overflow", many, 3, UINT32_MAX - 59, bt, 4, &c.lay);
	/* entries of the table that the range does not use are not checked */
	int32_t partly[4] = { -5, 99, 1, 2 };
	CHECK_OK(infs__inject_records(&next, &g, r, 1, 36, partly, 4, &c.lay, NULL, NULL, "test"));
	CHECK(next == 56);
	free(snap);
#undef BAD

	/* the last positions before UINT32_MAX are usable: 3 tokens at 2^32 - 4 */
	g = test_geometry(1, 1, 4, INFS_DTYPE_F32);
	test_rec tail;
	rec_make(&tail, &g, 9, 3);
	test_cache big;
	cache_make(&big, L_VLLM, &g, 1, 4, INFS_DTYPE_F32);
	big.lay.block_size = 2147483646u; /* UINT32_MAX - 3 = 2 * block_size: block 2, slot 0 */
	int32_t bt3[3] = { -1, -1, 0 };
	uint32_t last = 0;
	CHECK_OK(infs__inject_records(&last, &g, &tail.r, 1, UINT32_MAX - 3, bt3, 3, &big.lay, NULL, NULL, "test"));
	CHECK(last == UINT32_MAX);
	/* slot 2 of block 0 holds the third token's V */
	CHECK(((float *)big.v[0])[0] == ((float *)tail.v)[0] && ((float *)big.v[0])[2 * 4 + 3] == ((float *)tail.v)[11]);
	infs__record four[2] = { tail.r, tail.r };
	CHECK_ERR(infs__inject_records(&last, &g, four, 2, UINT32_MAX - 3, bt3, 3, &big.lay, NULL, NULL, "test"),
	          INFS_ERANGE);
	cache_free(&big);
	rec_free(&tail);
	cache_free(&c);
	rec_free(&rec);
}

static void init_functions(void)
{
	infs_kv_layout l;
	CHECK_OK(infs_kv_layout_init(&l, INFS_KV_LAYOUT_VERSION));
	CHECK(l.version == INFS_KV_LAYOUT_VERSION && l.device == -1 && l.stride_dim == 1);
	CHECK_ERR(infs_kv_layout_init(&l, 0), INFS_EINVAL);
	CHECK_ERR(infs_kv_layout_init(NULL, INFS_KV_LAYOUT_VERSION), INFS_EINVAL);
	infs_inject_options o;
	CHECK_OK(infs_inject_options_init(&o, INFS_INJECT_OPTIONS_VERSION));
	CHECK(o.version == INFS_INJECT_OPTIONS_VERSION && o.stream == NULL);
	CHECK_ERR(infs_inject_options_init(&o, 7), INFS_EINVAL);
	CHECK_ERR(infs_inject_options_init(NULL, INFS_INJECT_OPTIONS_VERSION), INFS_EINVAL);
}

int main(void)
{
	init_functions();
	property();
	round_trips();
	bad_inputs();
	CHECK_DONE();
}

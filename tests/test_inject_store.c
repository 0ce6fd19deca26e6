/* infs_inject_into_blocks end to end: facts and segments put into a store,
 * injected by id into a paged cache, compared with rotation of what was
 * put; every bad argument refused with the cache untouched; ids of another
 * namespace, deleted or never seen, refused alike; and the host-side
 * checks of infs_injector_create and infs_inject_device (the device side
 * is tests/gpu/test_gpu_inject_ids.c). */
#include "inject_util.h"
#include "scratch_util.h"

typedef struct stored {
	test_rec rec;
	uint64_t id;
} stored;

static void put(stored *s, infs_store *st, const char *ns, const infs_geometry *g, uint32_t n_tokens, int segment)
{
	rec_make(&s->rec, g, 0, n_tokens);
	int32_t *tokens = calloc(n_tokens, sizeof *tokens);
	float emb[8];
	for (int i = 0; i < 8; i++)
		emb[i] = frnd();
	infs_fact f = INFS_FACT_INIT;
	f.flags = segment ? INFS_FACT_SEGMENT : 0;
	f.n_tokens = n_tokens;
	f.tokens = tokens;
	f.embedding = segment ? NULL : emb;
	f.k = s->rec.k;
	f.v = s->rec.v;
	CHECK_OK(infs_fact_put(&s->id, st, ns, &f));
	s->rec.r.id = s->id;
	s->rec.r.flags = f.flags;
	free(tokens);
}

/* Each bad argument of the device-id path gets its code and a message
 * naming the problem; a store without a device copy (this one) or a build
 * without CUDA cannot make an injector. */
static void injector_args(infs_store *st, const test_cache *c)
{
	infs_injector *inj = (infs_injector *)&inj; /* must be reset to NULL */
	infs_injector_options o = INFS_INJECTOR_OPTIONS_INIT;
	infs_kv_layout l;
#define BAD(code, needle, expr)                                                                        \
	do {                                                                                           \
		CHECK_ERR(expr, code);                                                                 \
		if (!strstr(infs_error_last(), needle)) {                                              \
			fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__,          \
			        infs_error_last(), needle);                                            \
			check_failures++;                                                              \
		}                                                                                      \
	} while (0)
	BAD(INFS_EINVAL, "out is NULL", infs_injector_create(NULL, st, &c->lay, NULL));
	BAD(INFS_EINVAL, "store is NULL", infs_injector_create(&inj, NULL, &c->lay, NULL));
	CHECK(inj == NULL);
	BAD(INFS_EINVAL, "layout is NULL", infs_injector_create(&inj, st, NULL, NULL));
	o.version = 2;
	BAD(INFS_EINVAL, "version", infs_injector_create(&inj, st, &c->lay, &o));
	o = (infs_injector_options)INFS_INJECTOR_OPTIONS_INIT, o.max_ids = 0;
	BAD(INFS_ERANGE, "max_ids 0", infs_injector_create(&inj, st, &c->lay, &o));
	o.max_ids = INFS_RETRIEVE_K_MAX + 1;
	BAD(INFS_ERANGE, "max_ids 4097", infs_injector_create(&inj, st, &c->lay, &o));
	o = (infs_injector_options)INFS_INJECTOR_OPTIONS_INIT, o.max_tokens = 0;
	BAD(INFS_ERANGE, "max_tokens 0", infs_injector_create(&inj, st, &c->lay, &o));
	o.max_tokens = (uint32_t)INT32_MAX + 1;
	BAD(INFS_ERANGE, "max_tokens", infs_injector_create(&inj, st, &c->lay, &o));
	l = c->lay, l.n_layers = 2;
	BAD(INFS_EMISMATCH, "layers", infs_injector_create(&inj, st, &l, NULL));
	l = c->lay, l.stride_slot = 0;
	BAD(INFS_EINVAL, "stride_slot", infs_injector_create(&inj, st, &l, NULL));
	BAD(INFS_EINVAL, "host memory", infs_injector_create(&inj, st, &c->lay, NULL));
	l = c->lay, l.device = 0;
	BAD(INFS_EUNSUPPORTED, infs_features() & INFS_FEATURE_CUDA ? "no device copy" : "no CUDA support",
	    infs_injector_create(&inj, st, &l, NULL));
	CHECK(inj == NULL);
	infs_injector_free(NULL);

	uint64_t ids[1] = { 1 };
	uint32_t n = 1;
	int32_t bt[1] = { 0 };
	BAD(INFS_EINVAL, "injector is NULL", infs_inject_device(NULL, "alice", ids, 8, &n, 0, bt, 1, NULL, NULL, NULL));
#undef BAD
}

int main(void)
{
	char path[600];
	scratch_make("inject", path, sizeof path, "store.infs");
	infs_geometry g = test_geometry(3, 2, 16, INFS_DTYPE_BF16);
	g.rotary_dim = 12;
	g.rope_scaling = INFS_ROPE_SCALING_LLAMA3;
	g.rope_factor = 8;
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = &g;
	o.identity = "test-model";
	o.sync = INFS_SYNC_OFF;
	infs_store *st = NULL;
	CHECK_OK(infs_store_open(&st, path, &o));
	if (!st)
		CHECK_DONE();

	/* alice: a header and a footer segment around three facts; bob: one fact */
	stored header, footer, fa[3], fb;
	put(&header, st, "alice", &g, 6, 1);
	put(&fa[0], st, "alice", &g, 9, 0);
	put(&fa[1], st, "alice", &g, 1, 0);
	put(&fa[2], st, "alice", &g, 20, 0);
	put(&footer, st, "alice", &g, 3, 1);
	put(&fb, st, "bob", &g, 4, 0);

	test_cache c;
	cache_make(&c, L_HND, &g, 12, 16, INFS_DTYPE_F16);
	int32_t bt[8] = { 11, 2, 7, 0, 5, 9, 1, 3 };
	unsigned char *snap = cache_snapshot(&c);

	/* header + facts in the order given (not id order) + footer, in two calls */
	uint64_t ids1[3] = { header.id, fa[2].id, fa[0].id }, ids2[2] = { fa[1].id, footer.id };
	infs__record recs[5] = { header.rec.r, fa[2].rec.r, fa[0].rec.r, fa[1].rec.r, footer.rec.r };
	uint32_t start = 13, next = 0, next2 = 0;
	unsigned char *exp = cache_expected(&c, &g, recs, 5, start, bt);
	CHECK_OK(infs_inject_into_blocks(&next, st, "alice", ids1, 3, start, bt, 8, &c.lay, NULL));
	CHECK(next == start + 6 + 20 + 9);
	infs_inject_options io = INFS_INJECT_OPTIONS_INIT;
	CHECK_OK(infs_inject_into_blocks(&next2, st, "alice", ids2, 2, next, bt, 8, &c.lay, &io));
	CHECK(next2 == next + 1 + 3);
	CHECK(cache_equals(&c, exp));
	free(exp);

	/* bad arguments: each refused, the cache as it was */
	free(snap);
	snap = cache_snapshot(&c);
	uint64_t one[1] = { fa[0].id };
	uint32_t untouched = 777;
	infs_kv_layout l;
#define BAD(code, needle, ...)                                                                        \
	do {                                                                                          \
		CHECK_ERR(infs_inject_into_blocks(__VA_ARGS__), code);                                \
		if (!strstr(infs_error_last(), needle)) {                                             \
			fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__,         \
			        infs_error_last(), needle);                                           \
			check_failures++;                                                             \
		}                                                                                     \
		CHECK(cache_equals(&c, snap));                                                        \
		CHECK(untouched == 777);                                                              \
	} while (0)
	BAD(INFS_EINVAL, "out_next_pos", NULL, st, "alice", one, 1, 0, bt, 8, &c.lay, NULL);
	BAD(INFS_EINVAL, "store is NULL", &untouched, NULL, "alice", one, 1, 0, bt, 8, &c.lay, NULL);
	BAD(INFS_EINVAL, "infs_inject_into_blocks", &untouched, st, NULL, one, 1, 0, bt, 8, &c.lay, NULL);
	BAD(INFS_EINVAL, "infs_inject_into_blocks", &untouched, st, "", one, 1, 0, bt, 8, &c.lay, NULL);
	BAD(INFS_EINVAL, "infs_inject_into_blocks", &untouched, st, "ali\x01" "ce", one, 1, 0, bt, 8, &c.lay, NULL);
	BAD(INFS_EINVAL, "ids is NULL", &untouched, st, "alice", NULL, 1, 0, bt, 8, &c.lay, NULL);
	BAD(INFS_EINVAL, "n_ids is 0", &untouched, st, "alice", one, 0, 0, bt, 8, &c.lay, NULL);
	BAD(INFS_EINVAL, "block_table is NULL", &untouched, st, "alice", one, 1, 0, NULL, 8, &c.lay, NULL);
	BAD(INFS_EINVAL, "layout is NULL", &untouched, st, "alice", one, 1, 0, bt, 8, NULL, NULL);
	io.version = 0;
	BAD(INFS_EINVAL, "version", &untouched, st, "alice", one, 1, 0, bt, 8, &c.lay, &io);
	l = c.lay, l.version = 5;
	BAD(INFS_EINVAL, "version", &untouched, st, "alice", one, 1, 0, bt, 8, &l, NULL);
	l = c.lay, l.n_layers = 2;
	BAD(INFS_EMISMATCH, "layers", &untouched, st, "alice", one, 1, 0, bt, 8, &l, NULL);
	l = c.lay, l.n_kv_heads = 4;
	BAD(INFS_EMISMATCH, "KV heads", &untouched, st, "alice", one, 1, 0, bt, 8, &l, NULL);
	l = c.lay, l.head_dim = 8;
	BAD(INFS_EMISMATCH, "head_dim", &untouched, st, "alice", one, 1, 0, bt, 8, &l, NULL);
	l = c.lay, l.dtype = (infs_dtype)-1;
	BAD(INFS_EINVAL, "dtype", &untouched, st, "alice", one, 1, 0, bt, 8, &l, NULL);
	l = c.lay, l.stride_head = 0;
	BAD(INFS_EINVAL, "stride_head", &untouched, st, "alice", one, 1, 0, bt, 8, &l, NULL);
	if (!(infs_features() & INFS_FEATURE_CUDA)) {
		l = c.lay, l.device = 0;
		BAD(INFS_EUNSUPPORTED, "CUDA", &untouched, st, "alice", one, 1, 0, bt, 8, &l, NULL);
	}
	int32_t bad_bt[8] = { 0, 12, 2, 3, 4, 5, 6, 7 };
	BAD(INFS_ERANGE, "block_table[1] = 12", &untouched, st, "alice", one, 1, 10, bad_bt, 8, &c.lay, NULL);
	BAD(INFS_ERANGE, "block table has 1 entries", &untouched, st, "alice", one, 1, 10, bt, 1, &c.lay, NULL);
	BAD(INFS_ERANGE, "overflow", &untouched, st, "alice", one, 1, UINT32_MAX - 3, bt, 8, &c.lay, NULL);

	/* ids: unknown, of another namespace, deleted -- all the same answer,
	 * even when every other id of the list is good */
	uint64_t unknown[2] = { fa[0].id, 999999 }, foreign[3] = { fa[0].id, fa[1].id, fb.id };
	BAD(INFS_ENOTFOUND, "ids[1] = 999999 is not a record of namespace 'alice'", &untouched, st, "alice", unknown, 2,
	    0, bt, 8, &c.lay, NULL);
	char msg[256];
	snprintf(msg, sizeof msg, "ids[2] = %llu is not a record of namespace 'alice'", (unsigned long long)fb.id);
	BAD(INFS_ENOTFOUND, msg, &untouched, st, "alice", foreign, 3, 0, bt, 8, &c.lay, NULL);
	/* namespaces that are nearly "bob" are other namespaces */
	static const char *const near[] = { "bob ", "Bob", "bo", "bobb", "bob/", ("b\xc3\xb6" "b") };
	uint64_t bob_id[1] = { fb.id };
	for (size_t i = 0; i < sizeof near / sizeof near[0]; i++)
		BAD(INFS_ENOTFOUND, "is not a record", &untouched, st, near[i], bob_id, 1, 0, bt, 8, &c.lay, NULL);
	CHECK_OK(infs_fact_delete(st, "alice", fa[1].id));
	uint64_t deleted[1] = { fa[1].id };
	BAD(INFS_ENOTFOUND, "is not a record", &untouched, st, "alice", deleted, 1, 0, bt, 8, &c.lay, NULL);
#undef BAD

	injector_args(st, &c);

	/* bob's fact in bob's namespace is fine, and segments inject alone */
	uint64_t seg[1] = { footer.id };
	CHECK_OK(infs_inject_into_blocks(&next, st, "bob", bob_id, 1, 0, bt, 8, &c.lay, NULL));
	CHECK(next == 4);
	CHECK_OK(infs_inject_into_blocks(&next, st, "alice", seg, 1, 100, bt, 8, &c.lay, NULL));
	CHECK(next == 103);

	free(snap);
	cache_free(&c);
	rec_free(&header.rec);
	rec_free(&footer.rec);
	for (int i = 0; i < 3; i++)
		rec_free(&fa[i].rec);
	rec_free(&fb.rec);
	infs_store_close(st);
	scratch_cleanup();
	CHECK_DONE();
}

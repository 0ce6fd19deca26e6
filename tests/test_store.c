/* The store's API: round trips of every field through close and reopen for
 * each KV dtype, count/list/namespaces/drop, ids that are never reused,
 * namespace isolation under adversarial names, geometry and identity
 * mismatches, and bad input at every entry point leaving the store as it
 * was. */
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "util/geometry.h"
#include "store/store.h"
#include "test_store_util.h"

#define N_FACTS 40

static const char *const spaces[] = { "alice", "bob", "carol \xe2\x9c\x93" };

/* Everything observable about a store, to show that a failed call changed
 * nothing. */
typedef struct snapshot {
	infs_store_stats stats;
	size_t n_ns;
	uint64_t ids[256];
	size_t n_ids;
} snapshot;

static void take(snapshot *sn, infs_store *s)
{
	memset(sn, 0, sizeof *sn);
	sn->stats.version = INFS_STORE_STATS_VERSION;
	CHECK_OK(infs_store_stats_get(&sn->stats, s));
	char **names;
	CHECK_OK(infs_namespace_list(&names, &sn->n_ns, s));
	for (size_t i = 0; i < sn->n_ns; i++) {
		uint64_t *ids;
		size_t n;
		CHECK_OK(infs_fact_list(&ids, &n, s, names[i]));
		for (size_t j = 0; j < n && sn->n_ids < 256; j++)
			sn->ids[sn->n_ids++] = ids[j];
		infs_free(ids);
	}
	infs_free(names);
}

static int same(const snapshot *a, const snapshot *b)
{
	return a->n_ns == b->n_ns && a->n_ids == b->n_ids && !memcmp(a->ids, b->ids, a->n_ids * sizeof *a->ids) &&
	       a->stats.n_facts == b->stats.n_facts && a->stats.n_segments == b->stats.n_segments &&
	       a->stats.file_bytes == b->stats.file_bytes && a->stats.live_bytes == b->stats.live_bytes;
}

static unsigned flags_of(uint64_t seed)
{
	return seed % 4 == 3 ? INFS_FACT_SEGMENT : 0;
}

static void check_all(infs_store *s, const infs_geometry *g, const uint64_t *ids, const int *live)
{
	for (uint64_t i = 0; i < N_FACTS; i++) {
		infs_fact_record *r = NULL;
		const char *ns = spaces[i % 3];
		if (!live[i]) {
			CHECK_ERR(infs_fact_get(&r, s, ns, ids[i]), INFS_ENOTFOUND);
			CHECK(r == NULL);
			continue;
		}
		CHECK_OK(infs_fact_get(&r, s, ns, ids[i]));
		CHECK(r && r->id == ids[i] && gen_fact_matches(r, g, i, flags_of(i)));
		infs_fact_record_free(r);
	}
}

static void round_trip(infs_dtype dtype)
{
	char path[600];
	scratch_path(path, sizeof path, "rt.infs");
	unlink(path);
	infs_geometry g = small_geometry(dtype), got;
	infs_store *s;
	uint64_t ids[N_FACTS];
	int live[N_FACTS];
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_NORMAL));
	for (uint64_t i = 0; i < N_FACTS; i++) {
		gen_fact f;
		gen_fact_make(&f, &g, i, flags_of(i));
		CHECK_OK(infs_fact_put(&ids[i], s, spaces[i % 3], &f.fact));
		CHECK(i == 0 || ids[i] > ids[i - 1]);
		live[i] = 1;
		gen_fact_free(&f);
	}
	check_all(s, &g, ids, live);
	CHECK_OK(infs_store_sync(s));
	CHECK_OK(infs_store_geometry(&got, s));
	CHECK(infs__geometry_diff(&got, &g) == NULL);
	CHECK(strcmp(infs_store_identity(s), TEST_IDENTITY) == 0);
	infs_store_close(s);

	/* Reopen without geometry or identity: the file supplies them. */
	CHECK_OK(open_store(&s, path, NULL, 0, INFS_SYNC_FULL));
	check_all(s, &g, ids, live);
	CHECK_OK(infs_store_geometry(&got, s));
	CHECK(infs__geometry_diff(&got, &g) == NULL && got.kv_dtype == dtype);
	uint64_t n;
	for (int k = 0; k < 3; k++) {
		CHECK_OK(infs_fact_count(&n, s, spaces[k]));
		CHECK(n == (N_FACTS + 2 - (unsigned)k) / 3);
	}
	/* Delete every fifth fact, drop nothing yet, reopen, compact, reopen. */
	for (uint64_t i = 0; i < N_FACTS; i += 5) {
		CHECK_OK(infs_fact_delete(s, spaces[i % 3], ids[i]));
		CHECK_ERR(infs_fact_delete(s, spaces[i % 3], ids[i]), INFS_ENOTFOUND);
		live[i] = 0;
	}
	check_all(s, &g, ids, live);
	infs_store_close(s);
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_FULL));
	check_all(s, &g, ids, live);
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&st, s));
	uint64_t before = st.file_bytes;
	CHECK(st.n_facts + st.n_segments == N_FACTS - (N_FACTS + 4) / 5 && st.n_namespaces == 3);
	CHECK(st.dropped_tail_bytes == 0 && st.live_bytes < st.file_bytes);
	CHECK_OK(infs_store_compact(s));
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.file_bytes < before);
	check_all(s, &g, ids, live);
	infs_store_close(s);
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_FULL));
	check_all(s, &g, ids, live);
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.file_bytes < before);
	infs_store_close(s);
}

static void list_and_drop(void)
{
	char path[600];
	scratch_path(path, sizeof path, "list.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F16);
	infs_store *s;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	uint64_t ids[12], *got;
	size_t n;
	char **names;
	CHECK_OK(infs_namespace_list(&names, &n, s));
	CHECK(n == 0 && names == NULL);
	const char *order[] = { "zed", "Zed", "a", "zed", "\xc3\xa9t\xc3\xa9", "a" };
	for (int i = 0; i < 12; i++) {
		gen_fact f;
		gen_fact_make(&f, &g, (uint64_t)i, flags_of((uint64_t)i));
		CHECK_OK(infs_fact_put(&ids[i], s, order[i % 6], &f.fact));
		gen_fact_free(&f);
	}
	CHECK_OK(infs_namespace_list(&names, &n, s));
	CHECK(n == 4 && !strcmp(names[0], "Zed") && !strcmp(names[1], "a") && !strcmp(names[2], "zed") &&
	      !strcmp(names[3], "\xc3\xa9t\xc3\xa9"));
	infs_free(names);
	CHECK_OK(infs_fact_list(&got, &n, s, "a"));
	CHECK(n == 4 && got[0] == ids[2] && got[1] == ids[5] && got[2] == ids[8] && got[3] == ids[11]);
	infs_free(got);
	CHECK_OK(infs_fact_list(&got, &n, s, "nobody"));
	CHECK(n == 0 && got == NULL);

	/* The matrix holds facts only, in id order, with their embeddings. */
	const float *emb;
	const uint64_t *mids;
	uint64_t gen, gen2;
	infs__store_read_lock(s);
	CHECK_OK(infs__store_ns_matrix(&emb, &mids, &n, &gen, s, "a"));
	CHECK(n == 3 && mids[0] == ids[2] && mids[1] == ids[5] && mids[2] == ids[8]); /* 11 is a segment */
	for (size_t r = 0; r < n && r < 3; r++) {
		gen_fact f;
		gen_fact_make(&f, &g, 2 + 3 * r, 0);
		CHECK(!memcmp(emb + r * g.embed_dim, f.embedding, g.embed_dim * sizeof(float)));
		gen_fact_free(&f);
	}
	infs__record rec;
	CHECK_OK(infs__store_find(&rec, s, "a", ids[11]));
	CHECK(rec.flags == INFS_FACT_SEGMENT && rec.embedding == NULL && rec.id == ids[11]);
	CHECK_ERR(infs__store_find(&rec, s, "zed", ids[11]), INFS_ENOTFOUND);
	CHECK_OK(infs__store_ns_matrix(&emb, &mids, &n, &gen2, s, "nobody"));
	CHECK(n == 0);
	/* The bound on a fact's tokens: the longest fact's (segments aside). */
	uint32_t longest = 0, bound = 0, seg_tokens = 0;
	for (uint64_t i = 2; i < 12; i += 3) {
		gen_fact f;
		gen_fact_make(&f, &g, i, flags_of(i));
		if (i == 11)
			seg_tokens = f.fact.n_tokens;
		else if (f.fact.n_tokens > longest)
			longest = f.fact.n_tokens;
		gen_fact_free(&f);
	}
	CHECK_OK(infs__store_ns_bound(&n, &bound, s, "a"));
	CHECK(n == 3 && bound == longest && longest > 0);
	printf("bound of \"a\": %u tokens (its segment %u)\n", bound, seg_tokens);
	CHECK_OK(infs__store_ns_bound(&n, &bound, s, "nobody"));
	CHECK(n == 0 && bound == 0);
	CHECK_ERR(infs__store_ns_bound(&n, &bound, s, ""), INFS_EINVAL);
	infs__store_read_unlock(s);

	CHECK_OK(infs_fact_delete(s, "a", ids[8]));
	infs__store_read_lock(s);
	CHECK_OK(infs__store_ns_matrix(&emb, &mids, &n, &gen2, s, "a"));
	CHECK(n == 2 && mids[0] == ids[2] && mids[1] == ids[5] && gen2 != gen);
	/* a deleted fact may still count: a bound, never below a live fact */
	CHECK_OK(infs__store_ns_bound(&n, &bound, s, "a"));
	CHECK(n == 2 && bound == longest);
	infs__store_read_unlock(s);

	CHECK_OK(infs_namespace_drop(s, "zed"));
	CHECK_OK(infs_namespace_drop(s, "never-existed"));
	CHECK_OK(infs_fact_count(&gen, s, "zed"));
	CHECK(gen == 0);
	CHECK_ERR(infs_fact_get(&(infs_fact_record *){ NULL }, s, "zed", ids[0]), INFS_ENOTFOUND);
	CHECK_OK(infs_namespace_list(&names, &n, s));
	CHECK(n == 3 && !strcmp(names[0], "Zed") && !strcmp(names[1], "a"));
	infs_free(names);
	infs_store_close(s);
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_OFF));
	CHECK_OK(infs_fact_count(&gen, s, "zed"));
	CHECK(gen == 0);
	CHECK_OK(infs_fact_count(&gen, s, "Zed"));
	CHECK(gen == 2);
	/* A dropped namespace can be used again; its old ids stay gone. */
	gen_fact f;
	gen_fact_make(&f, &g, 99, 0);
	uint64_t id;
	CHECK_OK(infs_fact_put(&id, s, "zed", &f.fact));
	CHECK(id > ids[11]);
	CHECK_OK(infs_fact_list(&got, &n, s, "zed"));
	CHECK(n == 1 && got[0] == id);
	infs_free(got);
	gen_fact_free(&f);
	infs_store_close(s);
}

static void ids_never_reused(void)
{
	char path[600];
	scratch_path(path, sizeof path, "ids.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_BF16);
	infs_store *s;
	uint64_t ids[6], id;
	gen_fact f;
	gen_fact_make(&f, &g, 1, 0);
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_FULL));
	for (int i = 0; i < 6; i++)
		CHECK_OK(infs_fact_put(&ids[i], s, "u", &f.fact));
	/* Delete the newest ones, so that "largest id + 1" would reuse them. */
	for (int i = 3; i < 6; i++)
		CHECK_OK(infs_fact_delete(s, "u", ids[i]));
	CHECK_OK(infs_store_compact(s));
	infs_store_close(s);
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_FULL));
	CHECK_OK(infs_fact_put(&id, s, "u", &f.fact));
	CHECK(id > ids[5]);
	/* Everything deleted and dropped, compacted twice, reopened. */
	CHECK_OK(infs_namespace_drop(s, "u"));
	CHECK_OK(infs_store_compact(s));
	CHECK_OK(infs_store_compact(s));
	infs_store_close(s);
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_FULL));
	uint64_t id2;
	CHECK_OK(infs_fact_put(&id2, s, "u", &f.fact));
	CHECK(id2 > id);
	infs_store_close(s);
	gen_fact_free(&f);
}

static void isolation(void)
{
	char path[600], msg1[300], msg2[300];
	scratch_path(path, sizeof path, "iso.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F32);
	infs_store *s;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	gen_fact f;
	gen_fact_make(&f, &g, 5, 0);
	uint64_t a, b, n, *ids;
	size_t nn;
	CHECK_OK(infs_fact_put(&a, s, "alice", &f.fact));
	CHECK_OK(infs_fact_put(&b, s, "bob", &f.fact));
	infs_fact_record *r = NULL;

	/* Another namespace's id looks exactly like an id that never existed. */
	CHECK_ERR(infs_fact_get(&r, s, "bob", a), INFS_ENOTFOUND);
	snprintf(msg1, sizeof msg1, "%s", infs_error_last());
	CHECK_ERR(infs_fact_get(&r, s, "bob", b + 1000), INFS_ENOTFOUND);
	snprintf(msg2, sizeof msg2, "%s", infs_error_last());
	char want1[300], want2[300];
	snprintf(want1, sizeof want1, "infs_fact_get: no fact %llu in namespace \"bob\"", (unsigned long long)a);
	snprintf(want2, sizeof want2, "infs_fact_get: no fact %llu in namespace \"bob\"", (unsigned long long)(b + 1000));
	CHECK(!strcmp(msg1, want1) && !strcmp(msg2, want2));
	CHECK(r == NULL);

	const char *near[] = { "alic", "alice ", "alicex", "Alice", "ALICE", " alice", "alice\xc2\xa0", "bo" };
	for (size_t i = 0; i < sizeof near / sizeof *near; i++) {
		CHECK_ERR(infs_fact_get(&r, s, near[i], a), INFS_ENOTFOUND);
		CHECK_ERR(infs_fact_delete(s, near[i], a), INFS_ENOTFOUND);
		CHECK_OK(infs_fact_count(&n, s, near[i]));
		CHECK(n == 0);
		CHECK_OK(infs_fact_list(&ids, &nn, s, near[i]));
		CHECK(nn == 0 && ids == NULL);
		CHECK_OK(infs_namespace_drop(s, near[i]));
	}
	CHECK_ERR(infs_fact_delete(s, "bob", a), INFS_ENOTFOUND);
	CHECK_ERR(infs_fact_get(&r, s, "alice", 0), INFS_ENOTFOUND);
	CHECK_ERR(infs_fact_get(&r, s, "alice", UINT64_MAX), INFS_ENOTFOUND);

	/* Names at and past the limits, and malformed ones. */
	char name[300];
	memset(name, 'x', sizeof name);
	name[INFS_NAMESPACE_MAX] = '\0';
	uint64_t id;
	CHECK_OK(infs_fact_put(&id, s, name, &f.fact));
	CHECK_OK(infs_fact_get(&r, s, name, id));
	infs_fact_record_free(r);
	r = NULL;
	name[INFS_NAMESPACE_MAX - 1] = '\0';
	CHECK_ERR(infs_fact_get(&r, s, name, id), INFS_ENOTFOUND);
	name[INFS_NAMESPACE_MAX - 1] = 'x';
	name[INFS_NAMESPACE_MAX] = 'x';
	name[INFS_NAMESPACE_MAX + 1] = '\0';
	const char *bad[] = { "", name, "a\xff", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\xe2\x82", "tab\there",
		              "nl\n", "del\x7f", "c1\xc2\x85" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		CHECK_ERR(infs_fact_put(&id, s, bad[i], &f.fact), INFS_EINVAL);
		CHECK(strstr(infs_error_last(), "namespace") != NULL);
		CHECK_ERR(infs_fact_get(&r, s, bad[i], a), INFS_EINVAL);
		CHECK_ERR(infs_fact_delete(s, bad[i], a), INFS_EINVAL);
		CHECK_ERR(infs_fact_count(&n, s, bad[i]), INFS_EINVAL);
		CHECK_ERR(infs_fact_list(&ids, &nn, s, bad[i]), INFS_EINVAL);
		CHECK_ERR(infs_namespace_drop(s, bad[i]), INFS_EINVAL);
		infs__store_read_lock(s);
		infs__record rec;
		const float *emb;
		const uint64_t *mids;
		CHECK_ERR(infs__store_find(&rec, s, bad[i], a), INFS_EINVAL);
		CHECK_ERR(infs__store_ns_matrix(&emb, &mids, &nn, &n, s, bad[i]), INFS_EINVAL);
		infs__store_read_unlock(s);
	}
	CHECK_ERR(infs__check_namespace(NULL), INFS_EINVAL);
	CHECK_OK(infs__check_namespace("\xf0\x9f\x98\x80 user-42"));
	CHECK_OK(infs_fact_count(&n, s, "alice"));
	CHECK(n == 1);
	CHECK_OK(infs_fact_get(&r, s, "alice", a));
	CHECK(r && gen_fact_matches(r, &g, 5, 0));
	infs_fact_record_free(r);
	gen_fact_free(&f);
	infs_store_close(s);
}

static void mismatch(void)
{
	char path[600], missing[600];
	scratch_path(path, sizeof path, "mm.infs");
	scratch_path(missing, sizeof missing, "missing.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F16), h;
	infs_store *s = NULL;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_FULL));
	infs_store_close(s);

	h = g;
	h.n_layers = 4;
	CHECK_ERR(open_store(&s, path, &h, 0, INFS_SYNC_FULL), INFS_EMISMATCH);
	CHECK(s == NULL && strstr(infs_error_last(), "has n_layers 3, caller gave 4"));
	h = g;
	h.kv_dtype = INFS_DTYPE_BF16;
	CHECK_ERR(open_store(&s, path, &h, INFS_OPEN_CREATE, INFS_SYNC_FULL), INFS_EMISMATCH);
	CHECK(strstr(infs_error_last(), "has kv_dtype f16, caller gave bf16"));
	h = g;
	h.rope_theta = 500000;
	CHECK_ERR(open_store(&s, path, &h, 0, INFS_SYNC_FULL), INFS_EMISMATCH);
	CHECK(strstr(infs_error_last(), "rope_theta 10000, caller gave 500000"));
	h = g;
	h.embed_dim = 384;
	CHECK_ERR(open_store(&s, path, &h, 0, INFS_SYNC_FULL), INFS_EMISMATCH);
	CHECK(strstr(infs_error_last(), "embed_dim 6, caller gave 384"));
	h = g;
	h.rope_style = INFS_ROPE_GPTJ;
	CHECK_ERR(open_store(&s, path, &h, 0, INFS_SYNC_FULL), INFS_EMISMATCH);
	CHECK(strstr(infs_error_last(), "rope_style neox, caller gave gptj"));

	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.identity = "other-model";
	CHECK_ERR(infs_store_open(&s, path, &o), INFS_EMISMATCH);
	CHECK(strstr(infs_error_last(), "identity") && strstr(infs_error_last(), "other-model"));
	o.identity = TEST_IDENTITY;
	CHECK_OK(infs_store_open(&s, path, &o));
	infs_store_close(s);

	/* Options that cannot work. */
	CHECK_ERR(open_store(&s, missing, NULL, INFS_OPEN_CREATE, INFS_SYNC_FULL), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "geometry"));
	o = (infs_store_options)INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = &g;
	CHECK_ERR(infs_store_open(&s, missing, &o), INFS_EINVAL); /* no identity */
	o.identity = "";
	CHECK_ERR(infs_store_open(&s, missing, &o), INFS_EINVAL);
	char *long_id = malloc(INFS_IDENTITY_MAX + 2);
	memset(long_id, 'i', INFS_IDENTITY_MAX + 1);
	long_id[INFS_IDENTITY_MAX + 1] = '\0';
	o.identity = long_id;
	CHECK_ERR(infs_store_open(&s, missing, &o), INFS_EINVAL);
	long_id[INFS_IDENTITY_MAX] = '\0'; /* the limit itself is fine */
	CHECK_OK(infs_store_open(&s, missing, &o));
	CHECK(s && strlen(infs_store_identity(s)) == INFS_IDENTITY_MAX);
	infs_store_close(s);
	CHECK_OK(infs_store_open(&s, missing, &o));
	infs_store_close(s);
	s = NULL;
	unlink(missing);
	free(long_id);
	CHECK_ERR(open_store(&s, missing, NULL, 0, INFS_SYNC_FULL), INFS_ENOTFOUND);
	CHECK(access(missing, F_OK) != 0);
	CHECK_ERR(open_store(&s, path, &g, INFS_OPEN_CREATE | INFS_OPEN_READONLY, INFS_SYNC_FULL), INFS_EINVAL);
	CHECK_ERR(open_store(&s, path, &g, 1u << 7, INFS_SYNC_FULL), INFS_EINVAL);
	CHECK_ERR(open_store(&s, path, &g, 0, (infs_sync_mode)9), INFS_EINVAL);
	h = g;
	h.rotary_dim = 7;
	CHECK_ERR(open_store(&s, path, &h, 0, INFS_SYNC_FULL), INFS_EINVAL);
	h = g;
	h.version = 42;
	CHECK_ERR(open_store(&s, path, &h, 0, INFS_SYNC_FULL), INFS_EINVAL);
	o = (infs_store_options)INFS_STORE_OPTIONS_INIT;
	o.version = 77;
	CHECK_ERR(infs_store_open(&s, path, &o), INFS_EINVAL);
	o = (infs_store_options)INFS_STORE_OPTIONS_INIT;
	o.device = 0;
	int rc = infs_store_open(&s, path, &o);
	if (!(infs_features() & INFS_FEATURE_CUDA))
		CHECK(rc == INFS_EUNSUPPORTED && strstr(infs_error_last(), "CUDA"));
	else if (rc == INFS_OK)
		infs_store_close(s);
	o.device = -2;
	CHECK_ERR(infs_store_open(&s, path, &o), INFS_EINVAL);
	CHECK_ERR(infs_store_open(NULL, path, NULL), INFS_EINVAL);
	CHECK_ERR(infs_store_open(&s, NULL, NULL), INFS_EINVAL);
	CHECK_ERR(infs_store_open(&s, "", NULL), INFS_EINVAL);
	CHECK_ERR(infs_store_open(&s, scratch_dir, NULL), INFS_EINVAL);
	CHECK(s == NULL);
	CHECK_OK(infs_store_open(&s, path, NULL));
	infs_store_close(s);
	CHECK_ERR(infs_store_options_init(NULL, INFS_STORE_OPTIONS_VERSION), INFS_EINVAL);
	CHECK_ERR(infs_store_options_init(&o, INFS_STORE_OPTIONS_VERSION + 1), INFS_EINVAL);
	CHECK_OK(infs_store_options_init(&o, INFS_STORE_OPTIONS_VERSION));
	CHECK(o.device == -1 && o.sync == INFS_SYNC_FULL && o.faiss_min_facts == 100000);
	infs_store_close(NULL);
}

/* Compacting through a symbolic link rewrites the store it points to and
 * leaves the link a link. */
static void through_symlink(void)
{
	char path[600], link_path[600];
	scratch_path(path, sizeof path, "target.infs");
	scratch_path(link_path, sizeof link_path, "link.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F32);
	infs_store *s;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	infs_store_close(s);
	CHECK(symlink("target.infs", link_path) == 0);
	CHECK_OK(open_store(&s, link_path, &g, 0, INFS_SYNC_OFF));
	gen_fact f;
	gen_fact_make(&f, &g, 4, 0);
	uint64_t a, b;
	CHECK_OK(infs_fact_put(&a, s, "u", &f.fact));
	CHECK_OK(infs_fact_put(&b, s, "u", &f.fact));
	CHECK_OK(infs_fact_delete(s, "u", a));
	CHECK_OK(infs_store_compact(s));
	infs_store_close(s);
	struct stat st;
	CHECK(lstat(link_path, &st) == 0 && S_ISLNK(st.st_mode));
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_OFF));
	uint64_t n;
	CHECK_OK(infs_fact_count(&n, s, "u"));
	CHECK(n == 1);
	infs_store_close(s);
	gen_fact_free(&f);
}

/* Writes that fail in the file system (here: the file size limit, so
 * pwritev writes part of the record and then fails) leave the store and
 * its file exactly as they were, and the store keeps working. */
static void failed_writes(void)
{
	char path[600];
	scratch_path(path, sizeof path, "efbig.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F32);
	infs_store *s;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_FULL));
	gen_fact f;
	gen_fact_make(&f, &g, 6, 0);
	uint64_t a, b, id = 777;
	CHECK_OK(infs_fact_put(&a, s, "u", &f.fact));
	CHECK_OK(infs_fact_put(&b, s, "u", &f.fact));
	CHECK_OK(infs_fact_delete(s, "u", a));
	snapshot before, after;
	take(&before, s);
	struct rlimit old, lim;
	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = (rlim_t)before.stats.file_bytes + 100;
	setrlimit(RLIMIT_FSIZE, &lim);
	CHECK_ERR(infs_fact_put(&id, s, "u", &f.fact), INFS_EIO);
	CHECK_ERR(infs_fact_put(&id, s, "new-namespace", &f.fact), INFS_EIO);
	CHECK(id == 777);
	lim.rlim_cur = 200; /* below the compacted file's size */
	setrlimit(RLIMIT_FSIZE, &lim);
	CHECK_ERR(infs_store_compact(s), INFS_EIO);
	setrlimit(RLIMIT_FSIZE, &old);
	take(&after, s);
	CHECK(same(&before, &after));
	struct stat st;
	CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == before.stats.file_bytes);
	char tmp[700];
	snprintf(tmp, sizeof tmp, "%s.compact", path);
	CHECK(access(tmp, F_OK) != 0);
	CHECK_OK(infs_fact_put(&id, s, "u", &f.fact));
	CHECK(id == b + 1);
	CHECK_OK(infs_store_compact(s));
	infs_store_close(s);
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_FULL));
	uint64_t *ids;
	size_t n;
	CHECK_OK(infs_fact_list(&ids, &n, s, "u"));
	CHECK(n == 2 && ids[0] == b && ids[1] == id);
	infs_free(ids);
	infs_store_stats stats = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&stats, s));
	CHECK(stats.dropped_tail_bytes == 0 && stats.n_namespaces == 1);
	infs_store_close(s);
	gen_fact_free(&f);
}

static int destroyed;
static void destroy_ext(void *p)
{
	destroyed += *(int *)p;
}

static void internal_interface(void)
{
	char path[600], faiss[16] = "Flat";
	scratch_path(path, sizeof path, "ext.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F32);
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = &g;
	o.identity = TEST_IDENTITY;
	o.faiss_index = faiss;
	o.faiss_min_facts = 7;
	infs_store *s;
	CHECK_OK(infs_store_open(&s, path, &o));
	strcpy(faiss, "HNSW32");
	const infs_store_options *so = infs__store_opts(s);
	CHECK(so->faiss_index != faiss && !strcmp(so->faiss_index, "Flat") && so->faiss_min_facts == 7);
	CHECK(so->geometry && so->geometry->n_layers == 3 && !strcmp(so->identity, TEST_IDENTITY));
	CHECK(infs__store_geom(s)->embed_dim == 6);
	int one = 1, two = 2;
	struct infs__store_ext *e = infs__store_ext(s, INFS_EXT_FAISS);
	CHECK(e && e->data == NULL && e->destroy == NULL);
	e->data = &one;
	e->destroy = destroy_ext;
	e = infs__store_ext(s, INFS_EXT_DEVICE);
	e->data = &two;
	e->destroy = destroy_ext;
	CHECK(infs__store_ext(s, INFS_EXT_COUNT) == NULL);
	infs_store_close(s);
	CHECK(destroyed == 3);
}

static void bad_inputs(void)
{
	char path[600];
	scratch_path(path, sizeof path, "bad.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F16);
	infs_store *s, *ro;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	gen_fact ok, seg;
	gen_fact_make(&ok, &g, 11, 0);
	gen_fact_make(&seg, &g, 12, INFS_FACT_SEGMENT);
	uint64_t id = 0, keep, n;
	CHECK_OK(infs_fact_put(&keep, s, "u", &ok.fact));
	CHECK_OK(infs_fact_put(&id, s, "u", &seg.fact));
	snapshot before, after;
	take(&before, s);

	infs_fact f;
#define BAD_PUT(code, mutate)                                                \
	do {                                                                 \
		f = ok.fact;                                                 \
		mutate;                                                      \
		uint64_t bad_id_ = 12345;                                    \
		CHECK_ERR(infs_fact_put(&bad_id_, s, "u", &f), code);        \
		CHECK(bad_id_ == 12345);                                     \
		take(&after, s);                                             \
		CHECK(same(&before, &after));                                \
	} while (0)
	BAD_PUT(INFS_EINVAL, f.version = 2);
	BAD_PUT(INFS_EINVAL, f.flags = 1u << 5);
	BAD_PUT(INFS_ERANGE, f.n_tokens = 0);
	BAD_PUT(INFS_ERANGE, f.n_tokens = INFS_FACT_TOKENS_MAX + 1);
	BAD_PUT(INFS_EINVAL, f.tokens = NULL);
	BAD_PUT(INFS_EINVAL, f.k = NULL);
	BAD_PUT(INFS_EINVAL, f.v = NULL);
	BAD_PUT(INFS_EINVAL, f.embedding = NULL);
	CHECK(strstr(infs_error_last(), "embedding"));
	BAD_PUT(INFS_EINVAL, f.flags = INFS_FACT_SEGMENT); /* a segment with an embedding */
	int32_t neg[8];
	memcpy(neg, ok.tokens, ok.fact.n_tokens * sizeof *neg);
	neg[ok.fact.n_tokens - 1] = -1;
	BAD_PUT(INFS_EINVAL, f.tokens = neg);
	float emb[6];
	memcpy(emb, ok.embedding, sizeof emb);
	emb[3] = NAN;
	BAD_PUT(INFS_EINVAL, f.embedding = emb);
	CHECK(strstr(infs_error_last(), "embedding[3]"));
	emb[3] = INFINITY;
	BAD_PUT(INFS_EINVAL, f.embedding = emb);
	unsigned char *kbad = malloc(ok.kv_bytes);
	memcpy(kbad, ok.k, ok.kv_bytes);
	uint16_t inf16 = 0x7c00;
	memcpy(kbad + 10, &inf16, 2);
	BAD_PUT(INFS_EINVAL, f.k = kbad);
	CHECK(strstr(infs_error_last(), "k element 5"));
	BAD_PUT(INFS_EINVAL, f.v = kbad);
	char *big = malloc(INFS_TEXT_MAX + 1);
	memset(big, 'a', INFS_TEXT_MAX);
	big[INFS_TEXT_MAX] = '\0';
	BAD_PUT(INFS_ERANGE, f.text = big);
	big[INFS_METADATA_MAX] = '\0';
	BAD_PUT(INFS_ERANGE, f.metadata = big);
	CHECK(strstr(infs_error_last(), "metadata"));
	BAD_PUT(INFS_EINVAL, f.text = "bad \xff utf-8");
	BAD_PUT(INFS_EINVAL, f.metadata = "{\"a\": \"\xc0\x80\"}");
	/* Limits themselves are fine. */
	big[INFS_TEXT_MAX - 1] = '\0';
	f = ok.fact;
	f.text = big;
	CHECK_OK(infs_fact_put(&n, s, "big", &f));
	CHECK_OK(infs_namespace_drop(s, "big"));
	take(&before, s);

	CHECK_ERR(infs_fact_put(NULL, s, "u", &ok.fact), INFS_EINVAL);
	CHECK_ERR(infs_fact_put(&id, NULL, "u", &ok.fact), INFS_EINVAL);
	CHECK_ERR(infs_fact_put(&id, s, NULL, &ok.fact), INFS_EINVAL);
	CHECK_ERR(infs_fact_put(&id, s, "u", NULL), INFS_EINVAL);
	infs_fact_record *r = (infs_fact_record *)&r;
	CHECK_ERR(infs_fact_get(NULL, s, "u", keep), INFS_EINVAL);
	CHECK_ERR(infs_fact_get(&r, NULL, "u", keep), INFS_EINVAL);
	CHECK(r == NULL);
	CHECK_ERR(infs_fact_get(&r, s, NULL, keep), INFS_EINVAL);
	CHECK_ERR(infs_fact_delete(NULL, "u", keep), INFS_EINVAL);
	CHECK_ERR(infs_fact_delete(s, NULL, keep), INFS_EINVAL);
	CHECK_ERR(infs_fact_delete(s, "u", keep + 100), INFS_ENOTFOUND);
	CHECK_ERR(infs_fact_count(NULL, s, "u"), INFS_EINVAL);
	CHECK_ERR(infs_fact_count(&n, NULL, "u"), INFS_EINVAL);
	uint64_t *ids;
	size_t nn;
	CHECK_ERR(infs_fact_list(NULL, &nn, s, "u"), INFS_EINVAL);
	CHECK_ERR(infs_fact_list(&ids, NULL, s, "u"), INFS_EINVAL);
	CHECK_ERR(infs_fact_list(&ids, &nn, NULL, "u"), INFS_EINVAL);
	char **names;
	CHECK_ERR(infs_namespace_list(NULL, &nn, s), INFS_EINVAL);
	CHECK_ERR(infs_namespace_list(&names, NULL, s), INFS_EINVAL);
	CHECK_ERR(infs_namespace_list(&names, &nn, NULL), INFS_EINVAL);
	CHECK_ERR(infs_namespace_drop(NULL, "u"), INFS_EINVAL);
	infs_store_stats st = { .version = 0 };
	CHECK_ERR(infs_store_stats_get(&st, s), INFS_EINVAL);
	st.version = INFS_STORE_STATS_VERSION;
	CHECK_ERR(infs_store_stats_get(NULL, s), INFS_EINVAL);
	CHECK_ERR(infs_store_stats_get(&st, NULL), INFS_EINVAL);
	infs_geometry gg;
	CHECK_ERR(infs_store_geometry(NULL, s), INFS_EINVAL);
	CHECK_ERR(infs_store_geometry(&gg, NULL), INFS_EINVAL);
	CHECK(infs_store_identity(NULL) == NULL);
	CHECK_ERR(infs_store_sync(NULL), INFS_EINVAL);
	CHECK_ERR(infs_store_compact(NULL), INFS_EINVAL);
	infs_fact_record_free(NULL);
	take(&after, s);
	CHECK(same(&before, &after));

	/* A read-only handle refuses every write and changes nothing. */
	infs_store_close(s);
	CHECK_OK(open_store(&ro, path, NULL, INFS_OPEN_READONLY, INFS_SYNC_FULL));
	take(&before, ro);
	CHECK_ERR(infs_fact_put(&id, ro, "u", &ok.fact), INFS_EREADONLY);
	CHECK_ERR(infs_fact_delete(ro, "u", keep), INFS_EREADONLY);
	CHECK_ERR(infs_namespace_drop(ro, "u"), INFS_EREADONLY);
	CHECK_ERR(infs_store_compact(ro), INFS_EREADONLY);
	CHECK_OK(infs_store_sync(ro));
	take(&after, ro);
	CHECK(same(&before, &after));
	CHECK_OK(infs_fact_get(&r, ro, "u", keep));
	CHECK(gen_fact_matches(r, &g, 11, 0));
	infs_fact_record_free(r);
	infs_store_close(ro);

	free(big);
	free(kbad);
	gen_fact_free(&ok);
	gen_fact_free(&seg);
}

static void no_embeddings(void)
{
	char path[600];
	scratch_path(path, sizeof path, "noemb.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F32);
	g.embed_dim = 0;
	infs_store *s;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	gen_fact f;
	gen_fact_make(&f, &g, 3, 0);
	uint64_t id;
	CHECK(f.fact.embedding == NULL);
	CHECK_OK(infs_fact_put(&id, s, "u", &f.fact));
	float e = 1;
	f.fact.embedding = &e;
	CHECK_ERR(infs_fact_put(&id, s, "u", &f.fact), INFS_EINVAL);
	infs_store_close(s);
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_OFF));
	infs_fact_record *r;
	CHECK_OK(infs_fact_get(&r, s, "u", id));
	CHECK(r->embedding == NULL && gen_fact_matches(r, &g, 3, 0));
	infs_fact_record_free(r);
	infs_store_close(s);
	gen_fact_free(&f);
}

/* Without a device copy (any store on this build, or device -1) the file is
 * the only tier: prefetch and wait do nothing, every namespace is
 * INFS_TIER_FILE, the tier counters are 0, and a version 1 options struct
 * (before host_budget_bytes) still opens. */
static void tiers_without_device(void)
{
	char path[600];
	scratch_path(path, sizeof path, "tiers.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F16);
	infs_store *s;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	gen_fact f;
	gen_fact_make(&f, &g, 3, 0);
	uint64_t id;
	CHECK_OK(infs_fact_put(&id, s, "maya", &f.fact));
	infs_tier t = INFS_TIER_DEVICE;
	CHECK_OK(infs_prefetch(s, "maya"));
	CHECK_OK(infs_prefetch(s, "nobody"));
	CHECK_OK(infs_tier_wait(s));
	CHECK_OK(infs_namespace_tier(&t, s, "maya"));
	CHECK(t == INFS_TIER_FILE);
	t = INFS_TIER_DEVICE;
	CHECK_OK(infs_namespace_tier(&t, s, "nobody"));
	CHECK(t == INFS_TIER_FILE);
	CHECK_ERR(infs_prefetch(NULL, "maya"), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "infs_prefetch: store is NULL"));
	CHECK_ERR(infs_prefetch(s, ""), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "infs_prefetch"));
	CHECK_ERR(infs_prefetch(s, NULL), INFS_EINVAL);
	CHECK_ERR(infs_namespace_tier(NULL, s, "maya"), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "infs_namespace_tier: out is NULL"));
	CHECK_ERR(infs_namespace_tier(&t, NULL, "maya"), INFS_EINVAL);
	CHECK_ERR(infs_namespace_tier(&t, s, "bad\x01name"), INFS_EINVAL);
	CHECK_ERR(infs_tier_wait(NULL), INFS_EINVAL);

	/* version 3 of the stats: the tier counters, 0 here; version 2 is
	 * not written past lost_records */
	infs_store_stats st;
	memset(&st, 0xab, sizeof st);
	st.version = INFS_STORE_STATS_VERSION;
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.n_facts == 1 && st.host_bytes == 0 && st.kv_device_bytes == 0 && st.kv_host_bytes == 0);
	CHECK(st.device_evictions == 0 && st.host_evictions == 0 && st.promotions == 0);
	memset(&st, 0xab, sizeof st);
	st.version = 2;
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.n_facts == 1 && st.lost_records == 0 && st.host_bytes == 0xababababababababull);
	/* version 4 adds the set-aside files' counts; version 3 stops before them */
	memset(&st, 0xab, sizeof st);
	st.version = 3;
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.promotions == 0 && st.torn_bytes == 0xababababababababull);
	infs_store_close(s);

	infs_store_options o;
	CHECK_OK(infs_store_options_init(&o, INFS_STORE_OPTIONS_VERSION));
	CHECK(o.host_budget_bytes == 0 && o.device_budget_bytes == 0);
	/* a host budget without a device copy has nothing to hold */
	o.host_budget_bytes = 1 << 20;
	CHECK_OK(infs_store_open(&s, path, &o));
	CHECK_OK(infs_namespace_tier(&t, s, "maya"));
	CHECK(t == INFS_TIER_FILE);
	infs_store_close(s);
	struct {
		infs_store_options o;
		uint64_t guard;
	} v1;
	memset(&v1, 0xab, sizeof v1); /* host_budget_bytes of version 2 is garbage: not read */
	CHECK_OK(infs_store_options_init(&v1.o, 1));
	CHECK(v1.o.version == 1 && v1.o.device == -1 && v1.o.faiss_min_facts == 100000);
	CHECK(v1.o.host_budget_bytes == 0xababababababababull);
	CHECK_OK(infs_store_open(&s, path, &v1.o));
	uint64_t n;
	CHECK_OK(infs_fact_count(&n, s, "maya"));
	CHECK(n == 1);
	infs_store_close(s);
	gen_fact_free(&f);
}

int main(void)
{
	scratch_init("store");
	round_trip(INFS_DTYPE_F32);
	round_trip(INFS_DTYPE_F16);
	round_trip(INFS_DTYPE_BF16);
	list_and_drop();
	ids_never_reused();
	isolation();
	mismatch();
	internal_interface();
	through_symlink();
	failed_writes();
	bad_inputs();
	no_embeddings();
	tiers_without_device();
	scratch_cleanup();
	CHECK_DONE();
}

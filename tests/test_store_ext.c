/* The store's extension hooks (store.h), driven by a fake extension in both
 * slots, so that what the device copy relies on is checked without CUDA: a
 * put refused by on_put writes nothing and uses no id; a put whose write
 * fails, or that a later slot refuses, is taken back with on_delete; deletes
 * and drops call on_delete once per id; stats sum bytes; the tier entry
 * points reach the slot with tier hooks; close destroys. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "util/error.h"
#include "store/store.h"
#include "test_store_util.h"

typedef struct fake {
	int refuse;           /* on_put fails with INFS_EBUDGET */
	uint64_t put[16];     /* ids accepted, in order */
	size_t n_put;
	uint64_t deleted[16]; /* ids given to on_delete, in order */
	size_t n_deleted;
	char last_ns[64];     /* what the last on_put saw */
	const void *last_k, *last_embedding;
	uint64_t bytes;
	int destroyed;
	char prefetched[64];  /* the tier hooks: what they saw */
	int waits;
} fake;

static int fake_put(void *data, const char *ns, const infs__record *r)
{
	fake *f = data;
	if (f->refuse)
		return infs__error(INFS_EBUDGET, "fake extension: no room for %s/%llu", ns, (unsigned long long)r->id);
	snprintf(f->last_ns, sizeof f->last_ns, "%s", ns);
	f->last_k = r->k;
	f->last_embedding = r->embedding;
	f->put[f->n_put++] = r->id;
	return INFS_OK;
}

static void fake_delete(void *data, uint64_t id)
{
	fake *f = data;
	f->deleted[f->n_deleted++] = id;
}

static uint64_t fake_bytes(void *data)
{
	return ((fake *)data)->bytes;
}

static void fake_destroy(void *data)
{
	((fake *)data)->destroyed++;
}

static int fake_prefetch(void *data, const char *ns)
{
	fake *f = data;
	snprintf(f->prefetched, sizeof f->prefetched, "%s", ns);
	return strcmp(ns, "refused") ? INFS_OK : infs__error(INFS_EDEVICE, "fake extension: refused");
}

static int fake_tier(void *data, const char *ns)
{
	(void)data;
	return strcmp(ns, "hot") ? INFS_TIER_HOST : INFS_TIER_DEVICE;
}

static int fake_wait(void *data)
{
	((fake *)data)->waits++;
	return INFS_OK;
}

static void fake_stats(void *data, infs_store_stats *st)
{
	st->kv_host_bytes += ((fake *)data)->bytes;
	st->promotions += 3;
}

static void install(infs_store *s, infs__ext_slot slot, fake *f)
{
	*infs__store_ext(s, slot) = (struct infs__store_ext){
		.data = f, .destroy = fake_destroy, .on_put = fake_put, .on_delete = fake_delete, .bytes = fake_bytes
	};
}

static uint64_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static uint64_t device_bytes(infs_store *s)
{
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&st, s));
	return st.device_bytes;
}

int main(void)
{
	scratch_init("store-ext");
	char path[600];
	scratch_path(path, sizeof path, "ext.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F16);
	infs_store *s;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	gen_fact f;
	gen_fact_make(&f, &g, 4, 0);
	fake a = { .bytes = 1000 }, b = { .bytes = 24 };
	install(s, INFS_EXT_FAISS, &a);
	install(s, INFS_EXT_DEVICE, &b);
	CHECK(device_bytes(s) == 1024);

	/* The second slot refuses: nothing is written, the first takes the
	 * fact back, and the id is not used up. */
	uint64_t id = 0, size = file_size(path), n;
	b.refuse = 1;
	CHECK_ERR(infs_fact_put(&id, s, "u", &f.fact), INFS_EBUDGET);
	CHECK(strstr(infs_error_last(), "fake extension: no room for u/1"));
	CHECK(file_size(path) == size);
	CHECK_OK(infs_fact_count(&n, s, "u"));
	CHECK(n == 0);
	CHECK(a.n_put == 1 && a.put[0] == 1 && a.n_deleted == 1 && a.deleted[0] == 1);
	CHECK(b.n_put == 0 && b.n_deleted == 0);

	b.refuse = 0;
	uint64_t ids[3];
	for (int i = 0; i < 3; i++)
		CHECK_OK(infs_fact_put(&ids[i], s, "u", &f.fact));
	CHECK(ids[0] == 1 && ids[1] == 2 && ids[2] == 3);
	CHECK(b.n_put == 3 && b.put[0] == 1 && b.put[2] == 3 && b.n_deleted == 0);
	/* The hooks see the caller's arrays, not a copy. */
	CHECK(!strcmp(b.last_ns, "u") && b.last_k == f.fact.k && b.last_embedding == f.fact.embedding);

	/* Both accept, then the write fails (the file size limit): both take
	 * it back. */
	struct rlimit old, lim;
	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = (rlim_t)file_size(path) + 16;
	setrlimit(RLIMIT_FSIZE, &lim);
	CHECK_ERR(infs_fact_put(&id, s, "u", &f.fact), INFS_EIO);
	setrlimit(RLIMIT_FSIZE, &old);
	CHECK(b.n_put == 4 && b.put[3] == 4 && b.n_deleted == 1 && b.deleted[0] == 4);

	CHECK_OK(infs_fact_delete(s, "u", ids[1]));
	CHECK(b.n_deleted == 2 && b.deleted[1] == ids[1]);
	/* A refused delete (no such fact) tells the extensions nothing. */
	CHECK_ERR(infs_fact_delete(s, "u", ids[1]), INFS_ENOTFOUND);
	CHECK(b.n_deleted == 2);

	gen_fact seg;
	gen_fact_make(&seg, &g, 5, INFS_FACT_SEGMENT);
	CHECK_OK(infs_fact_put(&id, s, "other", &seg.fact));
	CHECK(id == 4 && !strcmp(b.last_ns, "other") && b.last_k == seg.fact.k && b.last_embedding == NULL);
	CHECK_OK(infs_namespace_drop(s, "u"));
	CHECK(b.n_deleted == 4 && b.deleted[2] == ids[0] && b.deleted[3] == ids[2]);
	CHECK(a.n_deleted == 5 && a.deleted[4] == ids[2]);

	b.bytes = 7;
	CHECK(device_bytes(s) == 1007);
	infs__store_ext(s, INFS_EXT_FAISS)->bytes = NULL;
	CHECK(device_bytes(s) == 7);

	/* The tier entry points reach the slot that has tier hooks; without
	 * one the file is the only tier. */
	infs_tier t = INFS_TIER_DEVICE;
	CHECK_OK(infs_namespace_tier(&t, s, "hot"));
	CHECK(t == INFS_TIER_FILE);
	CHECK_OK(infs_prefetch(s, "hot"));
	CHECK(b.prefetched[0] == 0);
	struct infs__store_ext *x = infs__store_ext(s, INFS_EXT_DEVICE);
	x->prefetch = fake_prefetch, x->tier = fake_tier, x->wait = fake_wait, x->stats = fake_stats;
	CHECK_OK(infs_prefetch(s, "hot"));
	CHECK(!strcmp(b.prefetched, "hot"));
	CHECK_ERR(infs_prefetch(s, "refused"), INFS_EDEVICE);
	CHECK(strstr(infs_error_last(), "fake extension: refused"));
	CHECK_OK(infs_namespace_tier(&t, s, "hot"));
	CHECK(t == INFS_TIER_DEVICE);
	CHECK_OK(infs_namespace_tier(&t, s, "cold"));
	CHECK(t == INFS_TIER_HOST);
	CHECK_OK(infs_tier_wait(s));
	CHECK(b.waits == 1);
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.kv_host_bytes == 7 && st.promotions == 3 && st.device_bytes == 7);
	infs_store_close(s);
	CHECK(a.destroyed == 1 && b.destroyed == 1);

	/* The store without extensions reads back what the hooks saw. */
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_OFF));
	CHECK_OK(infs_fact_count(&n, s, "u"));
	CHECK(n == 0);
	CHECK_OK(infs_fact_count(&n, s, "other"));
	CHECK(n == 1);
	CHECK(device_bytes(s) == 0);
	infs_store_close(s);
	gen_fact_free(&f);
	gen_fact_free(&seg);
	scratch_cleanup();
	CHECK_DONE();
}

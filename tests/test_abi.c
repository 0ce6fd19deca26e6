/* The promises of docs/abi.md, one check each: the compatibility rule of
 * versioned structs (on a simulated version 2 and on every public struct),
 * per-thread errors, status codes, destructors of NULL, NULL options, and
 * outputs left as they were by a call refused for its arguments. */
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/options.h"
#include "test_store_util.h"

/* A struct as a library that knows version 2 sees it: version 1 ended
 * before c. */
typedef struct sim_options {
	unsigned version;
	int a;
	double b;
	double c; /* version 2 */
} sim_options;

static const size_t sim_sizes[] = { [1] = offsetof(sim_options, c), [2] = sizeof(sim_options) };
#define SIM_INIT { 2, 7, 1.5, 9.25 }

int sim_init(sim_options *opts, unsigned version);
INFS__DEFINE_INIT(sim_init, sim_options, sim_sizes, SIM_INIT)

/* size bytes that end where an inaccessible page begins: reading or
 * writing past them faults. */
static void *guarded(size_t size)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || mprotect(p + page, page, PROT_NONE)) {
		perror("mmap");
		exit(1);
	}
	return p + page - size;
}

static void unguard(void *p)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	munmap((void *)((uintptr_t)p / page * page), 2 * page);
}

static void simulated_version_2(void)
{
	sim_options *v1 = guarded(sim_sizes[1]);
	/* The version-1 init fills version 1's fields and writes nothing past. */
	CHECK_OK(sim_init(v1, 1));
	CHECK(v1->version == 1 && v1->a == 7 && v1->b == 1.5);
	v1->a = 3;
	v1->b = -2.0;
	/* Taking it reads nothing past version 1: c keeps its default. */
	sim_options o = SIM_INIT;
	CHECK_OK(INFS__TAKE(o, v1, sim_sizes, "sim", "options"));
	CHECK(o.version == 1 && o.a == 3 && o.b == -2.0 && o.c == 9.25);
	/* An output of version 1 is written no further. */
	size_t size = 0;
	CHECK_OK(INFS__OUT_SIZE(&size, v1, sim_sizes, "sim"));
	CHECK(size == offsetof(sim_options, c));

	sim_options v2 = { 2, 4, 5.0, 6.0 }, t = SIM_INIT;
	CHECK_OK(INFS__TAKE(t, &v2, sim_sizes, "sim", "options"));
	CHECK(t.version == 2 && t.a == 4 && t.b == 5.0 && t.c == 6.0);
	CHECK_OK(sim_init(&v2, 2));
	CHECK(v2.version == 2 && v2.a == 7 && v2.c == 9.25);

	/* NULL keeps the defaults; 0 and 3 are refused, naming what is known. */
	sim_options d = SIM_INIT;
	CHECK_OK(INFS__TAKE(d, (const sim_options *)NULL, sim_sizes, "sim", "options"));
	CHECK(d.version == 2 && d.a == 7 && d.c == 9.25);
	for (unsigned bad = 0; bad <= 3; bad += 3) {
		sim_options b = SIM_INIT, in = SIM_INIT;
		in.version = bad;
		in.a = 1;
		CHECK_ERR(INFS__TAKE(b, &in, sim_sizes, "sim", "options"), INFS_EINVAL);
		CHECK(strstr(infs_error_last(), "this library knows 1 to 2") != NULL);
		CHECK(b.a == 7);
		CHECK_ERR(sim_init(&b, bad), INFS_EINVAL);
	}
	CHECK_ERR(sim_init(NULL, 1), INFS_EINVAL);
	unguard(v1);
}

/* Every public init, on a struct that ends at a guarded page: the current
 * version fills it, and versions 0 and current + 1 are refused. */
#define CHECK_INIT(TYPE, FN, VERSION)                                           \
	do {                                                                          \
		TYPE *s_ = guarded(sizeof(TYPE));                                     \
		CHECK_OK(FN(s_, VERSION));                                            \
		CHECK(s_->version == (VERSION));                                      \
		CHECK_ERR(FN(s_, 0), INFS_EINVAL);                                    \
		CHECK_ERR(FN(s_, (VERSION) + 1), INFS_EINVAL);                        \
		CHECK_ERR(FN(NULL, VERSION), INFS_EINVAL);                            \
		unguard(s_);                                                          \
	} while (0)

static void public_inits(void)
{
	CHECK_INIT(infs_store_options, infs_store_options_init, INFS_STORE_OPTIONS_VERSION);
	CHECK_INIT(infs_geometry, infs_geometry_init, INFS_GEOMETRY_VERSION);
	CHECK_INIT(infs_retrieve_options, infs_retrieve_options_init, INFS_RETRIEVE_OPTIONS_VERSION);
	CHECK_INIT(infs_kv_layout, infs_kv_layout_init, INFS_KV_LAYOUT_VERSION);
	CHECK_INIT(infs_inject_options, infs_inject_options_init, INFS_INJECT_OPTIONS_VERSION);
	CHECK_INIT(infs_injector_options, infs_injector_options_init, INFS_INJECTOR_OPTIONS_VERSION);
	CHECK_INIT(infs_model_options, infs_model_options_init, INFS_MODEL_OPTIONS_VERSION);
	CHECK_INIT(infs_forward_options, infs_forward_options_init, INFS_FORWARD_OPTIONS_VERSION);
	CHECK_INIT(infs_embedder_options, infs_embedder_options_init, INFS_EMBEDDER_OPTIONS_VERSION);
	CHECK_INIT(infs_embed_options, infs_embed_options_init, INFS_EMBED_OPTIONS_VERSION);
	CHECK_INIT(infs_encode_options, infs_encode_options_init, INFS_ENCODE_OPTIONS_VERSION);
	CHECK_INIT(infs_fact_input, infs_fact_input_init, INFS_FACT_INPUT_VERSION);
	CHECK_INIT(infs_engine_options, infs_engine_options_init, INFS_ENGINE_OPTIONS_VERSION);
	CHECK_INIT(infs_generate_options, infs_generate_options_init, INFS_GENERATE_OPTIONS_VERSION);
	CHECK_INIT(infs_ask_options, infs_ask_options_init, INFS_ASK_OPTIONS_VERSION);
}

static void *fail_on_thread(void *arg)
{
	(void)arg;
	/* A fresh thread has no error yet, and a message all the same. */
	int fresh = infs_error_last() != NULL && infs_error_last_code() == INFS_OK;
	infs_retrieve_options o;
	int failed = infs_retrieve_options_init(&o, 0) == INFS_EINVAL;
	return (void *)(uintptr_t)(fresh && failed);
}

static void errors(void)
{
	CHECK_ERR(infs_store_open(NULL, "x", NULL), INFS_EINVAL);
	char before[1024];
	snprintf(before, sizeof before, "%s", infs_error_last());
	CHECK(strstr(before, "infs_store_open") != NULL);
	/* Another thread's failure leaves this thread's message. */
	pthread_t t;
	void *ok = NULL;
	CHECK(pthread_create(&t, NULL, fail_on_thread, NULL) == 0);
	CHECK(pthread_join(t, &ok) == 0);
	CHECK(ok != NULL);
	CHECK(strcmp(infs_error_last(), before) == 0 && infs_error_last_code() == INFS_EINVAL);
	/* A call that succeeds leaves it too. */
	infs_retrieve_options o;
	CHECK_OK(infs_retrieve_options_init(&o, INFS_RETRIEVE_OPTIONS_VERSION));
	CHECK(strcmp(infs_error_last(), before) == 0 && infs_error_last_code() == INFS_EINVAL);
	/* Messages name the values involved. */
	o.version = 7;
	infs_hit hit;
	size_t n;
	float q = 1;
	CHECK_ERR(infs_retrieve(&hit, &n, (infs_store *)&o, "ns", &q, 1, 1, &o), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "version 7") != NULL);

	/* Codes keep their numbers; each has its own description. */
	static const int codes[] = { INFS_OK, INFS_EINVAL, INFS_ENOMEM, INFS_EIO, INFS_ENOTFOUND, INFS_EMISMATCH,
		                     INFS_ECORRUPT, INFS_EBUSY, INFS_ERANGE, INFS_EUNSUPPORTED, INFS_EDEVICE,
		                     INFS_EEXISTS, INFS_EFORMAT, INFS_EBUDGET, INFS_ECANCELED, INFS_EREADONLY,
		                     INFS_ENOTRESIDENT };
	const char *unknown = infs_strerror(-1000);
	CHECK(unknown != NULL);
	for (int i = 0; i < (int)(sizeof codes / sizeof codes[0]); i++) {
		CHECK(codes[i] == -i);
		CHECK(infs_strerror(codes[i]) != NULL && strcmp(infs_strerror(codes[i]), unknown) != 0);
		for (int j = 0; j < i; j++)
			CHECK(strcmp(infs_strerror(codes[i]), infs_strerror(codes[j])) != 0);
	}
}

static void destructors_and_versions(void)
{
	infs_store_close(NULL);
	infs_free(NULL);
	infs_fact_record_free(NULL);
	infs_model_free(NULL);
	infs_tokenizer_free(NULL);
	infs_embedder_free(NULL);
	infs_engine_free(NULL);
	infs_answer_free(NULL);
	CHECK(infs_version_number() == INFS_VERSION_NUMBER);
	CHECK(strcmp(infs_version_string(), INFS_VERSION_STRING) == 0);
}

/* NULL options mean the defaults; a call refused for its arguments leaves
 * the store and the caller's outputs as they were. */
static void store_calls(void)
{
	char path[600];
	scratch_init("abi");
	scratch_path(path, sizeof path, "abi.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F16);
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE;
	so.geometry = &g;
	so.identity = TEST_IDENTITY;
	infs_store *st = NULL;
	CHECK_OK(infs_store_open(&st, path, &so));
	gen_fact f;
	gen_fact_make(&f, &g, 1, 0);
	uint64_t id = 0;
	CHECK_OK(infs_fact_put(&id, st, "ns", &f.fact));
	infs_store_close(st);

	infs_store *bad = (infs_store *)&g;
	CHECK_ERR(infs_store_open(&bad, path, &(infs_store_options){ .version = 0 }), INFS_EINVAL);
	CHECK(bad == NULL || bad == (infs_store *)&g); /* never a freed or partial handle */
	st = NULL;
	CHECK_OK(infs_store_open(&st, path, NULL));
	if (!st)
		return;

	/* retrieve: NULL options are INFS_RETRIEVE_OPTIONS_INIT. */
	infs_hit a[2], b[2];
	size_t na = 9, nb = 9;
	const float *q = f.embedding;
	infs_retrieve_options ro = INFS_RETRIEVE_OPTIONS_INIT;
	CHECK_OK(infs_retrieve(a, &na, st, "ns", q, 1, 2, NULL));
	CHECK_OK(infs_retrieve(b, &nb, st, "ns", q, 1, 2, &ro));
	CHECK(na == 1 && nb == 1 && a[0].id == id && b[0].id == id && a[0].score == b[0].score);

	/* Refused calls leave hits, counts, ids and the store as they were. */
	infs_hit hits[4];
	size_t counts[2];
	memset(hits, 0x5a, sizeof hits);
	memset(counts, 0x5a, sizeof counts);
	unsigned char want_hits[sizeof hits], want_counts[sizeof counts];
	memcpy(want_hits, hits, sizeof hits);
	memcpy(want_counts, counts, sizeof counts);
	float queries[12];
	memcpy(queries, q, 6 * sizeof *q);
	memcpy(queries + 6, q, 6 * sizeof *q);
	queries[7] = 0.0f / 0.0f;
	CHECK_ERR(infs_retrieve(hits, counts, st, "ns", queries, 2, 2, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, counts, st, "ns", queries, 1, 0, NULL), INFS_ERANGE);
	ro.version = INFS_RETRIEVE_OPTIONS_VERSION + 1;
	CHECK_ERR(infs_retrieve(hits, counts, st, "ns", queries, 1, 2, &ro), INFS_EINVAL);
	CHECK(memcmp(hits, want_hits, sizeof hits) == 0 && memcmp(counts, want_counts, sizeof counts) == 0);

	infs_store_stats s0 = { .version = INFS_STORE_STATS_VERSION }, s1 = s0;
	CHECK_OK(infs_store_stats_get(&s0, st));
	uint64_t out_id = 77;
	f.fact.version = INFS_FACT_VERSION + 1;
	CHECK_ERR(infs_fact_put(&out_id, st, "ns", &f.fact), INFS_EINVAL);
	f.fact.version = INFS_FACT_VERSION;
	f.fact.n_tokens = 0;
	CHECK_ERR(infs_fact_put(&out_id, st, "ns", &f.fact), INFS_ERANGE);
	CHECK(out_id == 77);
	CHECK_OK(infs_store_stats_get(&s1, st));
	CHECK(s1.n_facts == s0.n_facts && s1.file_bytes == s0.file_bytes);

	infs_store_stats refused = { .version = 0, .n_facts = 5 };
	CHECK_ERR(infs_store_stats_get(&refused, st), INFS_EINVAL);
	CHECK(refused.n_facts == 5);
	gen_fact_free(&f);
	infs_store_close(st);
	scratch_cleanup();
}

int main(void)
{
	simulated_version_2();
	public_inits();
	errors();
	destructors_and_versions();
	store_calls();
	CHECK_DONE();
}

/* One store handle hammered by 8 threads at once: writers putting,
 * deleters deleting (and compacting), readers getting and listing, and
 * matrix readers checking infs__store_ns_matrix against the records under
 * the read lock. Then the final state is checked against what the threads
 * say they did, before and after reopening. */
#include <pthread.h>

#include "store/store.h"
#include "test_store_util.h"

#define PER_WRITER 400
#define N_WRITERS 3
#define SPACES 3

static const char *const spaces[SPACES] = { "ns-a", "ns-b", "ns-c" };
static infs_geometry geo;
static infs_store *store;

/* What the writers put and the deleters deleted. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t put_ids[N_WRITERS * PER_WRITER], put_seed[N_WRITERS * PER_WRITER];
static size_t n_put;
static uint64_t del_ids[N_WRITERS * PER_WRITER];
static size_t n_del;
static int writers_done;
static int failures;
static int read_rounds, matrix_rounds;
static pthread_barrier_t start;

static void fail(const char *what)
{
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "thread check failed: %s (%s)\n", what, infs_error_last());
	failures++;
	pthread_mutex_unlock(&log_lock);
}

static unsigned flags_of(uint64_t seed)
{
	return seed % 5 == 2 ? INFS_FACT_SEGMENT : 0;
}

/* Facts carry their seed in source_id (gen_fact: seed * 1000003). */
static void check_record(const infs_fact_record *r, const char *ns)
{
	uint64_t seed = r->source_id / 1000003;
	if (strcmp(spaces[seed % SPACES], ns) != 0 || !gen_fact_matches(r, &geo, seed, flags_of(seed)))
		fail("a record read back differs from what was put");
}

static void *writer(void *arg)
{
	size_t w = (size_t)arg;
	pthread_barrier_wait(&start);
	for (size_t i = 0; i < PER_WRITER; i++) {
		uint64_t seed = w * PER_WRITER + i, id;
		gen_fact f;
		gen_fact_make(&f, &geo, seed, flags_of(seed));
		if (infs_fact_put(&id, store, spaces[seed % SPACES], &f.fact) != INFS_OK)
			fail("put");
		gen_fact_free(&f);
		pthread_mutex_lock(&log_lock);
		put_ids[n_put] = id;
		put_seed[n_put++] = seed;
		pthread_mutex_unlock(&log_lock);
	}
	pthread_mutex_lock(&log_lock);
	writers_done++;
	pthread_mutex_unlock(&log_lock);
	return NULL;
}

static int done(void)
{
	pthread_mutex_lock(&log_lock);
	int d = writers_done == N_WRITERS;
	pthread_mutex_unlock(&log_lock);
	return d;
}

/* Deletes every third fact put so far (each taken by one deleter only) and
 * compacts now and then, which moves every record in the file. */
static void *deleter(void *arg)
{
	size_t me = (size_t)arg, next = me, round = 0;
	pthread_barrier_wait(&start);
	for (;;) {
		int finished = done();
		pthread_mutex_lock(&log_lock);
		size_t avail = n_put;
		pthread_mutex_unlock(&log_lock);
		for (; next < avail; next += 6) {
			pthread_mutex_lock(&log_lock);
			uint64_t id = put_ids[next], seed = put_seed[next];
			pthread_mutex_unlock(&log_lock);
			if (infs_fact_delete(store, spaces[seed % SPACES], id) != INFS_OK) {
				fail("delete");
				continue;
			}
			if (infs_fact_delete(store, spaces[seed % SPACES], id) != INFS_ENOTFOUND)
				fail("a second delete of the same id");
			pthread_mutex_lock(&log_lock);
			del_ids[n_del++] = id;
			pthread_mutex_unlock(&log_lock);
			if (++round % 40 == 0 && infs_store_compact(store) != INFS_OK)
				fail("compact");
		}
		if (finished)
			return NULL;
	}
}

static void *reader(void *arg)
{
	uint64_t rng = (uint64_t)(size_t)arg;
	pthread_barrier_wait(&start);
	/* At least one round, however late the thread is scheduled. */
	do {
		__atomic_fetch_add(&read_rounds, 1, __ATOMIC_RELAXED);
		size_t k = rng_next(&rng) % SPACES;
		const char *ns = spaces[k], *other = spaces[(k + 1 + rng_next(&rng) % (SPACES - 1)) % SPACES];
		uint64_t *ids;
		size_t n;
		if (infs_fact_list(&ids, &n, store, ns) != INFS_OK) {
			fail("list");
			continue;
		}
		for (size_t i = 1; i < n; i++)
			if (ids[i] <= ids[i - 1])
				fail("list is not increasing");
		for (int tries = 0; tries < 8 && n; tries++) {
			infs_fact_record *r;
			uint64_t id = ids[rng_next(&rng) % n];
			int rc = infs_fact_get(&r, store, ns, id);
			if (rc == INFS_OK) {
				check_record(r, ns);
				infs_fact_record_free(r);
			} else if (rc != INFS_ENOTFOUND) { /* deleted since the list */
				fail("get");
			}
			/* Never visible through another namespace. */
			if (infs_fact_get(&r, store, other, id) != INFS_ENOTFOUND)
				fail("an id read through another namespace");
		}
		infs_free(ids);
		uint64_t count;
		char **names;
		if (infs_fact_count(&count, store, ns) != INFS_OK || infs_namespace_list(&names, &n, store) != INFS_OK)
			fail("count or namespace list");
		else
			infs_free(names);
	} while (!done());
	return NULL;
}

/* Under one read lock the matrix, its ids and the records agree. */
static void *matrix_reader(void *arg)
{
	uint64_t last_gen[SPACES] = { 0 };
	pthread_barrier_wait(&start);
	do {
		__atomic_fetch_add(&matrix_rounds, 1, __ATOMIC_RELAXED);
		for (int k = 0; k < SPACES; k++) {
			const float *emb;
			const uint64_t *ids;
			size_t n;
			uint64_t gen;
			infs__store_read_lock(store);
			if (infs__store_ns_matrix(&emb, &ids, &n, &gen, store, spaces[k]) != INFS_OK)
				fail("ns_matrix");
			for (size_t i = 0; i < n; i++) {
				infs__record r;
				if (i && ids[i] <= ids[i - 1])
					fail("matrix ids are not increasing");
				if (infs__store_find(&r, store, spaces[k], ids[i]) != INFS_OK || !r.embedding ||
				    (r.flags & INFS_FACT_SEGMENT) ||
				    memcmp(r.embedding, emb + i * geo.embed_dim, geo.embed_dim * sizeof(float)) != 0) {
					fail("a matrix row does not match its record");
					break;
				}
			}
			infs__store_read_unlock(store);
			/* A namespace the deletes emptied is forgotten and reads 0, as
			 * an unknown one (infs_namespace_generation); when it comes
			 * back its generation is above every one it had. */
			if (n == 0 && gen == 0)
				continue;
			if (gen < last_gen[k])
				fail("generation went backwards");
			last_gen[k] = gen;
		}
	} while (!done());
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void check_final(void)
{
	size_t live = 0;
	for (size_t i = 0; i < n_put; i++) {
		int deleted = bsearch(&put_ids[i], del_ids, n_del, sizeof *del_ids, cmp_u64) != NULL;
		infs_fact_record *r = NULL;
		const char *ns = spaces[put_seed[i] % SPACES];
		int rc = infs_fact_get(&r, store, ns, put_ids[i]);
		CHECK(deleted ? rc == INFS_ENOTFOUND : rc == INFS_OK);
		if (r) {
			CHECK(gen_fact_matches(r, &geo, put_seed[i], flags_of(put_seed[i])));
			infs_fact_record_free(r);
		}
		live += !deleted;
	}
	uint64_t total = 0, n;
	for (int k = 0; k < SPACES; k++) {
		CHECK_OK(infs_fact_count(&n, store, spaces[k]));
		total += n;
	}
	CHECK(total == live);
}

int main(void)
{
	char path[600];
	scratch_init("store-threads");
	scratch_path(path, sizeof path, "threads.infs");
	geo = small_geometry(INFS_DTYPE_F16);
	CHECK_OK(open_store(&store, path, &geo, INFS_OPEN_CREATE, INFS_SYNC_NORMAL));
	pthread_t t[8];
	pthread_barrier_init(&start, NULL, 8);
	for (size_t i = 0; i < N_WRITERS; i++)
		pthread_create(&t[i], NULL, writer, (void *)i);
	pthread_create(&t[3], NULL, deleter, (void *)0);
	pthread_create(&t[4], NULL, deleter, (void *)3);
	pthread_create(&t[5], NULL, reader, (void *)5);
	pthread_create(&t[6], NULL, reader, (void *)6);
	pthread_create(&t[7], NULL, matrix_reader, NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	CHECK(failures == 0);
	CHECK(read_rounds > 0 && matrix_rounds > 0);
	fprintf(stderr, "%zu puts, %zu deletes, %d read rounds, %d matrix rounds, concurrently\n", n_put, n_del,
	        read_rounds, matrix_rounds);
	CHECK(n_put == N_WRITERS * PER_WRITER && n_del == (n_put + 2) / 3);
	qsort(del_ids, n_del, sizeof *del_ids, cmp_u64);
	for (size_t i = 1; i < n_put; i++)
		CHECK(put_ids[i] != put_ids[i - 1]);
	check_final();
	infs_store_close(store);
	CHECK_OK(open_store(&store, path, &geo, 0, INFS_SYNC_NORMAL));
	check_final();
	infs_store_close(store);
	scratch_cleanup();
	CHECK_DONE();
}

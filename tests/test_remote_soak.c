/* kill -9 of the server during puts, again and again: a thread keeps
 * putting facts and notes every one acknowledged; the server (AOF,
 * appendfsync always) is killed at random moments and started again on
 * the same directory. At the end a store on a fresh file must answer
 * every acknowledged fact, byte for byte. Bounded: INFS_SOAK_KILLS kills
 * (default 100) or INFS_SOAK_SECONDS seconds (default 60), whichever
 * comes first; it prints how many it did. */
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <time.h>

#include "redis_server.h"
#include "test_store_util.h"

enum { MAX_ACKED = 1 << 18, N_NS = 4 };

static test_redis srv;
static infs_geometry geo;
static infs_store *writer_store;
static atomic_bool stop;
static struct acked {
	uint64_t id, seed;
} acked[MAX_ACKED];
static atomic_size_t n_acked;
static atomic_size_t n_failed;

static void ns_of(char *buf, size_t n, uint64_t seed)
{
	snprintf(buf, n, "soak-%llu", (unsigned long long)(seed % N_NS));
}

static void *writer(void *arg)
{
	(void)arg;
	for (uint64_t seed = 1; !atomic_load(&stop) && atomic_load(&n_acked) < MAX_ACKED; seed++) {
		gen_fact g;
		gen_fact_make(&g, &geo, seed, 0);
		char ns[32];
		ns_of(ns, sizeof ns, seed);
		uint64_t id = 0;
		if (infs_fact_put(&id, writer_store, ns, &g.fact) == INFS_OK) {
			size_t i = atomic_load(&n_acked);
			acked[i] = (struct acked){ id, seed };
			atomic_store(&n_acked, i + 1);
		} else {
			atomic_fetch_add(&n_failed, 1);
			test_sleep_ms(1);
		}
		gen_fact_free(&g);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtol(v, NULL, 10) : dflt;
}

int main(void)
{
	test_redis_require();
	geo = small_geometry(INFS_DTYPE_F16);
	char path[600], fresh[600];
	scratch_init("remote-soak");
	scratch_path(path, sizeof path, "w.infs");
	scratch_path(fresh, sizeof fresh, "fresh.infs");
	test_redis_start(&srv, "soak");

	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = &geo;
	o.identity = TEST_IDENTITY;
	o.remote = srv.url;
	o.remote_timeout_ms = 500;
	o.sync = INFS_SYNC_OFF; /* the server is what must keep the facts */
	CHECK_OK(infs_store_open(&writer_store, path, &o));
	if (!writer_store)
		return 1;

	long max_kills = env_long("INFS_SOAK_KILLS", 100), max_s = env_long("INFS_SOAK_SECONDS", 60);
	pthread_t t;
	pthread_create(&t, NULL, writer, NULL);
	uint64_t rng = 12345;
	double t0 = now_s();
	long kills = 0;
	int restart_failed = 0;
	while (kills < max_kills && now_s() - t0 < (double)max_s) {
		test_sleep_ms(5 + (long)(rng_next(&rng) % 40));
		test_redis_kill(&srv);
		kills++;
		if (test_redis_restart(&srv) != 0) {
			restart_failed = 1;
			break;
		}
	}
	test_sleep_ms(50);
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	double took = now_s() - t0;
	infs_store_close(writer_store);
	CHECK(!restart_failed);

	/* every acknowledged fact, from a store that never saw them */
	CHECK_OK(infs_store_open(&writer_store, fresh, &o));
	size_t n = atomic_load(&n_acked), lost = 0;
	for (size_t i = 0; writer_store && i < n; i++) {
		char ns[32];
		ns_of(ns, sizeof ns, acked[i].seed);
		infs_fact_record *r = NULL;
		int ok = infs_fact_get(&r, writer_store, ns, acked[i].id) == INFS_OK &&
		         gen_fact_matches(r, &geo, acked[i].seed, 0);
		infs_fact_record_free(r);
		if (!ok && lost++ < 5)
			fprintf(stderr, "lost: fact %llu (seed %llu) of %s: %s\n", (unsigned long long)acked[i].id,
			        (unsigned long long)acked[i].seed, ns, infs_error_last());
	}
	infs_store_close(writer_store);
	printf("soak: %ld kill -9 of the server in %.1f s, %zu puts acknowledged, %zu refused while it was down, "
	       "%zu acknowledged facts lost\n",
	       kills, took, n, atomic_load(&n_failed), lost);
	CHECK(lost == 0);
	CHECK(n > (size_t)kills); /* puts went through between the kills */
	CHECK(kills >= max_kills || took >= (double)max_s - 1);
	test_redis_stop(&srv);
	scratch_cleanup();
	return check_failures ? 1 : 0;
}

/* Crash safety: a child process writes facts (and deletes some, and
 * compacts) and reports every acknowledged operation through a pipe; the
 * parent kills it with SIGKILL at a random moment, reopens the store and
 * checks that every acknowledged fact is there, byte for byte, and every
 * acknowledged delete stuck. Repeated over many rounds on one store, in
 * every sync mode. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "store/store.h"
#include "test_store_util.h"

#define MAX_ACKS 100000

typedef struct ack {
	uint64_t op; /* 1 put, 2 delete, 3 about to delete */
	uint64_t id;
	uint64_t seed;   /* which of the POOL facts */
	uint64_t serial; /* stored as its source_id, unique per put */
} ack;

#define POOL 16
static gen_fact pool[POOL];

static ack acks[MAX_ACKS];
static size_t n_acks;
static int torn_tails, cut_compactions; /* how often a kill hit a write or a compaction */

/* Bigger than the other tests' geometry, so that one put takes long
 * enough for kills to land inside it. */
static infs_geometry crash_geometry(void)
{
	infs_geometry g = small_geometry(INFS_DTYPE_F16);
	g.n_layers = 8;
	g.n_kv_heads = 4;
	g.head_dim = 64;
	g.rotary_dim = 64;
	g.embed_dim = 32;
	return g;
}

static unsigned pool_flags(uint64_t seed)
{
	return seed % 9 == 4 ? INFS_FACT_SEGMENT : 0;
}

static void pool_make(void)
{
	infs_geometry g = crash_geometry();
	for (uint64_t i = 0; i < POOL; i++)
		gen_fact_make(&pool[i], &g, i, pool_flags(i));
}

static void send_ack(int fd, uint64_t op, uint64_t id, uint64_t seed, uint64_t serial)
{
	ack a = { op, id, seed, serial };
	/* One write of fewer than PIPE_BUF bytes: never interleaved or split. */
	if (write(fd, &a, sizeof a) != (ssize_t)sizeof a)
		_exit(3);
}

/* The child: puts facts forever; with compact set, also deletes the oldest
 * live fact it wrote and compacts every few operations. The facts are made
 * up front so that it spends its time writing. */
static void child(const char *path, int fd, uint64_t serial0, infs_sync_mode sync, int compact)
{
	infs_geometry g = crash_geometry();
	infs_store *s;
	if (open_store(&s, path, &g, INFS_OPEN_CREATE, sync) != INFS_OK)
		_exit(2);
	uint64_t mine[64];
	size_t n_mine = 0;
	for (uint64_t i = 0;; i++) {
		uint64_t seed = (serial0 + i) % POOL, id;
		infs_fact f = pool[seed].fact;
		f.source_id = serial0 + i;
		if (infs_fact_put(&id, s, seed % 2 ? "one" : "two", &f) != INFS_OK)
			_exit(4);
		send_ack(fd, 1, id, seed, serial0 + i);
		if (n_mine < 64)
			mine[n_mine++] = id * 2 + seed % 2;
		if (compact && i % 3 == 2 && n_mine) {
			uint64_t victim = mine[0];
			memmove(mine, mine + 1, --n_mine * sizeof *mine);
			send_ack(fd, 3, victim / 2, 0, 0);
			if (infs_fact_delete(s, victim % 2 ? "one" : "two", victim / 2) != INFS_OK)
				_exit(5);
			send_ack(fd, 2, victim / 2, 0, 0);
			if (infs_store_compact(s) != INFS_OK)
				_exit(6);
		}
	}
}

static int intact(const infs_fact_record *r, const ack *a, const infs_geometry *g)
{
	const gen_fact *p = &pool[a->seed];
	const infs_fact *f = &p->fact;
	return r->id == a->id && r->source_id == a->serial && r->flags == f->flags && r->n_tokens == f->n_tokens &&
	       !memcmp(r->tokens, f->tokens, f->n_tokens * sizeof *f->tokens) && !memcmp(r->k, f->k, p->kv_bytes) &&
	       !memcmp(r->v, f->v, p->kv_bytes) && !strcmp(r->text, f->text ? f->text : "") &&
	       !strcmp(r->metadata, f->metadata ? f->metadata : "") && r->timestamp == f->timestamp &&
	       (f->embedding ? r->embedding && !memcmp(r->embedding, f->embedding, g->embed_dim * sizeof(float))
	                     : r->embedding == NULL);
}

static void read_acks(int fd)
{
	for (;;) {
		ack a;
		ssize_t r = read(fd, &a, sizeof a);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		if (r != (ssize_t)sizeof a || n_acks == MAX_ACKS)
			abort();
		acks[n_acks++] = a;
	}
}

/* Every acknowledged put is present and intact unless its delete was
 * acknowledged too, in which case it is gone. A delete under way when the
 * child died may or may not have happened. */
static void verify(const char *path, int round)
{
	infs_geometry g = crash_geometry();
	infs_store *s;
	char tmp[700];
	snprintf(tmp, sizeof tmp, "%s.compact", path);
	cut_compactions += access(tmp, F_OK) == 0;
	int rc = open_store(&s, path, &g, 0, INFS_SYNC_FULL);
	CHECK_OK(rc);
	if (rc) {
		fprintf(stderr, "round %d: the store does not open\n", round);
		return;
	}
	size_t bad = 0;
	for (size_t i = 0; i < n_acks; i++) {
		if (acks[i].op != 1)
			continue;
		int deleted = 0, maybe = 0;
		for (size_t j = i + 1; j < n_acks; j++) {
			deleted |= acks[j].op == 2 && acks[j].id == acks[i].id;
			maybe |= acks[j].op == 3 && acks[j].id == acks[i].id;
		}
		infs_fact_record *r = NULL;
		rc = infs_fact_get(&r, s, acks[i].seed % 2 ? "one" : "two", acks[i].id);
		if (maybe && !deleted && rc == INFS_ENOTFOUND)
			deleted = 1;
		if (deleted ? rc != INFS_ENOTFOUND : rc != INFS_OK || !intact(r, &acks[i], &g))
			bad++;
		infs_fact_record_free(r);
	}
	if (bad)
		fprintf(stderr, "round %d: %zu acknowledged operations lost\n", round, bad);
	CHECK(bad == 0);
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&st, s));
	torn_tails += st.dropped_tail_bytes > 0;
	/* A kill never loses a committed record, so the commit slot never
	 * claims one that is missing. */
	CHECK(st.lost_records == 0);
	infs_store_close(s);
	CHECK(access(tmp, F_OK) != 0); /* the writer's open cleared a crashed compaction */
}

static void rounds(const char *name, int n_rounds, int compact, uint64_t *rng)
{
	char path[600];
	scratch_path(path, sizeof path, name);
	n_acks = 0;
	uint64_t serial0 = 0;
	for (int round = 0; round < n_rounds; round++) {
		int p[2];
		if (pipe(p) != 0)
			abort();
		infs_sync_mode sync = (infs_sync_mode)(round % 3);
		pid_t pid = fork();
		if (pid == 0) {
			close(p[0]);
			child(path, p[1], serial0, sync, compact);
		}
		close(p[1]);
		/* Let it acknowledge a random number of operations, then kill it
		 * a random moment later, most likely in the middle of a write. */
		size_t want = n_acks + 1 + rng_next(rng) % 12;
		while (n_acks < want) {
			ack a;
			ssize_t r = read(p[0], &a, sizeof a);
			if (r != (ssize_t)sizeof a)
				break;
			acks[n_acks++] = a;
		}
		struct timespec ts = { 0, (long)(rng_next(rng) % 3000) * 1000 };
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		read_acks(p[0]);
		close(p[0]);
		int status;
		waitpid(pid, &status, 0);
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		serial0 += 1000000;
		verify(path, round);
	}
}

int main(void)
{
	scratch_init("store-crash");
	pool_make();
	/* A new seed each run, printed; INFS_CRASH_SEED replays one. */
	const char *env = getenv("INFS_CRASH_SEED");
	uint64_t rng = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
	fprintf(stderr, "random seed %llu (INFS_CRASH_SEED replays it)\n", (unsigned long long)rng);
	enum { PUT_ROUNDS = 40, COMPACT_ROUNDS = 25 };
	rounds("puts.infs", PUT_ROUNDS, 0, &rng);
	size_t puts = n_acks;
	rounds("compact.infs", COMPACT_ROUNDS, 1, &rng);
	/* scripts/soak.sh sums these lines over many runs. */
	fprintf(stderr,
	        "%d trials: %zu acknowledged puts, then %zu acknowledged operations with compaction, all found; "
	        "%d kills tore a record, %d cut a compaction short\n",
	        PUT_ROUNDS + COMPACT_ROUNDS, puts, n_acks, torn_tails, cut_compactions);
	/* The child spends most of its time compacting: kills must have cut some
	 * compactions short, or the test did not test that. */
	CHECK(cut_compactions > 0);
	for (int i = 0; i < POOL; i++)
		gen_fact_free(&pool[i]);
	scratch_cleanup();
	CHECK_DONE();
}

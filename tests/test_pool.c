/* The thread pool a model or embedder keeps: one call at a time holds it
 * (the same pool again once given back), a concurrent call gets a pool of
 * its own, and every pool runs each task exactly once, in a child of a
 * fork too, where the parent's threads are not: the pool must not wait for
 * them, and starts workers of its own. */
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "util/pool.h"

#define TASKS 1000

static atomic_uint workers_seen; /* bit w: worker w ran a task */

static void count(void *arg, uint32_t task, uint32_t worker)
{
	atomic_int *hits = arg;
	atomic_fetch_add(&hits[task], 1);
	atomic_fetch_or(&workers_seen, 1u << (worker & 31));
	usleep(20); /* long enough that every worker gets tasks */
}

static int runs_once(infs__pool *p)
{
	static atomic_int hits[TASKS];
	for (int i = 0; i < TASKS; i++)
		atomic_store(&hits[i], 0);
	atomic_store(&workers_seen, 0);
	infs__pool_run(p, count, hits, TASKS);
	int wrong = 0;
	for (int i = 0; i < TASKS; i++)
		wrong += atomic_load(&hits[i]) != 1;
	return wrong == 0;
}

static void check_runs(infs__pool *p)
{
	CHECK(runs_once(p));
}

/* A child of a fork runs the parent's pool and the kept pool, each within
 * 20 s and each on workers of its own besides the calling thread. */
static void check_fork(infs__pool *p, infs__pool_keep *keep)
{
	const pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		alarm(20);
		int ok = runs_once(p) && atomic_load(&workers_seen) > 1;
		infs__pool *mine = NULL;
		ok = ok && infs__pool_borrow(keep, 3, &mine) == INFS_OK && runs_once(mine) &&
		     atomic_load(&workers_seen) > 1;
		infs__pool_give_back(keep, mine);
		infs__pool_free(p);
		infs__pool_keep_free(keep);
		_exit(ok ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	if (WIFSIGNALED(status))
		fprintf(stderr, "the child of the fork died of signal %d (%s)\n", WTERMSIG(status),
		        WTERMSIG(status) == SIGALRM ? "it waited for the pool's threads" : "?");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The parent's pool still has its threads. */
	check_runs(p);
}

int main(void)
{
	infs__pool_keep *keep = infs__pool_keep_new();
	CHECK(keep != NULL);
	if (!keep)
		CHECK_DONE();
	infs__pool *a = NULL, *b = NULL, *c = NULL;
	CHECK_OK(infs__pool_borrow(keep, 3, &a));
	CHECK(a && infs__pool_size(a) == 3);
	/* Held: the second call starts its own. */
	CHECK_OK(infs__pool_borrow(keep, 3, &b));
	CHECK(b && b != a && infs__pool_size(b) == 3);
	check_runs(a);
	check_runs(b);
	infs__pool_give_back(keep, b);
	infs__pool_give_back(keep, a);
	/* Given back: the kept pool again, its threads still there. */
	CHECK_OK(infs__pool_borrow(keep, 3, &c));
	CHECK(c == a);
	check_runs(c);
	infs__pool_give_back(keep, c);
	/* No keeper (a model made for benchmarks): a pool of the call's own. */
	infs__pool *d = NULL;
	CHECK_OK(infs__pool_borrow(NULL, 2, &d));
	CHECK(d && infs__pool_size(d) == 2);
	check_runs(d);
	/* The kept pool borrowed once in the parent, then the fork. */
	infs__pool *e = NULL;
	CHECK_OK(infs__pool_borrow(keep, 3, &e));
	infs__pool_give_back(keep, e);
	check_fork(d, keep);
	infs__pool_give_back(NULL, d);
	infs__pool_keep_free(keep);
	CHECK_DONE();
}

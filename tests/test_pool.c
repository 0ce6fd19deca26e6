/* The thread pool a model or embedder keeps: one call at a time holds it
 * (the same pool again once given back), a concurrent call gets a pool of
 * its own, and every pool runs each task exactly once. */
#include <stdatomic.h>

#include "check.h"
#include "util/pool.h"

#define TASKS 1000

static void count(void *arg, uint32_t task, uint32_t worker)
{
	atomic_int *hits = arg;
	(void)worker;
	atomic_fetch_add(&hits[task], 1);
}

static void check_runs(infs__pool *p)
{
	static atomic_int hits[TASKS];
	for (int i = 0; i < TASKS; i++)
		atomic_store(&hits[i], 0);
	infs__pool_run(p, count, hits, TASKS);
	int wrong = 0;
	for (int i = 0; i < TASKS; i++)
		wrong += atomic_load(&hits[i]) != 1;
	CHECK(wrong == 0);
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
	infs__pool_give_back(NULL, d);
	infs__pool_keep_free(keep);
	CHECK_DONE();
}

#include "util/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/error.h"
#include "inferscale/common.h"

/* Pauses a thread spins for a new run (or for the workers to finish)
 * before it sleeps on the condition: about 50 us, more than the gap between
 * the products of a decoding step, so that a step's ~250 runs do not each
 * pay a wake-up through the scheduler. */
#define SPINS 2000

struct infs__pool {
	pthread_mutex_t mu;
	pthread_cond_t start, done;
	atomic_uint_fast64_t generation; /* bumped for every run; workers wait for a new one */
	atomic_uint busy;      /* workers still inside the current run */
	int quit;
	infs__pool_fn fn;
	void *arg;
	uint32_t n_tasks;
	atomic_uint next;      /* next task to take */
	uint32_t n_threads;
	pthread_t *threads;
	uint32_t n_started;
	atomic_uint next_id;   /* worker ids handed out at start */
	int kept;              /* an infs__pool_keep's: given back, not freed */
	unsigned forks;        /* the process's forks when the threads started */
};

struct infs__pool_keep {
	pthread_mutex_t mu; /* held by the call using the pool */
	infs__pool *pool;
};

/* Forks of this process so far, counted in each child: a pool's threads
 * stay in the process that started them, so in a child of a fork (Python's
 * multiprocessing, a pre-forking server) a pool starts workers of its own
 * on its first run instead of waiting for ones it does not have. */
static atomic_uint forks;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void count_fork(void)
{
	atomic_fetch_add(&forks, 1);
}

static void watch_forks(void)
{
	pthread_atfork(NULL, NULL, count_fork);
}

static int forked_since(const infs__pool *p)
{
	return p->forks != atomic_load_explicit(&forks, memory_order_relaxed);
}

static void take_tasks(infs__pool *p, uint32_t worker)
{
	for (;;) {
		uint32_t t = atomic_fetch_add(&p->next, 1);
		if (t >= p->n_tasks)
			break;
		p->fn(p->arg, t, worker);
	}
}

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void *worker(void *arg)
{
	infs__pool *p = arg;
	uint32_t id = atomic_fetch_add(&p->next_id, 1) + 1;
	uint64_t seen = 0;
	for (;;) {
		for (int i = 0; i < SPINS && atomic_load(&p->generation) == seen; i++)
			relax();
		/* The run's fields are read after this lock: the main thread set
		 * them under it. */
		pthread_mutex_lock(&p->mu);
		while (!p->quit && atomic_load(&p->generation) == seen)
			pthread_cond_wait(&p->start, &p->mu);
		if (p->quit)
			break;
		seen = atomic_load(&p->generation);
		pthread_mutex_unlock(&p->mu);
		take_tasks(p, id);
		pthread_mutex_lock(&p->mu);
		if (atomic_fetch_sub(&p->busy, 1) == 1)
			pthread_cond_signal(&p->done);
		pthread_mutex_unlock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

uint32_t infs__cpu_count(void)
{
	/* The processors this process may run on (a container's or taskset's
	 * share), not all those the machine has. */
	cpu_set_t set;
	long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 1024 ? 1024 : (uint32_t)n;
}

/* The lock, the conditions and the workers of p, made anew: at creation,
 * and in a child of a fork, where the copies of the lock and conditions are
 * in whatever state the parent's threads left them and the workers are
 * not. INFS_ENOMEM when a thread cannot be started (those started work). */
static int start(infs__pool *p)
{
	p->forks = atomic_load(&forks);
	p->quit = 0;
	p->n_started = 0;
	atomic_store(&p->generation, 0);
	atomic_store(&p->busy, 0);
	atomic_store(&p->next_id, 0);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->start, NULL);
	pthread_cond_init(&p->done, NULL);
	for (uint32_t i = 0; i + 1 < p->n_threads; i++) {
		if (pthread_create(&p->threads[i], NULL, worker, p) != 0)
			return INFS_ENOMEM;
		p->n_started++;
	}
	return INFS_OK;
}

int infs__pool_create(infs__pool **out, uint32_t n_threads)
{
	infs__pool *p = calloc(1, sizeof *p);
	if (!p)
		return infs__error(INFS_ENOMEM, "out of memory");
	p->n_threads = n_threads ? n_threads : 1;
	pthread_once(&fork_once, watch_forks);
	if (p->n_threads > 1 && !(p->threads = calloc(p->n_threads - 1, sizeof *p->threads))) {
		free(p);
		return infs__error(INFS_ENOMEM, "out of memory");
	}
	if (start(p)) {
		infs__pool_free(p);
		return infs__error(INFS_ENOMEM, "cannot start %u threads", p->n_threads);
	}
	*out = p;
	return INFS_OK;
}

void infs__pool_free(infs__pool *p)
{
	if (!p)
		return;
	if (forked_since(p)) { /* no threads to join here; the lock may have been held at the fork */
		free(p->threads);
		free(p);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->quit = 1;
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->mu);
	for (uint32_t i = 0; i < p->n_started; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->start);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->mu);
	free(p->threads);
	free(p);
}

uint32_t infs__pool_size(const infs__pool *p)
{
	return p->n_started + 1;
}

void infs__pool_run(infs__pool *p, infs__pool_fn fn, void *arg, uint32_t n_tasks)
{
	if (forked_since(p) && n_tasks > 1)
		start(p); /* this process's own workers (none when they cannot start) */
	if (p->n_started == 0 || n_tasks <= 1) {
		for (uint32_t t = 0; t < n_tasks; t++)
			fn(arg, t, 0);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->arg = arg;
	p->n_tasks = n_tasks;
	atomic_store(&p->next, 0);
	atomic_store(&p->busy, p->n_started);
	atomic_fetch_add(&p->generation, 1);
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->mu);
	take_tasks(p, 0);
	for (int i = 0; i < SPINS && atomic_load(&p->busy); i++)
		relax();
	pthread_mutex_lock(&p->mu);
	while (atomic_load(&p->busy))
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

infs__pool_keep *infs__pool_keep_new(void)
{
	infs__pool_keep *k = calloc(1, sizeof *k);
	if (k)
		pthread_mutex_init(&k->mu, NULL);
	return k;
}

void infs__pool_keep_free(infs__pool_keep *k)
{
	if (!k)
		return;
	infs__pool_free(k->pool);
	pthread_mutex_destroy(&k->mu);
	free(k);
}

int infs__pool_borrow(infs__pool_keep *k, uint32_t n_threads, infs__pool **pool)
{
	if (!k || pthread_mutex_trylock(&k->mu) != 0)
		return infs__pool_create(pool, n_threads);
	int rc = INFS_OK;
	if (!k->pool && (rc = infs__pool_create(&k->pool, n_threads)) == INFS_OK)
		k->pool->kept = 1;
	if (rc) {
		pthread_mutex_unlock(&k->mu);
		return rc;
	}
	*pool = k->pool;
	return INFS_OK;
}

void infs__pool_give_back(infs__pool_keep *k, infs__pool *pool)
{
	if (pool && pool->kept)
		pthread_mutex_unlock(&k->mu);
	else
		infs__pool_free(pool);
}

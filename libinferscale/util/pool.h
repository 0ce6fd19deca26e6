/* A small fork-join thread pool for the forward pass: the calling thread and
 * n - 1 workers share the tasks of each run. */
#ifndef INFS_POOL_H
#define INFS_POOL_H

#include <stdint.h>

typedef struct infs__pool infs__pool;

/* fn(arg, task, worker) is called once for every task in [0, n_tasks);
 * worker, in [0, pool size), names the thread running it (for scratch). */
typedef void (*infs__pool_fn)(void *arg, uint32_t task, uint32_t worker);

/* A pool of n_threads threads in all (the caller counts as one; 1 starts
 * none). INFS_ENOMEM when threads cannot be started. */
int infs__pool_create(infs__pool **out, uint32_t n_threads);
void infs__pool_free(infs__pool *pool);
uint32_t infs__pool_size(const infs__pool *pool);

/* Runs every task and returns when all are done. In a child of a fork
 * after the pool started, its first run starts the child's own workers. */
void infs__pool_run(infs__pool *pool, infs__pool_fn fn, void *arg, uint32_t n_tasks);

/* A pool a model or embedder keeps for the calls that bring none, so that a
 * decoding step does not start and join threads: started on first use and
 * held by one call at a time; a call that finds it held starts its own. */
typedef struct infs__pool_keep infs__pool_keep;

infs__pool_keep *infs__pool_keep_new(void); /* NULL: out of memory */
void infs__pool_keep_free(infs__pool_keep *keep);

/* *pool: the kept pool of n_threads, held until infs__pool_give_back, or a
 * pool of the call's own. INFS_ENOMEM when threads cannot be started. */
int infs__pool_borrow(infs__pool_keep *keep, uint32_t n_threads, infs__pool **pool);
void infs__pool_give_back(infs__pool_keep *keep, infs__pool *pool);

/* The number of processors this process may use, at least 1. */
uint32_t infs__cpu_count(void);

#endif

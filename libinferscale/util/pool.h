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

/* Runs every task and returns when all are done. */
void infs__pool_run(infs__pool *pool, infs__pool_fn fn, void *arg, uint32_t n_tasks);

/* The number of processors this process may use, at least 1. */
uint32_t infs__cpu_count(void);

#endif

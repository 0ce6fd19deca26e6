/* The tiers of fact KV in a store's device copy: the device pool within the
 * device budget, the pinned pool within the host budget, the store file
 * with everything. Namespaces are evicted least recently used; the store's
 * own thread moves a namespace up (prefetch, or after an injection read it
 * from a lower tier) or an evicted one down to pinned memory. A move
 * reserves its room under the store's write lock (evicting others),
 * copies under the read lock in batches (readers of every namespace go
 * on), and publishes the new copies under the write lock: the records'
 * pointers, and the rows' K pointers rewritten in place on the device so
 * that captured graphs stay valid. Memory given up is reused only after a
 * device sync (device_pool.c). docs/cuda.md, "Tiers". */
#include <stdlib.h>
#include <string.h>

#include "cuda/device_copy.h"
#include "cuda/named_list.h"
#include "util/error.h"
#include "rows_kernels.h"

/* Bytes a move copies per hold of the read lock, so that a waiting writer
 * (and the readers queued behind it) waits for one batch at most. */
#define MOVE_BATCH (64ull << 20)

infs__kv_ns *infs__kns_find(const infs__device *d, const char *name)
{
	for (infs__kv_ns *k = d->kns; k; k = k->next)
		if (!strcmp(k->name, name))
			return k;
	return NULL;
}

void infs__kns_touch(infs__device *d, infs__kv_ns *k)
{
	__atomic_store_n(&k->lru, __atomic_add_fetch(&d->tick, 1, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

static INFS__NAMED_GET(kns_get, infs__kns_find, infs__kv_ns, infs__device, kns)

static void kns_free_if_empty(infs__device *d, infs__kv_ns *k)
{
	if (k->n)
		return;
	for (infs__kv_ns **pp = &d->kns; *pp; pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			break;
		}
	free(k->ids);
	free(k->name);
	free(k);
}

/* The K pointer the device reads for e: its device copy, else its pinned
 * copy through the mapping, else NULL (the file's tier only). */
static const char *row_ptr(const infs__device *d, const infs__dev_rec *e)
{
	return e->kv ? e->kv : e->host ? infs__kvpool_dptr(&d->hpool, e->hchunk, e->host) : NULL;
}

/* Rows whose K pointers change, written to the device in one launch, and
 * the memory they leave, released once they no longer point there. */
typedef struct row_set {
	uint64_t id;
	uint32_t row;
	const char *val;
	infs__kvpool *pool;           /* NULL: nothing to release */
	uint32_t chunk;
	const char *ptr;
	uint64_t bytes;
} row_set;

typedef struct row_batch {
	infs__dev_ns *ns;           /* one kv namespace's records share one rows namespace */
	row_set *s;
	size_t n, cap;
} row_batch;

/* Adds e, whose copies have just changed, and the memory (pool, chunk,
 * ptr, bytes; pool NULL: none) it gave up. Memory no row points to is
 * released at once; a row that cannot be rewritten (out of memory) keeps
 * pointing to memory that is then never released, so it stays valid. */
static void batch_add(row_batch *b, infs__device *d, const infs__dev_rec *e, infs__kvpool *pool, uint32_t chunk,
                      const char *ptr, uint64_t bytes)
{
	const char *val = row_ptr(d, e);
	const int has_row = e->ns && e->row != UINT32_MAX;
	if (!has_row || val == e->rowv) {
		if (pool)
			infs__kvpool_release(pool, chunk, ptr, bytes);
		return;
	}
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		row_set *t = realloc(b->s, cap * sizeof *t);
		if (!t)
			return;
		b->s = t;
		b->cap = cap;
	}
	b->ns = e->ns;
	b->s[b->n++] = (row_set){ e->id, e->row, val, pool, chunk, ptr, bytes };
}

/* Writes the batch's pointers and waits for them, so that every later
 * launch on any stream (a compaction's gather, an injection) reads them;
 * then releases what they left (reused after a device sync: work queued
 * before may still read it). On a failure the rows and the memory stay. */
static void batch_flush(infs__device *d, row_batch *b)
{
	const size_t n = b->n, bytes = n * (sizeof(char *) + 4);
	cudaError_t err = cudaSuccess;
	char *h = n ? malloc(bytes) : NULL;
	if (n && bytes > d->set_cap) {
		cudaFree(d->set_buf);
		d->set_buf = NULL;
		d->set_cap = 0;
		if ((err = cudaMalloc(&d->set_buf, 2 * bytes)) == cudaSuccess)
			d->set_cap = 2 * bytes;
	}
	if (n && h && err == cudaSuccess) {
		const char **hv = (const char **)h;
		uint32_t *hr = (uint32_t *)(h + n * sizeof(char *));
		for (size_t i = 0; i < n; i++) {
			hv[i] = b->s[i].val;
			hr[i] = b->s[i].row;
		}
		const char *const *vals = (const char *const *)d->set_buf;
		const uint32_t *rows = (const uint32_t *)((char *)d->set_buf + n * sizeof(char *));
		err = cudaMemcpyAsync(d->set_buf, h, bytes, cudaMemcpyHostToDevice, d->set_stream);
		if (err == cudaSuccess)
			err = infs_k_set_rows(b->ns->kv, rows, vals, (uint32_t)n, d->set_stream);
		if (err == cudaSuccess)
			err = cudaStreamSynchronize(d->set_stream);
		for (size_t i = 0; i < n && err == cudaSuccess; i++) {
			infs__dev_rec *e = infs__device_rec_mut(d, b->s[i].id);
			e->rowv = b->s[i].val;
			if (b->s[i].pool)
				infs__kvpool_release(b->s[i].pool, b->s[i].chunk, b->s[i].ptr, b->s[i].bytes);
		}
	}
	if (err != cudaSuccess)
		infs__cuda_error(err, "moving fact KV between tiers", "rewriting rows' K pointers");
	free(h);
	free(b->s);
	*b = (row_batch){ 0 };
}

static void set_dev(infs__device *d, infs__dev_rec *e, char *kv, uint32_t chunk)
{
	infs__kv_ns *k = e->kns;
	const int was_up = e->kv || e->host;
	if (e->kv) {
		k->n_dev--;
		k->dev_bytes -= e->bytes;
		d->kv_dev -= e->bytes;
	}
	e->kv = kv;
	e->chunk = chunk;
	if (kv) {
		k->n_dev++;
		k->dev_bytes += e->bytes;
		d->kv_dev += e->bytes;
	}
	k->n_up += (uint32_t)(e->kv || e->host) - (uint32_t)was_up;
}

static void set_host(infs__device *d, infs__dev_rec *e, char *host, uint32_t chunk)
{
	infs__kv_ns *k = e->kns;
	const int was_up = e->kv || e->host;
	if (e->host) {
		k->host_bytes -= e->bytes;
		d->kv_host -= e->bytes;
	}
	e->host = host;
	e->hchunk = chunk;
	if (host) {
		k->host_bytes += e->bytes;
		d->kv_host += e->bytes;
	}
	k->n_up += (uint32_t)(e->kv || e->host) - (uint32_t)was_up;
}

/* The least recently used kv namespace but keep with KV in the tier. */
static infs__kv_ns *victim(const infs__device *d, const infs__kv_ns *keep, int host)
{
	infs__kv_ns *best = NULL;
	uint64_t best_lru = 0;
	for (infs__kv_ns *k = d->kns; k; k = k->next) {
		if (k == keep || !(host ? k->host_bytes : k->dev_bytes))
			continue;
		uint64_t lru = __atomic_load_n(&k->lru, __ATOMIC_RELAXED);
		if (!best || lru < best_lru)
			best = k, best_lru = lru;
	}
	return best;
}

/* Takes k's KV off the device; the rows read its pinned copy where it has
 * one, else nothing (the file's tier), and a move down to pinned memory
 * is queued when there is a pinned tier. */
static void evict_dev(infs__device *d, infs__kv_ns *k)
{
	row_batch b = { 0 };
	for (uint32_t i = 0; i < k->n; i++) {
		infs__dev_rec *e = infs__device_rec_mut(d, k->ids[i]);
		if (!e->kv)
			continue;
		char *kv = e->kv;
		uint32_t chunk = e->chunk;
		set_dev(d, e, NULL, 0);
		batch_add(&b, d, e, &d->dpool, chunk, kv, e->bytes);
	}
	batch_flush(d, &b);
	d->evictions++;
	if (d->hpool.budget && k->n_up < k->n)
		infs__tier_queue(d, k->name, 1);
}

static void evict_host(infs__device *d, infs__kv_ns *k)
{
	row_batch b = { 0 };
	for (uint32_t i = 0; i < k->n; i++) {
		infs__dev_rec *e = infs__device_rec_mut(d, k->ids[i]);
		if (!e->host)
			continue;
		char *host = e->host;
		uint32_t chunk = e->hchunk;
		set_host(d, e, NULL, 0);
		batch_add(&b, d, e, &d->hpool, chunk, host, e->bytes);
	}
	batch_flush(d, &b);
	d->host_evictions++;
}

/* Room for bytes in a tier's pool: a free range, empty chunks given back
 * for a larger one, then (evict set) least recently used namespaces but
 * keep evicted one at a time. INFS_EBUDGET, with no message, when none. */
static int tier_alloc(infs__device *d, int host, uint64_t bytes, const infs__kv_ns *keep, int evict,
                      uint32_t *chunk, char **ptr, const char *fn)
{
	infs__kvpool *p = host ? &d->hpool : &d->dpool;
	for (;;) {
		int rc = infs__kvpool_alloc(p, bytes, host ? 0 : d->rows, chunk, ptr, fn);
		if (rc != INFS_EBUDGET)
			return rc;
		if (infs__kvpool_trim(p))
			continue;
		infs__kv_ns *v = evict ? victim(d, keep, host) : NULL;
		if (!v)
			return INFS_EBUDGET;
		if (host)
			evict_host(d, v);
		else
			evict_dev(d, v);
	}
}

int infs__tier_rows_room(infs__device *d, uint64_t more)
{
	while (d->budget && d->rows + d->dpool.held + more > d->budget) {
		if (infs__kvpool_trim(&d->dpool))
			continue;
		infs__kv_ns *v = victim(d, NULL, 0);
		if (!v)
			return INFS_EBUDGET;
		evict_dev(d, v);
	}
	return INFS_OK;
}

int infs__tier_add(infs__device *d, const infs__record *r, const char *ns, infs__dev_ns *p, uint32_t row,
                   int evict, const char **row_kv, const char *fn)
{
	int rc = infs__device_rec_reserve(d);
	if (rc)
		return rc;
	infs__kv_ns *k = kns_get(d, ns, fn);
	if (!k)
		return INFS_ENOMEM;
	if (k->n == k->cap) {
		uint32_t cap = k->cap ? 2 * k->cap : 16;
		uint64_t *t = realloc(k->ids, cap * sizeof *t);
		if (!t) {
			kns_free_if_empty(d, k);
			return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
		}
		k->ids = t;
		k->cap = cap;
	}
	const uint64_t half = (uint64_t)r->n_tokens * d->token_bytes;
	uint32_t chunk = 0;
	char *kv = NULL;
	if (evict)
		infs__kns_touch(d, k);
	rc = tier_alloc(d, 0, 2 * half, k, evict, &chunk, &kv, fn);
	if (rc == INFS_OK) {
		cudaError_t err = cudaMemcpy(kv, r->k, half, cudaMemcpyHostToDevice);
		if (err == cudaSuccess)
			err = cudaMemcpy(kv + half, r->v, half, cudaMemcpyHostToDevice);
		if (err != cudaSuccess) {
			infs__kvpool_release(&d->dpool, chunk, kv, 2 * half);
			rc = infs__cuda_error(err, fn, "copying a record's KV to the device");
		}
	} else if (rc == INFS_EBUDGET) {
		rc = INFS_OK; /* no room on the device: the file's tier holds it */
		kv = NULL;
	}
	if (rc) {
		kns_free_if_empty(d, k);
		return rc;
	}
	infs__dev_rec e = { .id = r->id, .rowv = kv, .bytes = 2 * half, .row = row, .pos = k->n, .ns = p, .kns = k };
	k->ids[k->n++] = r->id;
	k->bytes += e.bytes;
	infs__device_rec_insert(d, &e);
	infs__dev_rec *in = infs__device_rec_mut(d, r->id);
	if (kv)
		set_dev(d, in, kv, chunk);
	*row_kv = kv;
	return INFS_OK;
}

void infs__tier_drop(infs__device *d, infs__dev_rec *e)
{
	if (e->kv)
		infs__kvpool_release(&d->dpool, e->chunk, e->kv, e->bytes);
	if (e->host)
		infs__kvpool_release(&d->hpool, e->hchunk, e->host, e->bytes);
	set_dev(d, e, NULL, 0);
	set_host(d, e, NULL, 0);
	infs__kv_ns *k = e->kns;
	const uint32_t last = --k->n;
	if (e->pos != last) {
		k->ids[e->pos] = k->ids[last];
		infs__device_rec_mut(d, k->ids[e->pos])->pos = e->pos;
	}
	k->bytes -= e->bytes;
	kns_free_if_empty(d, k);
}

/* One record's room reserved by a move, copied, then published. */
typedef struct move_item {
	uint64_t id, bytes;
	char *dst;
	uint32_t chunk;
	int host, ok;
} move_item;

/* Reserves room for namespace name's records that a move (down: to pinned
 * memory only) brings up: on the device while it has room (up moves),
 * then in pinned memory. Under the write lock. */
static size_t move_reserve(infs__device *d, const char *name, int down, move_item **out, const char *fn)
{
	infs__kv_ns *k = infs__kns_find(d, name);
	if (!k || !k->n)
		return 0;
	move_item *it = malloc(k->n * sizeof *it);
	if (!it)
		return 0;
	if (!down)
		infs__kns_touch(d, k);
	int dev_full = down, host_full = !d->hpool.budget;
	size_t n = 0;
	for (uint32_t i = 0; i < k->n && !(dev_full && host_full); i++) {
		const infs__dev_rec *e = infs__device_rec_mut(d, k->ids[i]);
		uint32_t chunk;
		char *dst;
		if (!dev_full && !e->kv) {
			if (tier_alloc(d, 0, e->bytes, k, 1, &chunk, &dst, fn) == INFS_OK) {
				it[n++] = (move_item){ e->id, e->bytes, dst, chunk, 0, 1 };
				continue;
			}
			dev_full = 1;
		}
		if (!host_full && !e->kv && !e->host) {
			if (tier_alloc(d, 1, e->bytes, k, 1, &chunk, &dst, fn) == INFS_OK)
				it[n++] = (move_item){ e->id, e->bytes, dst, chunk, 1, 1 };
			else
				host_full = 1;
		}
	}
	*out = it;
	return n;
}

/* Copies one record into its reserved room from the fastest copy it has.
 * Under the read lock; the copies are queued on the move stream. */
static int move_copy(infs__device *d, const char *name, move_item *m, const char *fn)
{
	const infs__dev_rec *e = infs__device_rec(d, m->id);
	if (!e)
		return INFS_ENOTFOUND; /* deleted since */
	cudaError_t err = cudaSuccess;
	if (m->host && e->kv)
		err = cudaMemcpyAsync(m->dst, e->kv, m->bytes, cudaMemcpyDeviceToHost, d->move_stream);
	else if (!m->host && e->host)
		err = cudaMemcpyAsync(m->dst, e->host, m->bytes, cudaMemcpyHostToDevice, d->move_stream);
	else {
		infs__record r;
		int rc = infs__store_find(&r, d->store, name, m->id);
		if (rc)
			return rc;
		const size_t half = (size_t)(m->bytes / 2);
		if (m->host) {
			memcpy(m->dst, r.k, half);
			memcpy(m->dst + half, r.v, half);
		} else if ((rc = infs__stage_upload(d->move_stager, m->dst, r.k, half, d->move_stream, fn)) ||
		           (rc = infs__stage_upload(d->move_stager, m->dst + half, r.v, half, d->move_stream, fn))) {
			return rc;
		}
	}
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "copying fact KV between tiers");
}

int infs__tier_can_rise(const infs__device *d, const infs__kv_ns *k, int down)
{
	if (!k || !k->n)
		return 0;
	const uint64_t mean = k->bytes / k->n;
	const int dev = !down && k->n_dev < k->n && (!d->budget || d->budget > d->rows + mean);
	const int host = d->hpool.budget && k->n_up < k->n;
	return dev || host;
}

/* A tier move of namespace name (docs/cuda.md, "Tiers"). */
static void move(infs__device *d, const char *name, int down)
{
	static const char fn[] = "infs_prefetch";
	infs_store *s = d->store;
	move_item *it = NULL;
	/* most moves asked for after injections have nothing to do: the
	 * write lock is taken only for those that may */
	infs__store_read_lock(s);
	const int can = infs__tier_can_rise(d, infs__kns_find(d, name), down);
	infs__store_read_unlock(s);
	if (!can)
		return;
	infs__store_write_lock(s);
	const size_t n = move_reserve(d, name, down, &it, fn);
	infs__store_write_unlock(s);

	for (size_t i = 0; i < n;) {
		uint64_t batch = 0;
		int failed = 0;
		infs__store_read_lock(s);
		for (; i < n && batch < MOVE_BATCH && !failed; i++) {
			batch += it[i].bytes;
			int rc = move_copy(d, name, &it[i], fn);
			it[i].ok = rc == INFS_OK;
			failed = rc != INFS_OK && rc != INFS_ENOTFOUND;
		}
		/* the sources may move once the lock is released */
		if (cudaStreamSynchronize(d->move_stream) != cudaSuccess)
			failed = 1;
		infs__store_read_unlock(s);
		if (failed) {
			for (size_t j = 0; j < n; j++)
				it[j].ok = 0;
			break;
		}
	}

	if (n) {
		infs__store_write_lock(s);
		row_batch b = { 0 };
		int up = 0;
		for (size_t i = 0; i < n; i++) {
			move_item *m = &it[i];
			infs__dev_rec *e = infs__device_rec_mut(d, m->id);
			infs__kvpool *p = m->host ? &d->hpool : &d->dpool;
			if (!m->ok || !e || (m->host ? e->host : e->kv)) {
				infs__kvpool_release(p, m->chunk, m->dst, m->bytes);
				continue;
			}
			if (m->host)
				set_host(d, e, m->dst, m->chunk);
			else
				set_dev(d, e, m->dst, m->chunk);
			up = 1;
			batch_add(&b, d, e, NULL, 0, NULL, 0);
		}
		batch_flush(d, &b);
		if (up && !down)
			d->promotions++;
		infs__store_write_unlock(s);
	}
	free(it);
}

void infs__tier_queue(infs__device *d, const char *name, int down)
{
	pthread_mutex_lock(&d->q_lock);
	for (size_t i = 0; i < d->q_n; i++)
		if (!strcmp(d->queue[i].name, name)) {
			d->queue[i].down &= down; /* up covers down */
			pthread_mutex_unlock(&d->q_lock);
			return;
		}
	char *copy = NULL;
	if (d->q_n == d->q_cap) {
		size_t cap = d->q_cap ? 2 * d->q_cap : 16;
		infs__move *t = realloc(d->queue, cap * sizeof *t);
		if (t) {
			d->queue = t;
			d->q_cap = cap;
		}
	}
	/* without memory the move is not made: the KV stays where it is */
	if (d->q_n < d->q_cap && (copy = strdup(name))) {
		d->queue[d->q_n++] = (infs__move){ copy, down };
		pthread_cond_signal(&d->q_cond);
	}
	pthread_mutex_unlock(&d->q_lock);
}

static void *mover_main(void *arg)
{
	infs__device *d = arg;
	cudaSetDevice(d->device);
	/* an application capturing a graph in cudaStreamCaptureModeGlobal
	 * does not forbid this thread's allocations and syncs */
	enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
	cudaThreadExchangeStreamCaptureMode(&mode);
	pthread_mutex_lock(&d->q_lock);
	for (;;) {
		while (!d->q_n && !d->stop)
			pthread_cond_wait(&d->q_cond, &d->q_lock);
		if (d->stop)
			break;
		infs__move m = d->queue[0];
		memmove(d->queue, d->queue + 1, --d->q_n * sizeof *d->queue);
		d->busy = 1;
		pthread_mutex_unlock(&d->q_lock);
		move(d, m.name, m.down);
		free(m.name);
		pthread_mutex_lock(&d->q_lock);
		d->busy = 0;
		if (!d->q_n)
			pthread_cond_broadcast(&d->q_idle);
	}
	pthread_cond_broadcast(&d->q_idle);
	pthread_mutex_unlock(&d->q_lock);
	return NULL;
}

int infs__tier_start(infs__device *d, const char *fn)
{
	cudaError_t err = cudaStreamCreateWithFlags(&d->move_stream, cudaStreamNonBlocking);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "creating the stream of tier moves");
	int rc = infs__stager_create(&d->move_stager, fn);
	if (rc)
		return rc;
	if (pthread_create(&d->mover, NULL, mover_main, d))
		return infs__error(INFS_ENOMEM, "%s: cannot start the thread of tier moves", fn);
	d->mover_started = 1;
	return INFS_OK;
}

void infs__tier_stop(infs__device *d)
{
	if (d->mover_started) {
		pthread_mutex_lock(&d->q_lock);
		d->stop = 1;
		pthread_cond_signal(&d->q_cond);
		pthread_mutex_unlock(&d->q_lock);
		pthread_join(d->mover, NULL);
		d->mover_started = 0;
	}
	for (size_t i = 0; i < d->q_n; i++)
		free(d->queue[i].name);
	free(d->queue);
	d->queue = NULL;
	d->q_n = d->q_cap = 0;
	infs__stager_free(d->move_stager);
	d->move_stager = NULL;
	if (d->move_stream)
		cudaStreamDestroy(d->move_stream);
	d->move_stream = NULL;
	for (size_t i = 0; i < d->n_stagers; i++)
		infs__stager_free(d->stagers[i]);
	free(d->stagers);
	d->stagers = NULL;
	d->n_stagers = d->cap_stagers = 0;
}

infs__stager *infs__tier_stager_take(infs__device *d, const char *fn)
{
	infs__stager *st = NULL;
	pthread_mutex_lock(&d->stage_lock);
	if (d->n_stagers)
		st = d->stagers[--d->n_stagers];
	pthread_mutex_unlock(&d->stage_lock);
	if (!st && infs__stager_create(&st, fn))
		return NULL;
	return st;
}

void infs__tier_stager_give(infs__device *d, infs__stager *st)
{
	pthread_mutex_lock(&d->stage_lock);
	if (d->n_stagers == d->cap_stagers) {
		size_t cap = d->cap_stagers ? 2 * d->cap_stagers : 8;
		infs__stager **t = realloc(d->stagers, cap * sizeof *t);
		if (t) {
			d->stagers = t;
			d->cap_stagers = cap;
		}
	}
	if (d->n_stagers < d->cap_stagers) {
		d->stagers[d->n_stagers++] = st;
		st = NULL;
	}
	pthread_mutex_unlock(&d->stage_lock);
	infs__stager_free(st);
}

int infs__tier_prefetch(void *data, const char *ns)
{
	infs__tier_queue(data, ns, 0);
	return INFS_OK;
}

int infs__tier_of(void *data, const char *ns)
{
	const infs__kv_ns *k = infs__kns_find(data, ns);
	if (!k || k->n_dev == k->n)
		return INFS_TIER_DEVICE;
	return k->n_up == k->n ? INFS_TIER_HOST : INFS_TIER_FILE;
}

int infs__tier_wait(void *data)
{
	infs__device *d = data;
	pthread_mutex_lock(&d->q_lock);
	while ((d->q_n || d->busy) && !d->stop)
		pthread_cond_wait(&d->q_idle, &d->q_lock);
	pthread_mutex_unlock(&d->q_lock);
	return INFS_OK;
}

void infs__tier_stats(void *data, infs_store_stats *st)
{
	const infs__device *d = data;
	st->host_bytes += d->hpool.held;
	st->kv_device_bytes += d->kv_dev;
	st->kv_host_bytes += d->kv_host;
	st->device_evictions += d->evictions;
	st->host_evictions += d->host_evictions;
	st->promotions += d->promotions;
}

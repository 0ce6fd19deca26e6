/* The store's device copy: each namespace's embeddings (device_rows.c) and
 * the records' pre-RoPE K and V in the tiers of device_tiers.c, built at
 * open and kept in step by the hooks it installs in the store's
 * INFS_EXT_DEVICE slot, which run under the store's write lock. */
#include "cuda/device_copy.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* The pools' chunks: the device's, unless a budget makes them smaller
 * (an eighth of it, so that eviction and empty chunks given back leave
 * room for rows), and the pinned pool's. */
#define KV_CHUNK (256ull << 20)
#define HOST_CHUNK (64ull << 20)
#define MIN_CHUNK (64ull << 10)

static void drop_rec(infs__device *d, infs__dev_rec *e)
{
	infs__tier_drop(d, e);
	infs__dev_ns *p = e->ns;
	uint32_t row = e->row;
	infs__device_rec_remove(d, e);
	if (p && row != UINT32_MAX)
		infs__rows_drop(d, p, row);
}

static void device_destroy(void *data)
{
	infs__device *d = data;
	if (!d)
		return;
	int prev;
	if (infs__device_enter(&prev, d->device, "infs_store_close") == INFS_OK) {
		infs__tier_stop(d);
		cudaDeviceSynchronize(); /* queued injections may still read the pools */
		while (d->ns)
			infs__rows_unlink(d, d->ns);
		infs__kvpool_destroy(&d->dpool);
		infs__kvpool_destroy(&d->hpool);
		infs__device_pool_free(d);
		cudaFree(d->set_buf);
		if (d->set_stream)
			cudaStreamDestroy(d->set_stream);
		infs__device_restore(prev);
	}
	while (d->kns) {
		infs__kv_ns *k = d->kns;
		d->kns = k->next;
		free(k->ids);
		free(k->name);
		free(k);
	}
	pthread_mutex_destroy(&d->pool_lock);
	pthread_mutex_destroy(&d->stage_lock);
	pthread_mutex_destroy(&d->q_lock);
	pthread_cond_destroy(&d->q_cond);
	pthread_cond_destroy(&d->q_idle);
	free(d->recs);
	free(d);
}

/* Copies namespace ns's embeddings. Under the store's read lock. */
static int attach_rows(infs__device *d, infs_store *s, const char *ns, const char *fn)
{
	const float *emb = NULL;
	const uint64_t *fact_ids = NULL;
	size_t n_facts = 0;
	uint64_t gen;
	infs__dev_ns *p = NULL;
	int rc = infs__store_ns_matrix(&emb, &fact_ids, &n_facts, &gen, s, ns);
	if (rc || !n_facts || !d->embed_dim)
		return rc;
	if (n_facts > UINT32_MAX - 32)
		return infs__error(INFS_ERANGE, "%s: namespace '%s' has too many facts for the device copy", fn, ns);
	if (!(p = infs__rows_get(d, ns, fn)))
		return INFS_ENOMEM;
	return infs__rows_append(d, p, emb, fact_ids, (uint32_t)n_facts, fn);
}

/* Maps namespace ns's records and copies their KV to the device while it
 * has room (no eviction: namespaces fill the budget in the order they come,
 * the rest stays in the file's tier until used). Under the read lock. */
static int attach_kv(infs__device *d, infs_store *s, const char *ns, const char *fn)
{
	uint64_t *ids;
	size_t n;
	int rc = infs_fact_list(&ids, &n, s, ns);
	if (rc)
		return rc;
	infs__store_read_lock(s);
	infs__dev_ns *p = infs__device_ns(d, ns);
	const uint32_t n_rows = p ? p->n_rows : 0;
	const char **kv = p ? calloc(n_rows, sizeof *kv) : NULL;
	uint32_t *ntok = p ? calloc(n_rows, sizeof *ntok) : NULL;
	if (p && (!kv || !ntok))
		rc = infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	uint32_t next_fact = 0;
	for (size_t i = 0; i < n && rc == INFS_OK; i++) {
		infs__record r;
		if ((rc = infs__store_find(&r, s, ns, ids[i])))
			break;
		uint32_t row = UINT32_MAX;
		if (p && !(r.flags & INFS_FACT_SEGMENT)) {
			while (next_fact < n_rows && p->host_ids[next_fact] < r.id)
				next_fact++;
			row = next_fact;
		}
		const char *at;
		rc = infs__tier_add(d, &r, ns, row == UINT32_MAX ? NULL : p, row, 0, &at, fn);
		if (rc == INFS_OK && row != UINT32_MAX) {
			kv[row] = at;
			ntok[row] = r.n_tokens;
		}
	}
	if (rc == INFS_OK && p)
		rc = infs__rows_set_kv(p, 0, kv, ntok, n_rows, fn);
	infs__store_read_unlock(s);
	free(kv), free(ntok);
	free(ids);
	return rc;
}

/* The INFS_EXT_DEVICE slot's hooks (store.h). */
static int device_on_put(void *data, const char *ns, const infs__record *r)
{
	static const char fn[] = "infs_fact_put";
	infs__device *d = data;
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	infs__dev_ns *p = NULL;
	uint32_t row = UINT32_MAX;
	if (!(r->flags & INFS_FACT_SEGMENT) && d->embed_dim) {
		if (!(p = infs__rows_get(d, ns, fn)))
			rc = INFS_ENOMEM;
		else if (p->n_rows == UINT32_MAX - 32)
			rc = infs__error(INFS_ERANGE, "%s: namespace '%s' is full on the device", fn, ns);
		else if (!(rc = infs__rows_append(d, p, r->embedding, &r->id, 1, fn)))
			row = p->n_rows - 1;
	}
	const char *kv = NULL;
	if (rc == INFS_OK && (rc = infs__tier_add(d, r, ns, p, row, 1, &kv, fn)) == INFS_OK && row != UINT32_MAX &&
	    (rc = infs__rows_set_kv(p, row, &kv, &r->n_tokens, 1, fn))) {
		infs__dev_rec *e = infs__device_rec_mut(d, r->id);
		infs__tier_drop(d, e);
		infs__device_rec_remove(d, e);
	}
	if (rc && row != UINT32_MAX)
		p->n_rows--; /* withdraw the row just added: it is the last one */
	if (p && !p->n_rows)
		infs__rows_unlink(d, p);
	infs__device_restore(prev);
	return rc;
}

static void device_on_delete(void *data, uint64_t id)
{
	infs__device *d = data;
	infs__dev_rec *e = (infs__dev_rec *)infs__device_rec(d, id);
	if (!e)
		return;
	int prev;
	if (infs__device_enter(&prev, d->device, "infs_fact_delete"))
		return;
	drop_rec(d, e);
	infs__device_restore(prev);
}

static uint64_t device_bytes(void *data)
{
	const infs__device *d = data;
	return d->rows + d->dpool.held;
}

int infs__device_attach(infs_store *s)
{
	static const char fn[] = "infs_store_open";
	const infs_store_options *o = infs__store_opts(s);
	const infs_geometry *g = infs__store_geom(s);
	int count = 0;
	cudaError_t err = cudaGetDeviceCount(&count);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "looking for CUDA devices");
	if (o->device >= count)
		return infs__error(INFS_EINVAL, "%s: device %d asked for, but there are %d CUDA devices", fn, o->device,
		                   count);
	infs__device *d = calloc(1, sizeof *d);
	if (!d)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	d->device = o->device;
	d->store = s;
	d->budget = o->device_budget_bytes;
	d->token_bytes = infs_geometry_kv_token_bytes(g);
	d->embed_dim = g->embed_dim;
	d->dpool.budget = d->budget;
	d->dpool.chunk_bytes = KV_CHUNK;
	if (d->budget && d->dpool.chunk_bytes > d->budget / 8)
		d->dpool.chunk_bytes = d->budget / 8 > MIN_CHUNK ? d->budget / 8 : MIN_CHUNK;
	d->hpool.host = 1;
	d->hpool.budget = o->host_budget_bytes;
	d->hpool.chunk_bytes = HOST_CHUNK;
	if (d->hpool.budget && d->hpool.chunk_bytes > d->hpool.budget / 8)
		d->hpool.chunk_bytes = d->hpool.budget / 8 > MIN_CHUNK ? d->hpool.budget / 8 : MIN_CHUNK;
	pthread_mutex_init(&d->pool_lock, NULL);
	pthread_mutex_init(&d->stage_lock, NULL);
	pthread_mutex_init(&d->q_lock, NULL);
	pthread_cond_init(&d->q_cond, NULL);
	pthread_cond_init(&d->q_idle, NULL);
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc) {
		device_destroy(d);
		return rc;
	}
	err = cudaStreamCreateWithFlags(&d->set_stream, cudaStreamNonBlocking);
	if (err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "creating a stream");
	char **names = NULL;
	size_t n_names = 0;
	if (rc == INFS_OK)
		rc = infs_namespace_list(&names, &n_names, s);
	/* every namespace's rows first: only they must fit */
	for (size_t i = 0; i < n_names && rc == INFS_OK; i++) {
		infs__store_read_lock(s);
		rc = attach_rows(d, s, names[i], fn);
		infs__store_read_unlock(s);
	}
	for (size_t i = 0; i < n_names && rc == INFS_OK; i++)
		rc = attach_kv(d, s, names[i], fn);
	infs_free(names);
	if (rc == INFS_OK)
		rc = infs__tier_start(d, fn);
	infs__device_restore(prev);
	if (rc) {
		device_destroy(d);
		return rc;
	}
	*infs__store_ext(s, INFS_EXT_DEVICE) = (struct infs__store_ext){
		.data = d, .destroy = device_destroy, .on_put = device_on_put, .on_delete = device_on_delete,
		.bytes = device_bytes, .prefetch = infs__tier_prefetch, .tier = infs__tier_of, .wait = infs__tier_wait,
		.stats = infs__tier_stats,
	};
	return INFS_OK;
}

/* The store's device copy: each namespace's embeddings as one f16 matrix
 * (and its f32 rows, ids and K pointers), and the records' pre-RoPE K and V
 * in the tiers of device_tiers.c, built at open and kept in step by the
 * hooks it installs in the store's INFS_EXT_DEVICE slot, which run under
 * the store's write lock. Also the CUDA backend's table (device.h). */
#include "cuda/device_copy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.h"
#include "cuda/device_embed.h"
#include "kernels.h"
#include "util/dtype.h"
#include "util/error.h"
#include "inject/inject.h"
#include "retrieve/retrieve.h"

/* The pools' chunks: the device's, unless a budget makes them smaller
 * (an eighth of it, so that eviction and empty chunks given back leave
 * room for rows), and the pinned pool's. */
#define KV_CHUNK (256ull << 20)
#define HOST_CHUNK (64ull << 20)
#define MIN_CHUNK (64ull << 10)

int infs__cuda_error(cudaError_t err, const char *fn, const char *what)
{
	cudaGetLastError(); /* clear a sticky launch error for the next call */
	return infs__error(err == cudaErrorMemoryAllocation ? INFS_EBUDGET : INFS_EDEVICE, "%s: %s: CUDA error %d: %s",
	                   fn, what, (int)err, cudaGetErrorString(err));
}

int infs__device_enter(int *prev, int dev, const char *fn)
{
	cudaError_t err = cudaGetDevice(prev);
	if (err == cudaSuccess)
		err = cudaSetDevice(dev);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "selecting the device");
}

void infs__device_restore(int prev)
{
	cudaSetDevice(prev);
}

infs__device *infs__device_of(infs_store *s)
{
	return s ? infs__store_ext(s, INFS_EXT_DEVICE)->data : NULL;
}

/* The record map: open addressing with linear probing. */
static size_t slot_of(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

infs__dev_rec *infs__device_rec_mut(infs__device *d, uint64_t id)
{
	return (infs__dev_rec *)infs__device_rec(d, id);
}

const infs__dev_rec *infs__device_rec(const infs__device *d, uint64_t id)
{
	if (!d->recs_cap)
		return NULL;
	for (size_t i = slot_of(id, d->recs_cap);; i = (i + 1) & (d->recs_cap - 1)) {
		if (d->recs[i].id == id)
			return &d->recs[i];
		if (!d->recs[i].id)
			return NULL;
	}
}

int infs__device_rec_reserve(infs__device *d)
{
	if ((d->recs_n + 1) * 2 <= d->recs_cap)
		return INFS_OK;
	size_t cap = d->recs_cap ? d->recs_cap * 2 : 1024;
	infs__dev_rec *t = calloc(cap, sizeof *t);
	if (!t)
		return infs__error(INFS_ENOMEM, "device copy: out of memory for its record map");
	for (size_t i = 0; i < d->recs_cap; i++) {
		if (!d->recs[i].id)
			continue;
		size_t j = slot_of(d->recs[i].id, cap);
		while (t[j].id)
			j = (j + 1) & (cap - 1);
		t[j] = d->recs[i];
	}
	free(d->recs);
	d->recs = t;
	d->recs_cap = cap;
	return INFS_OK;
}

static void rec_remove(infs__device *d, infs__dev_rec *e)
{
	/* backward-shift deletion keeps every probe chain unbroken */
	size_t mask = d->recs_cap - 1, i = (size_t)(e - d->recs), j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (!d->recs[j].id)
			break;
		size_t home = slot_of(d->recs[j].id, d->recs_cap);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			d->recs[i] = d->recs[j];
			i = j;
		}
	}
	memset(&d->recs[i], 0, sizeof d->recs[i]);
	d->recs_n--;
}

static int over_budget(const infs__device *d, uint64_t more, const char *fn, const char *what)
{
	return infs__error(INFS_EBUDGET,
	                   "%s: the store's device budget of %llu bytes is exceeded: %s needs %llu more bytes, "
	                   "%llu are in use by retrieval rows (fact KV was evicted to make room)",
	                   fn, (unsigned long long)d->budget, what, (unsigned long long)more,
	                   (unsigned long long)d->rows);
}

void infs__device_rec_insert(infs__device *d, const infs__dev_rec *e)
{
	size_t i = slot_of(e->id, d->recs_cap);
	while (d->recs[i].id)
		i = (i + 1) & (d->recs_cap - 1);
	d->recs[i] = *e;
	d->recs_n++;
}

infs__dev_ns *infs__device_ns(const infs__device *d, const char *ns)
{
	for (infs__dev_ns *p = d->ns; p; p = p->next)
		if (!strcmp(p->name, ns))
			return p;
	return NULL;
}

/* The arrays of a namespace's allocation for cap rows, each aligned to
 * 256 bytes: where they lie from mem (NULL: only the size), and the bytes
 * of one row of each (dead, a bitmap, is last and not a row array). */
#define NS_FIELDS 8

static uint64_t ns_carve(const infs__device *d, uint32_t cap, char *mem, infs__dev_ns *p, void **field,
                         size_t *row_bytes)
{
	const size_t dim = d->embed_dim;
	const size_t rb[NS_FIELDS] = { 8, sizeof(char *), dim * 4, 4, 4, 4, dim * 2, 0 };
	void **dst[NS_FIELDS] = { (void **)&p->ids, (void **)&p->kv, (void **)&p->emb32, (void **)&p->norm,
		                  (void **)&p->inv, (void **)&p->ntok, (void **)&p->emb, (void **)&p->dead };
	uint64_t off = 0;
	for (int i = 0; i < NS_FIELDS; i++) {
		uint64_t bytes = i < NS_FIELDS - 1 ? (uint64_t)cap * rb[i] : ((uint64_t)cap + 31) / 32 * 4;
		if (mem) {
			*dst[i] = mem + off;
			if (field)
				field[i] = mem + off;
		}
		if (row_bytes)
			row_bytes[i] = rb[i];
		off += (bytes + 255) & ~(uint64_t)255;
	}
	return off;
}

static void ns_free(infs__device *d, infs__dev_ns *p)
{
	cudaFree(p->mem);
	d->rows -= ns_carve(d, p->cap, NULL, p, NULL, NULL);
	free(p->host_ids);
	free(p->host_dead);
	free(p->name);
	free(p);
}

/* New arrays of cap rows for p, filled by copy (rows[i] = old row i) or by
 * gather (rows[i] = old row keep[i]), then the old ones freed once the
 * device has finished with them: a search or injection queued earlier, on
 * any stream, may still read them. keep is on the device. */
static int ns_rebuild(infs__device *d, infs__dev_ns *p, uint32_t cap, uint32_t n, const uint32_t *keep,
                      const char *fn)
{
	const uint64_t bytes = ns_carve(d, cap, NULL, p, NULL, NULL), old_bytes = ns_carve(d, p->cap, NULL, p, NULL, NULL);
	/* fact KV makes way for rows: only rows that do not fit are refused */
	if (d->budget && bytes > old_bytes && infs__tier_rows_room(d, bytes - old_bytes))
		return over_budget(d, bytes - old_bytes, fn, "a namespace's embeddings");
	void *old_f[NS_FIELDS], *new_f[NS_FIELDS];
	size_t rb[NS_FIELDS];
	infs__dev_ns old = *p, fresh = *p;
	if (p->mem)
		ns_carve(d, p->cap, p->mem, &old, old_f, rb);
	char *mem = NULL;
	cudaError_t err = cudaMalloc((void **)&mem, bytes);
	if (err == cudaSuccess) {
		ns_carve(d, cap, mem, &fresh, new_f, rb);
		err = cudaMemset(fresh.dead, 0, ((size_t)cap + 31) / 32 * 4);
	}
	for (int i = 0; i < NS_FIELDS - 1 && err == cudaSuccess && n; i++)
		err = keep ? infs_k_gather_rows(new_f[i], old_f[i], rb[i], keep, n, NULL)
		           : cudaMemcpy(new_f[i], old_f[i], (size_t)n * rb[i], cudaMemcpyDeviceToDevice);
	if (err == cudaSuccess && !keep && n)
		err = cudaMemcpy(fresh.dead, old.dead, ((size_t)n + 31) / 32 * 4, cudaMemcpyDeviceToDevice);
	if (err == cudaSuccess)
		err = cudaDeviceSynchronize();
	if (err != cudaSuccess) {
		cudaFree(mem);
		return infs__cuda_error(err, fn, "rebuilding a namespace's embeddings");
	}
	cudaFree(p->mem);
	d->rows = d->rows - old_bytes + bytes;
	fresh.mem = mem;
	fresh.cap = cap;
	*p = fresh;
	return INFS_OK;
}

/* Room for rows more rows in namespace p, growing its arrays by doubling. */
static int ns_reserve(infs__device *d, infs__dev_ns *p, uint32_t rows, const char *fn)
{
	if (p->n_rows + rows <= p->cap)
		return INFS_OK;
	uint64_t want = (uint64_t)p->n_rows + rows, cap = p->cap ? p->cap : 256;
	while (cap < want)
		cap *= 2;
	if (cap > UINT32_MAX - 31)
		return infs__error(INFS_ERANGE, "%s: namespace '%s' would hold more than 2^32 rows", fn, p->name);
	uint64_t more = ns_carve(d, (uint32_t)cap, NULL, p, NULL, NULL) - ns_carve(d, p->cap, NULL, p, NULL, NULL);
	if (d->budget && d->rows + more > d->budget / 2)
		cap = want; /* no slack once rows would take half the budget: KV would make way for it */
	uint64_t *hid = realloc(p->host_ids, cap * sizeof *hid);
	if (hid)
		p->host_ids = hid;
	uint32_t *hdead = realloc(p->host_dead, (cap + 31) / 32 * 4);
	if (hdead)
		p->host_dead = hdead;
	if (!hid || !hdead)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	memset(hdead + (p->cap + 31) / 32, 0, ((cap + 31) / 32 - (p->cap + 31) / 32) * 4);
	return ns_rebuild(d, p, (uint32_t)cap, p->n_rows, NULL, fn);
}

/* Appends n rows (ids increasing, all above the namespace's last): f16
 * unit vectors and lengths to rank, the f32 rows and the CPU's inverse
 * lengths to score (infs__ns_cache_norms computes the same bits). Their
 * KV pointers are set by ns_set_kv once the records are in the pool. */
static int ns_append(infs__device *d, infs__dev_ns *p, const float *emb, const uint64_t *ids, uint32_t n,
                     const char *fn)
{
	int rc = ns_reserve(d, p, n, fn);
	if (rc)
		return rc;
	size_t dim = d->embed_dim;
	uint16_t *h = malloc((size_t)n * dim * 2);
	float *norm = malloc((size_t)n * 8);
	if (!h || !norm) {
		free(h), free(norm);
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	}
	float *inv = norm + n;
	for (uint32_t i = 0; i < n; i++) {
		const float *x = emb + (size_t)i * dim;
		double ss = 0;
		for (size_t j = 0; j < dim; j++)
			ss += (double)x[j] * x[j];
		double len = sqrt(ss);
		norm[i] = (float)len;
		inv[i] = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
		for (size_t j = 0; j < dim; j++)
			h[(size_t)i * dim + j] = infs__f32_to_f16(len > 0 ? (float)(x[j] / len) : 0.0f);
	}
	size_t r = p->n_rows;
	cudaError_t err = cudaMemcpy(p->emb + r * dim, h, (size_t)n * dim * 2, cudaMemcpyHostToDevice);
	if (err == cudaSuccess)
		err = cudaMemcpy(p->emb32 + r * dim, emb, (size_t)n * dim * 4, cudaMemcpyHostToDevice);
	if (err == cudaSuccess)
		err = cudaMemcpy(p->norm + r, norm, (size_t)n * 4, cudaMemcpyHostToDevice);
	if (err == cudaSuccess)
		err = cudaMemcpy(p->inv + r, inv, (size_t)n * 4, cudaMemcpyHostToDevice);
	if (err == cudaSuccess)
		err = cudaMemcpy(p->ids + r, ids, (size_t)n * 8, cudaMemcpyHostToDevice);
	free(h), free(norm);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "copying embeddings to the device");
	memcpy(p->host_ids + r, ids, (size_t)n * 8);
	p->n_rows += n;
	return INFS_OK;
}

/* Rows row .. row + n of p: where their K lies and how many tokens. */
static int ns_set_kv(infs__dev_ns *p, uint32_t row, const char *const *kv, const uint32_t *ntok, uint32_t n,
                     const char *fn)
{
	cudaError_t err = cudaMemcpy(p->kv + row, kv, (size_t)n * sizeof *kv, cudaMemcpyHostToDevice);
	if (err == cudaSuccess)
		err = cudaMemcpy(p->ntok + row, ntok, (size_t)n * 4, cudaMemcpyHostToDevice);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "copying where the facts' KV lies");
}

static infs__dev_ns *ns_get(infs__device *d, const char *name, const char *fn)
{
	infs__dev_ns *p = infs__device_ns(d, name);
	if (p)
		return p;
	p = calloc(1, sizeof *p);
	if (p && !(p->name = strdup(name))) {
		free(p);
		p = NULL;
	}
	if (!p) {
		infs__error(INFS_ENOMEM, "%s: out of memory", fn);
		return NULL;
	}
	p->next = d->ns;
	d->ns = p;
	return p;
}

static void ns_unlink(infs__device *d, infs__dev_ns *p)
{
	for (infs__dev_ns **pp = &d->ns; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	ns_free(d, p);
}

/* Rebuilds p without its dead rows, renumbering the records' rows: the
 * device memory of deleted facts comes back without reopening the store. */
static int ns_compact(infs__device *d, infs__dev_ns *p, const char *fn)
{
	const uint32_t live = p->n_rows - p->n_dead;
	uint32_t cap = 256;
	while (cap < live)
		cap *= 2;
	uint32_t *keep = malloc((size_t)live * 4), *d_keep = NULL;
	if (!keep)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	uint32_t n = 0;
	for (uint32_t r = 0; r < p->n_rows; r++)
		if (!(p->host_dead[r / 32] >> (r % 32) & 1))
			keep[n++] = r;
	cudaError_t err = cudaMalloc((void **)&d_keep, (size_t)live * 4);
	if (err == cudaSuccess)
		err = cudaMemcpy(d_keep, keep, (size_t)live * 4, cudaMemcpyHostToDevice);
	int rc = err == cudaSuccess ? ns_rebuild(d, p, cap, live, d_keep, fn)
	                            : infs__cuda_error(err, fn, "compacting a namespace");
	cudaFree(d_keep);
	if (rc == INFS_OK) {
		for (uint32_t j = 0; j < live; j++) {
			p->host_ids[j] = p->host_ids[keep[j]];
			infs__dev_rec *e = (infs__dev_rec *)infs__device_rec(d, p->host_ids[j]);
			if (e)
				e->row = j;
		}
		memset(p->host_dead, 0, ((size_t)p->n_rows + 31) / 32 * 4);
		p->n_rows = live;
		p->n_dead = 0;
		}
	free(keep);
	return rc;
}

/* A namespace at least this large is compacted once half its rows are dead. */
#define COMPACT_MIN_ROWS 64u

static void drop_rec(infs__device *d, infs__dev_rec *e)
{
	infs__tier_drop(d, e);
	infs__dev_ns *p = e->ns;
	uint32_t row = e->row;
	rec_remove(d, e);
	if (!p || row == UINT32_MAX)
		return;
	uint32_t w = row / 32;
	p->host_dead[w] |= 1u << (row % 32);
	p->n_dead++;
	if (p->n_dead == p->n_rows) {
		ns_unlink(d, p);
		return;
	}
	if (p->n_rows >= COMPACT_MIN_ROWS && 2 * p->n_dead >= p->n_rows &&
	    ns_compact(d, p, "infs_fact_delete") == INFS_OK)
		return;
	/* Searches and injections by device ids skip the rows flagged here; a
	 * failed copy (the device failing) leaves this one live to them. */
	cudaMemcpy(p->dead + w, &p->host_dead[w], 4, cudaMemcpyHostToDevice);
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
			ns_unlink(d, d->ns);
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
	if (!(p = ns_get(d, ns, fn)))
		return INFS_ENOMEM;
	return ns_append(d, p, emb, fact_ids, (uint32_t)n_facts, fn);
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
		rc = ns_set_kv(p, 0, kv, ntok, n_rows, fn);
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
		if (!(p = ns_get(d, ns, fn)))
			rc = INFS_ENOMEM;
		else if (p->n_rows == UINT32_MAX - 32)
			rc = infs__error(INFS_ERANGE, "%s: namespace '%s' is full on the device", fn, ns);
		else if (!(rc = ns_append(d, p, r->embedding, &r->id, 1, fn)))
			row = p->n_rows - 1;
	}
	const char *kv = NULL;
	if (rc == INFS_OK && (rc = infs__tier_add(d, r, ns, p, row, 1, &kv, fn)) == INFS_OK && row != UINT32_MAX &&
	    (rc = ns_set_kv(p, row, &kv, &r->n_tokens, 1, fn))) {
		infs__dev_rec *e = infs__device_rec_mut(d, r->id);
		infs__tier_drop(d, e);
		rec_remove(d, e);
	}
	if (rc && row != UINT32_MAX)
		p->n_rows--; /* withdraw the row just added: it is the last one */
	if (p && !p->n_rows)
		ns_unlink(d, p);
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

static int device_attach(infs_store *s)
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

static const infs__device_backend cuda_backend = { device_attach, infs__retrieve_device,
	                                                infs__searcher_create, infs__searcher_free,
	                                                infs__retrieve_on_device, infs__inject_device,
	                                                infs__injector_create, infs__injector_free,
	                                                infs__inject_on_device,
	                                                infs__device_model_upload, infs__device_model_random,
	                                                infs__device_model_release, infs__device_model_forward,
	                                                infs__device_model_recompute,
	                                                infs__device_model_encode,
	                                                infs__device_bert_upload,
	                                                infs__device_bert_release,
	                                                infs__device_bert_encode,
	                                                infs__device_bert_encode_host,
	                                                &infs__dengine_cuda };
const infs__device_backend *const infs__cuda = &cuda_backend;


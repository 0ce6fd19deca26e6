/* Each namespace's embeddings in the store's device copy (infs__dev_ns):
 * rows appended as facts are put, flagged dead as they are deleted, the
 * arrays grown by doubling within the device budget (fact KV makes way,
 * device_tiers.c) and compacted once half their rows are dead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device_copy.h"
#include "cuda/named_list.h"
#include "rows_kernels.h"
#include "util/dtype.h"
#include "util/error.h"

static int over_budget(const infs__device *d, uint64_t more, const char *fn, const char *what)
{
	return infs__error(INFS_EBUDGET,
	                   "%s: the store's device budget of %llu bytes is exceeded: %s needs %llu more bytes, "
	                   "%llu are in use by retrieval rows (fact KV was evicted to make room)",
	                   fn, (unsigned long long)d->budget, what, (unsigned long long)more,
	                   (unsigned long long)d->rows);
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

INFS__NAMED_GET(infs__rows_get, infs__device_ns, infs__dev_ns, infs__device, ns)

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
 * KV pointers are set by infs__rows_set_kv once the records are in the pool. */
int infs__rows_append(infs__device *d, infs__dev_ns *p, const float *emb, const uint64_t *ids, uint32_t n,
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
int infs__rows_set_kv(infs__dev_ns *p, uint32_t row, const char *const *kv, const uint32_t *ntok, uint32_t n,
                     const char *fn)
{
	cudaError_t err = cudaMemcpy(p->kv + row, kv, (size_t)n * sizeof *kv, cudaMemcpyHostToDevice);
	if (err == cudaSuccess)
		err = cudaMemcpy(p->ntok + row, ntok, (size_t)n * 4, cudaMemcpyHostToDevice);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "copying where the facts' KV lies");
}

void infs__rows_unlink(infs__device *d, infs__dev_ns *p)
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

void infs__rows_drop(infs__device *d, infs__dev_ns *p, uint32_t row)
{
	uint32_t w = row / 32;
	p->host_dead[w] |= 1u << (row % 32);
	p->n_dead++;
	if (p->n_dead == p->n_rows) {
		infs__rows_unlink(d, p);
		return;
	}
	if (p->n_rows >= COMPACT_MIN_ROWS && 2 * p->n_dead >= p->n_rows &&
	    ns_compact(d, p, "infs_fact_delete") == INFS_OK)
		return;
	/* Searches and injections by device ids skip the rows flagged here; a
	 * failed copy (the device failing) leaves this one live to them. */
	cudaMemcpy(p->dead + w, &p->host_dead[w], 4, cudaMemcpyHostToDevice);
}

/* The store's in-memory index: a hash map from fact id to the record's place
 * in the file, and per namespace the sorted ids and the dense embedding
 * matrix that retrieval scans. */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "store/store_impl.h"

static size_t slot_of(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

void infs__index_init(infs__index *ix, uint32_t embed_dim)
{
	memset(ix, 0, sizeof *ix);
	ix->embed_dim = embed_dim;
}

static void ns_free(infs__ns *ns)
{
	if (!ns)
		return;
	free(ns->name);
	free(ns->ids);
	free(ns->fact_ids);
	free(ns->emb);
	free(ns);
}

void infs__index_free(infs__index *ix)
{
	for (size_t i = 0; i < ix->n_ns; i++)
		ns_free(ix->ns[i]);
	free(ix->ns);
	free(ix->slots);
	memset(ix, 0, sizeof *ix);
}

/* The position of name in the sorted namespace array, or where it belongs. */
static size_t ns_search(const infs__index *ix, const char *name, bool *found)
{
	size_t lo = 0, hi = ix->n_ns;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ix->ns[mid]->name, name);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

infs__ns *infs__index_ns(const infs__index *ix, const char *name)
{
	bool found;
	size_t i = ns_search(ix, name, &found);
	return found ? ix->ns[i] : NULL;
}

infs__entry *infs__index_get(const infs__index *ix, uint64_t id)
{
	if (!ix->cap || id == 0)
		return NULL;
	for (size_t i = slot_of(id, ix->cap);; i = (i + 1) & (ix->cap - 1)) {
		if (ix->slots[i].id == id)
			return &ix->slots[i];
		if (ix->slots[i].id == 0)
			return NULL;
	}
}

static void hash_insert(infs__entry *slots, size_t cap, const infs__entry *e)
{
	size_t i = slot_of(e->id, cap);
	while (slots[i].id)
		i = (i + 1) & (cap - 1);
	slots[i] = *e;
}

/* Keeps the load factor at or below 1/2. */
static int hash_reserve(infs__index *ix, size_t n)
{
	if (n * 2 <= ix->cap)
		return INFS_OK;
	size_t cap = ix->cap ? ix->cap : 64;
	while (n * 2 > cap)
		cap *= 2;
	infs__entry *slots = calloc(cap, sizeof *slots);
	if (!slots)
		return infs__error(INFS_ENOMEM, "store index: out of memory for %zu records", n);
	for (size_t i = 0; i < ix->cap; i++)
		if (ix->slots[i].id)
			hash_insert(slots, cap, &ix->slots[i]);
	free(ix->slots);
	ix->slots = slots;
	ix->cap = cap;
	return INFS_OK;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return INFS_OK;
	size_t c = *cap ? *cap : 1;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return infs__error(INFS_ENOMEM, "store index: out of memory");
	*p = q;
	*cap = c;
	return INFS_OK;
}

/* fact_ids and emb share cap_facts, so they grow together. Arrays start at
 * one element and double: a store of many users with a few facts each
 * wastes at most half of its embedding matrices. */
static int facts_reserve(infs__ns *ns, size_t need, uint32_t dim)
{
	if (need <= ns->cap_facts)
		return INFS_OK;
	size_t c = ns->cap_facts ? ns->cap_facts : 1;
	while (c < need)
		c *= 2;
	uint64_t *ids = realloc(ns->fact_ids, c * sizeof *ids);
	if (!ids)
		return infs__error(INFS_ENOMEM, "store index: out of memory");
	ns->fact_ids = ids;
	if (dim) {
		float *emb = realloc(ns->emb, c * dim * sizeof *emb);
		if (!emb)
			return infs__error(INFS_ENOMEM, "store index: out of memory for the embedding matrix");
		ns->emb = emb;
	}
	ns->cap_facts = c;
	return INFS_OK;
}

int infs__index_reserve(infs__ns **out, infs__index *ix, const char *name)
{
	int rc = hash_reserve(ix, ix->n + 1);
	if (rc)
		return rc;
	bool found;
	size_t pos = ns_search(ix, name, &found);
	infs__ns *ns;
	if (found) {
		ns = ix->ns[pos];
	} else {
		if ((rc = grow((void **)&ix->ns, &ix->cap_ns, ix->n_ns + 1, sizeof *ix->ns)))
			return rc;
		ns = calloc(1, sizeof *ns);
		if (!ns || !(ns->name = strdup(name))) {
			free(ns);
			return infs__error(INFS_ENOMEM, "store index: out of memory");
		}
		ns->erase_len = INFS__REC_HEAD + infs__ns_body_len(INFS__DELETE_FIXED, strlen(name));
		memmove(ix->ns + pos + 1, ix->ns + pos, (ix->n_ns - pos) * sizeof *ix->ns);
		ix->ns[pos] = ns;
		ix->n_ns++;
	}
	if ((rc = grow((void **)&ns->ids, &ns->cap_ids, ns->n_ids + 1, sizeof *ns->ids)) ||
	    (rc = facts_reserve(ns, ns->n_facts + 1, ix->embed_dim))) {
		infs__index_prune(ix, ns);
		return rc;
	}
	*out = ns;
	return INFS_OK;
}

static size_t id_search(const uint64_t *ids, size_t n, uint64_t id);

/* Where id goes in the increasing array ids of n: at the end, except for
 * a fact the remote tier brought in after newer ones (store.h). */
static size_t id_place(const uint64_t *ids, size_t n, uint64_t id)
{
	return n == 0 || ids[n - 1] < id ? n : id_search(ids, n, id);
}

float *infs__index_add(infs__index *ix, infs__ns *ns, uint64_t id, uint64_t off, uint64_t len, unsigned flags,
                       uint32_t n_tokens)
{
	infs__entry e = { id, off, len, ns, flags };
	hash_insert(ix->slots, ix->cap, &e);
	ix->n++;
	ix->live_bytes += len;
	ix->erase_bytes += ns->erase_len;
	size_t at = id_place(ns->ids, ns->n_ids, id);
	memmove(ns->ids + at + 1, ns->ids + at, (ns->n_ids - at) * sizeof *ns->ids);
	ns->ids[at] = id;
	ns->n_ids++;
	ns->generation = ++ix->generation;
	if (flags & INFS_FACT_SEGMENT) {
		ix->n_segments++;
		return NULL;
	}
	ix->n_facts++;
	if (n_tokens > ns->max_tokens)
		ns->max_tokens = n_tokens;
	size_t dim = ix->embed_dim;
	at = id_place(ns->fact_ids, ns->n_facts, id);
	memmove(ns->fact_ids + at + 1, ns->fact_ids + at, (ns->n_facts - at) * sizeof *ns->fact_ids);
	ns->fact_ids[at] = id;
	if (dim)
		memmove(ns->emb + (at + 1) * dim, ns->emb + at * dim, (ns->n_facts - at) * dim * sizeof *ns->emb);
	float *row = dim ? ns->emb + at * dim : NULL;
	ns->n_facts++;
	return row;
}

static size_t id_search(const uint64_t *ids, size_t n, uint64_t id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void hash_delete(infs__index *ix, infs__entry *e)
{
	size_t mask = ix->cap - 1, i = (size_t)(e - ix->slots), j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (ix->slots[j].id == 0)
			break;
		size_t home = slot_of(ix->slots[j].id, ix->cap);
		/* slots[j] may move to i when i lies cyclically in [home, j). */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			ix->slots[i] = ix->slots[j];
			i = j;
		}
	}
	ix->slots[i].id = 0;
	ix->n--;
}

void infs__index_remove(infs__index *ix, uint64_t id)
{
	infs__entry *e = infs__index_get(ix, id);
	if (!e)
		return;
	infs__ns *ns = e->ns;
	size_t i = id_search(ns->ids, ns->n_ids, id);
	memmove(ns->ids + i, ns->ids + i + 1, (ns->n_ids - i - 1) * sizeof *ns->ids);
	ns->n_ids--;
	if (e->flags & INFS_FACT_SEGMENT) {
		ix->n_segments--;
	} else {
		size_t dim = ix->embed_dim;
		i = id_search(ns->fact_ids, ns->n_facts, id);
		memmove(ns->fact_ids + i, ns->fact_ids + i + 1, (ns->n_facts - i - 1) * sizeof *ns->fact_ids);
		if (dim)
			memmove(ns->emb + i * dim, ns->emb + (i + 1) * dim, (ns->n_facts - i - 1) * dim * sizeof *ns->emb);
		ns->n_facts--;
		ix->n_facts--;
	}
	ix->live_bytes -= e->len;
	ix->erase_bytes -= ns->erase_len;
	ns->generation = ++ix->generation;
	hash_delete(ix, e);
	infs__index_prune(ix, ns);
}

void infs__index_drop(infs__index *ix, infs__ns *ns)
{
	for (size_t i = 0; i < ns->n_ids; i++) {
		infs__entry *e = infs__index_get(ix, ns->ids[i]);
		if (e->flags & INFS_FACT_SEGMENT)
			ix->n_segments--;
		else
			ix->n_facts--;
		ix->live_bytes -= e->len;
		hash_delete(ix, e);
	}
	ix->erase_bytes -= ns->n_ids * ns->erase_len;
	ns->n_ids = ns->n_facts = 0;
	infs__index_prune(ix, ns);
}

void infs__index_prune(infs__index *ix, infs__ns *ns)
{
	if (ns->n_ids)
		return;
	bool found;
	size_t pos = ns_search(ix, ns->name, &found);
	if (!found)
		return;
	memmove(ix->ns + pos, ix->ns + pos + 1, (ix->n_ns - pos - 1) * sizeof *ix->ns);
	ix->n_ns--;
	ns_free(ns);
}

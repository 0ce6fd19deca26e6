/* The store's public API (put, get, delete, count, list, namespaces, stats)
 * and the internal interface retrieval, injection and the device copy use. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/options.h"
#include "store/store_impl.h"

void infs__store_read_lock(infs_store *s)
{
	pthread_rwlock_rdlock(&s->lock);
}

void infs__store_read_unlock(infs_store *s)
{
	pthread_rwlock_unlock(&s->lock);
}

void infs__store_write_lock(infs_store *s)
{
	pthread_rwlock_wrlock(&s->lock);
}

void infs__store_write_unlock(infs_store *s)
{
	pthread_rwlock_unlock(&s->lock);
}

const infs_geometry *infs__store_geom(const infs_store *s)
{
	return &s->geom;
}

struct infs__store_ext *infs__store_ext(infs_store *s, infs__ext_slot slot)
{
	return (unsigned)slot < INFS_EXT_COUNT ? &s->ext[slot] : NULL;
}

uint64_t infs__store_serial(const infs_store *s)
{
	return s->serial;
}

const char *infs__store_path(const infs_store *s)
{
	return s->path;
}

const infs_store_options *infs__store_opts(const infs_store *s)
{
	return &s->opts;
}

/* The one message for an id that does not exist, was deleted, or lives in
 * another namespace, so that callers cannot probe other namespaces. */
static int not_found(const char *ns, uint64_t id)
{
	return infs__error(INFS_ENOTFOUND, "no fact %llu in namespace \"%s\"", (unsigned long long)id, ns);
}

/* The live entry of id in namespace ns, or NULL. */
static const infs__entry *entry_in(const infs_store *s, const char *ns, uint64_t id)
{
	const infs__entry *e = infs__index_get(&s->ix, id);
	return e && strcmp(e->ns->name, ns) == 0 ? e : NULL;
}

int infs__store_find(infs__record *out, infs_store *s, const char *ns, uint64_t id)
{
	int rc = infs__check_namespace(ns);
	if (rc)
		return rc;
	const infs__entry *e = entry_in(s, ns, id);
	if (!e)
		return not_found(ns, id);
	infs__record_at(out, s, e->off);
	return INFS_OK;
}

int infs__store_ns_matrix(const float **emb, const uint64_t **ids, size_t *n, uint64_t *generation,
                          infs_store *s, const char *ns)
{
	int rc = infs__check_namespace(ns);
	if (rc)
		return rc;
	const infs__ns *p = infs__index_ns(&s->ix, ns);
	*emb = p ? p->emb : NULL;
	*ids = p ? p->fact_ids : NULL;
	*n = p ? p->n_facts : 0;
	*generation = p ? p->generation : 0;
	return INFS_OK;
}

int infs__store_ns_bound(size_t *n_facts, uint32_t *max_tokens, infs_store *s, const char *ns)
{
	int rc = infs__check_namespace(ns);
	if (rc)
		return rc;
	const infs__ns *p = infs__index_ns(&s->ix, ns);
	*n_facts = p ? p->n_facts : 0;
	*max_tokens = p ? p->max_tokens : 0;
	return INFS_OK;
}

#define CHECK_STORE(fn, s)                                                  \
	do {                                                                \
		if (!(s))                                                   \
			return infs__error(INFS_EINVAL, fn ": store is NULL"); \
	} while (0)

#define CHECK_NS(fn, ns)                                        \
	do {                                                    \
		int ns_rc_ = infs__check_namespace(ns);         \
		if (ns_rc_)                                     \
			return infs__error_wrap(ns_rc_, fn);    \
	} while (0)

/* Names under INFS_RESERVED_PREFIX are written by the library only. */
#define CHECK_NOT_RESERVED(fn, ns)                                                              \
	do {                                                                                    \
		if (infs__namespace_reserved(ns))                                               \
			return infs__error(INFS_EINVAL, fn ": namespace \"%s\" is reserved (names " \
			                   "starting with \"" INFS_RESERVED_PREFIX "\" belong to the library)", ns); \
	} while (0)

#define CHECK_WRITABLE(fn, s)                                                                       \
	do {                                                                                        \
		if ((s)->readonly)                                                                  \
			return infs__error(INFS_EREADONLY, fn ": %s was opened read-only", (s)->path); \
	} while (0)

/* The extensions' hooks (store.h), called under the write lock. A put
 * that one refuses is taken back out of those that took it. */
int infs__ext_put(infs_store *s, const char *ns, const infs__record *r)
{
	for (int i = 0; i < INFS_EXT_COUNT; i++) {
		const struct infs__store_ext *x = &s->ext[i];
		int rc = x->data && x->on_put ? x->on_put(x->data, ns, r) : INFS_OK;
		if (rc) {
			while (i-- > 0)
				if (s->ext[i].data && s->ext[i].on_put && s->ext[i].on_delete)
					s->ext[i].on_delete(s->ext[i].data, r->id);
			return rc;
		}
	}
	return INFS_OK;
}

void infs__ext_delete(infs_store *s, uint64_t id)
{
	for (int i = 0; i < INFS_EXT_COUNT; i++)
		if (s->ext[i].data && s->ext[i].on_delete)
			s->ext[i].on_delete(s->ext[i].data, id);
}

/* The remote tier's slot when the store has one (store.h), else NULL. */
static const struct infs__store_ext *remote_of(const infs_store *s)
{
	const struct infs__store_ext *x = &s->ext[INFS_EXT_REMOTE];
	return x->data ? x : NULL;
}

int infs__store_use(infs_store *s, const char *ns)
{
	const struct infs__store_ext *rx = remote_of(s);
	return rx ? rx->use(rx->data, ns, false) : INFS_OK;
}

bool infs__namespace_reserved(const char *ns)
{
	return strncmp(ns, INFS_RESERVED_PREFIX, sizeof INFS_RESERVED_PREFIX - 1) == 0;
}

int infs_fact_put(uint64_t *out_id, infs_store *s, const char *ns, const infs_fact *f)
{
	CHECK_NS("infs_fact_put", ns);
	CHECK_NOT_RESERVED("infs_fact_put", ns);
	return infs__fact_put(out_id, s, ns, f);
}

int infs__fact_put(uint64_t *out_id, infs_store *s, const char *ns, const infs_fact *f)
{
	if (!out_id)
		return infs__error(INFS_EINVAL, "infs_fact_put: out_id is NULL");
	CHECK_STORE("infs_fact_put", s);
	CHECK_NS("infs_fact_put", ns);
	size_t text_len, meta_len;
	infs_fact fact;
	int rc = infs__check_fact(&fact, f, &s->geom, &text_len, &meta_len);
	if (rc)
		return infs__error_wrap(rc, "infs_fact_put");
	f = &fact;
	CHECK_WRITABLE("infs_fact_put", s);

	bool segment = f->flags & INFS_FACT_SEGMENT;
	infs__put_fields p = { .flags = f->flags, .n_tokens = f->n_tokens, .source_id = f->source_id,
		               .timestamp = f->timestamp, .ns_len = (uint32_t)strlen(ns),
		               .embed_n = segment ? 0 : s->geom.embed_dim, .text_len = (uint32_t)text_len,
		               .meta_len = (uint32_t)meta_len };
	unsigned char fixed[INFS__PUT_FIXED];
	struct iovec iov[1 + INFS__PUT_IOV];

	const struct infs__store_ext *rx = remote_of(s);
	if (rx)
		rx->writer(rx->data, true);
	pthread_rwlock_wrlock(&s->lock);
	/* The id is known only under the lock (from the server, with a remote
	 * tier); the body points at the caller's arrays, so building it
	 * copies nothing. */
	uint64_t off = s->end;
	p.id = s->next_id;
	infs__ns *nsp;
	if (rx && (rc = rx->take_id(rx->data, s->next_id, &p.id)))
		goto out;
	int n = 1 + infs__put_encode(iov + 1, fixed, &p, ns, f, s->kv_token_bytes);
	if (p.id == UINT64_MAX) {
		rc = infs__error(INFS_ERANGE, "infs_fact_put: %s has used up its fact ids", s->path);
		goto out;
	}
	if ((rc = infs__index_reserve(&nsp, &s->ix, ns))) {
		rc = infs__error_wrap(rc, "infs_fact_put");
		goto out;
	}
	/* The extensions go first: when one refuses the fact (the device
	 * copy's budget), nothing has been written. */
	infs__record r = { p.id, f->flags, f->n_tokens, f->tokens, segment ? NULL : f->embedding, f->k, f->v,
		           f->text ? f->text : "", f->metadata ? f->metadata : "", f->source_id, f->timestamp };
	if ((rc = infs__ext_put(s, ns, &r))) {
		infs__index_prune(&s->ix, nsp);
		goto out;
	}
	/* The server acknowledges the record before the file takes it: the
	 * put is acknowledged only once both hold it. */
	unsigned char head[INFS__REC_HEAD];
	if (rx) {
		infs__head_encode(head, INFS__REC_PUT, iov + 1, n - 1);
		iov[0] = (struct iovec){ head, sizeof head };
		if ((rc = rx->put_value(rx->data, ns, p.id, iov, n))) {
			infs__ext_delete(s, p.id);
			infs__index_prune(&s->ix, nsp);
			goto out;
		}
	}
	if ((rc = infs__append(s, INFS__REC_PUT, iov, n, infs__reserve_after_put(s, nsp), "infs_fact_put"))) {
		infs__ext_delete(s, p.id);
		if (rx)
			rx->undo_put(rx->data, ns, p.id);
		infs__index_prune(&s->ix, nsp);
		goto out;
	}
	float *row = infs__index_add(&s->ix, nsp, p.id, off, s->end - off, f->flags, f->n_tokens);
	if (row)
		memcpy(row, f->embedding, (size_t)p.embed_n * sizeof *row);
	s->next_id = p.id + 1;
	*out_id = p.id;
out:
	pthread_rwlock_unlock(&s->lock);
	if (rx)
		rx->writer(rx->data, false);
	return rc;
}

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

int infs_fact_get(infs_fact_record **out, infs_store *s, const char *ns, uint64_t id)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_fact_get: out is NULL");
	*out = NULL;
	CHECK_STORE("infs_fact_get", s);
	CHECK_NS("infs_fact_get", ns);
	int rc = infs__store_use(s, ns);
	if (rc)
		return infs__error_wrap(rc, "infs_fact_get");
	pthread_rwlock_rdlock(&s->lock);
	infs__record r;
	rc = infs__store_find(&r, s, ns, id);
	const infs__entry *e = rc ? NULL : entry_in(s, ns, id);
	/* The file may have been changed under the handle since open checked
	 * it; the copy is made anyway, so check it first. */
	if (e && !infs__record_sound(s, e->off, e->len))
		rc = infs__error(INFS_ECORRUPT, "%s: the record of fact %llu at offset %llu no longer matches its checksum",
		                 s->path, (unsigned long long)id, (unsigned long long)e->off);
	if (rc) {
		pthread_rwlock_unlock(&s->lock);
		return infs__error_wrap(rc, "infs_fact_get");
	}
	size_t tok = (size_t)r.n_tokens * 4, emb = r.embedding ? (size_t)s->geom.embed_dim * 4 : 0;
	size_t kv = s->kv_token_bytes * r.n_tokens, text = strlen(r.text) + 1, meta = strlen(r.metadata) + 1;
	size_t o_tok = align16(sizeof(infs_fact_record)), o_emb = o_tok + align16(tok), o_k = o_emb + align16(emb);
	size_t o_v = o_k + align16(kv), o_text = o_v + align16(kv), o_meta = o_text + text;
	unsigned char *p = malloc(o_meta + meta);
	if (!p) {
		pthread_rwlock_unlock(&s->lock);
		return infs__error(INFS_ENOMEM, "infs_fact_get: out of memory for a %zu-byte record", o_meta + meta);
	}
	infs_fact_record *rec = (infs_fact_record *)(void *)p;
	memcpy(p + o_tok, r.tokens, tok);
	if (emb)
		memcpy(p + o_emb, r.embedding, emb);
	memcpy(p + o_k, r.k, kv);
	memcpy(p + o_v, r.v, kv);
	memcpy(p + o_text, r.text, text);
	memcpy(p + o_meta, r.metadata, meta);
	pthread_rwlock_unlock(&s->lock);
	rec->id = r.id;
	rec->flags = r.flags;
	rec->n_tokens = r.n_tokens;
	rec->tokens = (const int32_t *)(void *)(p + o_tok);
	rec->embedding = emb ? (const float *)(void *)(p + o_emb) : NULL;
	rec->k = p + o_k;
	rec->v = p + o_v;
	rec->text = (const char *)p + o_text;
	rec->metadata = (const char *)p + o_meta;
	rec->source_id = r.source_id;
	rec->timestamp = r.timestamp;
	*out = rec;
	return INFS_OK;
}

void infs_fact_record_free(infs_fact_record *record)
{
	free(record);
}

int infs_fact_delete(infs_store *s, const char *ns, uint64_t id)
{
	CHECK_STORE("infs_fact_delete", s);
	CHECK_NS("infs_fact_delete", ns);
	CHECK_NOT_RESERVED("infs_fact_delete", ns);
	CHECK_WRITABLE("infs_fact_delete", s);
	unsigned char fixed[INFS__DELETE_FIXED];
	struct iovec iov[1 + INFS__NS_IOV];
	infs__delete_encode(iov + 1, fixed, id, ns, (uint32_t)strlen(ns));
	int rc = infs__store_use(s, ns);
	if (rc)
		return infs__error_wrap(rc, "infs_fact_delete");

	const struct infs__store_ext *rx = remote_of(s);
	if (rx)
		rx->writer(rx->data, true);
	pthread_rwlock_wrlock(&s->lock);
	if (!entry_in(s, ns, id))
		rc = infs__error_wrap(not_found(ns, id), "infs_fact_delete");
	else if (!(rx && (rc = rx->erase(rx->data, ns, id))) &&
	         !(rc = infs__append(s, INFS__REC_DELETE, iov, 1 + INFS__NS_IOV, 0, "infs_fact_delete"))) {
		infs__index_remove(&s->ix, id);
		infs__ext_delete(s, id);
	}
	pthread_rwlock_unlock(&s->lock);
	if (rx)
		rx->writer(rx->data, false);
	return rc;
}

int infs_fact_count(uint64_t *out, infs_store *s, const char *ns)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_fact_count: out is NULL");
	CHECK_STORE("infs_fact_count", s);
	CHECK_NS("infs_fact_count", ns);
	int rc = infs__store_use(s, ns);
	if (rc)
		return infs__error_wrap(rc, "infs_fact_count");
	pthread_rwlock_rdlock(&s->lock);
	const infs__ns *p = infs__index_ns(&s->ix, ns);
	*out = p ? p->n_ids : 0;
	pthread_rwlock_unlock(&s->lock);
	return INFS_OK;
}

int infs_namespace_generation(uint64_t *out, infs_store *s, const char *ns)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_namespace_generation: out is NULL");
	CHECK_STORE("infs_namespace_generation", s);
	CHECK_NS("infs_namespace_generation", ns);
	int rc = infs__store_use(s, ns);
	if (rc)
		return infs__error_wrap(rc, "infs_namespace_generation");
	pthread_rwlock_rdlock(&s->lock);
	const infs__ns *p = infs__index_ns(&s->ix, ns);
	*out = p ? p->generation : 0;
	pthread_rwlock_unlock(&s->lock);
	return INFS_OK;
}

/* The slot that keeps tiers of fact KV, or NULL (a store without a device
 * copy has one tier: its file). */
static const struct infs__store_ext *tiers_of(infs_store *s)
{
	for (int i = 0; i < INFS_EXT_COUNT; i++)
		if (s->ext[i].data && s->ext[i].tier)
			return &s->ext[i];
	return NULL;
}

int infs_prefetch(infs_store *s, const char *ns)
{
	CHECK_STORE("infs_prefetch", s);
	CHECK_NS("infs_prefetch", ns);
	/* The remote tier first: the namespace, as the server holds it now,
	 * into the file, and then up the local tiers. */
	const struct infs__store_ext *rx = remote_of(s);
	int rc = rx ? rx->use(rx->data, ns, true) : INFS_OK;
	if (rc)
		return infs__error_wrap(rc, "infs_prefetch");
	const struct infs__store_ext *x = tiers_of(s);
	return x ? x->prefetch(x->data, ns) : INFS_OK;
}

int infs_namespace_tier(infs_tier *out, infs_store *s, const char *ns)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_namespace_tier: out is NULL");
	CHECK_STORE("infs_namespace_tier", s);
	CHECK_NS("infs_namespace_tier", ns);
	const struct infs__store_ext *x = tiers_of(s);
	if (!x) {
		*out = INFS_TIER_FILE;
		return INFS_OK;
	}
	pthread_rwlock_rdlock(&s->lock);
	*out = (infs_tier)x->tier(x->data, ns);
	pthread_rwlock_unlock(&s->lock);
	return INFS_OK;
}

int infs_tier_wait(infs_store *s)
{
	CHECK_STORE("infs_tier_wait", s);
	const struct infs__store_ext *x = tiers_of(s);
	return x ? x->wait(x->data) : INFS_OK;
}

int infs_fact_list(uint64_t **out_ids, size_t *out_n, infs_store *s, const char *ns)
{
	if (!out_ids || !out_n)
		return infs__error(INFS_EINVAL, "infs_fact_list: %s is NULL", out_ids ? "out_n" : "out_ids");
	*out_ids = NULL;
	*out_n = 0;
	CHECK_STORE("infs_fact_list", s);
	CHECK_NS("infs_fact_list", ns);
	int rc = infs__store_use(s, ns);
	if (rc)
		return infs__error_wrap(rc, "infs_fact_list");
	pthread_rwlock_rdlock(&s->lock);
	const infs__ns *p = infs__index_ns(&s->ix, ns);
	if (p) {
		uint64_t *ids = malloc(p->n_ids * sizeof *ids);
		if (ids) {
			memcpy(ids, p->ids, p->n_ids * sizeof *ids);
			*out_ids = ids;
			*out_n = p->n_ids;
		} else {
			rc = infs__error(INFS_ENOMEM, "infs_fact_list: out of memory for %zu ids", p->n_ids);
		}
	}
	pthread_rwlock_unlock(&s->lock);
	return rc;
}

int infs_namespace_list(char ***out_names, size_t *out_n, infs_store *s)
{
	if (!out_names || !out_n)
		return infs__error(INFS_EINVAL, "infs_namespace_list: %s is NULL", out_names ? "out_n" : "out_names");
	*out_names = NULL;
	*out_n = 0;
	CHECK_STORE("infs_namespace_list", s);
	pthread_rwlock_rdlock(&s->lock);
	size_t n = s->ix.n_ns, bytes = n * sizeof(char *);
	for (size_t i = 0; i < n; i++)
		bytes += strlen(s->ix.ns[i]->name) + 1;
	int rc = INFS_OK;
	char **names = n ? malloc(bytes) : NULL;
	if (names) {
		char *str = (char *)(names + n);
		for (size_t i = 0; i < n; i++) {
			size_t len = strlen(s->ix.ns[i]->name) + 1;
			memcpy(str, s->ix.ns[i]->name, len);
			names[i] = str;
			str += len;
		}
		*out_names = names;
		*out_n = n;
	} else if (n) {
		rc = infs__error(INFS_ENOMEM, "infs_namespace_list: out of memory");
	}
	pthread_rwlock_unlock(&s->lock);
	return rc;
}

int infs_namespace_drop(infs_store *s, const char *ns)
{
	CHECK_STORE("infs_namespace_drop", s);
	CHECK_NS("infs_namespace_drop", ns);
	CHECK_NOT_RESERVED("infs_namespace_drop", ns);
	CHECK_WRITABLE("infs_namespace_drop", s);
	unsigned char fixed[INFS__DROP_FIXED];
	struct iovec iov[1 + INFS__NS_IOV];
	infs__drop_encode(iov + 1, fixed, ns, (uint32_t)strlen(ns));

	const struct infs__store_ext *rx = remote_of(s);
	if (rx)
		rx->writer(rx->data, true);
	pthread_rwlock_wrlock(&s->lock);
	/* The server drops it even when this file never cached it. */
	int rc = rx ? rx->erase(rx->data, ns, 0) : INFS_OK;
	infs__ns *p = rc ? NULL : infs__index_ns(&s->ix, ns);
	/* Dropping a namespace with no records writes nothing. */
	if (p && !(rc = infs__append(s, INFS__REC_DROP, iov, 1 + INFS__NS_IOV, 0, "infs_namespace_drop"))) {
		for (size_t i = 0; i < p->n_ids; i++)
			infs__ext_delete(s, p->ids[i]);
		infs__index_drop(&s->ix, p);
	}
	pthread_rwlock_unlock(&s->lock);
	if (rx)
		rx->writer(rx->data, false);
	return rc;
}

int infs_store_stats_get(infs_store_stats *out, infs_store *s)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_store_stats_get: out is NULL");
	size_t size = 0;
	int rc = INFS__OUT_SIZE(&size, out, infs__sizes_store_stats, "infs_store_stats_get");
	if (rc)
		return rc;
	CHECK_STORE("infs_store_stats_get", s);
	infs_store_stats st = { .version = out->version };
	pthread_rwlock_rdlock(&s->lock);
	st.n_facts = s->ix.n_facts;
	st.n_segments = s->ix.n_segments;
	st.n_namespaces = s->ix.n_ns;
	st.file_bytes = s->end;
	st.live_bytes = s->ix.live_bytes;
	st.dropped_tail_bytes = s->dropped_tail;
	for (int i = 0; i < INFS_EXT_COUNT; i++)
		if (s->ext[i].data && s->ext[i].bytes)
			st.device_bytes += s->ext[i].bytes(s->ext[i].data);
	st.lost_records = s->lost;
	st.torn_bytes = s->torn_bytes;
	st.torn_records = s->torn_records;
	for (int i = 0; i < INFS_EXT_COUNT; i++)
		if (s->ext[i].data && s->ext[i].stats)
			s->ext[i].stats(s->ext[i].data, &st);
	pthread_rwlock_unlock(&s->lock);
	memcpy(out, &st, size);
	return INFS_OK;
}

int infs_store_geometry(infs_geometry *out, const infs_store *s)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_store_geometry: out is NULL");
	CHECK_STORE("infs_store_geometry", s);
	*out = s->geom;
	return INFS_OK;
}

const char *infs_store_identity(const infs_store *s)
{
	if (!s) {
		infs__error(INFS_EINVAL, "infs_store_identity: store is NULL");
		return NULL;
	}
	return s->identity;
}

int infs_store_sync(infs_store *s)
{
	CHECK_STORE("infs_store_sync", s);
	if (s->readonly)
		return INFS_OK;
	pthread_rwlock_rdlock(&s->lock);
	int rc = INFS_OK;
	if (fdatasync(s->fd) != 0)
		rc = infs__error(INFS_EIO, "infs_store_sync: %s: %s", s->path, strerror(errno));
	pthread_rwlock_unlock(&s->lock);
	return rc;
}

int infs_store_verify(infs_store *s, uint64_t *bad_offset, uint64_t *bad_id)
{
	uint64_t off = 0, id = 0;
	if (bad_offset)
		*bad_offset = 0;
	if (bad_id)
		*bad_id = 0;
	CHECK_STORE("infs_store_verify", s);
	pthread_rwlock_rdlock(&s->lock);
	int rc = infs__store_verify(s, &off);
	const infs__entry *e = NULL;
	for (size_t i = 0; rc == INFS_ECORRUPT && off && !e && i < s->ix.cap; i++)
		if (s->ix.slots[i].id && s->ix.slots[i].off == off)
			e = &s->ix.slots[i];
	if (e) {
		id = e->id;
		rc = infs__error_wrap(rc, "infs_store_verify: fact %llu of namespace \"%s\"", (unsigned long long)id,
		                      e->ns->name);
	} else if (rc) {
		rc = infs__error_wrap(rc, "infs_store_verify");
	}
	pthread_rwlock_unlock(&s->lock);
	if (bad_offset)
		*bad_offset = off;
	if (bad_id)
		*bad_id = id;
	return rc;
}

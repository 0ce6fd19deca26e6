/* What the store takes from its remote tier: a namespace as the server
 * holds it, installed into the file after every value is checked, and the
 * header value that binds a server's keys to one geometry and identity. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/crc32c.h"
#include "util/error.h"
#include "store/store_impl.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static bool in_sorted(const uint64_t *ids, size_t n, uint64_t id)
{
	return n && bsearch(&id, ids, n, sizeof *ids, cmp_u64) != NULL;
}

int infs__store_missing(uint64_t **out, size_t *n_out, infs_store *s, const char *ns, const uint64_t *remote,
                        size_t n_remote)
{
	*out = NULL;
	*n_out = 0;
	uint64_t *miss = n_remote ? malloc(n_remote * sizeof *miss) : NULL;
	if (n_remote && !miss)
		return infs__error(INFS_ENOMEM, "out of memory for %zu fact ids of namespace \"%s\"", n_remote, ns);
	size_t n = 0;
	infs__store_read_lock(s);
	for (size_t i = 0; i < n_remote; i++) {
		const infs__entry *e = infs__index_get(&s->ix, remote[i]);
		if (!e || strcmp(e->ns->name, ns) != 0)
			miss[n++] = remote[i];
	}
	infs__store_read_unlock(s);
	if (n == 0) {
		free(miss);
		miss = NULL;
	}
	*out = miss;
	*n_out = n;
	return INFS_OK;
}

/* Checks that value (len bytes) is a sound put record of fact want in
 * namespace ns that fits the store's geometry. */
uint32_t infs__store_value_crc(const unsigned char *v, size_t len)
{
	return len > INFS__REC_HEAD ? infs__crc32c(0, v + INFS__REC_HEAD, len - INFS__REC_HEAD) : 0;
}

/* crc, when not NULL, is the body's checksum taken by the caller. */
static int check_value(const infs_store *s, const char *ns, uint64_t want, const unsigned char *v, size_t len,
                       const char *server, const uint32_t *crc)
{
	const char *why = NULL;
	infs__rec_head h;
	infs__put_fields p;
	infs__put_layout l;
	size_t ns_len = strlen(ns);
	if (len < INFS__REC_HEAD || !infs__head_decode(&h, v))
		why = "it is not a record of this library (its head fails its checksum)";
	else if (h.type != INFS__REC_PUT)
		why = "it is not a fact";
	else if (h.body_len != len - INFS__REC_HEAD || h.body_len < INFS__PUT_FIXED)
		why = "its length does not match its head";
	else if ((crc ? *crc : infs__crc32c(0, v + INFS__REC_HEAD, h.body_len)) != h.body_crc)
		why = "its body fails its checksum";
	if (!why) {
		const unsigned char *b = v + INFS__REC_HEAD;
		infs__put_decode(&p, b);
		infs__put_layout_of(&l, &p, s->kv_token_bytes);
		if (p.id != want)
			why = "it holds another fact id";
		else if (p.ns_len != ns_len || memcmp(b + l.ns, ns, ns_len + 1) != 0)
			why = "it belongs to another namespace";
		else if ((p.flags & ~(unsigned)INFS_FACT_SEGMENT) || p.n_tokens == 0 ||
		         p.n_tokens > INFS_FACT_TOKENS_MAX || p.text_len >= INFS_TEXT_MAX ||
		         p.meta_len >= INFS_METADATA_MAX ||
		         p.embed_n != (p.flags & INFS_FACT_SEGMENT ? 0 : s->geom.embed_dim) || l.end != h.body_len)
			why = "its sizes do not match this store's geometry";
		else if (b[l.text + p.text_len] || b[l.meta + p.meta_len])
			why = "its text or metadata is not terminated";
	}
	if (why)
		return infs__error(INFS_ECORRUPT,
		                   "the value of fact %llu of namespace \"%s\" on %s is refused: %s; nothing was written "
		                   "to %s (drop the namespace on the server, or put the fact again)",
		                   (unsigned long long)want, ns, server, why, s->path);
	return INFS_OK;
}

/* Takes namespace ns back out of the file after a failed install, so that
 * it is never left half there: its next use installs it again. */
static void undo_install(infs_store *s, const char *ns)
{
	infs__ns *p = infs__index_ns(&s->ix, ns);
	if (!p)
		return;
	unsigned char fixed[INFS__DROP_FIXED];
	struct iovec iov[1 + INFS__NS_IOV];
	infs__drop_encode(iov + 1, fixed, ns, (uint32_t)strlen(ns));
	infs__append(s, INFS__REC_DROP, iov, 1 + INFS__NS_IOV, 0, "infs_prefetch");
	for (size_t i = 0; i < p->n_ids; i++)
		infs__ext_delete(s, p->ids[i]);
	infs__index_drop(&s->ix, p);
}

/* Books the record v (len bytes, written already at s->end) as fact of
 * namespace ns: the index, the extensions, the end. */
static int book_one(infs_store *s, const char *ns, const unsigned char *v, size_t len)
{
	infs__ns *nsp;
	int rc = infs__index_reserve(&nsp, &s->ix, ns);
	if (rc)
		return rc;
	infs__record r;
	infs__put_view(&r, v + INFS__REC_HEAD, s->kv_token_bytes);
	if ((rc = infs__ext_put(s, ns, &r))) {
		infs__index_prune(&s->ix, nsp);
		return rc;
	}
	float *row = infs__index_add(&s->ix, nsp, r.id, s->end, len, r.flags, r.n_tokens);
	if (row)
		memcpy(row, r.embedding, (size_t)s->geom.embed_dim * sizeof *row);
	s->end += len;
	s->n_records++;
	if (r.id >= s->next_id)
		s->next_id = r.id + 1;
	return INFS_OK;
}

/* Writes the values the file lacks, each the record it is (its head and
 * checksums checked already by check_value, so not summed again), in one
 * call, then books them and commits once. */
static int install_all(infs_store *s, const char *ns, const unsigned char *const *values, const size_t *values_len,
                       const uint64_t *want_ids, size_t n_values, uint64_t keep)
{
	struct iovec *iov = malloc((n_values ? n_values : 1) * sizeof *iov);
	if (!iov)
		return infs__error(INFS_ENOMEM, "infs_prefetch: out of memory for %zu values", n_values);
	int k = 0;
	for (size_t i = 0; i < n_values; i++)
		if (!infs__index_get(&s->ix, want_ids[i]))
			iov[k++] = (struct iovec){ (void *)values[i], values_len[i] };
	int rc = k ? infs__write_records(s, iov, k, keep, "infs_prefetch") : INFS_OK;
	for (int i = 0; !rc && i < k; i++)
		rc = book_one(s, ns, iov[i].iov_base, iov[i].iov_len);
	if (rc)
		infs__cut(s); /* the records not booked */
	else if (k)
		infs__commit(s);
	free(iov);
	return rc;
}

int infs__store_install(infs_store *s, const char *ns, const uint64_t *remote, size_t n_remote,
                        const unsigned char *const *values, const size_t *values_len, const uint64_t *want_ids,
                        size_t n_values, const char *server, const uint32_t *body_crcs)
{
	if (s->readonly)
		return infs__error(INFS_EREADONLY, "%s was opened read-only: it cannot cache namespace \"%s\" from %s",
		                   s->path, ns, server);
	for (size_t i = 0; i < n_values; i++) {
		int rc = check_value(s, ns, want_ids[i], values[i], values_len[i], server, body_crcs ? &body_crcs[i] : NULL);
		if (rc)
			return rc;
	}
	uint64_t *sorted = n_remote ? malloc(n_remote * sizeof *sorted) : NULL;
	if (n_remote && !sorted)
		return infs__error(INFS_ENOMEM, "out of memory for %zu fact ids of namespace \"%s\"", n_remote, ns);
	if (n_remote) {
		memcpy(sorted, remote, n_remote * sizeof *sorted);
		qsort(sorted, n_remote, sizeof *sorted, cmp_u64);
	}
	int rc = INFS_OK;
	infs__store_write_lock(s);
	/* An id live in another namespace of this file cannot be taken in. */
	for (size_t i = 0; i < n_values && !rc; i++) {
		const infs__entry *e = infs__index_get(&s->ix, want_ids[i]);
		if (e && strcmp(e->ns->name, ns) != 0)
			rc = infs__error(INFS_ECORRUPT,
			                 "fact %llu of namespace \"%s\" on %s is fact %llu of namespace \"%s\" in %s: the file "
			                 "caches another server or prefix (remove it, it is a cache)",
			                 (unsigned long long)want_ids[i], ns, server, (unsigned long long)want_ids[i],
			                 e->ns->name, s->path);
	}
	/* The facts the server no longer holds go first. */
	infs__ns *p = rc ? NULL : infs__index_ns(&s->ix, ns);
	for (size_t i = p ? p->n_ids : 0; i-- > 0 && !rc;) {
		uint64_t id = p->ids[i];
		if (in_sorted(sorted, n_remote, id))
			continue;
		unsigned char fixed[INFS__DELETE_FIXED];
		struct iovec iov[1 + INFS__NS_IOV];
		infs__delete_encode(iov + 1, fixed, id, ns, (uint32_t)strlen(ns));
		bool last = p->n_ids == 1; /* removing it frees p */
		if (!(rc = infs__append(s, INFS__REC_DELETE, iov, 1 + INFS__NS_IOV, 0, "infs_prefetch"))) {
			infs__index_remove(&s->ix, id);
			infs__ext_delete(s, id);
		}
		if (last)
			break;
	}
	/* One allocation and one sync for the namespace, not one per fact:
	 * the file is a cache, and a namespace cut short by a crash is made
	 * whole again on its next use. */
	uint64_t bytes = 0;
	for (size_t i = 0; i < n_values; i++)
		bytes += values_len[i];
	uint64_t keep = s->ix.erase_bytes + n_values * (INFS__REC_HEAD + infs__ns_body_len(INFS__DELETE_FIXED,
	                                                                                    strlen(ns))) + INFS__RESERVE;
	if (!rc && n_values && s->end + bytes + keep > s->reserved) {
		uint64_t got = infs__reserve_quietly(s->fd, s->end, bytes + keep);
		if (got > s->reserved)
			s->reserved = got;
	}
	if (!rc && n_values)
		rc = infs__map_reserve(s, s->end + bytes);
	infs_sync_mode sync = s->opts.sync;
	if (!rc)
		rc = install_all(s, ns, values, values_len, want_ids, n_values, keep);
	if (!rc && n_values && sync == INFS_SYNC_FULL && fdatasync(s->fd) != 0)
		rc = infs__error(INFS_EIO, "writing %s: %s", s->path, strerror(errno));
	if (rc) {
		undo_install(s, ns);
		rc = infs__error_wrap(rc, "caching namespace \"%s\" from %s in %s (the file holds none of it now)", ns,
		                      server, s->path);
	}
	infs__store_write_unlock(s);
	free(sorted);
	return rc;
}

int infs__store_header_value(unsigned char **out, size_t *len, const infs_store *s)
{
	unsigned char *buf = malloc(infs__header_len(strlen(s->identity)));
	if (!buf)
		return infs__error(INFS_ENOMEM, "out of memory for the store's header");
	*len = infs__header_encode(buf, &s->geom, s->identity, INFS__STORE_FORMAT);
	*out = buf;
	return INFS_OK;
}

int infs__header_value_decode(infs_geometry *g, char **identity, const unsigned char *buf, size_t len)
{
	*identity = NULL;
	uint32_t version, hlen, id_len;
	if (len < INFS__HEADER_FIXED + 8 || len > INFS__HEADER_MAX || memcmp(buf, INFS__STORE_MAGIC, 8) != 0)
		return infs__error(INFS_ECORRUPT, "it is not a store header of this library");
	infs__header_peek(&version, &hlen, buf);
	if (hlen != len || !infs__header_sound(buf, hlen))
		return infs__error(INFS_ECORRUPT, "the store header fails its checksum");
	infs__header_decode(g, &id_len, buf);
	if (id_len == 0 || id_len > INFS_IDENTITY_MAX || INFS__HEADER_FIXED + (uint64_t)id_len + 1 + 4 > len ||
	    buf[INFS__HEADER_FIXED + id_len] != '\0' || infs_geometry_validate(g) != INFS_OK)
		return infs__error(INFS_ECORRUPT, "the store header holds a bad geometry or identity");
	*identity = strndup((const char *)buf + INFS__HEADER_FIXED, id_len);
	if (!*identity)
		return infs__error(INFS_ENOMEM, "out of memory for the store's identity");
	return INFS_OK;
}

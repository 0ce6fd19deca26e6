/* The store's file: reading the header, the scan that verifies every
 * record at open, and appends. The byte layout is in store_record.c;
 * recovery rules are documented in docs/store-format.md. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/crc32c.h"
#include "util/error.h"
#include "store/store_impl.h"

#define SCAN_CHUNK (4u << 20) /* most records fit, so each is read once */

/* Reads exactly n bytes at off; -1 with errno on failure, errno 0 at EOF. */
static int read_full(int fd, void *buf, size_t n, uint64_t off)
{
	unsigned char *p = buf;
	while (n) {
		ssize_t r = pread(fd, p, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = 0;
			return -1;
		}
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int io_error(const char *path, const char *what)
{
	return infs__error(INFS_EIO, "%s: %s: %s", path, what, errno ? strerror(errno) : "unexpected end of file");
}

int infs__header_read(infs_geometry *g, char **identity, uint64_t *header_len, uint32_t *version_out, int fd,
                      uint64_t size, const char *path)
{
	unsigned char head[16];
	size_t have = size < sizeof head ? (size_t)size : sizeof head;
	if (have && read_full(fd, head, have, 0))
		return io_error(path, "reading the header");
	if (have < 8 || memcmp(head + INFS__HDR_MAGIC, INFS__STORE_MAGIC, 8) != 0)
		return infs__error(INFS_EFORMAT, "%s is not an inferscale store (no \"INFSTORE\" magic)", path);
	if (have < 16)
		return infs__error(INFS_ECORRUPT, "%s: the header is truncated (the file is %llu bytes)", path,
		                   (unsigned long long)size);
	uint32_t version, len;
	infs__header_peek(&version, &len, head);
	if (len < infs__header_len(0) || len > INFS__HEADER_MAX || len % 8)
		return infs__error(INFS_ECORRUPT, "%s: the header length %u is invalid", path, len);
	if (len > size)
		return infs__error(INFS_ECORRUPT, "%s: the header is truncated (%llu of its %u bytes)", path,
		                   (unsigned long long)size, len);
	unsigned char *buf = malloc(len);
	if (!buf)
		return infs__error(INFS_ENOMEM, "%s: out of memory reading the header", path);
	int rc = INFS_OK;
	if (read_full(fd, buf, len, 0)) {
		rc = io_error(path, "reading the header");
		goto out;
	}
	if (!infs__header_sound(buf, len)) {
		rc = infs__error(INFS_ECORRUPT, "%s: the header checksum does not match: the header is corrupt", path);
		goto out;
	}
	if (version > INFS__STORE_FORMAT) {
		rc = infs__error(INFS_EUNSUPPORTED, "%s: store format version %u is newer than this library's (%u)",
		                 path, version, INFS__STORE_FORMAT);
		goto out;
	}
	if (version == 0) {
		rc = infs__error(INFS_ECORRUPT, "%s: the header has format version 0", path);
		goto out;
	}
	infs_geometry geo;
	uint32_t id_len;
	infs__header_decode(&geo, &id_len, buf);
	if (id_len > INFS_IDENTITY_MAX || infs__header_len(id_len) != len ||
	    memchr(buf + INFS__HEADER_FIXED, 0, id_len + 1) != buf + INFS__HEADER_FIXED + id_len) {
		rc = infs__error(INFS_ECORRUPT, "%s: the header's identity string is malformed", path);
		goto out;
	}
	if (infs_geometry_validate(&geo)) {
		rc = infs__error_wrap(INFS_ECORRUPT, "%s: the header holds an invalid geometry", path);
		goto out;
	}
	char *id = strdup((const char *)buf + INFS__HEADER_FIXED);
	if (!id) {
		rc = infs__error(INFS_ENOMEM, "%s: out of memory reading the header", path);
		goto out;
	}
	*g = geo;
	*identity = id;
	*header_len = len;
	*version_out = version;
out:
	free(buf);
	return rc;
}

/* A window of the file read with pread, so that the scan makes one system
 * call per few megabytes rather than several per record. */
typedef struct window {
	const infs_store *s;
	uint64_t size; /* of the file, as scanned */
	unsigned char *buf;
	size_t cap;
	uint64_t off; /* of buf[0] */
	size_t len;
} window;

/* Points *out at n (<= cap) bytes of the file at off, which must lie
 * within size. */
static int view(const unsigned char **out, window *w, uint64_t off, size_t n)
{
	if (off < w->off || off + n > w->off + w->len) {
		size_t want = w->size - off < w->cap ? (size_t)(w->size - off) : w->cap;
		if (read_full(w->s->fd, w->buf, want, off))
			return io_error(w->s->path, "reading");
		w->off = off;
		w->len = want;
	}
	*out = w->buf + (off - w->off);
	return INFS_OK;
}

/* Copies n bytes at off, however many they are. */
static int fetch(void *dst, window *w, uint64_t off, size_t n)
{
	for (size_t done = 0; done < n;) {
		size_t k = n - done < w->cap ? n - done : w->cap;
		const unsigned char *p = NULL;
		int rc = view(&p, w, off + done, k);
		if (rc)
			return rc;
		memcpy((unsigned char *)dst + done, p, k);
		done += k;
	}
	return INFS_OK;
}

/* Checks the record at off. Returns INFS_OK when its head and body checksums
 * hold, 1 (with *why) when they do not, or an error. *head_ok says whether
 * the head alone is sound, so that *body_len can be trusted. */
static int rec_check(window *w, uint64_t off, uint32_t *type, uint64_t *body_len, bool *head_ok, const char **why)
{
	const unsigned char *h;
	*head_ok = false;
	if (w->size - off < INFS__REC_HEAD) {
		*why = "the record head is cut short";
		return 1;
	}
	int rc = view(&h, w, off, INFS__REC_HEAD);
	if (rc)
		return rc;
	infs__rec_head head;
	if (!infs__head_decode(&head, h)) {
		*why = "the record head is damaged";
		return 1;
	}
	*head_ok = true;
	*type = head.type;
	*body_len = head.body_len;
	uint32_t crc = 0;
	if (*body_len > w->size - off - INFS__REC_HEAD) {
		*why = "the record runs past the end of the file";
		return 1;
	}
	for (uint64_t done = 0; done < *body_len;) {
		size_t n = *body_len - done < w->cap ? (size_t)(*body_len - done) : w->cap;
		const unsigned char *p = NULL;
		if ((rc = view(&p, w, off + INFS__REC_HEAD + done, n)))
			return rc;
		crc = infs__crc32c(crc, p, n);
		done += n;
	}
	if (crc != head.body_crc) {
		*why = "the record checksum does not match";
		return 1;
	}
	return INFS_OK;
}

/* The first bad record at off: a torn tail when no sound record follows it,
 * corruption otherwise. A record whose head is sound is skipped whole, so
 * bytes inside its body (K/V data, say) are never taken for records. */
static int bad_record(infs_store *s, window *w, window *probe, uint64_t off, bool head_ok, uint64_t body_len,
                      const char *why)
{
	uint64_t size = w->size, from = off + 8;
	if (head_ok)
		from = body_len > size - off - INFS__REC_HEAD ? size : off + INFS__REC_HEAD + body_len;
	for (uint64_t at = from; at + INFS__REC_HEAD <= size; at += w->cap) {
		size_t n = size - at < w->cap ? (size_t)(size - at) : w->cap;
		const unsigned char *p = NULL;
		int rc = view(&p, w, at, n);
		if (rc)
			return rc;
		for (size_t i = 0; i + 4 <= n; i += 8) {
			if (!infs__head_has_magic(p + i))
				continue;
			uint32_t t;
			uint64_t len;
			bool ok;
			const char *ignored;
			if ((rc = rec_check(probe, at + i, &t, &len, &ok, &ignored)) < 0)
				return rc;
			if (rc == INFS_OK)
				return infs__error(INFS_ECORRUPT,
				                   "%s: the record at offset %llu is damaged (%s) but a sound record follows at "
				                   "offset %llu: the file is corrupt, not cut short by a crash",
				                   s->path, (unsigned long long)off, why, (unsigned long long)(at + i));
		}
	}
	s->end = off;
	s->dropped_tail = size - off;
	return INFS_OK;
}

/* Whether a slot that fails its checksum was the commit after the sound one
 * (seq, n_records, end): its fields say so, at least two of the three, so
 * that damage to any one field of the newer slot still shows it, and damage
 * to one field of an older slot never makes it look newer. */
static bool newer_damaged(const infs__slot *bad, const infs__slot *good)
{
	return (bad->seq == good->seq + 1) + (bad->n_records > good->n_records) + (bad->end > good->end) >= 2;
}

/* Takes the sound commit slot with the highest sequence number: the other
 * one may have been torn while being written. Sets seq and slot_end, and
 * returns the slot's record count; *newer receives a damaged slot that was
 * the commit after it (newer->seq 0 when none). */
static int read_slots(infs_store *s, uint64_t size, uint64_t *n_records, infs__slot *newer)
{
	unsigned char b[INFS__SLOTS];
	infs__slot slots[2];
	bool sound[2];
	*n_records = 0;
	*newer = (infs__slot){ 0, 0, 0 };
	if (size < s->header_len + INFS__SLOTS)
		return infs__error(INFS_ECORRUPT, "%s: the commit slots are cut short (the file is %llu bytes)", s->path,
		                   (unsigned long long)size);
	if (read_full(s->fd, b, sizeof b, s->header_len))
		return io_error(s->path, "reading the commit slots");
	for (int i = 0; i < 2; i++) {
		infs__slot *slot = &slots[i];
		sound[i] = infs__slot_decode(slot, b + i * INFS__SLOT);
		if (!sound[i] || slot->seq <= s->seq || slot->seq % 2 != (uint64_t)i)
			continue;
		s->seq = slot->seq;
		*n_records = slot->n_records;
		s->slot_end = slot->end;
	}
	static const unsigned char zero[INFS__SLOT];
	for (int i = 0; i < 2 && s->seq; i++)
		if (!sound[i] && memcmp(b + i * INFS__SLOT, zero, INFS__SLOT) &&
		    newer_damaged(&slots[i], &(infs__slot){ s->seq, *n_records, s->slot_end }))
			*newer = slots[i];
	return INFS_OK;
}

static int corrupt(const infs_store *s, uint64_t off, const char *what)
{
	return infs__error(INFS_ECORRUPT, "%s: the record at offset %llu is corrupt: %s", s->path,
	                   (unsigned long long)off, what);
}

/* Reads the namespace at file offset at of the record at off. */
static int read_ns(char *ns, window *w, uint64_t at, uint32_t ns_len, uint64_t off)
{
	if (ns_len == 0 || ns_len > INFS_NAMESPACE_MAX)
		return corrupt(w->s, off, "bad namespace length");
	int rc = fetch(ns, w, at, ns_len + 1);
	if (rc)
		return rc;
	if (ns[ns_len] != '\0' || infs__check_namespace(ns))
		return corrupt(w->s, off, "bad namespace");
	return INFS_OK;
}

static int apply_put(infs_store *s, window *w, uint64_t off, uint64_t body_len, uint64_t *last_put)
{
	unsigned char f[INFS__PUT_FIXED];
	char ns[INFS_NAMESPACE_MAX + 1];
	uint64_t body = off + INFS__REC_HEAD;
	if (body_len < INFS__PUT_FIXED)
		return corrupt(s, off, "a put record is too short");
	int rc = fetch(f, w, body, sizeof f);
	if (rc)
		return rc;
	infs__put_fields p;
	infs__put_decode(&p, f);
	/* Ids increase through the log, except where the remote tier brought
	 * in facts that other nodes had put before this file's newest. */
	if (p.id == 0 || (p.id <= *last_put && infs__index_get(&s->ix, p.id)))
		return corrupt(s, off, p.id ? "a fact id is used twice" : "fact id 0");
	if (p.flags & ~(unsigned)INFS_FACT_SEGMENT)
		return corrupt(s, off, "unknown flags");
	if (p.n_tokens == 0 || p.n_tokens > INFS_FACT_TOKENS_MAX)
		return corrupt(s, off, "bad n_tokens");
	if (p.embed_n != (p.flags & INFS_FACT_SEGMENT ? 0 : s->geom.embed_dim))
		return corrupt(s, off, "the embedding size does not match the geometry");
	if (p.text_len >= INFS_TEXT_MAX || p.meta_len >= INFS_METADATA_MAX)
		return corrupt(s, off, "text or metadata too long");
	if (p.ns_len > INFS_NAMESPACE_MAX)
		return corrupt(s, off, "bad namespace length");
	infs__put_layout l;
	infs__put_layout_of(&l, &p, s->kv_token_bytes);
	if (l.end != body_len)
		return corrupt(s, off, "the record length does not match its fields");
	if ((rc = read_ns(ns, w, body + l.ns, p.ns_len, off)))
		return rc;
	char nul[2];
	if ((rc = fetch(nul, w, body + l.text + p.text_len, 1)) || (rc = fetch(nul + 1, w, body + l.meta + p.meta_len, 1)))
		return rc;
	if (nul[0] || nul[1])
		return corrupt(s, off, "text or metadata is not terminated");
	infs__ns *nsp;
	if ((rc = infs__index_reserve(&nsp, &s->ix, ns)))
		return rc;
	float *row = infs__index_add(&s->ix, nsp, p.id, off, INFS__REC_HEAD + body_len, p.flags, p.n_tokens);
	if (row && (rc = fetch(row, w, body + l.emb, (size_t)p.embed_n * 4)))
		return rc;
	if (p.id > *last_put)
		*last_put = p.id;
	if (p.id >= s->next_id)
		s->next_id = p.id + 1;
	return INFS_OK;
}

static int apply(infs_store *s, window *w, uint64_t off, uint32_t type, uint64_t body_len, uint64_t *last_put)
{
	unsigned char f[INFS__DELETE_FIXED];
	char ns[INFS_NAMESPACE_MAX + 1];
	uint64_t body = off + INFS__REC_HEAD;
	int rc;
	switch (type) {
	case INFS__REC_PUT:
		return apply_put(s, w, off, body_len, last_put);
	case INFS__REC_DELETE: {
		if (body_len < INFS__DELETE_FIXED)
			return corrupt(s, off, "a delete record is too short");
		if ((rc = fetch(f, w, body, INFS__DELETE_FIXED)))
			return rc;
		uint64_t id;
		uint32_t ns_len;
		infs__delete_decode(&id, &ns_len, f);
		if (body_len != infs__ns_body_len(INFS__DELETE_FIXED, ns_len))
			return corrupt(s, off, "the record length does not match its fields");
		if ((rc = read_ns(ns, w, body + INFS__DELETE_FIXED, ns_len, off)))
			return rc;
		infs__entry *e = infs__index_get(&s->ix, id);
		if (!e || strcmp(e->ns->name, ns) != 0)
			return corrupt(s, off, "it deletes a fact that is not live in its namespace");
		infs__index_remove(&s->ix, id);
		return INFS_OK;
	}
	case INFS__REC_DROP: {
		if (body_len < INFS__DROP_FIXED)
			return corrupt(s, off, "a drop record is too short");
		if ((rc = fetch(f, w, body, INFS__DROP_FIXED)))
			return rc;
		uint32_t ns_len;
		infs__drop_decode(&ns_len, f);
		if (body_len != infs__ns_body_len(INFS__DROP_FIXED, ns_len))
			return corrupt(s, off, "the record length does not match its fields");
		if ((rc = read_ns(ns, w, body + INFS__DROP_FIXED, ns_len, off)))
			return rc;
		infs__ns *nsp = infs__index_ns(&s->ix, ns);
		if (nsp)
			infs__index_drop(&s->ix, nsp);
		return INFS_OK;
	}
	case INFS__REC_NEXT_ID: {
		if (body_len != INFS__NEXT_ID_FIXED)
			return corrupt(s, off, "a next-id record has the wrong length");
		if ((rc = fetch(f, w, body, INFS__NEXT_ID_FIXED)))
			return rc;
		uint64_t next = infs__next_id_decode(f);
		if (next == 0 || next == UINT64_MAX)
			return corrupt(s, off, "bad next id");
		if (next > s->next_id)
			s->next_id = next;
		return INFS_OK;
	}
	default:
		return corrupt(s, off, "unknown record type");
	}
}

int infs__store_scan(infs_store *s, uint64_t size)
{
	/* Two windows: one for the scan, one to probe for sound records after
	 * a bad one. Small files need only small ones. */
	size_t cap = size < SCAN_CHUNK ? (size_t)infs__pad8(size) : SCAN_CHUNK;
	unsigned char *buf = malloc(2 * cap);
	if (!buf)
		return infs__error(INFS_ENOMEM, "%s: out of memory", s->path);
	window w = { s, size, buf, cap, 0, 0 }, probe = { s, size, buf + cap, cap, 0, 0 };
	uint64_t slot_records = 0, last_put = 0;
	infs__slot newer = { 0, 0, 0 };
	int rc = INFS_OK;
	s->next_id = 1;
	s->dropped_tail = 0;
	s->n_records = 0;
	s->lost = 0;
	s->seq = 0;
	s->slot_end = 0;
	s->newer_damaged = false;
	s->log_start = s->header_len + (s->version >= 2 ? INFS__SLOTS : 0);
	if (s->version >= 2 && (rc = read_slots(s, size, &slot_records, &newer))) {
		free(buf);
		return rc;
	}
	uint64_t off = s->log_start;
	while (off < size) {
		uint32_t type = 0;
		uint64_t body_len = 0;
		bool head_ok;
		const char *why = NULL;
		rc = rec_check(&w, off, &type, &body_len, &head_ok, &why);
		if (rc == 1) {
			rc = bad_record(s, &w, &probe, off, head_ok, body_len, why);
			off = s->end;
			break;
		}
		if (rc || (rc = apply(s, &w, off, type, body_len, &last_put)))
			break;
		off += INFS__REC_HEAD + body_len;
		s->n_records++;
	}
	free(buf);
	if (rc)
		return rc;
	s->end = off;
	/* The newest commit slot names where the log ended when it was
	 * written: a log that ends before lost acknowledged records, however
	 * cleanly it ends. Sound records past it are kept (their slot was not
	 * written yet). */
	if (s->slot_end > s->end)
		s->lost = slot_records > s->n_records ? slot_records - s->n_records : 1;
	/* A damaged newest slot, and no record past the one before it: the
	 * records of the newest commit are gone too (at least one; its count
	 * when that field is plausible). A crash while a slot is written
	 * leaves its record in the log, past the older slot. */
	if (newer.seq && s->end <= s->slot_end) {
		uint64_t n = newer.n_records > s->n_records && newer.end > s->end &&
		             newer.n_records - s->n_records <= (newer.end - s->end) / INFS__REC_HEAD
		                     ? newer.n_records - s->n_records
		                     : 1;
		s->lost = n > s->lost ? n : s->lost;
		s->newer_damaged = true;
	}
	return INFS_OK;
}

int infs__store_verify(infs_store *s, uint64_t *bad_off)
{
	struct stat st;
	*bad_off = 0;
	if (fstat(s->fd, &st) != 0)
		return io_error(s->path, "checking the size");
	if ((uint64_t)st.st_size < s->end) {
		*bad_off = (uint64_t)st.st_size;
		return infs__error(INFS_ECORRUPT, "%s has been cut to %llu bytes under the open store (its log ends at %llu)",
		                   s->path, (unsigned long long)st.st_size, (unsigned long long)s->end);
	}
	unsigned char want[INFS__HEADER_FIXED + INFS_IDENTITY_MAX + 16];
	size_t hlen = infs__header_encode(want, &s->geom, s->identity, s->version);
	size_t cap = s->end < SCAN_CHUNK ? (size_t)infs__pad8(s->end) : SCAN_CHUNK;
	unsigned char *buf = malloc(cap > hlen ? cap : hlen);
	if (!buf)
		return infs__error(INFS_ENOMEM, "%s: out of memory", s->path);
	int rc = INFS_OK;
	if (read_full(s->fd, buf, hlen, 0)) {
		rc = io_error(s->path, "reading the header");
	} else if (memcmp(buf, want, hlen) != 0) {
		rc = infs__error(INFS_ECORRUPT, "%s: the header has changed since the store was opened", s->path);
	} else {
		window w = { s, s->end, buf, cap, 0, 0 };
		for (uint64_t off = s->log_start; off < s->end;) {
			uint32_t type;
			uint64_t body_len = 0;
			bool head_ok;
			const char *why = NULL;
			if ((rc = rec_check(&w, off, &type, &body_len, &head_ok, &why)) == 1) {
				*bad_off = off;
				rc = infs__error(INFS_ECORRUPT, "%s: the record at offset %llu is damaged (%s)", s->path,
				                 (unsigned long long)off, why);
			}
			if (rc)
				break;
			off += INFS__REC_HEAD + body_len;
		}
	}
	free(buf);
	return rc;
}

int infs__map_reserve(infs_store *s, uint64_t need)
{
	if (need <= s->map_cap)
		return INFS_OK;
	uint64_t cap = s->map_cap ? s->map_cap : (uint64_t)1 << 20;
	while (cap < need)
		cap *= 2;
	if (cap > SIZE_MAX)
		return infs__error(INFS_ENOMEM, "%s: the file is too large to map", s->path);
	void *p = s->map ? mremap((void *)s->map, s->map_cap, (size_t)cap, MREMAP_MAYMOVE)
	                 : mmap(NULL, (size_t)cap, PROT_READ, MAP_SHARED, s->fd, 0);
	if (p == MAP_FAILED)
		return infs__error(INFS_EIO, "%s: mapping %llu bytes: %s", s->path, (unsigned long long)cap,
		                   strerror(errno));
	s->map = p;
	s->map_cap = (size_t)cap;
	return INFS_OK;
}

int infs__write_all(int fd, uint64_t off, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = pwritev(fd, iov, n < IOV_MAX ? n : IOV_MAX, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		off += (uint64_t)w;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int infs__commit(infs_store *s)
{
	if (s->version < 2)
		return INFS_OK;
	unsigned char slot[INFS__SLOT];
	uint64_t seq = s->seq + 1;
	infs__slot_encode(slot, &(infs__slot){ seq, s->n_records, s->end });
	struct iovec iov = { slot, sizeof slot };
	if (infs__write_all(s->fd, s->header_len + seq % 2 * INFS__SLOT, &iov, 1))
		return io_error(s->path, "writing a commit slot");
	s->seq = seq;
	s->slot_end = s->end;
	return INFS_OK;
}

uint64_t infs__reserve_after_put(const infs_store *s, const infs__ns *ns)
{
	return s->ix.erase_bytes + ns->erase_len + INFS__RESERVE;
}

uint64_t infs__reserve_quietly(int fd, uint64_t end, uint64_t keep)
{
	int err = errno;
	int rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)end, (off_t)keep);
	errno = err;
	return rc == 0 ? end + keep : end;
}

/* Allocates the file for a record of total bytes plus keep bytes past it,
 * which only deletes and drops may use, so that they fit when the disk is
 * full. File systems without fallocate get no reserve. */
static int reserve(infs_store *s, uint64_t total, uint64_t keep, const char *fn)
{
	uint64_t need = s->end + total + keep;
	if (need <= s->reserved)
		return INFS_OK;
	if (fallocate(s->fd, FALLOC_FL_KEEP_SIZE, (off_t)s->end, (off_t)(need - s->end)) != 0) {
		if (errno == EOPNOTSUPP || errno == ENOSYS)
			return INFS_OK;
		return infs__error(INFS_EIO, "%s: no room in %s for a %llu-byte record and the %llu bytes kept for deletes: %s",
		                   fn, s->path, (unsigned long long)total, (unsigned long long)keep, strerror(errno));
	}
	s->reserved = need;
	return INFS_OK;
}

int infs__append(infs_store *s, uint32_t type, struct iovec *iov, int n, uint64_t keep, const char *fn)
{
	unsigned char head[INFS__REC_HEAD];
	infs__head_encode(head, type, iov + 1, n - 1);
	iov[0].iov_base = head;
	iov[0].iov_len = sizeof head;
	return infs__append_record(s, iov, n, keep, fn);
}

int infs__append_record(infs_store *s, struct iovec *iov, int n, uint64_t keep, const char *fn)
{
	int rc = infs__write_records(s, iov, n, keep, fn);
	if (rc)
		return rc;
	if (s->opts.sync == INFS_SYNC_FULL && fdatasync(s->fd) != 0) {
		int err = errno;
		infs__cut(s);
		return infs__error(INFS_EIO, "%s: writing %s: %s", fn, s->path, strerror(err));
	}
	for (int i = 0; i < n; i++)
		s->end += iov[i].iov_len;
	s->n_records++;
	/* The record is in the file (and durable in FULL), so the write
	 * succeeded; its slot reaches the disk with the next sync. A slot
	 * that cannot be written leaves an older one, which only lowers what
	 * the next open can check (records past a slot are kept). */
	infs__commit(s);
	return INFS_OK;
}

int infs__write_records(infs_store *s, struct iovec *iov, int n, uint64_t keep, const char *fn)
{
	uint64_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	int rc = infs__map_reserve(s, s->end + total);
	if (rc)
		return infs__error_wrap(rc, "%s", fn);
	if (keep && (rc = reserve(s, total, keep, fn)))
		return rc;
	if (infs__write_all(s->fd, s->end, iov, n) == 0)
		return INFS_OK;
	int err = errno;
	/* Cut the partial records off so the file stays what the index says.
	 * If that fails too, the next append overwrites them from s->end and
	 * a later open drops any rest as a torn tail. */
	infs__cut(s);
	return infs__error(INFS_EIO, "%s: writing %s: %s", fn, s->path, strerror(err));
}

void infs__cut(infs_store *s)
{
	int cut = ftruncate(s->fd, (off_t)s->end);
	(void)cut; /* if it fails, the next append overwrites from s->end */
	s->reserved = s->end; /* truncating may have freed the reserve */
}

bool infs__record_sound(const infs_store *s, uint64_t off, uint64_t len)
{
	const unsigned char *h = s->map + off;
	infs__rec_head head;
	return infs__head_decode(&head, h) && head.body_len == len - INFS__REC_HEAD &&
	       infs__crc32c(0, h + INFS__REC_HEAD, head.body_len) == head.body_crc;
}

void infs__record_at(infs__record *out, const infs_store *s, uint64_t off)
{
	infs__put_view(out, s->map + off + INFS__REC_HEAD, s->kv_token_bytes);
}

/* Compaction: the live records are copied to a new file beside the store,
 * which is synced and renamed over it. Until the rename the old file is the
 * store; after it the new one, complete. A crash at any point loses nothing. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "store/store_impl.h"

#define BATCH 256 /* records per pwritev */

typedef struct live {
	uint64_t id, off, len, new_off;
} live;

static int by_id(const void *a, const void *b)
{
	uint64_t x = ((const live *)a)->id, y = ((const live *)b)->id;
	return x < y ? -1 : x > y;
}

/* Writes the new file: header, a next-id record so that ids of deleted
 * facts are never handed out again, then the live records in id order. */
static int write_new(infs_store *s, int fd, live *recs, size_t n, uint64_t *end)
{
	unsigned char header[INFS__HEADER_FIXED + INFS_IDENTITY_MAX + 16 + INFS__SLOTS];
	unsigned char head[INFS__REC_HEAD];
	size_t hlen = infs__header_encode(header, &s->geom, s->identity, INFS__STORE_FORMAT);
	/* The new file is always the current format; its slot 1 (sequence 1)
	 * commits every record it will hold. */
	uint64_t total = hlen + INFS__SLOTS + sizeof head + INFS__NEXT_ID_FIXED;
	for (size_t i = 0; i < n; i++)
		total += recs[i].len;
	memset(header + hlen, 0, INFS__SLOT);
	infs__slot_encode(header + hlen + INFS__SLOT, &(infs__slot){ 1, n + 1, total });
	unsigned char next_id[INFS__NEXT_ID_FIXED];
	infs__next_id_encode(next_id, s->next_id);
	struct iovec iov[BATCH];
	struct iovec first[3] = { { header, hlen + INFS__SLOTS }, { head, sizeof head }, { next_id, sizeof next_id } };
	infs__head_encode(head, INFS__REC_NEXT_ID, first + 2, 1);
	if (infs__write_all(fd, 0, first, 3))
		return -1;
	uint64_t off = hlen + INFS__SLOTS + sizeof head + INFS__NEXT_ID_FIXED;
	for (size_t i = 0; i < n;) {
		uint64_t start = off;
		int k = 0;
		for (; k < BATCH && i < n; k++, i++) {
			iov[k] = (struct iovec){ (void *)(s->map + recs[i].off), recs[i].len };
			recs[i].new_off = off;
			off += recs[i].len;
		}
		if (infs__write_all(fd, start, iov, k))
			return -1;
	}
	*end = off;
	return 0;
}

static int compact(infs_store *s)
{
	char *tmp = NULL;
	live *recs = NULL;
	const unsigned char *map = MAP_FAILED;
	size_t map_cap = 1u << 20;
	int fd = -1, rc = INFS_OK;
	uint64_t end = 0;
	size_t n = 0;

	if (asprintf(&tmp, "%s.compact", s->path) < 0) {
		tmp = NULL;
		rc = infs__error(INFS_ENOMEM, "infs_store_compact: out of memory");
		goto fail;
	}
	if (s->ix.n && !(recs = malloc(s->ix.n * sizeof *recs))) {
		rc = infs__error(INFS_ENOMEM, "infs_store_compact: out of memory for %zu records", s->ix.n);
		goto fail;
	}
	for (size_t i = 0; i < s->ix.cap; i++) {
		const infs__entry *e = &s->ix.slots[i];
		if (e->id)
			recs[n++] = (live){ e->id, e->off, e->len, 0 };
	}
	if (n)
		qsort(recs, n, sizeof *recs, by_id);

	/* The new file is locked before it is renamed, so that no other writer
	 * can take it in between. */
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
		rc = infs__error(INFS_EIO, "infs_store_compact: creating %s: %s", tmp, strerror(errno));
		goto fail;
	}
	if (write_new(s, fd, recs, n, &end) != 0 || (s->opts.sync != INFS_SYNC_OFF && fsync(fd) != 0)) {
		rc = infs__error(INFS_EIO, "infs_store_compact: writing %s: %s", tmp, strerror(errno));
		goto fail;
	}
	while (map_cap < end)
		map_cap *= 2;
	map = mmap(NULL, map_cap, PROT_READ, MAP_SHARED, fd, 0);
	struct stat st;
	if (map == MAP_FAILED || fstat(fd, &st) != 0) {
		rc = infs__error(INFS_EIO, "infs_store_compact: mapping %s: %s", tmp, strerror(errno));
		goto fail;
	}
	if (rename(tmp, s->path) != 0) {
		rc = infs__error(INFS_EIO, "infs_store_compact: renaming %s over %s: %s", tmp, s->path, strerror(errno));
		goto fail;
	}
	/* From here on the new file is the store; only its directory entry may
	 * still need syncing, which is reported but changes nothing. */
	if (s->opts.sync != INFS_SYNC_OFF && (rc = infs__fsync_dir(s->path)))
		rc = infs__error_wrap(rc, "infs_store_compact");
	for (size_t i = 0; i < n; i++)
		infs__index_get(&s->ix, recs[i].id)->off = recs[i].new_off;
	munmap((void *)s->map, s->map_cap);
	infs__registry_update(s->dev, s->ino, st.st_dev, st.st_ino);
	close(s->fd);
	s->fd = fd;
	s->map = map;
	s->map_cap = map_cap;
	s->end = end;
	s->version = INFS__STORE_FORMAT;
	s->log_start = s->header_len + INFS__SLOTS;
	s->seq = 1;
	s->n_records = n + 1;
	s->slot_end = end;
	/* The old file's space is free now: the reserve for deletes moves over. */
	s->reserved = infs__reserve_quietly(fd, end, s->ix.erase_bytes + INFS__RESERVE);
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	free(recs);
	free(tmp);
	return rc;
fail:
	if (map != MAP_FAILED)
		munmap((void *)map, map_cap);
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	free(recs);
	free(tmp);
	return rc;
}

int infs_store_compact(infs_store *s)
{
	if (!s)
		return infs__error(INFS_EINVAL, "infs_store_compact: store is NULL");
	if (s->readonly)
		return infs__error(INFS_EREADONLY, "infs_store_compact: %s was opened read-only", s->path);
	pthread_rwlock_wrlock(&s->lock);
	int rc = compact(s);
	pthread_rwlock_unlock(&s->lock);
	return rc;
}

/* Erasing on a full disk. This program defines fallocate and pwritev, so the
 * library (linked statically into it) calls these instead of the C
 * library's: while disk_full is set, they fail with ENOSPC for anything that
 * needs new space, that is any fallocate and any write past both the file's
 * size and what fallocate allocated before the disk filled. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "store/store.h"
#include "test_store_util.h"

static int disk_full;
static off_t allocated; /* the end of the last successful fallocate */
static ino_t allocated_ino; /* of the file it allocated (the store) */

/* With _FILE_OFFSET_BITS=64 (meson's default) the headers name these
 * fallocate64 and pwritev64, here and in the library alike. */
_Static_assert(sizeof(off_t) == 8, "built with 64-bit offsets");

int fallocate(int fd, int mode, off_t off, off_t len)
{
	int (*real)(int, int, off_t, off_t) = (int (*)(int, int, off_t, off_t))dlsym(RTLD_NEXT, "fallocate64");
	if (disk_full) {
		errno = ENOSPC;
		return -1;
	}
	int rc = real(fd, mode, off, len);
	struct stat st;
	if (rc == 0 && fstat(fd, &st) == 0) {
		if (st.st_ino != allocated_ino || off + len > allocated)
			allocated = off + len;
		allocated_ino = st.st_ino;
	}
	return rc;
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	ssize_t (*real)(int, const struct iovec *, int, off_t) =
		(ssize_t (*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev64");
	struct stat st;
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	if (disk_full && fstat(fd, &st) == 0 && off + (off_t)len > st.st_size &&
	    (st.st_ino != allocated_ino || off + (off_t)len > allocated)) {
		errno = ENOSPC;
		return -1;
	}
	return real(fd, iov, n, off);
}

/* A namespace name of the longest length, 255 bytes, distinct by tag. */
static void long_name(char *out, char tag)
{
	memset(out, tag, INFS_NAMESPACE_MAX);
	out[INFS_NAMESPACE_MAX] = '\0';
}

/* Every record can be erased on a full disk whatever its namespace's
 * length: the reserve grows with the delete records it must hold. Here
 * 1,500 facts under 255-byte names, whose deletes (296 bytes each) need
 * several times a fixed 64 KiB. */
static void long_names(const infs_geometry *g)
{
	char path[600], a[INFS_NAMESPACE_MAX + 1], b[INFS_NAMESPACE_MAX + 1];
	scratch_path(path, sizeof path, "full-long.infs");
	long_name(a, 'a');
	long_name(b, 'b');
	enum { N = 1500 };
	uint64_t *ids = malloc(N * sizeof *ids);
	infs_store *s;
	CHECK_OK(open_store(&s, path, g, INFS_OPEN_CREATE, INFS_SYNC_NORMAL));
	for (int i = 0; i < N; i++) {
		gen_fact f;
		gen_fact_make(&f, g, (uint64_t)i, 0);
		CHECK_OK(infs_fact_put(&ids[i], s, i % 2 ? b : a, &f.fact));
		gen_fact_free(&f);
	}
	disk_full = 1;
	/* Every fact of a, one by one, then b dropped: none finds the disk full. */
	int failed = 0;
	for (int i = 0; i < N; i += 2)
		failed += infs_fact_delete(s, a, ids[i]) != INFS_OK;
	CHECK(failed == 0);
	CHECK_OK(infs_namespace_drop(s, b));
	infs_store_close(s);
	/* Reopened while the disk is still full: the reserve is still there. */
	CHECK_OK(open_store(&s, path, NULL, 0, INFS_SYNC_NORMAL));
	uint64_t n = 1;
	CHECK_OK(infs_fact_count(&n, s, a));
	CHECK(n == 0);
	CHECK_OK(infs_fact_count(&n, s, b));
	CHECK(n == 0);
	infs_store_close(s);
	disk_full = 0;

	/* After a compaction too: the new file takes its reserve with it. */
	CHECK_OK(open_store(&s, path, NULL, 0, INFS_SYNC_NORMAL));
	for (int i = 0; i < N; i++) {
		gen_fact f;
		gen_fact_make(&f, g, (uint64_t)i, 0);
		CHECK_OK(infs_fact_put(&ids[i], s, i % 2 ? b : a, &f.fact));
		gen_fact_free(&f);
	}
	CHECK_OK(infs_fact_delete(s, a, ids[0]));
	CHECK_OK(infs_store_compact(s));
	disk_full = 1;
	failed = 0;
	for (int i = 2; i < N; i += 2)
		failed += infs_fact_delete(s, a, ids[i]) != INFS_OK;
	CHECK(failed == 0);
	CHECK_OK(infs_namespace_drop(s, b));
	infs_store_close(s);
	disk_full = 0;
	free(ids);
}

int main(void)
{
	scratch_init("store-full");
	char path[600];
	scratch_path(path, sizeof path, "full.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F16);
	long_names(&g);
	infs_store *s;
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_FULL));
	uint64_t ids[6];
	for (int i = 0; i < 6; i++) {
		gen_fact f;
		gen_fact_make(&f, &g, (uint64_t)i, 0);
		CHECK_OK(infs_fact_put(&ids[i], s, i < 3 ? "alice" : "bob", &f.fact));
		gen_fact_free(&f);
	}
	CHECK(allocated > 0); /* the file system took the reserve */

	disk_full = 1;
	/* A put finds no room for itself and the reserve: refused, nothing written. */
	infs_store_stats before = { .version = INFS_STORE_STATS_VERSION }, after = before;
	CHECK_OK(infs_store_stats_get(&before, s));
	gen_fact f;
	gen_fact_make(&f, &g, 9, 0);
	uint64_t id;
	CHECK_ERR(infs_fact_put(&id, s, "alice", &f.fact), INFS_EIO);
	CHECK(strstr(infs_error_last(), "No space left") && strstr(infs_error_last(), "kept for deletes"));
	gen_fact_free(&f);
	CHECK_OK(infs_store_stats_get(&after, s));
	CHECK(after.file_bytes == before.file_bytes && after.n_facts == 6);
	/* Deleting and dropping still work: they use the reserve. */
	CHECK_OK(infs_fact_delete(s, "alice", ids[1]));
	CHECK_OK(infs_namespace_drop(s, "bob"));
	/* Compaction needs a new file: it fails and changes nothing. */
	CHECK_ERR(infs_store_compact(s), INFS_EIO);
	infs_store_close(s);

	CHECK_OK(open_store(&s, path, NULL, 0, INFS_SYNC_FULL));
	uint64_t n = 0;
	CHECK_OK(infs_fact_count(&n, s, "alice"));
	CHECK(n == 2);
	CHECK_OK(infs_fact_count(&n, s, "bob"));
	CHECK(n == 0);
	infs_fact_record *r = NULL;
	CHECK_ERR(infs_fact_get(&r, s, "alice", ids[1]), INFS_ENOTFOUND);
	CHECK_OK(infs_fact_get(&r, s, "alice", ids[2]));
	infs_fact_record_free(r);
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.lost_records == 0 && st.dropped_tail_bytes == 0);
	infs_store_close(s);
	disk_full = 0;
	scratch_cleanup();
	CHECK_DONE();
}

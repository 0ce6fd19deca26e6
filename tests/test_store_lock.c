/* Writer exclusion: a second writer, from another handle of this process
 * or from another process, gets INFS_EBUSY, also after compaction replaced
 * the file; readers open alongside and see the store as it was when they
 * opened it. */
#include <sys/wait.h>

#include "store/store.h"
#include "test_store_util.h"

/* Runs in a forked child: tries to open path and exits with the status. */
static int open_in_child(const char *path, unsigned flags)
{
	pid_t pid = fork();
	if (pid == 0) {
		infs_store *s;
		int rc = open_store(&s, path, NULL, flags, INFS_SYNC_FULL);
		if (rc == INFS_EBUSY && !strstr(infs_error_last(), "another process"))
			_exit(100);
		infs_store_close(s);
		_exit(-rc);
	}
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? -WEXITSTATUS(status) : 999;
}

/* Processes racing to create the same store: the file appears whole once,
 * every opener either writes to that one store or is told it is busy, and
 * no temporary file is left behind. */
static void create_race(void)
{
	char path[600];
	scratch_path(path, sizeof path, "race.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F32);
	enum { N = 6 };
	pid_t pids[N];
	int go[2];
	if (pipe(go) != 0)
		abort();
	for (int i = 0; i < N; i++) {
		if ((pids[i] = fork()) == 0) {
			char c;
			close(go[1]);
			if (read(go[0], &c, 1) != 0) /* wait for the start: the pipe closing */
				_exit(90);
			infs_store *s;
			int rc = open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_FULL);
			if (rc == INFS_EBUSY)
				_exit(1);
			if (rc != INFS_OK)
				_exit(2);
			gen_fact f;
			gen_fact_make(&f, &g, (uint64_t)i, 0);
			uint64_t id;
			rc = infs_fact_put(&id, s, "race", &f.fact);
			infs_store_close(s);
			_exit(rc == INFS_OK ? 0 : 3);
		}
	}
	close(go[0]);
	close(go[1]);
	int wrote = 0;
	for (int i = 0; i < N; i++) {
		int status;
		waitpid(pids[i], &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) <= 1);
		wrote += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	CHECK(wrote >= 1);
	infs_store *s;
	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_FULL));
	uint64_t n = 0;
	CHECK_OK(infs_fact_count(&n, s, "race"));
	CHECK(n == (uint64_t)wrote);
	infs_store_close(s);
	DIR *d = opendir(scratch_dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		CHECK(strstr(e->d_name, ".create-") == NULL);
	if (d)
		closedir(d);
}

static uint64_t count(infs_store *s, const char *ns)
{
	uint64_t n = 0;
	CHECK_OK(infs_fact_count(&n, s, ns));
	return n;
}

int main(void)
{
	char path[600];
	scratch_init("store-lock");
	scratch_path(path, sizeof path, "lock.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F16);
	infs_store *w, *w2 = NULL, *r1, *r2;
	gen_fact f;
	gen_fact_make(&f, &g, 1, 0);
	uint64_t id, first;

	CHECK_OK(open_store(&w, path, &g, INFS_OPEN_CREATE, INFS_SYNC_FULL));
	CHECK_OK(infs_fact_put(&first, w, "u", &f.fact));
	CHECK_ERR(open_store(&w2, path, &g, 0, INFS_SYNC_FULL), INFS_EBUSY);
	CHECK(w2 == NULL && strstr(infs_error_last(), "this process"));
	CHECK_ERR(open_store(&w2, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF), INFS_EBUSY);
	CHECK(open_in_child(path, 0) == INFS_EBUSY);
	CHECK(open_in_child(path, INFS_OPEN_READONLY) == INFS_OK);

	/* A reader sees the store as of its open. */
	CHECK_OK(open_store(&r1, path, NULL, INFS_OPEN_READONLY, INFS_SYNC_FULL));
	CHECK(count(r1, "u") == 1);
	CHECK_OK(infs_fact_put(&id, w, "u", &f.fact));
	CHECK_OK(infs_fact_delete(w, "u", first));
	CHECK(count(r1, "u") == 1);
	infs_fact_record *rec;
	CHECK_OK(infs_fact_get(&rec, r1, "u", first));
	CHECK(gen_fact_matches(rec, &g, 1, 0));
	infs_fact_record_free(rec);
	CHECK_OK(open_store(&r2, path, NULL, INFS_OPEN_READONLY, INFS_SYNC_FULL));
	CHECK(count(r2, "u") == 1);
	CHECK_ERR(infs_fact_get(&rec, r2, "u", first), INFS_ENOTFOUND);

	/* Compaction renames a new file over the old one: still exclusive,
	 * and the old reader keeps its snapshot. */
	CHECK_OK(infs_store_compact(w));
	CHECK_ERR(open_store(&w2, path, &g, 0, INFS_SYNC_FULL), INFS_EBUSY);
	CHECK(open_in_child(path, 0) == INFS_EBUSY);
	CHECK_OK(infs_fact_get(&rec, r1, "u", first));
	CHECK(gen_fact_matches(rec, &g, 1, 0));
	infs_fact_record_free(rec);
	CHECK_OK(infs_fact_put(&id, w, "u", &f.fact));
	CHECK(count(r2, "u") == 1);
	infs_store_close(r1);
	infs_store_close(r2);

	/* Once the writer is gone, another one may open, here or elsewhere. */
	infs_store_close(w);
	CHECK(open_in_child(path, 0) == INFS_OK);
	CHECK_OK(open_store(&w2, path, &g, 0, INFS_SYNC_FULL));
	CHECK(count(w2, "u") == 2);
	infs_store_close(w2);
	gen_fact_free(&f);
	create_race();
	scratch_cleanup();
	CHECK_DONE();
}

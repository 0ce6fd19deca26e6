/* A scratch directory for tests that create files: one per test program. */
#ifndef INFS_TEST_SCRATCH_UTIL_H
#define INFS_TEST_SCRATCH_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char scratch_dir[512];

/* A fresh directory under $TMPDIR (or /tmp), removed by scratch_cleanup. */
static inline const char *scratch_init(const char *name)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(scratch_dir, sizeof scratch_dir, "%s/infs-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(scratch_dir)) {
		perror("mkdtemp");
		exit(1);
	}
	return scratch_dir;
}

/* buf receives the path of file in the directory. */
static inline void scratch_path(char *buf, size_t n, const char *file)
{
	snprintf(buf, n, "%s/%s", scratch_dir, file);
}

/* scratch_init and scratch_path in one call. */
static inline void scratch_make(const char *name, char *path, size_t n, const char *file)
{
	scratch_init(name);
	scratch_path(path, n, file);
}

/* Removes the directory and the files in it. */
static inline void scratch_cleanup(void)
{
	DIR *d = opendir(scratch_dir);
	if (!d)
		return;
	struct dirent *e;
	char p[1024];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof p, "%s/%s", scratch_dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(scratch_dir);
}

#endif

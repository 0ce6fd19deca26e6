/* A scratch directory for tests that create stores. */
#ifndef INFS_TEST_SCRATCH_UTIL_H
#define INFS_TEST_SCRATCH_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char scratch[512];

/* A fresh directory under $TMPDIR (or /tmp); path receives dir/file. */
static inline void scratch_make(const char *name, char *path, size_t n, const char *file)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(scratch, sizeof scratch, "%s/infs-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(path, n, "%s/%s", scratch, file);
}

static inline void scratch_remove(void)
{
	DIR *d = opendir(scratch);
	if (!d)
		return;
	struct dirent *e;
	char p[1024];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof p, "%s/%s", scratch, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(scratch);
}

#endif

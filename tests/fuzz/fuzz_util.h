/* Helpers shared by the libFuzzer targets: readers that take a path get the
 * input through one scratch file, rewritten for every input. */
#ifndef INFS_FUZZ_UTIL_H
#define INFS_FUZZ_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A failed check is a finding: abort so that libFuzzer keeps the input. */
static inline void require(int cond)
{
	if (!cond)
		abort();
}

/* The scratch file's path: one per process, under $TMPDIR (or /tmp), so
 * that parallel fuzzing jobs (-jobs=N) never share it. */
static inline const char *fuzz_scratch(const char *name)
{
	static char path[512];
	if (!path[0]) {
		const char *dir = getenv("TMPDIR");
		snprintf(path, sizeof path, "%s/infs-fuzz-%ld-%s", dir && *dir ? dir : "/tmp", (long)getpid(), name);
	}
	return path;
}

/* Replaces the scratch file's content with data[0..size). */
static inline const char *fuzz_write(const char *name, const uint8_t *data, size_t size)
{
	const char *path = fuzz_scratch(name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	require(fd >= 0);
	for (size_t off = 0; off < size;) {
		ssize_t w = write(fd, data + off, size - off);
		require(w > 0);
		off += (size_t)w;
	}
	close(fd);
	return path;
}

#endif

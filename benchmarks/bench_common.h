/* Shared by the benchmarks, CPU and GPU, which see the public API: clocks,
 * stopping at a failed call, the CPU's name, where the test models are, and
 * a whole file read. */
#ifndef INFS_BENCH_COMMON_H
#define INFS_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inferscale/inferscale.h"

/* Seconds on clock id (CLOCK_MONOTONIC: wall; CLOCK_PROCESS_CPUTIME_ID: CPU). */
static inline double bench_clock(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The monotonic clock in milliseconds and in microseconds. */
static inline double bench_now_ms(void)
{
	return bench_clock(CLOCK_MONOTONIC) * 1e3;
}

static inline double bench_now_us(void)
{
	return bench_clock(CLOCK_MONOTONIC) * 1e6;
}

/* Stops the benchmark after a failed call what, with the library's message. */
static inline void bench_die(const char *what)
{
	fprintf(stderr, "%s: %s\n", what, infs_error_last());
	exit(1);
}

static inline void bench_ok(int rc, const char *what)
{
	if (rc)
		bench_die(what);
}

/* The CPU's model name from /proc/cpuinfo, "unknown" without one; cut at a
 * quote or backslash so that it can stand in JSON as it is. */
static inline void bench_cpu_name(char *buf, size_t size)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "r");
	snprintf(buf, size, "unknown");
	while (f && fgets(line, sizeof line, f)) {
		char *c = strchr(line, ':');
		if (!strncmp(line, "model name", 10) && c) {
			snprintf(buf, size, "%s", c + 1 + (c[1] == ' '));
			buf[strcspn(buf, "\n\"\\")] = '\0';
			break;
		}
	}
	if (f)
		fclose(f);
}

/* rel under $INFS_CACHE, or ~/.cache/inferscale, where scripts/fetch-models.sh puts the models. */
static inline void bench_model_path(char *buf, size_t size, const char *rel)
{
	const char *c = getenv("INFS_CACHE"), *home = getenv("HOME");
	snprintf(buf, size, c && *c ? "%s/%s" : "%s/.cache/inferscale/%s", c && *c ? c : home ? home : ".", rel);
}

/* The whole file (a text file: it stops at a NUL byte), NUL-terminated, its
 * length in *len; NULL when it cannot be read. The caller frees. */
static inline char *bench_read_text(const char *path, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0;
	FILE *f = fopen(path, "rb");
	ssize_t n = f ? getdelim(&buf, &cap, '\0', f) : -1;
	if (f)
		fclose(f);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	*len = (size_t)n;
	return buf;
}

#endif

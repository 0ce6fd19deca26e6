/* Progress of encoding, on stderr: a bar redrawn on a terminal, else (a
 * log, a pipe) a line every 5 seconds and at the end. */
#ifndef CLI_PROGRESS_H
#define CLI_PROGRESS_H

#include <stddef.h>

typedef struct progress {
	size_t base, total;
	int show;        /* 0: quiet; 1: a bar on a terminal; 2: a line every few seconds */
	double t0, last; /* seconds */
} progress;

/* Seconds on the monotonic clock. */
double now_s(void);
/* p for total facts: quiet, or a bar when stderr is a terminal. */
progress progress_start(size_t total, int quiet);
/* infs_encode_options.progress, user a progress: done of the facts of the
 * call, after p->base of earlier calls. */
int show_progress(void *user, size_t done, size_t total);

#endif

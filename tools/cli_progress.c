#include "cli_progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

progress progress_start(size_t total, int quiet)
{
	return (progress){ 0, total, quiet ? 0 : isatty(2) ? 1 : 2, now_s(), now_s() };
}

/* Progress of encoding with its rate and time left: a bar redrawn on a
 * terminal, else (a log, a pipe) a line every 5 seconds and at the end. */
int show_progress(void *user, size_t done, size_t total)
{
	progress *p = user;
	(void)total;
	if (!p->show)
		return 0;
	const size_t d = p->base + done;
	const double t = now_s(), el = t - p->t0, rate = el > 0 ? (double)d / el : 0;
	const double eta = rate > 0 ? (double)(p->total - d) / rate : 0;
	if (p->show == 1) {
		size_t w = 30, fill = p->total ? d * w / p->total : w;
		fprintf(stderr, "\rencoding [");
		for (size_t i = 0; i < w; i++)
			fputc(i < fill ? '#' : ' ', stderr);
		fprintf(stderr, "] %zu/%zu, %.1f facts/s, %.0f s left ", d, p->total, rate, eta);
	} else if (t - p->last >= 5 || d == p->total) {
		fprintf(stderr, "encoding: %zu/%zu facts, %.1f facts/s, %.0f s left\n", d, p->total, rate, eta);
		p->last = t;
	}
	fflush(stderr);
	return 0;
}

/* bench_remote's TTFT row (remote_ttft.c). */
#ifndef INFS_BENCH_REMOTE_TTFT_H
#define INFS_BENCH_REMOTE_TTFT_H

#include <stddef.h>

/* Encodes the facts of the JSONL file facts as one user through the
 * remote tier on url (prefix "ttft"), asks about them cold and warm
 * (store files in dir), and writes the JSON object of the row into out.
 * INFS_ENOTFOUND, with a message, when the models are not fetched. */
int remote_ttft(char *out, size_t cap, const char *url, const char *dir, const char *facts, unsigned n_threads);

#endif

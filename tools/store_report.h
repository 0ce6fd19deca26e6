/* What the tool says about a store's state beyond a failed call: what an
 * open found missing or dropped (it succeeds, and the library leaves its
 * message in infs_error_last()), and the bytes that earlier writable opens
 * set aside in <store>.torn files. */
#ifndef STORE_REPORT_H
#define STORE_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "inferscale/inferscale.h"

/* Right after an open of s that returned 0: "inferscale: warning: " and the
 * open's message on err when it found acknowledged records missing or
 * dropped a damaged or torn tail; nothing otherwise. */
void store_report_open(infs_store *s, FILE *err);

/* The .torn files of store path as s's open found them: 0 when they hold
 * no whole record (a warning line on err when they hold bytes: a write cut
 * short by a crash), else -1 with a message in why (facts may be lost
 * there). */
int store_report_torn(infs_store *s, const char *path, FILE *err, char *why, size_t n_why);

#endif

/* --remote URL: the stores the tool opens keep their facts on a Redis or
 * Valkey server, their files a cache of it (docs/scale-out.md). */
#ifndef INFS_CLI_REMOTE_H
#define INFS_CLI_REMOTE_H

#include "inferscale/inferscale.h"

/* The URL given, or NULL. */
extern const char *cli_remote_url;

/* Takes "--remote URL" (or "--remote=URL") out of argv, before the
 * commands read their options; 2 with a message when it has no value. */
int cli_remote_take(int *argc, char **argv);

/* Sets the remote of options that open a store: a cache is written, so a
 * read-only open becomes a writable one. */
void cli_remote_apply(infs_store_options *so);

#endif

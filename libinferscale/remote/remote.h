/* The remote tier: a Redis or Valkey server that holds the store, with the
 * store's file as a cache of it (docs/scale-out.md). infs_store_open
 * (cuda/backend.c) composes it with the store through the store's
 * extension slot INFS_EXT_REMOTE; the store knows only the hooks. */
#ifndef INFS_REMOTE_H
#define INFS_REMOTE_H

#include "inferscale/store.h"

typedef struct infs__remote infs__remote;

/* Reads the remote fields of opts (version 3). Without a remote, *out is
 * NULL and nothing else happens. Otherwise connects to the server (an
 * INFS_EIO naming it when it cannot be reached), and fills *local with
 * the options to open the file with: the caller's, plus the server's
 * geometry and identity and INFS_OPEN_CREATE when the file at path does
 * not exist and the caller gave none (the file is a cache that can be
 * lost). A build without the remote tier refuses a remote with
 * INFS_EUNSUPPORTED. */
int infs__remote_prepare(infs__remote **out, infs_store_options *local, const char *path,
                         const infs_store_options *opts);

/* Binds the server's keys to the store's geometry and identity (the first
 * store under a prefix sets them, the others must match) and installs the
 * remote tier's hooks on s, which then owns r (also on failure). */
int infs__remote_attach(infs__remote *r, infs_store *s);

/* Releases an r that was never attached. Accepts NULL. */
void infs__remote_free(infs__remote *r);

#endif

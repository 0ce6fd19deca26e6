/* A new store for a model's facts, as the encode and engine tests need one:
 * the model's geometry and identity for KV in dtype dt, embeddings of
 * embed_dim floats, in a scratch directory (tests/scratch_util.h). */
#ifndef INFS_TEST_MODEL_STORE_UTIL_H
#define INFS_TEST_MODEL_STORE_UTIL_H

#include "check.h"
#include "scratch_util.h"

static inline infs_store *model_store_create(const infs_model *m, infs_dtype dt, uint32_t embed_dim,
                                             const char *name, const char *file, char *path, size_t n)
{
	infs_geometry g;
	CHECK_OK(infs_model_geometry(&g, m, dt));
	g.embed_dim = embed_dim;
	char *identity = NULL;
	CHECK_OK(infs_model_identity(&identity, m, dt));
	scratch_make(name, path, n, file);
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE;
	so.geometry = &g;
	so.identity = identity;
	so.sync = INFS_SYNC_OFF;
	infs_store *st = NULL;
	CHECK_OK(infs_store_open(&st, path, &so));
	infs_free(identity);
	return st;
}

#endif

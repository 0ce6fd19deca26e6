/* What the commands that answer run on: the model, the embedder, the store
 * and the engine, opened from the options with every error named. */
#ifndef CLI_RUNTIME_H
#define CLI_RUNTIME_H

#include "cli_options.h"
#include "inferscale/inferscale.h"

typedef struct runtime {
	infs_model *model;
	infs_embedder *embedder;
	infs_store *store;
	infs_engine *engine;
} runtime;

/* Opens a's store (create: creates it when it is not there, for the
 * model's facts in a's --kv-dtype), model, embedder and an engine prepared
 * on the store: 0, or 1 after a message. Free r with runtime_free in
 * either case. */
int runtime_open(runtime *r, const cli_args *a, int create);
void runtime_free(runtime *r);

/* a's model (--model, --threads, --int8-activations, --device), its device
 * copy's matrices in weights: 0, or 1 after a message. */
int runtime_model(infs_model **out, const cli_args *a, infs_dtype weights);
/* An engine of model on a's device, its cache in store's KV dtype,
 * prepared on store (a->store's path, for messages): 0, or 1 after a
 * message. */
int runtime_engine(infs_engine **out, infs_model *model, infs_store *store, const cli_args *a);

/* A new store at path for the facts of r's model and embedder, their KV in
 * kv_dtype: 0, or 1 after a message. */
int store_create(infs_store **out, const char *path, const runtime *r, infs_dtype kv_dtype, int device);

#endif

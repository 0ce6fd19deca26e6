#include "cli_runtime.h"
#include "cli_remote.h"

#include <string.h>
#include <sys/stat.h>

#include "cli_fail.h"
#include "cli_hints.h"
#include "store_report.h"

void runtime_free(runtime *r)
{
	infs_engine_free(r->engine);
	infs_store_close(r->store);
	infs_embedder_free(r->embedder);
	infs_model_free(r->model);
}

/* A new store at path for the facts of model and embedder, their KV in
 * kv_dtype. */
int store_create(infs_store **out, const char *path, const runtime *r, infs_dtype kv_dtype, int device)
{
	infs_geometry g;
	char *identity = NULL;
	if (infs_model_geometry(&g, r->model, kv_dtype) || infs_model_identity(&identity, r->model, kv_dtype))
		return lib_fail("model");
	g.embed_dim = infs_embedder_dim(r->embedder);
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.device = device;
	so.flags = INFS_OPEN_CREATE;
	so.geometry = &g;
	so.identity = identity;
	so.sync = INFS_SYNC_NORMAL;
	cli_remote_apply(&so);
	int rc = infs_store_open(out, path, &so);
	infs_free(identity);
	return rc ? lib_fail(path) : 0;
}

int runtime_open(runtime *r, const cli_args *a, int create)
{
	memset(r, 0, sizeof *r);
	/* An existing store is opened first: a wrong path fails before the
	 * models load. */
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.device = a->device;
	if ((!create && cli_need_store(a->store)) || cli_need_model(a->model, "model", "--model PATH") ||
	    cli_need_model(a->embedder, "embedder", "--embedder DIR"))
		return 1;
	if (!create) {
		so.flags = INFS_OPEN_READONLY;
		cli_remote_apply(&so);
		if (infs_store_open(&r->store, a->store, &so))
			return lib_fail(a->store);
		store_report_open(r->store, stderr);
	}
	if (runtime_model(&r->model, a, a->weights))
		return 1;
	infs_embedder_options eo = INFS_EMBEDDER_OPTIONS_INIT;
	eo.n_threads = a->threads;
	eo.device = a->device;
	if (infs_embedder_load(&r->embedder, a->embedder, &eo))
		return lib_fail("embedder");
	struct stat st;
	if (create && stat(a->store, &st) != 0) {
		if (store_create(&r->store, a->store, r, a->kv_dtype, a->device))
			return 1;
	} else if (create) {
		so.sync = INFS_SYNC_NORMAL;
		cli_remote_apply(&so);
		if (infs_store_open(&r->store, a->store, &so))
			return lib_fail(a->store);
		store_report_open(r->store, stderr);
	}
	infs_geometry sg;
	if (infs_store_geometry(&sg, r->store))
		return lib_fail(a->store);
	if (sg.embed_dim != infs_embedder_dim(r->embedder))
		return fail("%s: the store keeps %u-float embeddings, the embedder %s gives %u", a->store,
		            sg.embed_dim, a->embedder, infs_embedder_dim(r->embedder));
	return runtime_engine(&r->engine, r->model, r->store, a);
}

int runtime_model(infs_model **out, const cli_args *a, infs_dtype weights)
{
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.n_threads = a->threads;
	mo.int8_activations = a->int8;
	mo.device = a->device;
	mo.device_max_tokens = CLI_N_CTX;
	mo.device_weights = (int)weights;
	if (infs_model_load(out, a->model, &mo))
		return lib_fail("model"); /* the library's message names the path */
	return 0;
}

int runtime_engine(infs_engine **out, infs_model *model, infs_store *store, const cli_args *a)
{
	infs_geometry sg;
	if (infs_store_geometry(&sg, store))
		return lib_fail(a->store);
	infs_engine_options en = INFS_ENGINE_OPTIONS_INIT;
	en.n_ctx = CLI_N_CTX;
	/* fp8 is a store dtype only: its facts are dequantized into bf16 */
	en.kv_dtype = sg.kv_dtype == INFS_DTYPE_FP8_E4M3 ? INFS_DTYPE_BF16 : sg.kv_dtype;
	en.device = a->device;
	if (infs_engine_create(out, model, &en))
		return lib_fail("engine");
	if (infs_engine_prepare(*out, store))
		return lib_fail(a->store);
	return 0;
}

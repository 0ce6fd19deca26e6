/* The CUDA backend's table (backend/backend.h): the entry points of the
 * store's device copy, retrieval, injection, the model, the embedder and
 * the engine on a device. */
#include "backend/backend.h"
#include "cuda/device_copy.h"
#include "cuda/device_embed.h"
#include "inject/inject.h"
#include "retrieve/retrieve.h"

static const infs__device_backend cuda_backend = { infs__device_attach, infs__retrieve_device,
	                                                infs__searcher_create, infs__searcher_free,
	                                                infs__retrieve_on_device, infs__inject_device,
	                                                infs__injector_create, infs__injector_free,
	                                                infs__inject_on_device,
	                                                infs__device_model_upload, infs__device_model_random,
	                                                infs__device_model_release, infs__device_model_forward,
	                                                infs__device_model_recompute,
	                                                infs__device_model_encode,
	                                                infs__device_bert_upload,
	                                                infs__device_bert_release,
	                                                infs__device_bert_encode,
	                                                infs__device_bert_encode_host,
	                                                infs__device_bert_graph_runs,
	                                                &infs__dengine_cuda };
const infs__device_backend *const infs__cuda = &cuda_backend;


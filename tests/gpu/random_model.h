/* A small random Llama model for the gpu suite's tests of
 * infs__model_random_device: its configuration, and a prompt run through
 * it in calls of given sizes. */
#ifndef INFS_TEST_GPU_RANDOM_MODEL_H
#define INFS_TEST_GPU_RANDOM_MODEL_H

#include <string.h>

#include "gpu.h"
#include "inferscale/inferscale.h"
#include "model/model.h"

static inline infs__model_config gpu_small_llama(uint32_t vocab, uint32_t d, uint32_t layers, uint32_t heads,
                                                 uint32_t kv, uint32_t hd, uint32_t ff, double rope_theta)
{
	infs__model_config c;
	memset(&c, 0, sizeof c);
	c.arch = INFS_ARCH_LLAMA;
	c.n_vocab = vocab, c.n_embd = d, c.n_layers = layers, c.n_heads = heads, c.n_kv_heads = kv;
	c.head_dim = hd, c.n_ff = ff, c.n_ctx_train = 1024, c.norm_eps = 1e-5f;
	infs_geometry_init(&c.geom, INFS_GEOMETRY_VERSION);
	c.geom.n_layers = layers, c.geom.n_kv_heads = kv, c.geom.head_dim = hd, c.geom.rotary_dim = hd;
	c.geom.rope_theta = rope_theta;
	return c;
}

/* The small model of the fp8 and few-token tests: its shape, a paged
 * cache of NB blocks of BS, a prompt of LONG tokens. */
enum { RM_D = 128, RM_LAYERS = 2, RM_HEADS = 4, RM_KV = 2, RM_HD = 32, RM_FF = 192, RM_VOCAB = 512, RM_BS = 4,
       RM_NB = 32, RM_LONG = 70 };

static inline infs__model_config gpu_random_config(void)
{
	return gpu_small_llama(RM_VOCAB, RM_D, RM_LAYERS, RM_HEADS, RM_KV, RM_HD, RM_FF, 10000.0);
}

/* The last token's logits (RM_VOCAB floats) after the prompt's RM_LONG
 * tokens go through m in calls of the given sizes (summing to RM_LONG),
 * into a fresh cache with a shuffled block table, on a stream of its own;
 * with graph set, the last call is captured as a CUDA graph and replayed
 * instead of run. */
static inline void gpu_random_run(float *logits, const infs_model *m, const uint32_t *calls, int n_calls, int graph)
{
	infs_geometry g = m->cfg.geom;
	uint16_t *mem;
	void *lk[RM_LAYERS], *lv[RM_LAYERS];
	infs_kv_layout kl;
	gpu_vllm_cache(&kl, &mem, lk, lv, &g, RM_NB, RM_BS);
	int32_t table[RM_NB], tokens[RM_LONG];
	for (int i = 0; i < RM_NB; i++)
		table[i] = (i * 7) % RM_NB;
	for (int i = 0; i < RM_LONG; i++)
		tokens[i] = (i * 131 + 17) % RM_VOCAB;
	int32_t *d_table = gpu_to_dev(table, sizeof table), *d_tokens = gpu_to_dev(tokens, sizeof tokens);
	float *d_logits = gpu_to_dev(NULL, RM_VOCAB * 4);
	cudaStream_t s;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	uint32_t past = 0;
	for (int c = 0; c < n_calls; c++) {
		infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
		o.cache = &kl, o.block_table = d_table, o.block_table_len = RM_NB, o.n_past = past, o.stream = s;
		if (graph && c == n_calls - 1) {
			cudaGraph_t gr;
			cudaGraphExec_t ex;
			CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
			CHECK_OK(infs_model_forward_device(d_logits, m, d_tokens + past, NULL, calls[c], &o));
			CUDA_OK(cudaStreamEndCapture(s, &gr));
			CUDA_OK(cudaGraphInstantiate(&ex, gr, 0));
			CUDA_OK(cudaGraphLaunch(ex, s));
			CUDA_OK(cudaStreamSynchronize(s));
			cudaGraphExecDestroy(ex);
			cudaGraphDestroy(gr);
		} else {
			CHECK_OK(infs_model_forward_device(d_logits, m, d_tokens + past, NULL, calls[c], &o));
		}
		past += calls[c];
	}
	CUDA_OK(cudaStreamSynchronize(s));
	gpu_from_dev(logits, d_logits, RM_VOCAB * 4);
	cudaStreamDestroy(s);
	cudaFree(mem), cudaFree(d_table), cudaFree(d_tokens), cudaFree(d_logits);
}

/* sum (a - b)^2 / sum b^2 over RM_VOCAB logits */
static inline double gpu_nmse(const float *a, const float *b)
{
	double e = 0, t = 0;
	for (int i = 0; i < RM_VOCAB; i++) {
		e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		t += (double)b[i] * b[i];
	}
	return e / t;
}

#endif

/* The configuration of a small random Llama model for the gpu suite's
 * tests of infs__model_random_device. */
#ifndef INFS_TEST_GPU_RANDOM_MODEL_H
#define INFS_TEST_GPU_RANDOM_MODEL_H

#include <string.h>

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

#endif

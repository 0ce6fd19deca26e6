/* Llama-3-8B's configuration, for the GPU benchmarks' random models
 * (infs__model_random_device): 32 layers, 4096 wide, 32 heads over 8 KV
 * heads of 128, FFN 14336, vocabulary 128256, RoPE theta 500000 with
 * llama3 scaling (factor 8, low 1, high 4, original 8192), untied head. */
#ifndef INFS_BENCH_LLAMA3_H
#define INFS_BENCH_LLAMA3_H

#include <string.h>

#include "model/model.h"

static inline infs__model_config llama3_8b(void)
{
	infs__model_config c;
	memset(&c, 0, sizeof c);
	c.arch = INFS_ARCH_LLAMA;
	c.n_vocab = 128256, c.n_embd = 4096, c.n_layers = 32, c.n_heads = 32, c.n_kv_heads = 8;
	c.head_dim = 128, c.n_ff = 14336, c.n_ctx_train = 8192, c.norm_eps = 1e-5f;
	infs_geometry_init(&c.geom, INFS_GEOMETRY_VERSION);
	infs_geometry *g = &c.geom;
	g->n_layers = c.n_layers, g->n_kv_heads = c.n_kv_heads, g->head_dim = c.head_dim, g->rotary_dim = c.head_dim;
	g->rope_style = INFS_ROPE_NEOX, g->rope_theta = 500000.0, g->rope_scaling = INFS_ROPE_SCALING_LLAMA3;
	g->rope_factor = 8.0, g->rope_low_freq_factor = 1.0, g->rope_high_freq_factor = 4.0;
	g->rope_original_max_pos = 8192;
	return c;
}

#endif

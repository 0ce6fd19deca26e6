/* The GGUF reader on the real SmolLM2-135M-Instruct Q4_1 file: counts, types,
 * offsets and sizes as the gguf Python package reports them. */
#include <stdio.h>
#include <string.h>

#include "cache_path.h"
#include "check.h"
#include "gguf/gguf.h"

int main(void)
{
	char path[4096];
	cache_path(path, sizeof path, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	infs__gguf *g;
	CHECK_OK(infs__gguf_open(&g, path));
	if (!g)
		CHECK_DONE();
	CHECK(g->version == 3 && g->n_kv == 33 && g->n_tensors == 272);
	CHECK(g->alignment == 32 && g->data_offset == 1785664 && g->size == 98362432);

	int counts[64] = { 0 };
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (g->tensors[i].type < 64)
			counts[g->tensors[i].type]++;
	CHECK(counts[INFS_GGML_Q4_1] == 210 && counts[INFS_GGML_F32] == 61 && counts[INFS_GGML_Q8_0] == 1);

	const infs__gguf_tensor *t = infs__gguf_tensor_find(g, "token_embd.weight");
	CHECK(t && t->type == INFS_GGML_Q8_0 && t->n_dims == 2 && t->ne[0] == 576 && t->ne[1] == 49152 &&
	      t->offset == 1785664 && t->nbytes == 30081024);
	t = infs__gguf_tensor_find(g, "blk.0.ffn_down.weight");
	CHECK(t && t->type == INFS_GGML_Q4_1 && t->ne[0] == 1536 && t->ne[1] == 576 &&
	      t->offset == 31868992 && t->nbytes == 552960);
	t = infs__gguf_tensor_find(g, "output_norm.weight");
	CHECK(t && t->type == INFS_GGML_F32 && t->offset == 98360128 && t->nbytes == 2304 &&
	      t->offset + t->nbytes == g->size);

	infs__gguf_str s;
	int64_t v;
	double f;
	CHECK_OK(infs__gguf_get_str(g, "general.architecture", &s));
	CHECK(infs__gguf_str_eq(s, "llama"));
	CHECK_OK(infs__gguf_get_str(g, "tokenizer.ggml.pre", &s));
	CHECK(infs__gguf_str_eq(s, "smollm"));
	CHECK_OK(infs__gguf_get_int(g, "llama.block_count", &v));
	CHECK(v == 30);
	CHECK_OK(infs__gguf_get_float(g, "llama.rope.freq_base", &f));
	CHECK(f == 100000.0);
	const infs__gguf_value *a;
	CHECK_OK(infs__gguf_get_arr(g, "tokenizer.ggml.tokens", INFS_GGUF_STRING, &a));
	CHECK(a && a->n == 49152 && infs__gguf_str_eq(a->strs[1], "<|im_start|>"));
	CHECK_OK(infs__gguf_get_arr(g, "tokenizer.ggml.merges", INFS_GGUF_STRING, &a));
	CHECK(a && a->n == 48900);
	CHECK_OK(infs__gguf_get_arr(g, "tokenizer.ggml.token_type", INFS_GGUF_I64, &a));
	CHECK(a && a->n == 49152 && infs__gguf_arr_int(a, 0) == 3 && infs__gguf_arr_int(a, 17) == 1);
	infs__gguf_close(g);
	CHECK_DONE();
}

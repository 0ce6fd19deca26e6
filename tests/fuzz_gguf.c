/* libFuzzer target for the GGUF reader: any byte string must open cleanly or
 * fail with INFS_EFORMAT, and whatever opens must only point inside the input.
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude \
 *     -Ilibinferscale -Ibuild/include tests/fuzz_gguf.c libinferscale/gguf.c \
 *     libinferscale/error.c -o fuzz_gguf && ./fuzz_gguf
 * (meson builds it as tests/fuzz_gguf when the compiler is clang). */
#include <stdint.h>
#include <stdlib.h>

#include "gguf.h"
#include "inferscale/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	infs__gguf *g;
	int rc = infs__gguf_open_memory(&g, data, size, "fuzz");
	if (rc != INFS_OK) {
		require((rc == INFS_EFORMAT || rc == INFS_ENOMEM) && g == NULL);
		return 0;
	}
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const infs__gguf_tensor *t = &g->tensors[i];
		require(t->offset <= size && t->nbytes <= size - t->offset);
	}
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const infs__gguf_value *v = &g->kv[i].value;
		/* Touch every string so ASan sees any pointer outside the input. */
		volatile char sink = 0;
		if (v->type == INFS_GGUF_STRING && v->str.len)
			sink ^= v->str.ptr[v->str.len - 1];
		if (v->type == INFS_GGUF_ARRAY && v->elem_type == INFS_GGUF_STRING)
			for (uint64_t j = 0; j < v->n; j++)
				if (v->strs[j].len)
					sink ^= v->strs[j].ptr[v->strs[j].len - 1];
		if (v->type == INFS_GGUF_ARRAY && v->raw && v->n)
			sink ^= (char)infs__gguf_arr_int(v, v->n - 1);
		(void)sink;
	}
	infs__gguf_close(g);
	return 0;
}

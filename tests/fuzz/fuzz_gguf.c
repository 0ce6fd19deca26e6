/* libFuzzer target for the GGUF reader: any byte string must open cleanly or
 * fail with INFS_EFORMAT, and whatever opens must only point inside the input.
 * A file that opens is also read as a tokenizer, which then encodes and
 * decodes a sample text. scripts/fuzz.sh builds and runs it. */
#include "fuzz_util.h"
#include "gguf/gguf.h"
#include "inferscale/common.h"
#include "text/tokenizer_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	infs_tokenizer *tok;
	if (infs__tokenizer_from_gguf(&tok, g, "fuzz") == INFS_OK) {
		static const char text[] = "Hello world 123 <|im_start|>x\xff \xe4\xb8\xad";
		infs_token ids[256];
		char out[1024];
		size_t n = 0, m = 0;
		rc = infs_tokenize(tok, text, sizeof text - 1,
		                       INFS_TOKENIZE_PARSE_SPECIAL | INFS_TOKENIZE_ADD_SPECIAL, ids, 256, &n);
		require(rc == INFS_OK || rc == INFS_ERANGE);
		if (rc == INFS_OK) {
			/* Every id it gave is in range: decoding can only lack room. */
			rc = infs_detokenize(tok, ids, n, 0, out, sizeof out, &m);
			require(rc == INFS_OK || rc == INFS_ERANGE);
		}
		infs_tokenizer_free(tok);
	}
	infs__gguf_close(g);
	return 0;
}

#include "model/wmat.h"

#include <stdlib.h>

#include "gguf/gguf.h"
#include "model/quant.h"

void infs__wmat_row(float *dst, const infs__wmat *w, uint32_t r)
{
	infs__dequantize(dst, (const char *)w->data + (size_t)r * w->row_bytes, w->type, w->cols);
}

int infs__wmat_keeps(uint32_t type, uint64_t cols)
{
	uint32_t be = infs__ggml_block_elems(type);
	return be > 1 && cols % be == 0;
}

void infs__wmat_free(infs__wmat *w)
{
	free(w->data);
	w->data = NULL;
}

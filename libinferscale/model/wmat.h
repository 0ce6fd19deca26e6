/* A weight matrix as the model keeps it: f32, or the GGUF's quantized
 * blocks left as they are (each row a whole number of blocks), so that the
 * resident model stays near the file's size. Products over it are
 * model/qmatmul.h's. */
#ifndef INFS_WMAT_H
#define INFS_WMAT_H

#include <stddef.h>
#include <stdint.h>

typedef struct infs__wmat {
	uint32_t type;      /* a ggml type id (gguf.h): INFS_GGML_F32 or a block type */
	uint32_t rows, cols;
	size_t row_bytes;   /* bytes from one row to the next */
	void *data;         /* owned; NULL: no matrix */
	uint32_t int8_tokens; /* products of up to this many tokens quantize the
	                         activations to 8 bits (model/qdot.h); 0: never */
} infs__wmat;

/* Row r as cols f32 values. */
void infs__wmat_row(float *dst, const infs__wmat *w, uint32_t r);

/* Whether rows of cols elements of type can be kept as they are: a block
 * type whose blocks divide the row (anything else is converted to f32). */
int infs__wmat_keeps(uint32_t type, uint64_t cols);

void infs__wmat_free(infs__wmat *w);

#endif

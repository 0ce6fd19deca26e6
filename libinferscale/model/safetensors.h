/* Hugging Face safetensors checkpoints, memory-mapped: one file, or a
 * directory holding model.safetensors or a sharded set listed by
 * model.safetensors.index.json. Every header field and offset is checked at
 * open, so a tensor handed out always lies inside its file. */
#ifndef INFS_SAFETENSORS_H
#define INFS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define INFS_ST_MAX_DIMS 8

typedef enum infs__st_dtype {
	INFS_ST_F32,
	INFS_ST_F16,
	INFS_ST_BF16,
	INFS_ST_OTHER /* a valid safetensors dtype that is not a float type we compute with */
} infs__st_dtype;

typedef struct infs__st_tensor {
	const char *name;
	infs__st_dtype dtype;
	const char *dtype_name;   /* as the header spells it: "F32", "I64", ... */
	uint32_t n_dims;
	uint64_t shape[INFS_ST_MAX_DIMS]; /* row-major, outermost first */
	uint64_t n_elems;
	const void *data;
	size_t nbytes;
	const char *file;         /* the file it lives in, for messages */
} infs__st_tensor;

typedef struct infs__safetensors infs__safetensors;

/* Opens path: a .safetensors file or a directory (see above). Errors:
 * INFS_ENOTFOUND (no such file), INFS_EIO (read/mmap failed), INFS_EFORMAT
 * (truncated file, broken header JSON, unknown dtype, offsets outside the
 * data, sizes that disagree with shapes, a tensor in two shards). */
int infs__safetensors_open(infs__safetensors **out, const char *path);
void infs__safetensors_close(infs__safetensors *st);

size_t infs__safetensors_count(const infs__safetensors *st);
const infs__st_tensor *infs__safetensors_at(const infs__safetensors *st, size_t i);
/* The tensor called name, or NULL. */
const infs__st_tensor *infs__safetensors_find(const infs__safetensors *st, const char *name);

#endif

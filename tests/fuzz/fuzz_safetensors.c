/* libFuzzer target for the safetensors reader: any file opens or fails with
 * an error code, and every tensor of one that opens has a size that agrees
 * with its shape and lies inside the file. scripts/fuzz.sh builds and runs it. */
#include "fuzz_util.h"
#include "inferscale/common.h"
#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_write("model.safetensors", data, size);
	infs__safetensors *st = NULL;
	int rc = infs__safetensors_open(&st, path);
	if (rc != INFS_OK) {
		require(rc < 0 && st == NULL);
		return 0;
	}
	size_t total = 0;
	for (size_t i = 0; i < infs__safetensors_count(st); i++) {
		const infs__st_tensor *t = infs__safetensors_at(st, i);
		require(t && t->name && t->n_dims <= INFS_ST_MAX_DIMS);
		uint64_t elems = 1;
		for (uint32_t d = 0; d < t->n_dims; d++)
			elems *= t->shape[d];
		require(elems == t->n_elems && t->nbytes <= size);
		require(infs__safetensors_find(st, t->name) == t);
		total += t->nbytes;
		if (t->nbytes) {
			volatile uint8_t sink = ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
			(void)sink;
		}
	}
	require(total <= size);
	infs__safetensors_close(st);
	return 0;
}

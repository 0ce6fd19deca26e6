/* Dequantisation of every ggml type against the gguf Python package's
 * reference code (fixture made by tests/fixtures/model/make_quant.py). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "model/quant.h"
#include "read_file.h"

static uint32_t u32_at(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	if (argc != 2)
		CHECK_DONE();
	size_t len;
	unsigned char *buf = (unsigned char *)read_file(argv[1], &len);
	CHECK(buf != NULL);
	if (!buf)
		CHECK_DONE();

	int types_seen = 0;
	for (size_t off = 0; off + 12 <= len;) {
		uint32_t type = u32_at(buf + off), n = u32_at(buf + off + 4), nb = u32_at(buf + off + 8);
		const unsigned char *raw = buf + off + 12;
		const unsigned char *want = raw + nb;
		off += 12 + nb + (size_t)n * 4;
		CHECK(off <= len);
		if (off > len)
			break;
		size_t bytes = 0;
		CHECK_OK(infs__ggml_nbytes(&bytes, type, n));
		CHECK(bytes == nb);
		float *got = malloc((size_t)n * sizeof *got);
		infs__dequantize(got, raw, type, n);
		int bad = 0;
		for (uint32_t i = 0; i < n; i++) {
			float w;
			memcpy(&w, want + 4 * i, 4);
			if (got[i] != w && fabsf(got[i] - w) > 1e-6f * fabsf(w))
				bad++;
		}
		char name[24];
		if (bad)
			fprintf(stderr, "%s: %d of %u values differ\n", infs__ggml_type_name(type, name), bad, n);
		CHECK(bad == 0);
		free(got);
		types_seen++;
	}
	CHECK(types_seen == 11);

	/* Sizes: a partial block, an unknown type. */
	size_t bytes;
	CHECK_ERR(infs__ggml_nbytes(&bytes, INFS_GGML_Q4_1, 33), INFS_EFORMAT);
	CHECK_ERR(infs__ggml_nbytes(&bytes, 17, 256), INFS_EUNSUPPORTED);
	CHECK_ERR(infs__ggml_nbytes(&bytes, INFS_GGML_Q8_0, UINT64_MAX - 31), INFS_EFORMAT);
	CHECK_OK(infs__ggml_nbytes(&bytes, INFS_GGML_Q6_K, 512));
	CHECK(bytes == 420);
	char name[24];
	CHECK(strcmp(infs__ggml_type_name(99, name), "ggml type 99") == 0);
	free(buf);
	CHECK_DONE();
}

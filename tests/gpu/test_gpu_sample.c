/* Greedy sampling on the device (infs_k_argmax, kernels/sample.cu) against
 * the host's argmax (engine/sampling.c): rows of random logits of several
 * widths (one element, below a warp, not a multiple of the block, the size
 * of real vocabularies), the maximum planted at the first, the last and a
 * middle index, ties (the lowest index wins), NaN in a row (ignored) and a
 * row of NaN (index 0). */
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "engine/sampling.h"
#include "model_kernels.h"
#include "util/splitmix.h"

static void check_rows(const float *h, uint32_t rows, uint32_t n, const int32_t *want, const char *what)
{
	float *d;
	int32_t *d_out, got[64];
	CUDA_OK(cudaMalloc((void **)&d, (size_t)rows * n * sizeof *d));
	CUDA_OK(cudaMalloc((void **)&d_out, rows * sizeof *d_out));
	CUDA_OK(cudaMemcpy(d, h, (size_t)rows * n * sizeof *d, cudaMemcpyHostToDevice));
	CUDA_OK(infs_k_argmax(d_out, d, rows, n, 0));
	CUDA_OK(cudaMemcpy(got, d_out, rows * sizeof *got, cudaMemcpyDeviceToHost));
	for (uint32_t r = 0; r < rows; r++)
		if (got[r] != want[r]) {
			printf("%s, width %u, row %u: device %d, expected %d\n", what, n, r, got[r], want[r]);
			CHECK(0);
		}
	cudaFree(d);
	cudaFree(d_out);
}

int main(void)
{
	gpu_require();
	static const uint32_t widths[] = { 1, 7, 32, 513, 4099, 49152, 128256 };
	uint64_t rng = 3;
	for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
		const uint32_t n = widths[wi], rows = 8;
		float *h = malloc((size_t)rows * n * sizeof *h);
		int32_t want[8];
		for (size_t i = 0; i < (size_t)rows * n; i++)
			h[i] = (float)(infs__splitmix64(&rng) % 100000) / 1000.0f - 50.0f;
		/* rows 1-3: a maximum planted first, last, in the middle */
		const uint32_t at[3] = { 0, n - 1, n / 2 };
		for (int r = 1; r <= 3; r++)
			h[(size_t)r * n + at[r - 1]] = 1000.0f;
		/* row 4: two equal maxima, the lower index wins */
		if (n > 1) {
			h[4 * (size_t)n + n / 3] = 2000.0f;
			h[4 * (size_t)n + n - 1] = 2000.0f;
		}
		/* row 5: NaN at the first index is ignored */
		h[5 * (size_t)n] = NAN;
		/* row 6: all NaN */
		for (uint32_t j = 0; j < n; j++)
			h[6 * (size_t)n + j] = NAN;
		for (uint32_t r = 0; r < rows; r++)
			want[r] = r == 6 ? 0 : infs__argmax(h + (size_t)r * n, n);
		if (n > 1)
			want[5] = 1 + infs__argmax(h + 5 * (size_t)n + 1, n - 1);
		CHECK(want[1] == 0 && (uint32_t)want[2] == n - 1 && (uint32_t)want[3] == n / 2);
		check_rows(h, rows, n, want, "random rows");
		free(h);
	}
	CUDA_OK(infs_k_argmax(NULL, NULL, 0, 16, 0)); /* no rows: nothing runs */
	CHECK_DONE();
}

/* The matrix product, with BLAS and with the plain-C fallback, against a
 * double-precision reference on sizes that are not multiples of the tiles,
 * on 1 and 3 threads. */
#include <math.h>

#include "check.h"
#include "test_util.h"
#include "model/matmul.h"

static void check_size(uint32_t n, uint32_t in, uint32_t out, infs__pool *pool)
{
	uint64_t seed = n * 131 + in * 7 + out;
	float *x = malloc((size_t)n * in * sizeof *x), *w = malloc((size_t)out * in * sizeof *w);
	float *b = malloc(out * sizeof *b), *y1 = malloc((size_t)n * out * sizeof *y1);
	float *y2 = malloc((size_t)n * out * sizeof *y2);
	for (size_t i = 0; i < (size_t)n * in; i++)
		x[i] = rng_float(&seed);
	for (size_t i = 0; i < (size_t)out * in; i++)
		w[i] = rng_float(&seed);
	for (uint32_t i = 0; i < out; i++)
		b[i] = rng_float(&seed);
	infs__matmul_blocked(y1, x, w, b, n, in, out, pool);
	infs__matmul(y2, x, w, NULL, n, in, out, pool);
	double worst1 = 0, worst2 = 0;
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t o = 0; o < out; o++) {
			double ref = 0;
			for (uint32_t k = 0; k < in; k++)
				ref += (double)x[(size_t)t * in + k] * w[(size_t)o * in + k];
			double d1 = fabs(y1[(size_t)t * out + o] - (ref + b[o]));
			double d2 = fabs(y2[(size_t)t * out + o] - ref);
			worst1 = d1 > worst1 ? d1 : worst1;
			worst2 = d2 > worst2 ? d2 : worst2;
		}
	if (worst1 > 1e-4 * sqrt(in) || worst2 > 1e-4 * sqrt(in))
		fprintf(stderr, "n %u in %u out %u: blocked %g, default %g\n", n, in, out, worst1, worst2);
	CHECK(worst1 <= 1e-4 * sqrt(in));
	CHECK(worst2 <= 1e-4 * sqrt(in));
	free(x);
	free(w);
	free(b);
	free(y1);
	free(y2);
}

int main(void)
{
	static const uint32_t sizes[][3] = { { 1, 1, 1 }, { 1, 70, 37 }, { 5, 70, 37 }, { 4, 64, 64 },
	                                     { 13, 200, 129 }, { 3, 7, 300 } };
	for (uint32_t threads = 1; threads <= 3; threads += 2) {
		infs__pool *pool = NULL;
		CHECK_OK(infs__pool_create(&pool, threads));
		CHECK(pool && infs__pool_size(pool) == threads);
		for (size_t i = 0; pool && i < sizeof sizes / sizeof sizes[0]; i++)
			check_size(sizes[i][0], sizes[i][1], sizes[i][2], pool);
		infs__pool_free(pool);
	}
	CHECK_DONE();
}

/* Products over quantized weights (model/qmatmul.h), with every kernel set
 * this CPU runs, against a double-precision product over the dequantized
 * matrix: every block type the GGUF loader keeps, row counts that are not
 * multiples of the kernels' row groups or tasks, 1 to 9, 13 and 70 (three
 * token chunks) tokens, 1 and 3 threads, with and without a bias.
 *   test_qmatmul [bench]   bench: times one token and 16 tokens instead */
#include <math.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "test_util.h"
#include "inferscale/common.h"
#include "gguf/gguf.h"
#include "model/qmatmul.h"
#include "model/quant.h"

static const uint32_t types[] = { INFS_GGML_Q4_0, INFS_GGML_Q4_1, INFS_GGML_Q5_0, INFS_GGML_Q5_1,
	                          INFS_GGML_Q8_0, INFS_GGML_Q4_K, INFS_GGML_Q5_K, INFS_GGML_Q6_K };

/* Random blocks whose f16 scales are small finite numbers. */
static void fill_blocks(uint8_t *p, uint32_t type, size_t n_blocks, uint64_t *seed)
{
	static const uint16_t halves[] = { 0x2800, 0x2a00, 0xa800, 0x2400, 0x1c00 };
	const uint32_t bb = infs__ggml_block_bytes(type);
	for (size_t i = 0; i < n_blocks * bb; i++)
		p[i] = (uint8_t)(rng_float(seed) * 127.0f + 128.0f);
	for (size_t b = 0; b < n_blocks; b++) {
		uint8_t *blk = p + b * bb;
		size_t at[2] = { 0, 2 };
		int n_half = type == INFS_GGML_Q4_1 || type == INFS_GGML_Q5_1 || type == INFS_GGML_Q4_K ||
		             type == INFS_GGML_Q5_K ? 2 : 1;
		if (type == INFS_GGML_Q6_K)
			at[0] = 128 + 64 + 16;
		for (int h = 0; h < n_half; h++) {
			uint16_t v = halves[(size_t)((rng_float(seed) + 1.0f) * 2.4f) % 5];
			blk[at[h]] = (uint8_t)v;
			blk[at[h] + 1] = (uint8_t)(v >> 8);
		}
	}
}

static infs__wmat make(uint32_t type, uint32_t rows, uint32_t cols, uint64_t *seed)
{
	const size_t rb = (size_t)cols / infs__ggml_block_elems(type) * infs__ggml_block_bytes(type);
	infs__wmat w = { type, rows, cols, rb, malloc(rb * rows) };
	fill_blocks(w.data, type, (size_t)rows * cols / infs__ggml_block_elems(type), seed);
	return w;
}

static void check_shape(uint32_t type, uint32_t rows, uint32_t cols, uint32_t n, int with_bias, infs__pool *pool)
{
	uint64_t seed = type * 1000003u + rows * 131u + cols * 7u + n;
	infs__wmat w = make(type, rows, cols, &seed);
	float *deq = malloc((size_t)rows * cols * sizeof *deq), *x = malloc((size_t)n * cols * sizeof *x);
	float *b = malloc(rows * sizeof *b), *y = malloc((size_t)n * rows * sizeof *y);
	infs__dequantize(deq, w.data, type, (size_t)rows * cols);
	for (size_t i = 0; i < (size_t)n * cols; i++)
		x[i] = rng_float(&seed);
	for (uint32_t i = 0; i < rows; i++)
		b[i] = rng_float(&seed);
	for (infs__isa isa = INFS__ISA_PORTABLE; isa <= INFS__ISA_AVX2; isa++) {
		int rc = infs__matmul_w_isa(y, x, &w, with_bias ? b : NULL, n, pool, isa);
		if (rc == INFS_EUNSUPPORTED && isa != INFS__ISA_PORTABLE)
			continue;
		CHECK_OK(rc);
		double worst = 0;
		for (uint32_t t = 0; t < n; t++)
			for (uint32_t r = 0; r < rows; r++) {
				double ref = with_bias ? b[r] : 0, mag = fabs(ref);
				for (uint32_t k = 0; k < cols; k++) {
					double p = (double)x[(size_t)t * cols + k] * deq[(size_t)r * cols + k];
					ref += p;
					mag += fabs(p);
				}
				double e = fabs(y[(size_t)t * rows + r] - ref) / (mag + 1e-30);
				worst = e > worst ? e : worst;
			}
		if (worst > 1e-5)
			fprintf(stderr, "type %u isa %d rows %u cols %u n %u: relative error %g\n", type, (int)isa, rows,
			        cols, n, worst);
		CHECK(worst <= 1e-5);
	}
	free(w.data);
	free(deq);
	free(x);
	free(b);
	free(y);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Weights per second of one thread at 1 and 16 tokens, 1536 x 576. */
static void bench(void)
{
	infs__pool *pool = NULL;
	CHECK_OK(infs__pool_create(&pool, 1));
	uint64_t seed = 1;
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		const uint32_t cols = types[i] >= INFS_GGML_Q4_K ? 512 : 576;
		infs__wmat w = make(types[i], 1536, cols, &seed);
		float *x = calloc((size_t)16 * cols, sizeof *x), *y = malloc((size_t)16 * 1536 * sizeof *y);
		for (uint32_t n = 1; n <= 16; n += 15)
			for (infs__isa isa = INFS__ISA_PORTABLE; isa <= INFS__ISA_AVX2; isa++) {
				double t0 = now();
				int reps = 0;
				while (now() - t0 < 0.2 && infs__matmul_w_isa(y, x, &w, NULL, n, pool, isa) == INFS_OK)
					reps++;
				double s = (now() - t0) / (reps ? reps : 1);
				printf("type %2u isa %d n %2u: %.2f ms, %.2f G weights/s\n", types[i], (int)isa, n, s * 1e3,
				       1536.0 * cols / s * 1e-9);
			}
		free(w.data);
		free(x);
		free(y);
	}
	infs__pool_free(pool);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "bench")) {
		bench();
		return 0;
	}
	static const uint32_t rows[] = { 1, 3, 5, 17, 33 };
	static const uint32_t ns[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 70 };
	for (uint32_t threads = 1; threads <= 3; threads += 2) {
		infs__pool *pool = NULL;
		CHECK_OK(infs__pool_create(&pool, threads));
		for (size_t t = 0; pool && t < sizeof types / sizeof types[0]; t++) {
			const uint32_t be = infs__ggml_block_elems(types[t]);
			const uint32_t cols[] = { be, 3 * be, be == 32 ? 608 : 512 };
			for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
				for (size_t c = 0; c < 3; c++)
					for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
						check_shape(types[t], rows[r], cols[c], ns[k], (r + k) % 2, pool);
		}
		infs__pool_free(pool);
	}
	CHECK_DONE();
}

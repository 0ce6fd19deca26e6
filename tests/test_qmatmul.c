/* Products over quantized weights (model/qmatmul.h), with every kernel set
 * this CPU runs, against a double-precision product over the dequantized
 * matrix: every block type the GGUF loader keeps, row counts that are not
 * multiples of the kernels' row groups or tasks, 1 to 9, 13 and 70 (three
 * token chunks) tokens, 1 and 3 threads, with and without a bias; the
 * integer kernels on 8-bit activations (Q4_0, Q4_1, Q8_0; model/qdot.h) on
 * the same shapes, and their quantizer.
 *   test_qmatmul [bench]   bench: times both paths at 1 to 200 tokens instead */
#include <math.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "test_util.h"
#include "inferscale/common.h"
#include "gguf/gguf.h"
#include "model/qdot.h"
#include "model/qmatmul.h"
#include "model/quant.h"
#include "util/cpu.h"

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
	infs__wmat w = { .type = type, .rows = rows, .cols = cols, .row_bytes = rb, .data = malloc(rb * rows) };
	fill_blocks(w.data, type, (size_t)rows * cols / infs__ggml_block_elems(type), seed);
	return w;
}

/* The integer path (Q4_0, Q4_1, Q8_0): against a double product over the
 * dequantized matrix and the activations as quantized (relative error
 * <= 1e-5 of sum |xq * w|), and against the f32 product within the
 * activations' rounding, sum over blocks of d / 2 * sum |w|. */
/* How many products the AVX-512 VNNI kernels ran (0 on a CPU without them). */
static int vnni_checked;

static void check_q8(const infs__wmat *w, const float *deq, const float *x, const float *b, uint32_t n, float *y,
                     infs__pool *pool)
{
	const uint32_t rows = w->rows, cols = w->cols, nb = cols / 32;
	if (!infs__qdot_type(w->type)) {
		CHECK(infs__matmul_w_q8(y, x, w, b, n, pool, INFS__ISA_PORTABLE) == INFS_EUNSUPPORTED);
		return;
	}
	infs__q8 *xq = malloc((size_t)n * nb * sizeof *xq);
	infs__q8_quantize(xq, x, (size_t)n * cols, 0);
	float *avx2 = malloc((size_t)n * rows * sizeof *avx2);
	int have_avx2 = 0;
	for (infs__isa isa = INFS__ISA_PORTABLE; isa <= INFS__ISA_AVX512_VNNI; isa++) {
		int rc = infs__matmul_w_q8(y, x, w, b, n, pool, isa);
		if (rc == INFS_EUNSUPPORTED && isa != INFS__ISA_PORTABLE)
			continue;
		CHECK_OK(rc);
		/* vpdpbusd sums what maddubs + madd sum, without saturation, which
		 * these weights and activations never reach: the same bits. */
		if (isa == INFS__ISA_AVX2 && (have_avx2 = 1))
			memcpy(avx2, y, (size_t)n * rows * sizeof *avx2);
		if (isa == INFS__ISA_AVX512_VNNI && have_avx2) {
			CHECK(!memcmp(avx2, y, (size_t)n * rows * sizeof *avx2));
			vnni_checked++;
		}
		double worst = 0, worst_f32 = 0;
		for (uint32_t t = 0; t < n; t++)
			for (uint32_t r = 0; r < rows; r++) {
				double ref = b ? b[r] : 0, mag = fabs(ref), f32 = ref, f32_mag = mag, round = 0;
				for (uint32_t k = 0; k < cols; k++) {
					const infs__q8 *q = xq + (size_t)t * nb + k / 32;
					const double wv = deq[(size_t)r * cols + k];
					double p = (double)q->d * q->q[k % 32] * wv;
					ref += p;
					mag += fabs(p);
					p = (double)x[(size_t)t * cols + k] * wv;
					f32 += p;
					f32_mag += fabs(p);
					round += (double)q->d / 2 * fabs(wv);
				}
				const double yv = y[(size_t)t * rows + r];
				double e = fabs(yv - ref) / (mag + 1e-30);
				worst = e > worst ? e : worst;
				e = fabs(yv - f32) / (round + 1e-5 * f32_mag + 1e-30);
				worst_f32 = e > worst_f32 ? e : worst_f32;
			}
		if (worst > 1e-5 || worst_f32 > 1)
			fprintf(stderr, "q8: type %u isa %d rows %u cols %u n %u: relative error %g, %g of the rounding bound\n",
			        w->type, (int)isa, rows, cols, n, worst, worst_f32);
		CHECK(worst <= 1e-5);
		CHECK(worst_f32 <= 1);
	}
	free(avx2);
	free(xq);
}

/* The quantizer: every element within d / 2 of x, the block sums, the AVX2
 * blocks equal to the portable ones bit for bit (ties included), a zero
 * block all zero and a NaN that reaches the scale. */
static void check_quantize(void)
{
	enum { N = 32 * 40 };
	float x[N];
	uint64_t seed = 7;
	for (int i = 0; i < N; i++)
		x[i] = rng_float(&seed) * (i < 32 * 8 ? 1e-3f : 3.0f);
	for (int i = 0; i < 32; i++) /* halves: x * id lands on .5 exactly */
		x[32 * 9 + i] = (float)(i - 16) + (i ? 0.5f : 0.0f);
	x[32 * 9] = -127.0f;
	memset(x + 32 * 10, 0, 32 * sizeof *x);
	x[32 * 11 + 5] = NAN;
	infs__q8 a[N / 32], v[N / 32];
	infs__q8_quantize(a, x, N, 0);
	for (int b = 0; b < N / 32; b++) {
		if (b == 11) {
			CHECK(a[b].d != a[b].d);
			continue;
		}
		int sum = 0;
		for (int i = 0; i < 32; i++) {
			CHECK(fabsf(x[32 * b + i] - a[b].d * a[b].q[i]) <= a[b].d * 0.5001f);
			sum += a[b].q[i];
		}
		CHECK(a[b].s == a[b].d * (float)sum);
	}
	CHECK(a[9].q[1] == -14 && a[9].q[2] == -14 && a[9].q[3] == -12); /* -14.5, -13.5, -12.5: to even */
	CHECK(a[10].d == 0.0f && a[10].s == 0.0f && a[10].q[3] == 0);
	if (!infs__cpu_avx2())
		return;
	infs__q8_quantize(v, x, N, 1);
	for (int b = 0; b < N / 32; b++) {
		CHECK(!memcmp(a[b].q, v[b].q, 32));
		CHECK(b == 11 ? v[b].d != v[b].d : a[b].d == v[b].d && a[b].s == v[b].s);
	}
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
	check_q8(&w, deq, x, with_bias ? b : NULL, n, y, pool);
	free(w.data);
	free(deq);
	free(x);
	free(b);
	free(y);
}

/* infs__matmul_w_multi over matrices of one input (rows 1, 17 and 40,
 * one with a bias) gives what separate infs__matmul_w calls give, bit for
 * bit: with 8-bit activations (int8_tokens set), one token in f32, and
 * token counts past both; also when the matrices differ in type and the
 * products go one at a time. */
static void check_multi(uint32_t type, uint32_t other, uint32_t cols, uint32_t n, uint32_t int8_tokens,
                        infs__pool *pool)
{
	uint64_t seed = type * 7919u + other * 31u + cols + n * 101u + int8_tokens;
	static const uint32_t rows[3] = { 1, 17, 40 };
	infs__wmat w[3];
	float *y[3], *ref[3], *x = malloc((size_t)n * cols * sizeof *x), *b = malloc(40 * sizeof *b);
	for (size_t i = 0; i < (size_t)n * cols; i++)
		x[i] = rng_float(&seed);
	for (int i = 0; i < 40; i++)
		b[i] = rng_float(&seed);
	for (int i = 0; i < 3; i++) {
		w[i] = make(i == 2 ? other : type, rows[i], cols, &seed);
		w[i].int8_tokens = int8_tokens;
		y[i] = malloc((size_t)n * rows[i] * sizeof *y[i]);
		ref[i] = malloc((size_t)n * rows[i] * sizeof *ref[i]);
	}
	const float *bs[3] = { NULL, b, NULL };
	const infs__wmat *ws[3] = { &w[0], &w[1], &w[2] };
	for (int i = 0; i < 3; i++)
		infs__matmul_w(ref[i], x, &w[i], bs[i], n, pool);
	infs__matmul_w_multi(y, x, ws, bs, 3, n, pool);
	for (int i = 0; i < 3; i++) {
		int same = !memcmp(y[i], ref[i], (size_t)n * rows[i] * sizeof *y[i]);
		if (!same)
			fprintf(stderr, "multi: type %u/%u cols %u n %u int8 %u: matrix %d differs\n", type, other, cols, n,
			        int8_tokens, i);
		CHECK(same);
		free(w[i].data);
		free(y[i]);
		free(ref[i]);
	}
	free(x);
	free(b);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Multiply-adds per second of one thread, 1536 x 576, f32 kernels and (for
 * Q4_0 / Q4_1 / Q8_0) the integer ones, at the token counts of decoding, a
 * question and a prompt. */
static void bench(void)
{
	infs__pool *pool = NULL;
	CHECK_OK(infs__pool_create(&pool, 1));
	uint64_t seed = 1;
	static const uint32_t ns[] = { 1, 2, 4, 6, 8, 12, 24, 35, 64, 200 };
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		const uint32_t cols = types[i] >= INFS_GGML_Q4_K ? 512 : 576;
		infs__wmat w = make(types[i], 1536, cols, &seed);
		float *x = calloc((size_t)200 * cols, sizeof *x), *y = malloc((size_t)200 * 1536 * sizeof *y);
		for (size_t e = 0; e < (size_t)200 * cols; e++)
			x[e] = rng_float(&seed);
		for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
			for (int q8 = 0; q8 <= 1; q8++)
				for (infs__isa isa = INFS__ISA_PORTABLE; isa <= INFS__ISA_AVX512_VNNI; isa++) {
					const uint32_t n = ns[k];
					double t0 = now();
					int reps = 0;
					while (now() - t0 < 0.1 &&
					       (q8 ? infs__matmul_w_q8 : infs__matmul_w_isa)(y, x, &w, NULL, n, pool, isa) == INFS_OK)
						reps++;
					if (!reps)
						continue;
					double s = (now() - t0) / reps;
					printf("type %2u %s %-8s n %3u: %8.3f ms, %6.2f G multiply-adds/s\n", types[i],
					       q8 ? "q8 " : "f32", isa == INFS__ISA_AVX512_VNNI ? "vnni" : isa == INFS__ISA_AVX2 ? "avx2" : "portable", n, s * 1e3,
					       1536.0 * cols * n / s * 1e-9);
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
	check_quantize();
	{
		infs__pool *pool = NULL;
		CHECK_OK(infs__pool_create(&pool, 3));
		static const uint32_t qtypes[] = { INFS_GGML_Q4_0, INFS_GGML_Q4_1, INFS_GGML_Q8_0, INFS_GGML_Q5_0 };
		for (size_t t = 0; pool && t < 4; t++)
			for (uint32_t n = 1; n <= 6; n += 5)
				for (uint32_t i8 = 0; i8 <= 4; i8 += 4) {
					uint32_t cols = infs__ggml_block_elems(qtypes[t]) * 19;
					check_multi(qtypes[t], qtypes[t], cols, n, i8, pool);
					check_multi(qtypes[t], INFS_GGML_Q8_0, cols, n, i8, pool);
				}
		infs__pool_free(pool);
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
	/* Said, so that a run on a machine with AVX-512 VNNI shows its kernels ran. */
	printf("integer kernels: %s; AVX-512 VNNI equal to AVX2 bit for bit in %d products\n", infs__matmul_w_kernels(),
	       vnni_checked);
	CHECK(vnni_checked > 0 || strcmp(infs__matmul_w_kernels(), "avx512-vnni"));
	CHECK_DONE();
}

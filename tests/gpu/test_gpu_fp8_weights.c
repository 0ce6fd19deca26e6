/* fp8 weights (infs_model_options.device_weights, kernels/model_fp8.cu):
 * the device's row quantization gives the CPU's codes and scales
 * (infs__f32_to_e4m3) bit for bit, and its widening the CPU's bf16; the fp8
 * product of few tokens is the double-precision product of the same codes
 * within f32 summation error, over shapes with partial token fragments,
 * partial row blocks, one slice of the inner dimension (plain stores) and
 * several (atomic additions), with and without accumulation. A
 * random model with fp8 weights gives logits near the same model's with
 * bf16 weights, not equal to them; and its two product paths (the fp8
 * kernel for a call of few tokens, the widened matrix for a call of more
 * than INFS_K_FP8_GEMM_MAX_TOKENS) agree on the same prompt. */
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "model/model.h"
#include "random_model.h"
#include "model_kernels.h"

static uint64_t rng = 88172645463325252ull;

static float urand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (float)((rng >> 11) % 2000001) / 1000000.0f - 1.0f;
}

/* Quantization and widening of rows x cols values, rows of every kind:
 * random, zero, large, tiny, one value much larger than the rest. */
static void check_rows(uint32_t rows, uint32_t cols)
{
	const size_t n = (size_t)rows * cols;
	uint16_t *src = malloc(n * 2), *wide = malloc(n * 2);
	uint8_t *codes = malloc(n);
	float *scales = malloc(rows * 4);
	for (uint32_t r = 0; r < rows; r++) {
		const float mag = r % 5 == 1 ? 0.0f : r % 5 == 2 ? 3e4f : r % 5 == 3 ? 1e-6f : 1.0f;
		for (uint32_t c = 0; c < cols; c++)
			src[(size_t)r * cols + c] = infs__f32_to_bf16(mag * urand() * (r % 5 == 4 && c == 7 ? 900.0f : 1.0f));
	}
	uint16_t *d_src = gpu_to_dev(src, n * 2), *d_wide = gpu_to_dev(NULL, n * 2);
	uint8_t *d_codes = gpu_to_dev(NULL, n);
	float *d_scales = gpu_to_dev(NULL, rows * 4);
	CUDA_OK(infs_k_fp8_quant_rows(d_codes, d_scales, d_src, rows, cols, 0));
	CUDA_OK(infs_k_fp8_widen_rows(d_wide, d_codes, d_scales, rows, cols, 0));
	gpu_from_dev(codes, d_codes, n);
	gpu_from_dev(scales, d_scales, rows * 4);
	gpu_from_dev(wide, d_wide, n * 2);
	size_t bad_code = 0, bad_scale = 0, bad_wide = 0;
	for (uint32_t r = 0; r < rows; r++) {
		float m = 0;
		for (uint32_t c = 0; c < cols; c++)
			m = fmaxf(m, fabsf(infs__bf16_to_f32(src[(size_t)r * cols + c])));
		const float s = m > 0 ? m / 448.0f : 1.0f;
		bad_scale += scales[r] != s;
		for (uint32_t c = 0; c < cols; c++) {
			const size_t i = (size_t)r * cols + c;
			const uint8_t want = infs__f32_to_e4m3(infs__bf16_to_f32(src[i]) / s);
			bad_code += codes[i] != want;
			bad_wide += wide[i] != infs__f32_to_bf16(infs__e4m3_to_f32(want) * s);
		}
	}
	printf("rows %u x %u: %zu codes, %zu scales, %zu widened values differ from the CPU's\n", rows, cols, bad_code,
	       bad_scale, bad_wide);
	CHECK(bad_code == 0 && bad_scale == 0 && bad_wide == 0);
	cudaFree(d_src), cudaFree(d_wide), cudaFree(d_codes), cudaFree(d_scales);
	free(src), free(wide), free(codes), free(scales);
}

/* y (+)= x W^T through the fp8 kernel against double precision. */
static void check_gemm(uint32_t n, uint32_t in, uint32_t out, int accumulate, uint32_t n_sm)
{
	uint16_t *x = malloc((size_t)n * in * 2);
	uint8_t *w = malloc((size_t)out * in);
	float *scale = malloc(out * 4), *y0 = malloc((size_t)n * out * 4), *y = malloc((size_t)n * out * 4);
	for (size_t i = 0; i < (size_t)n * in; i++)
		x[i] = infs__f32_to_bf16(4 * urand());
	for (size_t i = 0; i < (size_t)out * in; i++) {
		w[i] = infs__f32_to_e4m3(448 * urand());
		if ((w[i] & 0x7f) == 0x7f) /* NaN: no quantizer writes it */
			w[i] = 0;
	}
	for (uint32_t r = 0; r < out; r++)
		scale[r] = (1 + urand()) * 1e-3f;
	for (size_t i = 0; i < (size_t)n * out; i++)
		y0[i] = accumulate ? urand() : NAN; /* without accumulation the NaN must be overwritten */
	uint16_t *d_x = gpu_to_dev(x, (size_t)n * in * 2);
	uint8_t *d_w = gpu_to_dev(w, (size_t)out * in);
	float *d_scale = gpu_to_dev(scale, out * 4), *d_y = gpu_to_dev(y0, (size_t)n * out * 4);
	CUDA_OK(infs_k_fp8_gemm(d_y, d_x, d_w, d_scale, n, in, out, accumulate, n_sm, 0));
	gpu_from_dev(y, d_y, (size_t)n * out * 4);
	double worst = 0;
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t r = 0; r < out; r++) {
			double s = 0, mag = 0;
			for (uint32_t k = 0; k < in; k++) {
				const double p = (double)infs__bf16_to_f32(x[(size_t)t * in + k]) *
				                 infs__e4m3_to_f32(w[(size_t)r * in + k]) * scale[r];
				s += p;
				mag += fabs(p);
			}
			const double base = accumulate ? y0[(size_t)t * out + r] : 0;
			const double err = fabs(y[(size_t)t * out + r] - (base + s)) / (mag + fabs(base) + 1e-30);
			worst = isnan(err) || err > worst ? (isnan(err) ? INFINITY : err) : worst;
		}
	printf("fp8 product n %u, in %u, out %u, accumulate %d: worst error %.2e of the terms' magnitude\n", n, in,
	       out, accumulate, worst);
	CHECK(worst < 2e-5);
	cudaFree(d_x), cudaFree(d_w), cudaFree(d_scale), cudaFree(d_y);
	free(x), free(w), free(scale), free(y0), free(y);
}

int main(void)
{
	gpu_require();
	int n_sm = 0;
	CUDA_OK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));

	check_rows(23, 192);
	check_rows(5, 4096);

	const uint32_t shapes[][3] = { { 1, 64, 16 }, { 3, 192, 48 }, { 8, 576, 960 }, { 35, 576, 272 },
		                           { 57, 1536, 576 }, { 64, 4096, 256 }, { 13, 14336, 64 },
	                           { 1, 4096, 512 } };
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		for (int acc = 0; acc < 2; acc++)
			check_gemm(shapes[i][0], shapes[i][1], shapes[i][2], acc, (uint32_t)n_sm);

	infs__model_config c = gpu_random_config();
	infs_model *bf = NULL, *f8 = NULL;
	CHECK_OK(infs__model_random_device(&bf, &c, 0, RM_LONG, 7, INFS_DTYPE_BF16));
	CHECK_OK(infs__model_random_device(&f8, &c, 0, RM_LONG, 7, INFS_DTYPE_FP8_E4M3));
	CHECK_ERR(infs__model_random_device(&f8, &c, -1, RM_LONG, 7, INFS_DTYPE_FP8_E4M3), INFS_EINVAL);
	CHECK_ERR(infs__model_random_device(&f8, &c, 0, RM_LONG, 7, 9), INFS_EINVAL);
	if (!bf || !f8)
		CHECK_DONE();
	static float lb[RM_VOCAB], lf_short[RM_VOCAB], lf_long[RM_VOCAB];
	const uint32_t one[1] = { RM_LONG }, two[2] = { 40, 30 };
	gpu_random_run(lb, bf, two, 2, 0);
	gpu_random_run(lf_short, f8, two, 2, 0); /* the fp8 kernel */
	gpu_random_run(lf_long, f8, one, 1, 0);  /* widened to bf16 */
	const double vs_bf16 = gpu_nmse(lf_short, lb), paths = gpu_nmse(lf_long, lf_short);
	printf("logits: fp8 against bf16 weights NMSE %.2e; the fp8 model's two paths %.2e\n", vs_bf16, paths);
	CHECK(vs_bf16 > 0 && vs_bf16 < 1e-2);
	CHECK(paths < 1e-4);
	infs_model_free(bf);
	infs_model_free(f8);
	CHECK_DONE();
}

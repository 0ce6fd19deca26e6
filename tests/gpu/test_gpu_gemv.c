/* The fused products of steps of few tokens (infs_k_gemv,
 * kernels/model_gemv.cu): against double precision for bf16 and fp8
 * weights, 1-4 tokens, inputs as bf16 rows or as f32 rows normalised in the
 * kernel (against the host's RMSNorm of the same rows), the three
 * epilogues, widths that leave the warps' last chunks partial, and more
 * rows than the grid has warps; the q|k|v epilogue (RoPE and the cache
 * write) against the product then infs_k_qkv; refused shapes. Then a random model's
 * decoding steps through them against the same steps through RMSNorm,
 * cuBLAS (or the fp8 kernel) and SwiGLU, and a decoding step captured in
 * a CUDA graph and replayed (the same bits as the step run directly). */
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "cuda/device_model.h"
#include "model/model.h"
#include "random_model.h"
#include "model_kernels.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float urand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (float)((rng >> 11) % 2000001) / 1000000.0f - 1.0f;
}

/* Weight (r, k) of a matrix held as bf16 or as e4m3 codes and scales. */
static double weight(const void *w, const float *scale, uint32_t in, uint32_t r, uint32_t k)
{
	const size_t i = (size_t)r * in + k;
	return scale ? (double)infs__e4m3_to_f32(((const uint8_t *)w)[i]) * scale[r]
	             : (double)infs__bf16_to_f32(((const uint16_t *)w)[i]);
}

/* Random weights [out][in]: bf16, or e4m3 codes with a scale per row. */
static void make_weights(void **w, float **scale, int fp8, uint32_t out, uint32_t in)
{
	const size_t nw = (size_t)out * in;
	*w = malloc(fp8 ? nw : 2 * nw);
	*scale = fp8 ? malloc(out * 4) : NULL;
	for (size_t i = 0; i < nw; i++) {
		if (fp8) {
			uint8_t c = infs__f32_to_e4m3(448 * urand());
			((uint8_t *)*w)[i] = (c & 0x7f) == 0x7f ? 0 : c; /* no NaN codes: no quantizer writes them */
		} else {
			((uint16_t *)*w)[i] = infs__f32_to_bf16(urand() * 0.05f);
		}
	}
	for (uint32_t r = 0; fp8 && r < out; r++)
		(*scale)[r] = (1 + urand()) * 1e-4f;
}

/* One call of infs_k_gemv against double precision: fp8 or bf16 weights,
 * n tokens, normed (f32 rows through RMSNorm) or bf16 rows, epilogue epi. */
static void check(int fp8, uint32_t n, uint32_t in, uint32_t out, int normed, int epi, uint32_t n_sm)
{
	const size_t nw = (size_t)out * in, nx = (size_t)n * in, ny = (size_t)n * (epi == INFS_K_GEMV_SWIGLU ? out / 2 : out);
	void *w;
	float *scale, *x = malloc(nx * 4), *g = malloc(in * 4);
	make_weights(&w, &scale, fp8, out, in);
	float *y0 = malloc(ny * 4), *y = malloc(ny * 4);
	uint16_t *a = malloc(nx * 2), *act = malloc(ny * 2);
	for (size_t i = 0; i < nx; i++) {
		x[i] = 3 * urand();
		a[i] = infs__f32_to_bf16(x[i]);
	}
	for (uint32_t k = 0; k < in; k++)
		g[k] = 1 + 0.5f * urand();
	for (size_t i = 0; i < ny; i++)
		y0[i] = epi == INFS_K_GEMV_ADD ? urand() : NAN; /* a store must overwrite the NaN */
	/* the inputs the kernel multiplies: the host's RMSNorm of x when normed */
	for (uint32_t t = 0; normed && t < n; t++) {
		double ss = 0;
		for (uint32_t k = 0; k < in; k++)
			ss += (double)x[(size_t)t * in + k] * x[(size_t)t * in + k];
		const float inv = 1.0f / sqrtf((float)(ss / in) + 1e-5f);
		for (uint32_t k = 0; k < in; k++)
			a[(size_t)t * in + k] = infs__f32_to_bf16(g[k] * (x[(size_t)t * in + k] * inv));
	}
	void *d_w = gpu_to_dev(w, fp8 ? nw : 2 * nw);
	float *d_scale = fp8 ? gpu_to_dev(scale, out * 4) : NULL, *d_x = gpu_to_dev(x, nx * 4), *d_g = gpu_to_dev(g, in * 4);
	float *d_y = gpu_to_dev(y0, ny * 4);
	uint16_t *d_a = gpu_to_dev(a, nx * 2), *d_act = gpu_to_dev(NULL, ny * 2);
	infs_k_gemv_params p = { .w = d_w, .scale = d_scale, .n = n, .in = in, .out = out, .epilogue = epi,
		                 .eps = 1e-5f, .n_sm = n_sm };
	if (normed)
		p.x = d_x, p.norm = d_g;
	else
		p.a = d_a;
	if (epi == INFS_K_GEMV_SWIGLU)
		p.act = d_act;
	else
		p.y = d_y;
	CUDA_OK(infs_k_gemv(&p, 0));
	gpu_from_dev(y, d_y, ny * 4);
	gpu_from_dev(act, d_act, ny * 2);
	const uint32_t units = epi == INFS_K_GEMV_SWIGLU ? out / 2 : out;
	double worst = 0;
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t u = 0; u < units; u++) {
			double s[2] = { 0, 0 }, mag[2] = { 0, 0 };
			for (int r = 0; r < (epi == INFS_K_GEMV_SWIGLU ? 2 : 1); r++)
				for (uint32_t k = 0; k < in; k++) {
					const double v = weight(w, scale, in, u + r * units, k) *
					                 infs__bf16_to_f32(a[(size_t)t * in + k]);
					s[r] += v;
					mag[r] += fabs(v);
				}
			/* the error against what f32 sums may leave (2e-5 of the
			 * terms' magnitude) and, for SwiGLU, one bf16 rounding (2^-8) */
			const size_t at = (size_t)t * units + u;
			double err;
			if (epi == INFS_K_GEMV_SWIGLU) {
				const double sig = 1 / (1 + exp(-s[0])), want = s[0] * sig * s[1];
				const double bound = fabs(want) / 256 + 2e-5 * (1.1 * mag[0] * fabs(s[1]) + fabs(s[0] * sig) * mag[1]);
				err = fabs(infs__bf16_to_f32(act[at]) - want) / (bound + 1e-30);
			} else {
				const double base = epi == INFS_K_GEMV_ADD ? y0[at] : 0;
				err = fabs(y[at] - (base + s[0])) / (2e-5 * (mag[0] + fabs(base)) + 1e-30);
			}
			worst = isnan(err) ? INFINITY : err > worst ? err : worst;
		}
	static const char *const epis[] = { "store", "add", "swiglu" };
	printf("gemv %s n %u in %u out %u %s %s: worst error %.3f of the bound\n", fp8 ? "fp8" : "bf16", n, in, out,
	       normed ? "normed" : "bf16 rows", epis[epi], worst);
	CHECK(worst <= 1);
	cudaFree(d_w), cudaFree(d_scale), cudaFree(d_x), cudaFree(d_g), cudaFree(d_y), cudaFree(d_a), cudaFree(d_act);
	free(w), free(scale), free(x), free(g), free(y0), free(y), free(a), free(act);
}

/* |got - want| within rel of |want| plus 4e-7 of scale (the largest
 * magnitude around: a rotated value that cancels keeps the error of its
 * terms), both NaN or neither. */
static int near(float got, float want, double rel, double scale)
{
	if (isnan(want) || isnan(got))
		return isnan(want) && isnan(got);
	return fabs((double)got - want) <= rel * fabs((double)want) + 4e-7 * scale;
}

static double largest(const float *v, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = fabs(v[i]) > m ? fabs(v[i]) : m;
	return m;
}

/* The q|k|v epilogue inside the product (RoPE with the step's table, the
 * cache write) against the product stored, then infs_k_qkv: n tokens in
 * two sequences (one when n is 1) over a paged cache of f32 or bf16, NeoX
 * or GPT-J pairs over rotary of the 32 dims of a head, bf16 or fp8
 * weights. q within 2 f32 ulps, k, v and the cache within a bf16 ulp,
 * each plus 4e-7 of the largest value (the rotation's multiply-adds may
 * fuse differently in the two kernels), the cache's other slots
 * untouched. */
static void check_qkv(int fp8, uint32_t n, int style, uint32_t rotary, int cache_dtype, uint32_t n_sm)
{
	enum { NQ = 4, NKV = 2, HD = 32, IN = 128, BS = 4, PER_SEQ = 8, NB = 16 };
	const uint32_t out = (NQ + 2 * NKV) * HD, es = cache_dtype == INFS_DTYPE_F32 ? 4 : 2;
	const size_t cache_elems = (size_t)NB * BS * NKV * HD;
	void *w;
	float *scale, x[4 * IN], g[IN], inv_freq[HD / 2];
	make_weights(&w, &scale, fp8, out, IN);
	for (size_t i = 0; i < 4 * IN; i++)
		x[i] = 3 * urand();
	for (uint32_t k = 0; k < IN; k++)
		g[k] = 1 + 0.5f * urand();
	for (uint32_t t = 0; t < rotary / 2; t++)
		inv_freq[t] = powf(10000.0f, -2.0f * t / rotary);
	int32_t table[2 * PER_SEQ], starts[3] = { 0, n > 1 ? 1 : (int32_t)n, (int32_t)n }, n_past[2] = { 5, 9 };
	for (int i = 0; i < 2 * PER_SEQ; i++)
		table[i] = (i * 5 + 3) % NB;
	void *fill = malloc(cache_elems * es);
	memset(fill, 0x3c, cache_elems * es); /* finite values in either dtype */
	void *d_w = gpu_to_dev(w, fp8 ? (size_t)out * IN : 2 * (size_t)out * IN);
	float *d_scale = fp8 ? gpu_to_dev(scale, out * 4) : NULL, *d_x = gpu_to_dev(x, sizeof x);
	float *d_g = gpu_to_dev(g, sizeof g), *d_inv = gpu_to_dev(inv_freq, sizeof inv_freq);
	float *d_qkv = gpu_to_dev(NULL, (size_t)n * out * 4), *d_rope = gpu_to_dev(NULL, (size_t)n * HD * 4);
	int32_t *d_table = gpu_to_dev(table, sizeof table), *d_starts = gpu_to_dev(starts, sizeof starts);
	int32_t *d_past = gpu_to_dev(n_past, sizeof n_past);
	/* [0]: the product, then infs_k_qkv; [1]: the product's epilogue */
	float *d_q[2];
	uint16_t *d_k[2], *d_v[2];
	void *d_ck[2], *d_cv[2];
	infs_k_qkv_params q[2];
	for (int i = 0; i < 2; i++) {
		d_q[i] = gpu_to_dev(NULL, (size_t)n * NQ * HD * 4);
		d_k[i] = gpu_to_dev(NULL, (size_t)n * NKV * HD * 2);
		d_v[i] = gpu_to_dev(NULL, (size_t)n * NKV * HD * 2);
		d_ck[i] = gpu_to_dev(fill, cache_elems * es);
		d_cv[i] = gpu_to_dev(fill, cache_elems * es);
		q[i] = (infs_k_qkv_params){
			.qkv = d_qkv, .q = d_q[i], .k = d_k[i], .v = d_v[i], .n_heads = NQ, .n_kv_heads = NKV, .head_dim = HD,
			.rotary_dim = rotary, .style = style, .attn_scale = 1.25f, .inv_freq = d_inv, .write_cache = 1,
			.seqs = { .n_seqs = n > 1 ? 2 : 1, .n_tokens = n, .starts = d_starts, .n_past = d_past },
			.cache = { .k = d_ck[i], .v = d_cv[i], .blocks = d_table, .n_table = PER_SEQ, .table_stride = PER_SEQ,
			           .n_blocks = NB, .block_size = BS, .stride_block = BS * NKV * HD, .stride_slot = NKV * HD,
			           .stride_head = HD, .stride_dim = 1, .dtype = cache_dtype },
		};
	}
	infs_k_gemv_params p = { .w = d_w, .scale = d_scale, .x = d_x, .norm = d_g, .eps = 1e-5f, .n = n, .in = IN,
		                 .out = out, .epilogue = INFS_K_GEMV_STORE, .y = d_qkv, .n_sm = n_sm };
	CUDA_OK(infs_k_gemv(&p, 0));
	CUDA_OK(infs_k_qkv(&q[0], 0));
	CUDA_OK(infs_k_rope_table(d_rope, &q[1].seqs, d_inv, rotary / 2, q[1].attn_scale, 0));
	p.epilogue = INFS_K_GEMV_QKV, p.y = NULL, p.qkv = q[1], p.rope = d_rope;
	CUDA_OK(infs_k_gemv(&p, 0));
	float *hq[2];
	uint16_t *hk[2], *hv[2];
	unsigned char *hck[2], *hcv[2];
	for (int i = 0; i < 2; i++) {
		hq[i] = malloc((size_t)n * NQ * HD * 4), hk[i] = malloc((size_t)n * NKV * HD * 2);
		hv[i] = malloc((size_t)n * NKV * HD * 2), hck[i] = malloc(cache_elems * es), hcv[i] = malloc(cache_elems * es);
		gpu_from_dev(hq[i], d_q[i], (size_t)n * NQ * HD * 4);
		gpu_from_dev(hk[i], d_k[i], (size_t)n * NKV * HD * 2);
		gpu_from_dev(hv[i], d_v[i], (size_t)n * NKV * HD * 2);
		gpu_from_dev(hck[i], d_ck[i], cache_elems * es);
		gpu_from_dev(hcv[i], d_cv[i], cache_elems * es);
	}
	size_t bad = 0, written = 0;
	const size_t nkv = (size_t)n * NKV * HD;
	float *fk = malloc(2 * nkv * sizeof *fk), *fv = malloc(2 * nkv * sizeof *fv);
	for (size_t i = 0; i < 2 * nkv; i++)
		fk[i] = infs__bf16_to_f32(hk[i / nkv][i % nkv]), fv[i] = infs__bf16_to_f32(hv[i / nkv][i % nkv]);
	const double mq = largest(hq[0], (size_t)n * NQ * HD), mk = largest(fk, nkv), mv = largest(fv, nkv);
	for (size_t i = 0; i < (size_t)n * NQ * HD; i++)
		bad += !near(hq[1][i], hq[0][i], 2.5e-7, mq);
	for (size_t i = 0; i < nkv; i++)
		bad += !near(fk[nkv + i], fk[i], 1.0 / 128, mk) + !near(fv[nkv + i], fv[i], 1.0 / 128, mv);
	for (size_t i = 0; i < cache_elems; i++)
		for (int kv = 0; kv < 2; kv++) {
			const unsigned char *a = (kv ? hcv : hck)[0] + i * es, *b = (kv ? hcv : hck)[1] + i * es;
			const float fa = es == 4 ? *(const float *)a : infs__bf16_to_f32(*(const uint16_t *)a);
			const float fb = es == 4 ? *(const float *)b : infs__bf16_to_f32(*(const uint16_t *)b);
			written += memcmp(a, (const unsigned char *)fill + i * es, es) != 0;
			bad += !near(fb, fa, es == 4 ? 2.5e-7 : 1.0 / 128, kv ? mv : mk);
		}
	free(fk), free(fv);
	printf("gemv q|k|v epilogue %s, %u tokens, %s, rotary %u of %u, %s cache: %zu values off, %zu cache values "
	       "written\n",
	       fp8 ? "fp8" : "bf16", n, style ? "GPT-J" : "NeoX", rotary, HD, es == 4 ? "f32" : "bf16", bad, written);
	CHECK(bad == 0);
	CHECK(written >= (size_t)n * 2 * NKV * HD - 8); /* every token's K and V (a value may equal the fill) */
	for (int i = 0; i < 2; i++) {
		cudaFree(d_q[i]), cudaFree(d_k[i]), cudaFree(d_v[i]), cudaFree(d_ck[i]), cudaFree(d_cv[i]);
		free(hq[i]), free(hk[i]), free(hv[i]), free(hck[i]), free(hcv[i]);
	}
	cudaFree(d_w), cudaFree(d_scale), cudaFree(d_x), cudaFree(d_g), cudaFree(d_inv), cudaFree(d_qkv);
	cudaFree(d_rope), cudaFree(d_table), cudaFree(d_starts), cudaFree(d_past);
	free(w), free(scale), free(fill);
}

/* A random model's decoding steps (1, 3 and 4 tokens after a prompt) with
 * the fused products against the unfused path. */
static void check_model(int weights)
{
	infs__model_config c = gpu_random_config();
	infs_model *m = NULL;
	CHECK_OK(infs__model_random_device(&m, &c, 0, RM_LONG, 11, weights));
	if (!m)
		return;
	const uint32_t calls[] = { 62, 1, 3, 4 };
	static float fused[RM_VOCAB], plain[RM_VOCAB], graphed[RM_VOCAB];
	gpu_random_run(fused, m, calls, 4, 0);
	gpu_random_run(graphed, m, calls, 4, 1);
	infs__device_model_few_tokens(m, 0);
	gpu_random_run(plain, m, calls, 4, 0);
	/* the paths' f32 sums differ in order only, which the bf16 rounding
	 * before the output projection mostly hides */
	const double e = gpu_nmse(fused, plain);
	const int same_graph = !memcmp(fused, graphed, sizeof fused);
	printf("%s model, decoding steps: fused against unfused products NMSE %.2e; captured and replayed: %s\n",
	       weights == INFS_DTYPE_FP8_E4M3 ? "fp8" : "bf16", e, same_graph ? "the same bits" : "DIFFERENT");
	CHECK(e < 1e-5);
	CHECK(same_graph);
	infs_model_free(m);
}

int main(void)
{
	gpu_require();
	int n_sm = 0;
	CUDA_OK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));
	const int small = getenv("INFS_TEST_SMALL") != NULL; /* under the sanitizers */
	for (int fp8 = 0; fp8 < 2; fp8++)
		for (int epi = INFS_K_GEMV_STORE; epi <= INFS_K_GEMV_SWIGLU; epi++) {
			check(fp8, 1, 576, 72, 1, epi, (uint32_t)n_sm);
			check(fp8, 4, 48, 18, 0, epi, (uint32_t)n_sm);
			check(fp8, 3, 1536, 256, epi != INFS_K_GEMV_ADD, epi, (uint32_t)n_sm);
			check(fp8, 2, 16, 2, 1, epi, (uint32_t)n_sm);
			if (!small) /* more rows than the grid has warps; a long inner dimension */
				check(fp8, 1, 256, 2 * (uint32_t)n_sm * 32 + 6, epi == INFS_K_GEMV_STORE, epi, (uint32_t)n_sm);
			if (!small)
				check(fp8, 2, 14336, 64, 0, epi, (uint32_t)n_sm);
		}
	for (int fp8 = 0; fp8 < 2; fp8++) {
		check_qkv(fp8, 1, 0, 32, INFS_DTYPE_BF16, (uint32_t)n_sm);
		check_qkv(fp8, 3, 1, 16, INFS_DTYPE_F32, (uint32_t)n_sm);
		check_qkv(fp8, 4, 0, 16, INFS_DTYPE_BF16, (uint32_t)n_sm);
		check_qkv(fp8, 2, 1, 32, INFS_DTYPE_BF16, 1);
	}
	/* refused at the launcher: too many tokens, a width off 16, an odd
	 * SwiGLU, no inputs */
	infs_k_gemv_params bad = { .w = &n_sm, .a = (const uint16_t *)&n_sm, .y = (float *)&n_sm, .n = 5, .in = 16,
		                   .out = 4, .n_sm = 1 };
	CHECK(infs_k_gemv(&bad, 0) == cudaErrorInvalidValue);
	bad.n = 1, bad.in = 24;
	CHECK(infs_k_gemv(&bad, 0) == cudaErrorInvalidValue);
	bad.in = 16, bad.out = 3, bad.epilogue = INFS_K_GEMV_SWIGLU, bad.act = (uint16_t *)&n_sm;
	CHECK(infs_k_gemv(&bad, 0) == cudaErrorInvalidValue);
	bad.out = 4, bad.epilogue = INFS_K_GEMV_STORE, bad.a = NULL;
	CHECK(infs_k_gemv(&bad, 0) == cudaErrorInvalidValue);
	/* the q|k|v epilogue: a width that is not the heads', then a bias,
	 * which it does not add */
	bad.a = (const uint16_t *)&n_sm, bad.n = 1, bad.out = 16, bad.epilogue = INFS_K_GEMV_QKV;
	bad.qkv = (infs_k_qkv_params){ .q = (float *)&n_sm, .k = (uint16_t *)&n_sm, .v = (uint16_t *)&n_sm,
		                       .n_heads = 1, .n_kv_heads = 1, .head_dim = 8, .seqs = { .n_seqs = 1, .n_tokens = 1 } };
	CHECK(infs_k_gemv(&bad, 0) == cudaErrorInvalidValue);
	bad.out = 24, bad.qkv.bias = (const float *)&n_sm;
	CHECK(infs_k_gemv(&bad, 0) == cudaErrorInvalidValue);

	check_model(INFS_DTYPE_BF16);
	check_model(INFS_DTYPE_FP8_E4M3);
	CHECK_DONE();
}

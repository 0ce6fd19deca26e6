/* The device attention (infs_k_attention) with its keys split among blocks
 * and their partial results merged, against the same call unsplit and
 * against a double-precision reference on the host: a
 * question of 9 tokens over 700 cached positions of one sequence, a
 * decode step of three sequences (one token each over 300, 650 and 20
 * positions) and 3 tokens over 500 positions of one sequence, each with
 * blocks of 16 query rows (the warps splitting the keys), of 64, and of the
 * kernel's own choice; head_dim 64 and 128, 8 query heads over 2 KV heads,
 * a bf16 paged cache (blocks of 16, shuffled). Splits 2, 5 and 32 give the
 * unsplit outputs within 2 bf16 ulps, every output is within the bf16 bound of the
 * reference, and a repeated call gives the same bits. */
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "model_kernels.h"

enum { HEADS = 8, KV = 2, BS = 16, MAX_POS = 720, MAX_SEQS = 3, MAX_SPLITS = 32 };

typedef struct setup {
	uint32_t hd, n, n_seqs;
	int32_t starts[MAX_SEQS + 1], n_past[MAX_SEQS];
	float *q;         /* host [n][HEADS][hd], bf16-exact values */
	uint16_t *k, *v;  /* host new tokens [n][KV][hd] */
	uint16_t *ck, *cv; /* host cache [blocks][BS][KV][hd] */
	int32_t *table;   /* [n_seqs][per_seq] */
	uint32_t n_blocks, per_seq;
} setup;

static float urand(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((*s >> 33) % 20001) / 10000.0f - 1.0f;
}

static uint16_t bf(float x)
{
	return infs__f32_to_bf16(x);
}

static float fb(uint16_t h)
{
	return infs__bf16_to_f32(h);
}

static void make(setup *s, uint32_t hd, uint32_t n_seqs, const int32_t *n_past, const int32_t *n_new, uint64_t seed)
{
	memset(s, 0, sizeof *s);
	s->hd = hd, s->n_seqs = n_seqs;
	for (uint32_t i = 0; i < n_seqs; i++) {
		s->n_past[i] = n_past[i];
		s->starts[i + 1] = s->starts[i] + n_new[i];
	}
	s->n = (uint32_t)s->starts[n_seqs];
	s->per_seq = MAX_POS / BS;
	s->n_blocks = n_seqs * s->per_seq;
	s->q = malloc((size_t)s->n * HEADS * hd * sizeof *s->q);
	s->k = malloc((size_t)s->n * KV * hd * 2);
	s->v = malloc((size_t)s->n * KV * hd * 2);
	s->ck = malloc((size_t)s->n_blocks * BS * KV * hd * 2);
	s->cv = malloc((size_t)s->n_blocks * BS * KV * hd * 2);
	s->table = malloc((size_t)s->n_blocks * sizeof *s->table);
	uint64_t r = seed;
	/* Scaled so that the softmax is neither flat nor one-hot. */
	for (size_t i = 0; i < (size_t)s->n * HEADS * hd; i++)
		s->q[i] = fb(bf(3.0f * urand(&r)));
	for (size_t i = 0; i < (size_t)s->n * KV * hd; i++)
		s->k[i] = bf(urand(&r)), s->v[i] = bf(urand(&r));
	for (size_t i = 0; i < (size_t)s->n_blocks * BS * KV * hd; i++)
		s->ck[i] = bf(urand(&r)), s->cv[i] = bf(urand(&r));
	/* A permutation of the blocks, every sequence its own row. */
	for (uint32_t i = 0; i < s->n_blocks; i++)
		s->table[i] = (int32_t)((i * 7 + 3) % s->n_blocks);
}

static void release(setup *s)
{
	free(s->q);
	free(s->k);
	free(s->v);
	free(s->ck);
	free(s->cv);
	free(s->table);
}

/* Position p's K (or V) row of KV head kvh as sequence sq sees it: the
 * cache below its n_past, its new tokens above. */
static const uint16_t *kv_row(const setup *s, int v, uint32_t sq, uint32_t p, uint32_t kvh)
{
	const uint32_t np = (uint32_t)s->n_past[sq];
	if (p < np) {
		const int32_t b = s->table[sq * s->per_seq + p / BS];
		return (v ? s->cv : s->ck) + (((size_t)b * BS + p % BS) * KV + kvh) * s->hd;
	}
	return (v ? s->v : s->k) + (((size_t)s->starts[sq] + (p - np)) * KV + kvh) * s->hd;
}

/* The reference output of token i (sequence sq, its j-th new token) and
 * head h, in double from the bf16 values the kernel reads. */
static void reference(double *out, const setup *s, uint32_t sq, uint32_t j, uint32_t h)
{
	const uint32_t hd = s->hd, kvh = h / (HEADS / KV), i = (uint32_t)s->starts[sq] + j;
	const uint32_t np = (uint32_t)s->n_past[sq], nk = np + j + 1;
	const float *q = s->q + ((size_t)i * HEADS + h) * hd;
	double *sc = malloc(nk * sizeof *sc), mx = -INFINITY, sum = 0;
	for (uint32_t p = 0; p < nk; p++) {
		const uint16_t *k = kv_row(s, 0, sq, p, kvh);
		double d = 0;
		for (uint32_t e = 0; e < hd; e++)
			d += (double)q[e] * fb(k[e]);
		sc[p] = d / sqrt((double)hd);
		mx = sc[p] > mx ? sc[p] : mx;
	}
	for (uint32_t e = 0; e < hd; e++)
		out[e] = 0;
	for (uint32_t p = 0; p < nk; p++) {
		const double w = exp(sc[p] - mx);
		sum += w;
		const uint16_t *v = kv_row(s, 1, sq, p, kvh);
		for (uint32_t e = 0; e < hd; e++)
			out[e] += w * fb(v[e]);
	}
	for (uint32_t e = 0; e < hd; e++)
		out[e] /= sum;
	free(sc);
}

typedef struct dev {
	float *q, *part_o, *part_ml;
	uint16_t *k, *v, *ck, *cv, *out;
	int32_t *table, *starts, *n_past;
} dev;

static void upload(dev *d, const setup *s)
{
	const size_t hd = s->hd, n = s->n;
	CUDA_OK(cudaMalloc((void **)&d->q, n * HEADS * hd * 4));
	CUDA_OK(cudaMalloc((void **)&d->k, n * KV * hd * 2));
	CUDA_OK(cudaMalloc((void **)&d->v, n * KV * hd * 2));
	CUDA_OK(cudaMalloc((void **)&d->ck, (size_t)s->n_blocks * BS * KV * hd * 2));
	CUDA_OK(cudaMalloc((void **)&d->cv, (size_t)s->n_blocks * BS * KV * hd * 2));
	CUDA_OK(cudaMalloc((void **)&d->out, n * HEADS * hd * 2));
	CUDA_OK(cudaMalloc((void **)&d->part_o, MAX_SPLITS * n * HEADS * hd * 4));
	CUDA_OK(cudaMalloc((void **)&d->part_ml, MAX_SPLITS * n * HEADS * 2 * 4));
	CUDA_OK(cudaMalloc((void **)&d->table, (size_t)s->n_blocks * 4));
	CUDA_OK(cudaMalloc((void **)&d->starts, (MAX_SEQS + 1) * 4));
	CUDA_OK(cudaMalloc((void **)&d->n_past, MAX_SEQS * 4));
	CUDA_OK(cudaMemcpy(d->q, s->q, n * HEADS * hd * 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d->k, s->k, n * KV * hd * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d->v, s->v, n * KV * hd * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d->ck, s->ck, (size_t)s->n_blocks * BS * KV * hd * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d->cv, s->cv, (size_t)s->n_blocks * BS * KV * hd * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d->table, s->table, (size_t)s->n_blocks * 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d->starts, s->starts, (MAX_SEQS + 1) * 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d->n_past, s->n_past, MAX_SEQS * 4, cudaMemcpyHostToDevice));
}

static void dev_free(dev *d)
{
	void *ps[] = { d->q, d->k, d->v, d->ck, d->cv, d->out, d->part_o, d->part_ml, d->table, d->starts, d->n_past };
	for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
		cudaFree(ps[i]);
}

/* One call with n_splits and blocks of rows query rows (0: the kernel's
 * choice); the outputs as floats into got. */
static void run(float *got, const setup *s, dev *d, uint32_t splits, uint32_t rows)
{
	const uint32_t hd = s->hd;
	infs_k_attn_params p;
	memset(&p, 0, sizeof p);
	p.out = d->out, p.q = d->q, p.k = d->k, p.v = d->v;
	p.seqs.n_seqs = s->n_seqs, p.seqs.n_tokens = s->n;
	if (s->n_seqs == 1 && s->n * (HEADS / KV) <= 16)
		p.seqs.n_past0 = (uint32_t)s->n_past[0]; /* one sequence, no shapes on the device */
	else
		p.seqs.starts = d->starts, p.seqs.n_past = d->n_past;
	p.n_heads = HEADS, p.n_kv_heads = KV, p.head_dim = hd;
	p.scale = 1.0f / sqrtf((float)hd);
	p.cache.k = d->ck, p.cache.v = d->cv, p.cache.blocks = d->table;
	p.cache.n_table = s->per_seq, p.cache.table_stride = s->per_seq;
	p.cache.n_blocks = s->n_blocks, p.cache.block_size = BS;
	p.cache.stride_block = (int64_t)BS * KV * hd, p.cache.stride_slot = (int64_t)KV * hd;
	p.cache.stride_head = hd, p.cache.stride_dim = 1, p.cache.dtype = INFS_DTYPE_BF16;
	p.n_splits = splits, p.part_o = d->part_o, p.part_ml = d->part_ml, p.block_rows = rows;
	CUDA_OK(cudaMemset(d->out, 0xff, (size_t)s->n * HEADS * hd * 2)); /* NaN where nothing is written */
	CUDA_OK(infs_k_attention(&p, 0));
	CUDA_OK(cudaDeviceSynchronize());
	uint16_t *h = malloc((size_t)s->n * HEADS * hd * 2);
	CUDA_OK(cudaMemcpy(h, d->out, (size_t)s->n * HEADS * hd * 2, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < (size_t)s->n * HEADS * hd; i++)
		got[i] = fb(h[i]);
	free(h);
}

static void check_case(const char *name, uint32_t hd, uint32_t n_seqs, const int32_t *n_past, const int32_t *n_new,
                       uint32_t rows)
{
	setup s;
	make(&s, hd, n_seqs, n_past, n_new, 1234 + hd + n_seqs);
	dev d;
	memset(&d, 0, sizeof d);
	upload(&d, &s);
	const size_t n_out = (size_t)s.n * HEADS * hd;
	float *one = malloc(n_out * 4), *got = malloc(n_out * 4), *again = malloc(n_out * 4);
	run(one, &s, &d, 1, rows);
	/* Against the reference: the bf16 rounding of P and of the output. */
	double worst_ref = 0;
	double *ref = malloc(hd * sizeof *ref);
	for (uint32_t sq = 0; sq < n_seqs; sq++)
		for (int32_t j = 0; j < n_new[sq]; j++)
			for (uint32_t h = 0; h < HEADS; h++) {
				reference(ref, &s, sq, (uint32_t)j, h);
				const float *o = one + (((size_t)s.starts[sq] + j) * HEADS + h) * hd;
				for (uint32_t e = 0; e < hd; e++) {
					const double diff = fabs(o[e] - ref[e]);
					worst_ref = !(diff <= worst_ref) ? diff : worst_ref;
				}
			}
	free(ref);
	printf("  %s, head_dim %u, blocks of %u rows: unsplit vs double reference max |diff| %.3g\n", name, hd, rows,
	       worst_ref);
	CHECK(worst_ref <= 0.02);
	static const uint32_t splits[] = { 2, 5, 32 };
	for (size_t k = 0; k < sizeof splits / sizeof splits[0]; k++) {
		run(got, &s, &d, splits[k], rows);
		run(again, &s, &d, splits[k], rows);
		double worst = 0;
		size_t same = 0;
		for (size_t i = 0; i < n_out; i++) {
			/* 2 ulps of bf16 at the value's scale (|o| <= 1). */
			const double diff = fabs((double)got[i] - one[i]), tol = 2.0 * ldexp(1.0, -8) * fmax(fabs(one[i]), 0.125);
			worst = !(diff <= worst) ? diff : worst;
			CHECK(diff <= tol);
			same += memcmp(&got[i], &again[i], 4) == 0;
		}
		printf("  %s, head_dim %u, %u splits: max |diff| to unsplit %.3g, repeat bitwise %s\n", name, hd, splits[k],
		       worst, same == n_out ? "equal" : "DIFFERENT");
		CHECK(same == n_out);
	}
	free(one);
	free(got);
	free(again);
	dev_free(&d);
	release(&s);
}

int main(void)
{
	gpu_require();
	static const int32_t q_past[] = { 700 }, q_new[] = { 9 };
	static const int32_t d_past[] = { 300, 650, 20 }, d_new[] = { 1, 1, 1 };
	static const int32_t f_past[] = { 500 }, f_new[] = { 3 };
	static const uint32_t rows[] = { 0, INFS_K_ATTN_FEW_ROWS, INFS_K_ATTN_ROWS };
	for (uint32_t hd = 64; hd <= 128; hd += 64)
		for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
			check_case("question", hd, 1, q_past, q_new, rows[r]);
			check_case("decode of 3 sequences", hd, 3, d_past, d_new, rows[r]);
			check_case("3 tokens", hd, 1, f_past, f_new, rows[r]);
		}
	/* refused: blocks of a size the kernel has not, or of fewer rows than
	 * the heads sharing a KV head; more splits than the merge takes */
	infs_k_attn_params bad;
	memset(&bad, 0, sizeof bad);
	bad.n_heads = HEADS, bad.n_kv_heads = KV, bad.head_dim = 64, bad.n_splits = 1, bad.seqs.n_seqs = 1;
	bad.block_rows = 32;
	CHECK(infs_k_attention(&bad, 0) == cudaErrorInvalidValue);
	bad.n_heads = 32, bad.n_kv_heads = 1, bad.block_rows = INFS_K_ATTN_FEW_ROWS;
	CHECK(infs_k_attention(&bad, 0) == cudaErrorInvalidValue);
	bad.n_heads = HEADS, bad.n_kv_heads = KV, bad.block_rows = 0;
	bad.n_splits = INFS_K_ATTN_MAX_SPLITS + 1, bad.part_o = bad.part_ml = (float *)&bad;
	CHECK(infs_k_attention(&bad, 0) == cudaErrorInvalidValue);
	CHECK_DONE();
}

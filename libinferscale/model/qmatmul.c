#include "model/qmatmul.h"

#include <stdlib.h>
#include <string.h>

#include "inferscale/common.h"
#include "gguf/gguf.h"
#include "model/matmul.h"
#include "model/qdot.h"
#include "model/quant.h"
#include "util/cpu.h"
#include "util/dtype.h"

/* Rows multiplied at a time (RB: 4 rows x 2 tokens of accumulators in
 * registers), output rows per pool task (enough tasks to balance the
 * threads at one token, where the weights' reading is all the work; the
 * task's rows, dequantized, stay in L2), tokens per pass over them. */
#define RB 4
#define ROWS_PER_TASK 16
#define TOKEN_CHUNK 32

typedef float vf4 __attribute__((vector_size(16)));

typedef struct qjob {
	float *y;
	const float *x;
	const infs__wmat *w;
	const float *bias;
	uint32_t n;
	float *buf;         /* (ROWS_PER_TASK + RB) * cols floats per worker */
	float *xsum;        /* one token: the sum of x over each 32-element block */
} qjob;

static vf4 load4(const float *p)
{
	vf4 v;
	memcpy(&v, p, sizeof v);
	return v;
}

static float hsum4(vf4 v)
{
	return (v[0] + v[1]) + (v[2] + v[3]);
}

static void put(const qjob *j, uint32_t t, uint32_t r, float s)
{
	j->y[(size_t)t * j->w->rows + r] = j->bias ? s + j->bias[r] : s;
}

/* Rows r0 .. r0 + nr - 1, held in buf (row b at buf + b * cols; rows from
 * nr to RB repeat row 0), against tokens [t0, t1). */
static void product_portable(const qjob *j, const float *buf, uint32_t r0, uint32_t nr, uint32_t t0, uint32_t t1)
{
	const uint32_t cols = j->w->cols;
	for (uint32_t t = t0; t < t1; t++) {
		const float *x = j->x + (size_t)t * cols;
		vf4 acc[RB];
		memset(acc, 0, sizeof acc);
		uint32_t k = 0;
		for (; k + 4 <= cols; k += 4) {
			vf4 xv = load4(x + k);
			for (uint32_t b = 0; b < RB; b++)
				acc[b] += xv * load4(buf + (size_t)b * cols + k);
		}
		for (uint32_t b = 0; b < nr; b++) {
			float s = hsum4(acc[b]);
			for (uint32_t kk = k; kk < cols; kk++)
				s += x[kk] * buf[(size_t)b * cols + kk];
			put(j, t, r0 + b, s);
		}
	}
}

static void dequant_portable(float *dst, const infs__wmat *w, uint32_t r)
{
	infs__wmat_row(dst, w, r);
}

#if HAVE_X86
TARGET_AVX2 static float hsum256(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
	return _mm_cvtss_f32(s);
}

/* Two tokens at a time: 8 accumulators, 4 weight vectors, one token
 * vector in registers. */
TARGET_AVX2 static void product_avx2(const qjob *j, const float *buf, uint32_t r0, uint32_t nr, uint32_t t0,
                                     uint32_t t1)
{
	const uint32_t cols = j->w->cols, k8 = cols & ~7u;
	const float *w0 = buf, *w1 = buf + cols, *w2 = buf + 2 * (size_t)cols, *w3 = buf + 3 * (size_t)cols;
	const float *wr[RB] = { w0, w1, w2, w3 };
	uint32_t t = t0;
	for (; t + 2 <= t1; t += 2) {
		const float *xa = j->x + (size_t)t * cols, *xb = xa + cols;
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
		for (uint32_t k = 0; k < k8; k += 8) {
			__m256 v0 = _mm256_loadu_ps(w0 + k), v1 = _mm256_loadu_ps(w1 + k);
			__m256 v2 = _mm256_loadu_ps(w2 + k), v3 = _mm256_loadu_ps(w3 + k);
			__m256 x = _mm256_loadu_ps(xa + k);
			a0 = _mm256_fmadd_ps(x, v0, a0);
			a1 = _mm256_fmadd_ps(x, v1, a1);
			a2 = _mm256_fmadd_ps(x, v2, a2);
			a3 = _mm256_fmadd_ps(x, v3, a3);
			x = _mm256_loadu_ps(xb + k);
			b0 = _mm256_fmadd_ps(x, v0, b0);
			b1 = _mm256_fmadd_ps(x, v1, b1);
			b2 = _mm256_fmadd_ps(x, v2, b2);
			b3 = _mm256_fmadd_ps(x, v3, b3);
		}
		const __m256 acc[2][RB] = { { a0, a1, a2, a3 }, { b0, b1, b2, b3 } };
		for (uint32_t u = 0; u < 2; u++)
			for (uint32_t b = 0; b < nr; b++) {
				const float *x = xa + (size_t)u * cols;
				float s = hsum256(acc[u][b]);
				for (uint32_t kk = k8; kk < cols; kk++)
					s += x[kk] * wr[b][kk];
				put(j, t + u, r0 + b, s);
			}
	}
	if (t < t1) {
		const float *x = j->x + (size_t)t * cols;
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		for (uint32_t k = 0; k < k8; k += 8) {
			__m256 xv = _mm256_loadu_ps(x + k);
			a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + k), a0);
			a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w1 + k), a1);
			a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w2 + k), a2);
			a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w3 + k), a3);
		}
		const __m256 acc[RB] = { a0, a1, a2, a3 };
		for (uint32_t b = 0; b < nr; b++) {
			float s = hsum256(acc[b]);
			for (uint32_t kk = k8; kk < cols; kk++)
				s += x[kk] * wr[b][kk];
			put(j, t, r0 + b, s);
		}
	}
}

INLINE_AVX2 float half_avx2(const uint8_t *p)
{
	return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8));
}

/* 16 nibbles (low halves, then high halves) as 32 floats d * q + m. */
INLINE_AVX2 void nibbles(float *y, const uint8_t *qs, __m256 d, __m256 m)
{
	const __m128i q = _mm_loadu_si128((const __m128i *)qs), mask = _mm_set1_epi8(0x0f);
	const __m128i lo = _mm_and_si128(q, mask), hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
	__m256 v0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
	__m256 v1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
	__m256 v2 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
	__m256 v3 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
	_mm256_storeu_ps(y, _mm256_fmadd_ps(v0, d, m));
	_mm256_storeu_ps(y + 8, _mm256_fmadd_ps(v1, d, m));
	_mm256_storeu_ps(y + 16, _mm256_fmadd_ps(v2, d, m));
	_mm256_storeu_ps(y + 24, _mm256_fmadd_ps(v3, d, m));
}

TARGET_AVX2 static void dequant_avx2(float *dst, const infs__wmat *w, uint32_t r)
{
	const uint8_t *b = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
	infs__prefetch_row(b, w->row_bytes);
	const uint32_t nb = w->cols / 32;
	switch (w->type) {
	case INFS_GGML_Q4_0:
		for (uint32_t i = 0; i < nb; i++, b += 18, dst += 32) {
			float d = half_avx2(b);
			nibbles(dst, b + 2, _mm256_set1_ps(d), _mm256_set1_ps(-8.0f * d));
		}
		return;
	case INFS_GGML_Q4_1:
		for (uint32_t i = 0; i < nb; i++, b += 20, dst += 32) {
			float d = half_avx2(b), m = half_avx2(b + 2);
			nibbles(dst, b + 4, _mm256_set1_ps(d), _mm256_set1_ps(m));
		}
		return;
	case INFS_GGML_Q8_0:
		for (uint32_t i = 0; i < nb; i++, b += 34, dst += 32) {
			const __m256 d = _mm256_set1_ps(half_avx2(b));
			for (int k = 0; k < 4; k++) {
				__m128i q = _mm_loadl_epi64((const __m128i *)(b + 2 + 8 * k));
				__m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
				_mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(v, d));
			}
		}
		return;
	default:
		infs__wmat_row(dst, w, r);
	}
}

/* 32 unsigned nibbles (low halves, then high halves) as four vectors. */
#define NIBBLES(q, v0, v1, v2, v3)                                                                          \
	do {                                                                                                \
		const __m128i mask_ = _mm_set1_epi8(0x0f);                                                  \
		const __m128i lo_ = _mm_and_si128(q, mask_), hi_ = _mm_and_si128(_mm_srli_epi16(q, 4), mask_); \
		v0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo_));                                         \
		v1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo_, 8)));                      \
		v2 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi_));                                         \
		v3 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi_, 8)));                      \
	} while (0)

/* One token, Q4_0 / Q4_1 / Q8_0 rows, with nothing stored between the
 * blocks and the FMAs: per block d * (q . x), plus the offset (Q4_1's m,
 * Q4_0's -8 d) times the block's sum of x, which j->xsum holds. */
TARGET_AVX2 static void one_token_avx2(const qjob *j, uint32_t r0, uint32_t r1)
{
	const infs__wmat *w = j->w;
	const uint32_t nb = w->cols / 32;
	for (uint32_t r = r0; r < r1; r++) {
		const uint8_t *b = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
		infs__prefetch_row(b, w->row_bytes);
		__m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
		float off = 0;
		for (uint32_t i = 0; i < nb; i++) {
			const float *x = j->x + 32 * (size_t)i;
			__m256 v0, v1, v2, v3;
			float d = half_avx2(b);
			if (w->type == INFS_GGML_Q8_0) {
				const __m256i q = _mm256_loadu_si256((const __m256i *)(b + 2));
				v0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm256_castsi256_si128(q)));
				v1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(_mm256_castsi256_si128(q), 8)));
				v2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
				v3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(_mm256_extracti128_si256(q, 1), 8)));
				b += 34;
			} else if (w->type == INFS_GGML_Q4_1) {
				const __m128i q = _mm_loadu_si128((const __m128i *)(b + 4));
				NIBBLES(q, v0, v1, v2, v3);
				off += half_avx2(b + 2) * j->xsum[i];
				b += 20;
			} else {
				const __m128i q = _mm_loadu_si128((const __m128i *)(b + 2));
				NIBBLES(q, v0, v1, v2, v3);
				off -= 8.0f * d * j->xsum[i];
				b += 18;
			}
			__m256 p = _mm256_mul_ps(v0, _mm256_loadu_ps(x));
			p = _mm256_fmadd_ps(v1, _mm256_loadu_ps(x + 8), p);
			p = _mm256_fmadd_ps(v2, _mm256_loadu_ps(x + 16), p);
			p = _mm256_fmadd_ps(v3, _mm256_loadu_ps(x + 24), p);
			if (i & 1)
				acc1 = _mm256_fmadd_ps(p, _mm256_set1_ps(d), acc1);
			else
				acc0 = _mm256_fmadd_ps(p, _mm256_set1_ps(d), acc0);
		}
		put(j, 0, r, hsum256(_mm256_add_ps(acc0, acc1)) + off);
	}
}

#endif

typedef struct qtask {
	qjob j;
	void (*dequant)(float *, const infs__wmat *, uint32_t);
	void (*product)(const qjob *, const float *, uint32_t, uint32_t, uint32_t, uint32_t);
	void (*one_token)(const qjob *, uint32_t, uint32_t); /* NULL: through the buffer */
} qtask;

/* A task's rows are dequantized once into the worker's buffer; the tokens
 * then go TOKEN_CHUNK at a time over them, so that the chunk of x stays in
 * the L2 cache while every row group of the task passes over it. */
static void q_task(void *arg, uint32_t task, uint32_t worker)
{
	const qtask *q = arg;
	const qjob *j = &q->j;
	const uint32_t cols = j->w->cols, rows = j->w->rows;
	const uint32_t begin = task * ROWS_PER_TASK;
	const uint32_t end = begin + ROWS_PER_TASK < rows ? begin + ROWS_PER_TASK : rows;
	if (q->one_token) {
		q->one_token(j, begin, end);
		return;
	}
	float *buf = j->buf + (size_t)worker * (ROWS_PER_TASK + RB) * cols;
	for (uint32_t r = begin; r < end; r++)
		q->dequant(buf + (size_t)(r - begin) * cols, j->w, r);
	/* Rows past the end repeat the first (computed, never written). */
	for (uint32_t r = end; r < begin + ROWS_PER_TASK + RB; r++)
		memcpy(buf + (size_t)(r - begin) * cols, buf, cols * sizeof *buf);
	for (uint32_t t0 = 0; t0 < j->n; t0 += TOKEN_CHUNK) {
		const uint32_t t1 = j->n - t0 < TOKEN_CHUNK ? j->n : t0 + TOKEN_CHUNK;
		for (uint32_t r0 = begin; r0 < end; r0 += RB)
			q->product(j, buf + (size_t)(r0 - begin) * cols, r0, end - r0 < RB ? end - r0 : RB, t0, t1);
	}
}

int infs__matmul_w_isa(float *y, const float *x, const infs__wmat *w, const float *bias, uint32_t n,
                       infs__pool *pool, infs__isa isa)
{
	if (isa == INFS__ISA_AUTO)
		isa = infs__cpu_avx2() ? INFS__ISA_AVX2 : INFS__ISA_PORTABLE;
	if (isa == INFS__ISA_AVX512_VNNI) /* no f32 kernels of its own */
		return INFS_EUNSUPPORTED;
	if (isa == INFS__ISA_AVX2 && !infs__cpu_avx2())
		return INFS_EUNSUPPORTED;
	qtask q = { { y, x, w, bias, n, NULL, NULL }, dequant_portable, product_portable, NULL };
#if HAVE_X86
	if (isa == INFS__ISA_AVX2) {
		q.dequant = dequant_avx2;
		q.product = product_avx2;
		if (n == 1 && (w->type == INFS_GGML_Q4_0 || w->type == INFS_GGML_Q4_1 || w->type == INFS_GGML_Q8_0))
			q.one_token = one_token_avx2;
	}
#endif
	if (q.one_token) {
		const uint32_t nb = w->cols / 32;
		q.j.xsum = malloc((nb ? nb : 1) * sizeof *q.j.xsum);
		for (uint32_t i = 0; q.j.xsum && i < nb; i++) {
			float s = 0;
			for (uint32_t e = 0; e < 32; e++)
				s += x[32 * (size_t)i + e];
			q.j.xsum[i] = s;
		}
		if (!q.j.xsum)
			return INFS_ENOMEM;
	} else {
		q.j.buf = malloc((size_t)infs__pool_size(pool) * (ROWS_PER_TASK + RB) * (w->cols ? w->cols : 1) *
		                 sizeof(float));
		if (!q.j.buf)
			return INFS_ENOMEM;
	}
	infs__pool_run(pool, q_task, &q, (w->rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
	free(q.j.buf);
	free(q.j.xsum);
	return INFS_OK;
}

typedef struct q8task {
	float *y;
	const infs__q8 *xq;
	const infs__wmat *w;
	const float *bias;
	uint32_t n;
	int level; /* INFS__QDOT_* */
} q8task;

static void q8_task(void *arg, uint32_t task, uint32_t worker)
{
	(void)worker;
	const q8task *q = arg;
	const uint32_t begin = task * ROWS_PER_TASK;
	const uint32_t end = begin + ROWS_PER_TASK < q->w->rows ? begin + ROWS_PER_TASK : q->w->rows;
	infs__qdot_rows(q->y, q->w->rows, q->xq, q->n, q->w, begin, end, q->bias, q->level);
}

/* The integer kernels of isa, -1 when this CPU cannot run them. */
static int qdot_level(infs__isa isa)
{
	if (isa == INFS__ISA_AUTO)
		return infs__cpu_avx512_vnni() ? INFS__QDOT_VNNI : infs__cpu_avx2() ? INFS__QDOT_AVX2 : INFS__QDOT_PORTABLE;
	if (isa == INFS__ISA_AVX512_VNNI)
		return infs__cpu_avx512_vnni() ? INFS__QDOT_VNNI : -1;
	if (isa == INFS__ISA_AVX2)
		return infs__cpu_avx2() ? INFS__QDOT_AVX2 : -1;
	return INFS__QDOT_PORTABLE;
}

int infs__matmul_w_q8(float *y, const float *x, const infs__wmat *w, const float *bias, uint32_t n,
                      infs__pool *pool, infs__isa isa)
{
	const int level = qdot_level(isa);
	if (level < 0 || !infs__qdot_type(w->type))
		return INFS_EUNSUPPORTED;
	const size_t nb = (size_t)n * (w->cols / 32);
	infs__q8 *xq = malloc((nb ? nb : 1) * sizeof *xq);
	if (!xq)
		return INFS_ENOMEM;
	q8task q = { y, xq, w, bias, n, level };
	infs__q8_quantize(xq, x, (size_t)n * w->cols, level != INFS__QDOT_PORTABLE);
	infs__pool_run(pool, q8_task, &q, (w->rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
	free(xq);
	return INFS_OK;
}

/* Several matrices over one input in one pass of the pool: task t is
 * matrix i's task t - first[i]. */
typedef struct multi {
	int count;
	uint32_t first[INFS__MATMUL_MULTI_MAX + 1];
	q8task q8[INFS__MATMUL_MULTI_MAX];
	qtask q[INFS__MATMUL_MULTI_MAX];
} multi;

static int multi_which(const multi *m, uint32_t task)
{
	int i = 0;
	while (task >= m->first[i + 1])
		i++;
	return i;
}

static void multi_q8_task(void *arg, uint32_t task, uint32_t worker)
{
	multi *m = arg;
	const int i = multi_which(m, task);
	q8_task(&m->q8[i], task - m->first[i], worker);
}

static void multi_q_task(void *arg, uint32_t task, uint32_t worker)
{
	multi *m = arg;
	const int i = multi_which(m, task);
	q_task(&m->q[i], task - m->first[i], worker);
}

/* The matrices the fused kernels take together: the same columns and
 * block type, and the same choice of kernel for n tokens. */
static int fusable(const infs__wmat *const *ws, int count, uint32_t n)
{
	if (count < 1 || count > INFS__MATMUL_MULTI_MAX || !infs__cpu_avx2())
		return 0;
	for (int i = 0; i < count; i++)
		if (ws[i]->cols != ws[0]->cols || ws[i]->type != ws[0]->type ||
		    ws[i]->int8_tokens != ws[0]->int8_tokens)
			return 0;
	const uint32_t t = ws[0]->type;
	if (n <= ws[0]->int8_tokens && infs__qdot_type(t))
		return 2; /* 8-bit activations, quantized once */
	if (n == 1 && (t == INFS_GGML_Q4_0 || t == INFS_GGML_Q4_1 || t == INFS_GGML_Q8_0))
		return 1; /* one token in f32: the block sums of x taken once */
	return 0;
}

void infs__matmul_w_multi(float *const *ys, const float *x, const infs__wmat *const *ws, const float *const *biases,
                          int count, uint32_t n, infs__pool *pool)
{
	const int how = fusable(ws, count, n);
	const uint32_t cols = how ? ws[0]->cols : 0, nb = cols / 32;
	const size_t n_q8 = (size_t)n * nb;
	void *shared = NULL;
	if (how == 2)
		shared = malloc((n_q8 ? n_q8 : 1) * sizeof(infs__q8));
	else if (how == 1)
		shared = malloc((nb ? nb : 1) * sizeof(float));
	if (!shared) { /* not fusable, or no memory: one product at a time */
		for (int i = 0; i < count; i++)
			infs__matmul_w(ys[i], x, ws[i], biases[i], n, pool);
		return;
	}
	multi m = { .count = count };
	for (int i = 0; i < count; i++)
		m.first[i + 1] = m.first[i] + (ws[i]->rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
	if (how == 2) {
		infs__q8_quantize(shared, x, (size_t)n * cols, 1);
		const int level = qdot_level(INFS__ISA_AUTO);
		for (int i = 0; i < count; i++)
			m.q8[i] = (q8task){ ys[i], shared, ws[i], biases[i], n, level };
		infs__pool_run(pool, multi_q8_task, &m, m.first[count]);
	} else {
#if HAVE_X86
		float *xsum = shared;
		for (uint32_t b = 0; b < nb; b++) {
			float sum = 0;
			for (uint32_t e = 0; e < 32; e++)
				sum += x[32 * (size_t)b + e];
			xsum[b] = sum;
		}
		for (int i = 0; i < count; i++)
			m.q[i] = (qtask){ { ys[i], x, ws[i], biases[i], 1, NULL, xsum }, dequant_avx2, product_avx2,
				          one_token_avx2 };
		infs__pool_run(pool, multi_q_task, &m, m.first[count]);
#endif
	}
	free(shared);
}

/* Token counts up to which the integer kernels beat the f32 ones on one
 * thread of the project's AVX2 machine (test_qmatmul bench: 1536 x 576).
 * Beyond, the f32 kernels' FMAs (8 multiply-adds, one instruction) outrun
 * maddubs + madd + convert + FMA (32, four instructions) over the
 * dequantized rows, whose cost the tokens share. */
uint32_t infs__matmul_w_int8_tokens(uint32_t type)
{
	return type == INFS_GGML_Q4_0 ? 6 : infs__qdot_type(type) ? 4 : 0;
}

void infs__matmul_w(float *y, const float *x, const infs__wmat *w, const float *bias, uint32_t n,
                    infs__pool *pool)
{
	if (w->type == INFS_GGML_F32) {
		infs__matmul(y, x, w->data, bias, n, w->cols, w->rows, pool);
		return;
	}
	if (n <= w->int8_tokens && infs__matmul_w_q8(y, x, w, bias, n, pool, INFS__ISA_AUTO) == INFS_OK)
		return;
	if (infs__matmul_w_isa(y, x, w, bias, n, pool, INFS__ISA_AUTO) == INFS_OK)
		return;
	/* No memory for the buffers: row by row through a stack chunk. */
	enum { CHUNK = 256 };
	float chunk[CHUNK];
	const uint32_t be = infs__ggml_block_elems(w->type), bb = infs__ggml_block_bytes(w->type);
	for (uint32_t r = 0; r < w->rows; r++) {
		for (uint32_t t = 0; t < n; t++)
			y[(size_t)t * w->rows + r] = bias ? bias[r] : 0.0f;
		const char *row = (const char *)w->data + (size_t)r * w->row_bytes;
		for (uint32_t c = 0; c < w->cols; c += CHUNK) {
			const uint32_t k = w->cols - c < CHUNK ? w->cols - c : CHUNK;
			infs__dequantize(chunk, row + (size_t)(c / be) * bb, w->type, k);
			for (uint32_t t = 0; t < n; t++) {
				float s = 0;
				for (uint32_t e = 0; e < k; e++)
					s += x[(size_t)t * w->cols + c + e] * chunk[e];
				y[(size_t)t * w->rows + r] += s;
			}
		}
	}
}

const char *infs__matmul_w_kernels(void)
{
	return infs__cpu_avx512_vnni() ? "avx512-vnni" : infs__cpu_avx2() ? "avx2" : "portable";
}

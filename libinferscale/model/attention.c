/* Grouped-query attention with a mask by position, on the CPU: a few queries
 * (the decode step, short questions) by KV head and run of keys with
 * vector kernels; more through two matrix products per head and query block
 * when the library has BLAS, else query by query in plain C. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef INFS_HAVE_BLAS
#include <cblas.h>
#endif

#include "model/attention_kernels.h"
#include "model/forward.h"

/* Head vectors in 4-float SIMD steps (vector extensions), tail scalar. */
typedef float vf4 __attribute__((vector_size(16)));

static float dot(const float *a, const float *b, uint32_t n)
{
	vf4 acc = { 0, 0, 0, 0 };
	uint32_t e = 0;
	for (; e + 4 <= n; e += 4) {
		vf4 x, y;
		memcpy(&x, a + e, sizeof x);
		memcpy(&y, b + e, sizeof y);
		acc += x * y;
	}
	float d = (acc[0] + acc[1]) + (acc[2] + acc[3]);
	for (; e < n; e++)
		d += a[e] * b[e];
	return d;
}

/* y += w * x */
static void axpy(float *y, float w, const float *x, uint32_t n)
{
	uint32_t e = 0;
	for (; e + 4 <= n; e += 4) {
		vf4 a, b;
		memcpy(&a, y + e, sizeof a);
		memcpy(&b, x + e, sizeof b);
		a += w * b;
		memcpy(y + e, &a, sizeof a);
	}
	for (; e < n; e++)
		y[e] += w * x[e];
}

/* Queries per task: enough work per task, enough tasks to balance. */
#define QUERIES_PER_TASK 8

typedef struct attn_job {
	const infs__attn_args *a;
	uint32_t n_qblocks;
} attn_job;

/* Rows of k and v that are earlier tokens at positions 0..: all of them
 * in place, else all but the new tokens' rows at the end. */
static uint32_t past_rows(const infs__attn_args *a)
{
	return a->in_place ? a->n_ctx : a->n_ctx - a->n;
}

/* The position of key j (of n_ctx). */
static int64_t key_pos(const infs__attn_args *a, uint32_t j)
{
	uint32_t n_past = past_rows(a);
	return j < n_past ? (int64_t)j : (int64_t)a->pos[j - n_past];
}

/* Score s of key j for new token i, calibrated where a->calib says. */
static float calibrated(const infs__attn_args *a, uint32_t j, uint32_t i, float s)
{
	const infs__calib *c = a->calib;
	if (!c || a->pos[i] < (int64_t)c->hi)
		return s;
	int64_t pj = key_pos(a, j);
	return pj >= (int64_t)c->lo && pj < (int64_t)c->hi ? s * c->inv_temp + c->log_scale : s;
}

/* Whether key j (of n_ctx) is visible to new token i. */
static int visible(const infs__attn_args *a, uint32_t j, uint32_t i)
{
	uint32_t n_past = past_rows(a);
	int64_t p = a->pos[i], pj = key_pos(a, j);
	if (pj > p)
		return 0;
	if (a->seq && j >= n_past && a->seq[j - n_past] != a->seq[i])
		return 0;
	return a->sliding_window == 0 || p - pj < (int64_t)a->sliding_window;
}

static void attn_task(void *arg, uint32_t task, uint32_t worker)
{
	const attn_job *job = arg;
	const infs__attn_args *a = job->a;
	uint32_t h = task / job->n_qblocks, qb = task % job->n_qblocks;
	uint32_t hd = a->head_dim, g = h / (a->n_heads / a->n_kv_heads);
	size_t kv_stride = (size_t)a->n_kv_heads * hd, q_stride = (size_t)a->n_heads * hd;
	float scale = 1.0f / sqrtf((float)hd);
	float *s = a->scratch + (size_t)worker * a->n_ctx;
	uint32_t i_end = (qb + 1) * QUERIES_PER_TASK < a->n ? (qb + 1) * QUERIES_PER_TASK : a->n;
	for (uint32_t i = qb * QUERIES_PER_TASK; i < i_end; i++) {
		const float *q = a->q + i * q_stride + (size_t)h * hd;
		float *o = a->out + i * q_stride + (size_t)h * hd;
		float mx = -INFINITY;
		for (uint32_t j = 0; j < a->n_ctx; j++) {
			if (!visible(a, j, i)) {
				s[j] = -INFINITY;
				continue;
			}
			s[j] = calibrated(a, j, i, dot(q, a->k + j * kv_stride + (size_t)g * hd, hd) * scale);
			if (s[j] > mx)
				mx = s[j];
		}
		for (uint32_t e = 0; e < hd; e++)
			o[e] = 0;
		if (mx == -INFINITY) /* nothing visible: the query sees no value */
			continue;
		float sum = 0;
		for (uint32_t j = 0; j < a->n_ctx; j++) {
			if (s[j] == -INFINITY)
				continue;
			float w = expf(s[j] - mx);
			sum += w;
			axpy(o, w, a->v + j * kv_stride + (size_t)g * hd, hd);
		}
		float inv = 1.0f / sum;
		for (uint32_t e = 0; e < hd; e++)
			o[e] *= inv;
	}
}

void infs__attention_rows(const infs__attn_args *a, infs__pool *pool)
{
	attn_job job = { a, (a->n + QUERIES_PER_TASK - 1) / QUERIES_PER_TASK };
	infs__pool_run(pool, attn_task, &job, a->n_heads * job.n_qblocks);
}

/* Queries up to which the few-query path runs; past it the products pay. */
#define FEW_QUERIES 32
/* Keys per run at least MIN_RUN (shorter runs cost more in merging than
 * they gain in balance), at most about RUN_KEYS (a run's K and V rows stay
 * in the core's cache while every query head of the group reads them),
 * unless the runs' partials would pass PART_FLOATS. */
#define MIN_RUN 64
#define RUN_KEYS 256
#define PART_FLOATS (1u << 22)

/* The few-query path: a task per KV head and run of keys computes, for
 * every query and head of the group, the run's softmax partial (its
 * largest score, the sum of exp(score - largest), the values weighted by
 * those); the caller merges the runs. Past keys (positions 0..) visible to
 * a query are one range, found once per query; only the new tokens' keys
 * are asked visible() one by one. */
typedef struct few_job {
	const infs__attn_args *a;
	const infs__attn_kernels *kern;
	uint32_t n_runs, run_len, group;
	float *part; /* [n][n_heads][n_runs][2 + head_dim] */
} few_job;

/* The f16 row of KV head g at past position j, and how many positions
 * from j on its block holds. */
static const uint16_t *past_row(const infs__attn_past *c, const uint16_t *layer, uint32_t j, uint32_t g,
                                uint32_t hd, uint32_t *n)
{
	*n = c->block_size - j % c->block_size;
	return layer + (size_t)c->table[j / c->block_size] * c->stride_block + (size_t)(j % c->block_size) * c->stride_slot +
	       (size_t)g * hd;
}

/* Scores of q over past rows [r0, r0 + len) of KV head g, block by block
 * where the past is in the cache. */
static void past_scores(const few_job *job, float *s, const float *q, uint32_t g, uint32_t r0, uint32_t len)
{
	const infs__attn_args *a = job->a;
	const uint32_t hd = a->head_dim;
	const float scale = 1.0f / sqrtf((float)hd);
	if (!a->past) {
		const size_t kv_stride = (size_t)a->n_kv_heads * hd;
		job->kern->scores(s, q, a->k + r0 * kv_stride + (size_t)g * hd, kv_stride, len, hd, scale);
		return;
	}
	for (uint32_t t = 0, n; t < len; t += n) {
		const uint16_t *k = past_row(a->past, a->past->k, r0 + t, g, hd, &n);
		n = n < len - t ? n : len - t;
		job->kern->scores_f16(s + t, q, k, a->past->stride_slot, n, hd, scale);
	}
}

/* o += the past rows' values weighted by p, as past_scores reads them. */
static void past_values(const few_job *job, float *o, const float *p, uint32_t g, uint32_t r0, uint32_t len)
{
	const infs__attn_args *a = job->a;
	const uint32_t hd = a->head_dim;
	if (!a->past) {
		const size_t kv_stride = (size_t)a->n_kv_heads * hd;
		job->kern->values(o, p, a->v + r0 * kv_stride + (size_t)g * hd, kv_stride, len, hd);
		return;
	}
	for (uint32_t t = 0, n; t < len; t += n) {
		const uint16_t *v = past_row(a->past, a->past->v, r0 + t, g, hd, &n);
		n = n < len - t ? n : len - t;
		job->kern->values_f16(o, p + t, v, a->past->stride_slot, n, hd);
	}
}

static void few_task(void *arg, uint32_t task, uint32_t worker)
{
	const few_job *job = arg;
	const infs__attn_args *a = job->a;
	const infs__attn_kernels *kern = job->kern;
	const uint32_t g = task / job->n_runs, run = task % job->n_runs, hd = a->head_dim;
	const uint32_t n_past = past_rows(a), j0 = run * job->run_len;
	const uint32_t j1 = j0 + job->run_len < a->n_ctx ? j0 + job->run_len : a->n_ctx;
	const uint32_t new0 = j0 > n_past ? j0 : n_past; /* the new tokens' keys in the run: [new0, j1) */
	const size_t kv_stride = (size_t)a->n_kv_heads * hd, q_stride = (size_t)a->n_heads * hd;
	const float scale = 1.0f / sqrtf((float)hd);
	const float *kg = a->k + (size_t)g * hd, *vg = a->v + (size_t)g * hd;
	float *s = a->scratch + (size_t)worker * a->n_ctx;
	for (uint32_t i = 0; i < a->n; i++) {
		/* Past keys visible to query i: [lo, hi) within the run. */
		const int64_t p = a->pos[i];
		int64_t lo = a->sliding_window ? p - (int64_t)a->sliding_window + 1 : 0, hi = p + 1;
		lo = lo > (int64_t)j0 ? lo : (int64_t)j0;
		hi = hi < (int64_t)j1 ? hi : (int64_t)j1;
		hi = hi < (int64_t)n_past ? hi : (int64_t)n_past;
		const uint32_t r0 = (uint32_t)lo, len = hi > lo ? (uint32_t)(hi - lo) : 0;
		const int calib = a->calib && p >= (int64_t)a->calib->hi;
		for (uint32_t h = g * job->group; h < (g + 1) * job->group; h++) {
			const float *q = a->q + i * q_stride + (size_t)h * hd;
			float *part = job->part + (((size_t)i * a->n_heads + h) * job->n_runs + run) * (2 + hd);
			uint32_t m = len;
			past_scores(job, s, q, g, r0, len);
			for (uint32_t t = 0; calib && t < len; t++)
				s[t] = calibrated(a, r0 + t, i, s[t]);
			for (uint32_t j = new0; j < j1; j++)
				if (visible(a, j, i)) {
					kern->scores(s + m, q, kg + j * kv_stride, kv_stride, 1, hd, scale);
					s[m] = calibrated(a, j, i, s[m]);
					m++;
				}
			float mx = -INFINITY;
			for (uint32_t t = 0; t < m; t++)
				mx = s[t] > mx ? s[t] : mx;
			part[0] = mx;
			part[1] = m ? kern->exp_sum(s, m, mx) : 0.0f;
			memset(part + 2, 0, hd * sizeof *part);
			past_values(job, part + 2, s, g, r0, len);
			for (uint32_t j = new0, t = len; j < j1; j++)
				if (visible(a, j, i))
					axpy(part + 2, s[t++], vg + j * kv_stride, hd);
		}
	}
}

/* Runs per KV head: the tasks a multiple of the threads, at least two per
 * thread, runs of at most RUN_KEYS within PART_FLOATS, none shorter than
 * MIN_RUN keys (one run on one thread). */
static uint32_t few_runs(const infs__attn_args *a, uint32_t threads)
{
	const size_t per_run = (size_t)a->n * a->n_heads * (2 + a->head_dim);
	uint32_t want = (a->n_ctx + RUN_KEYS - 1) / RUN_KEYS;
	if (want > PART_FLOATS / per_run)
		want = (uint32_t)(PART_FLOATS / per_run);
	uint32_t step = threads, x = a->n_kv_heads;
	while (x) { /* threads / gcd(threads, n_kv_heads) */
		uint32_t t = step % x;
		step = x;
		x = t;
	}
	step = threads / step;
	uint32_t runs = step;
	while (a->n_kv_heads * runs < 2 * threads || runs < want)
		runs += step;
	uint32_t most = (a->n_ctx + MIN_RUN - 1) / MIN_RUN;
	return runs < most ? runs : most > 0 ? most : 1;
}

int infs__attention_few(const infs__attn_args *a, infs__pool *pool, int avx2)
{
	if (a->n > FEW_QUERIES || (a->past && a->in_place))
		return -1;
	const uint32_t hd = a->head_dim, n_runs = few_runs(a, infs__pool_size(pool));
	few_job job = { a, infs__attn_kernels_get(avx2), n_runs, (a->n_ctx + n_runs - 1) / n_runs,
		        a->n_heads / a->n_kv_heads, NULL };
	job.part = malloc((size_t)a->n * a->n_heads * n_runs * (2 + hd) * sizeof *job.part);
	if (!job.part)
		return -1;
	infs__pool_run(pool, few_task, &job, a->n_kv_heads * n_runs);
	/* Merge: weights exp(max_run - max) on each run's sum and values. */
	for (size_t r = 0; r < (size_t)a->n * a->n_heads; r++) {
		const float *part = job.part + r * n_runs * (2 + hd);
		float *o = a->out + r * hd, mx = -INFINITY, sum = 0;
		for (uint32_t c = 0; c < n_runs; c++)
			mx = part[c * (2 + hd)] > mx ? part[c * (2 + hd)] : mx;
		for (uint32_t e = 0; e < hd; e++)
			o[e] = 0;
		if (mx == -INFINITY) /* nothing visible: the query sees no value */
			continue;
		for (uint32_t c = 0; c < n_runs; c++) {
			const float *pc = part + c * (2 + hd);
			if (pc[0] == -INFINITY)
				continue;
			const float w = n_runs == 1 ? 1.0f : expf(pc[0] - mx);
			sum += w * pc[1];
			axpy(o, w, pc + 2, hd);
		}
		const float inv = 1.0f / sum;
		for (uint32_t e = 0; e < hd; e++)
			o[e] *= inv;
	}
	free(job.part);
	return 0;
}

#ifdef INFS_HAVE_BLAS
/* Scores of a block of queries, masked and turned into probabilities in
 * place: rows of n_keys floats. */
typedef struct softmax_job {
	const infs__attn_args *a;
	float *s;
	uint32_t i0, n_keys;
} softmax_job;

static void softmax_task(void *arg, uint32_t r, uint32_t worker)
{
	const softmax_job *j = arg;
	float *row = j->s + (size_t)r * j->n_keys;
	uint32_t i = j->i0 + r;
	float scale = 1.0f / sqrtf((float)j->a->head_dim), mx = -INFINITY;
	for (uint32_t k = 0; k < j->n_keys; k++) {
		row[k] = visible(j->a, k, i) ? calibrated(j->a, k, i, row[k] * scale) : -INFINITY;
		mx = row[k] > mx ? row[k] : mx;
	}
	float sum = 0;
	for (uint32_t k = 0; k < j->n_keys; k++) {
		row[k] = row[k] == -INFINITY ? 0.0f : expf(row[k] - mx);
		sum += row[k];
	}
	float inv = sum > 0 ? 1.0f / sum : 0.0f;
	for (uint32_t k = 0; k < j->n_keys; k++)
		row[k] *= inv;
}

/* Scores and weighted values as matrix products per head and block of
 * queries; keys past the block's last visible one are left out. */
static int attention_gemm(const infs__attn_args *a, infs__pool *pool)
{
	uint32_t n_past = past_rows(a), hd = a->head_dim;
	/* Query blocks of up to 256 rows, the score block kept within 64 MiB. */
	uint32_t bq = (1u << 24) / a->n_ctx;
	bq = bq < 1 ? 1 : bq > 256 ? 256 : bq;
	if (bq > a->n)
		bq = a->n;
	float *s = malloc((size_t)bq * a->n_ctx * sizeof *s);
	if (!s)
		return -1;
	int q_stride = (int)(a->n_heads * hd), kv_stride = (int)(a->n_kv_heads * hd);
	for (uint32_t i0 = 0; i0 < a->n; i0 += bq) {
		uint32_t nq = a->n - i0 < bq ? a->n - i0 : bq;
		int32_t maxp = a->pos[i0];
		for (uint32_t i = i0; i < i0 + nq; i++)
			maxp = a->pos[i] > maxp ? a->pos[i] : maxp;
		uint32_t n_keys = a->in_place && maxp >= 0 && (uint32_t)maxp < n_past ? (uint32_t)maxp + 1 : n_past;
		for (uint32_t j = 0; !a->in_place && j < a->n; j++)
			if (a->pos[j] <= maxp)
				n_keys = n_past + j + 1;
		for (uint32_t h = 0; h < a->n_heads; h++) {
			uint32_t g = h / (a->n_heads / a->n_kv_heads);
			const float *q = a->q + (size_t)i0 * q_stride + (size_t)h * hd;
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)n_keys, (int)hd, 1.0f, q,
			            q_stride, a->k + (size_t)g * hd, kv_stride, 0.0f, s, (int)n_keys);
			softmax_job sj = { a, s, i0, n_keys };
			infs__pool_run(pool, softmax_task, &sj, nq);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)hd, (int)n_keys, 1.0f, s,
			            (int)n_keys, a->v + (size_t)g * hd, kv_stride, 0.0f,
			            a->out + (size_t)i0 * q_stride + (size_t)h * hd, q_stride);
		}
	}
	free(s);
	return 0;
}
#endif

static void attention_one(const infs__attn_args *a, infs__pool *pool);

/* Several sequences packed one after another (a->seq non-decreasing: runs
 * of one id) over a shared past: each run attends to the past and to itself
 * alone, its keys copied next to the past's, so that no score is computed
 * only to be masked. Returns nonzero (nothing done) when the ids are not in
 * order or memory runs out. */
static int attention_runs(const infs__attn_args *a, infs__pool *pool)
{
	const uint32_t n_past = past_rows(a);
	const size_t kv_stride = (size_t)a->n_kv_heads * a->head_dim, q_stride = (size_t)a->n_heads * a->head_dim;
	uint32_t longest = 0;
	for (uint32_t i = 1; i < a->n; i++)
		if (a->seq[i] < a->seq[i - 1]) /* an id may come back: the masked path */
			return -1;
	for (uint32_t i = 0, r0 = 0; i < a->n; i++)
		if (i + 1 == a->n || a->seq[i + 1] != a->seq[i]) {
			longest = i + 1 - r0 > longest ? i + 1 - r0 : longest;
			r0 = i + 1;
		}
	float *k = malloc(((size_t)n_past + longest) * kv_stride * sizeof *k);
	float *v = malloc(((size_t)n_past + longest) * kv_stride * sizeof *v);
	if (!k || !v) {
		free(k);
		free(v);
		return -1;
	}
	memcpy(k, a->k, (size_t)n_past * kv_stride * sizeof *k);
	memcpy(v, a->v, (size_t)n_past * kv_stride * sizeof *v);
	for (uint32_t r0 = 0; r0 < a->n;) {
		uint32_t r1 = r0 + 1;
		while (r1 < a->n && a->seq[r1] == a->seq[r0])
			r1++;
		const size_t len = r1 - r0;
		memcpy(k + (size_t)n_past * kv_stride, a->k + ((size_t)n_past + r0) * kv_stride, len * kv_stride * sizeof *k);
		memcpy(v + (size_t)n_past * kv_stride, a->v + ((size_t)n_past + r0) * kv_stride, len * kv_stride * sizeof *v);
		infs__attn_args run = *a;
		run.out = a->out + r0 * q_stride;
		run.q = a->q + r0 * q_stride;
		run.k = k;
		run.v = v;
		run.pos = a->pos + r0;
		run.n = (uint32_t)len;
		run.n_ctx = n_past + (uint32_t)len;
		run.seq = NULL;
		attention_one(&run, pool);
		r0 = r1;
	}
	free(k);
	free(v);
	return 0;
}

void infs__attention(const infs__attn_args *a, infs__pool *pool)
{
	if (a->seq && !a->in_place && a->n > 1 && attention_runs(a, pool) == 0)
		return;
	attention_one(a, pool);
}

static void attention_one(const infs__attn_args *a, infs__pool *pool)
{
	if (infs__attention_few(a, pool, 1) == 0)
		return;
#ifdef INFS_HAVE_BLAS
	/* A single query gains nothing from products; a failed allocation
	 * falls back to the row path, which needs no memory. */
	if (a->n > 1 && attention_gemm(a, pool) == 0)
		return;
#endif
	infs__attention_rows(a, pool);
}

/* Attention, all paths (matrix products with BLAS, rows in plain C, few
 * queries by KV head and run of keys with portable and AVX2 kernels),
 * against a double-precision reference: grouped heads, earlier tokens,
 * positions out of order and repeated, a sliding window, independent
 * sequences interleaved, queries in place (their own rows among the
 * cache's: selective recompute), calibration of a span of keys (only for
 * queries past it); 1 and 3 threads; for few queries, head sizes 64 and
 * not a multiple of 8, groups of 1, 3 and 4 query heads, pasts of 0..299,
 * the past read from a paged f16 cache where it lies. */
#include <math.h>

#include "check.h"
#include "test_util.h"
#include "util/dtype.h"
#include "model/forward.h"

static void reference(float *out, const infs__attn_args *a)
{
	uint32_t n_past = a->in_place ? a->n_ctx : a->n_ctx - a->n, hd = a->head_dim, qs = a->n_heads * hd, ks = a->n_kv_heads * hd;
	double *w = malloc(a->n_ctx * sizeof *w);
	for (uint32_t i = 0; i < a->n; i++)
		for (uint32_t h = 0; h < a->n_heads; h++) {
			uint32_t g = h / (a->n_heads / a->n_kv_heads);
			double mx = -INFINITY, sum = 0;
			for (uint32_t j = 0; j < a->n_ctx; j++) {
				int64_t pj = j < n_past ? (int64_t)j : (int64_t)a->pos[j - n_past], p = a->pos[i];
				int vis = pj <= p && (a->sliding_window == 0 || p - pj < (int64_t)a->sliding_window) &&
				          !(a->seq && j >= n_past && a->seq[j - n_past] != a->seq[i]);
				double d = 0;
				for (uint32_t e = 0; e < hd; e++)
					d += (double)a->q[i * qs + h * hd + e] * a->k[j * ks + g * hd + e];
				d /= sqrt(hd);
				if (a->calib && p >= (int64_t)a->calib->hi && pj >= (int64_t)a->calib->lo &&
				    pj < (int64_t)a->calib->hi)
					d = d * a->calib->inv_temp + a->calib->log_scale;
				w[j] = vis ? d : -INFINITY;
				mx = w[j] > mx ? w[j] : mx;
			}
			for (uint32_t j = 0; j < a->n_ctx; j++) {
				w[j] = w[j] == -INFINITY ? 0 : exp(w[j] - mx);
				sum += w[j];
			}
			for (uint32_t e = 0; e < hd; e++) {
				double o = 0;
				for (uint32_t j = 0; j < a->n_ctx; j++)
					o += w[j] * a->v[j * ks + g * hd + e];
				out[i * qs + h * hd + e] = (float)(o / sum);
			}
		}
	free(w);
}

/* The few-query path (avx2: its AVX2 kernels) into out, first filled with
 * NaN: its largest difference from want, infinite where an output is NaN. */
static float few_diff(infs__attn_args *a, infs__pool *pool, int avx2, float *out, const float *want, size_t qn)
{
	a->out = out;
	for (size_t i = 0; i < qn; i++)
		out[i] = NAN;
	CHECK(infs__attention_few(a, pool, avx2) == 0);
	float d = 0;
	for (size_t i = 0; i < qn; i++)
		d = out[i] != out[i] ? INFINITY : fabsf(out[i] - want[i]) > d ? fabsf(out[i] - want[i]) : d;
	return d;
}

static void check_case(uint32_t n, uint32_t n_past, uint32_t heads, uint32_t kv, uint32_t hd, uint32_t window,
                       int shuffled, int seqs, int in_place, const infs__calib *calib, infs__pool *pool)
{
	uint64_t seed = n * 977 + n_past * 31 + heads + window + (uint64_t)in_place;
	uint32_t n_ctx = in_place ? n_past : n + n_past;
	size_t qn = (size_t)n * heads * hd, kn = (size_t)n_ctx * kv * hd;
	float *q = malloc(qn * 4), *k = malloc(kn * 4), *v = malloc(kn * 4);
	float *o1 = malloc(qn * 4), *o2 = malloc(qn * 4), *want = malloc(qn * 4);
	float *rows = malloc((size_t)infs__pool_size(pool) * n_ctx * 4);
	int32_t *pos = malloc(n * sizeof *pos), *seq = malloc(n * sizeof *seq);
	for (size_t i = 0; i < qn; i++)
		q[i] = 2 * rng_float(&seed);
	for (size_t i = 0; i < kn; i++) {
		k[i] = 2 * rng_float(&seed);
		v[i] = rng_float(&seed);
	}
	for (uint32_t i = 0; i < n; i++) /* shuffled: out of order, with repeats */
		pos[i] = (int32_t)(n_past + (shuffled ? (i * 7) % (n - n / 4 > 0 ? n - n / 4 : 1) : i));
	for (uint32_t i = 0; i < n; i++) /* seqs 1: interleaved sequences, positions from 0 in each */
		seq[i] = seqs == 2 ? (int32_t)(i * 3 / n) : seqs ? (int32_t)(i % 3) : 0;
	if (seqs == 1)
		for (uint32_t i = 0; i < n; i++)
			pos[i] = (int32_t)(i / 3);
	/* seqs 2: three packed one after another over the shared past, each at
	 * positions n_past.. (the runs infs__attention takes apart) */
	for (uint32_t i = 0, start = 0; seqs == 2 && i < n; i++) {
		start = i && seq[i] != seq[i - 1] ? i : start;
		pos[i] = (int32_t)(n_past + i - start);
	}
	for (uint32_t i = 0; in_place && i < n; i++) /* rows of the cache, out of order */
		pos[i] = (int32_t)((i * 7 + 3) % n_past);
	infs__attn_args a = { o1, q, k, v, pos, n, n_ctx, heads, kv, hd, window, seqs ? seq : NULL, rows, in_place,
		              calib, NULL };
	infs__attention(&a, pool);
	a.out = o2;
	infs__attention_rows(&a, pool);
	reference(want, &a);
	float d1 = 0, d2 = 0;
	for (size_t i = 0; i < qn; i++) {
		d1 = fabsf(o1[i] - want[i]) > d1 ? fabsf(o1[i] - want[i]) : d1;
		d2 = fabsf(o2[i] - want[i]) > d2 ? fabsf(o2[i] - want[i]) : d2;
	}
	if (!(d1 < 1e-5f) || !(d2 < 1e-5f))
		fprintf(stderr, "n %u past %u heads %u/%u hd %u window %u: %g %g\n", n, n_past, heads, kv, hd,
		        window, d1, d2);
	CHECK(d1 < 1e-5f);
	CHECK(d2 < 1e-5f);
	for (int avx2 = 0; n <= 32 && avx2 < 2; avx2++) { /* what infs__attention runs for n <= 32 */
		float d3 = few_diff(&a, pool, avx2, o2, want, qn);
		if (!(d3 < 1e-5f))
			fprintf(stderr, "few (avx2 %d): n %u past %u heads %u/%u hd %u window %u: %g\n", avx2, n, n_past,
			        heads, kv, hd, window, d3);
		CHECK(d3 < 1e-5f);
	}
	CHECK(n > 32 || infs__attention_few(&a, pool, 1) == 0);
	CHECK(n <= 32 || infs__attention_few(&a, pool, 1) != 0);
	if (calib) { /* the calibration changed something: it cannot pass unapplied */
		a.calib = NULL;
		reference(o2, &a);
		float moved = 0;
		for (size_t i = 0; i < qn; i++)
			moved = fabsf(o2[i] - want[i]) > moved ? fabsf(o2[i] - want[i]) : moved;
		CHECK(moved > 1e-3f);
	}
	free(q);
	free(k);
	free(v);
	free(o1);
	free(o2);
	free(want);
	free(rows);
	free(pos);
	free(seq);
}

/* Few queries over a past read from a paged f16 cache (blocks of bs
 * slots, in reverse order, the unwritten slots and the f32 past rows NaN:
 * neither may be read) against the reference over the same values. */
static void check_paged(uint32_t n, uint32_t n_past, uint32_t heads, uint32_t kv, uint32_t hd, uint32_t window,
                        const infs__calib *calib, uint32_t bs, infs__pool *pool)
{
	uint64_t seed = n * 131 + n_past * 7 + hd + bs;
	const uint32_t n_ctx = n + n_past, n_blocks = n_past / bs + 2, row = kv * hd;
	size_t qn = (size_t)n * heads * hd, kn = (size_t)n_ctx * row, cn = (size_t)n_blocks * bs * row;
	float *q = malloc(qn * 4), *k = malloc(kn * 4), *v = malloc(kn * 4), *o = malloc(qn * 4), *want = malloc(qn * 4);
	float *rows = malloc((size_t)infs__pool_size(pool) * n_ctx * 4);
	uint16_t *ck = malloc(cn * 2), *cv = malloc(cn * 2);
	int32_t *pos = malloc(n * sizeof *pos), *table = malloc(n_blocks * sizeof *table);
	for (size_t i = 0; i < qn; i++)
		q[i] = 2 * rng_float(&seed);
	for (size_t i = 0; i < kn; i++) { /* values an f16 holds exactly */
		k[i] = infs__f16_to_f32(infs__f32_to_f16(2 * rng_float(&seed)));
		v[i] = infs__f16_to_f32(infs__f32_to_f16(rng_float(&seed)));
	}
	for (uint32_t b = 0; b < n_blocks; b++)
		table[b] = (int32_t)(n_blocks - 1 - b);
	for (size_t i = 0; i < cn; i++)
		ck[i] = cv[i] = 0x7e00; /* NaN */
	for (uint32_t p = 0; p < n_past; p++)
		for (uint32_t e = 0; e < row; e++) {
			size_t at = ((size_t)table[p / bs] * bs + p % bs) * row + e;
			ck[at] = infs__f32_to_f16(k[(size_t)p * row + e]);
			cv[at] = infs__f32_to_f16(v[(size_t)p * row + e]);
		}
	for (uint32_t i = 0; i < n; i++)
		pos[i] = (int32_t)(n_past + i);
	infs__attn_args a = { want, q, k, v, pos, n, n_ctx, heads, kv, hd, window, NULL, rows, 0, calib, NULL };
	reference(want, &a);
	for (size_t i = 0; i < (size_t)n_past * row; i++)
		k[i] = v[i] = NAN;
	const infs__attn_past past = { ck, cv, table, bs, (size_t)bs * row, row };
	a.out = o;
	a.past = &past;
	for (int avx2 = 0; avx2 < 2; avx2++) {
		float d = few_diff(&a, pool, avx2, o, want, qn);
		if (!(d < 1e-5f))
			fprintf(stderr, "paged (avx2 %d): n %u past %u heads %u/%u hd %u window %u block %u: %g\n", avx2, n,
			        n_past, heads, kv, hd, window, bs, d);
		CHECK(d < 1e-5f);
	}
	free(q);
	free(k);
	free(v);
	free(o);
	free(want);
	free(rows);
	free(ck);
	free(cv);
	free(pos);
	free(table);
}

int main(void)
{
	for (uint32_t threads = 1; threads <= 3; threads += 2) {
		infs__pool *pool = NULL;
		CHECK_OK(infs__pool_create(&pool, threads));
		if (!pool)
			break;
		check_case(1, 0, 2, 1, 8, 0, 0, 0, 0, NULL, pool);
		check_case(1, 9, 4, 2, 16, 0, 0, 0, 0, NULL, pool);
		check_case(17, 0, 4, 2, 16, 0, 0, 0, 0, NULL, pool);
		check_case(17, 5, 6, 3, 18, 0, 1, 0, 0, NULL, pool);
		check_case(30, 4, 4, 1, 8, 6, 0, 0, 0, NULL, pool);
		check_case(300, 10, 2, 2, 4, 0, 1, 0, 0, NULL, pool);
		check_case(31, 0, 4, 2, 16, 0, 0, 1, 0, NULL, pool);
		check_case(40, 0, 4, 2, 8, 5, 0, 1, 0, NULL, pool);
		check_case(31, 0, 4, 2, 16, 0, 0, 2, 0, NULL, pool);
		check_case(29, 11, 6, 3, 8, 0, 0, 2, 0, NULL, pool);
		check_case(40, 7, 4, 2, 8, 5, 0, 2, 0, NULL, pool);
		check_case(1, 9, 4, 2, 16, 0, 0, 0, 1, NULL, pool);
		check_case(12, 40, 4, 2, 16, 0, 0, 0, 1, NULL, pool);
		check_case(25, 33, 6, 3, 8, 7, 0, 0, 1, NULL, pool);
		/* Keys [3, 15) calibrated: all queries past them, then some before. */
		const infs__calib sharp = { 3, 15, 1.0f / 0.7f, -0.4f }, flat = { 2, 30, 1.0f / 1.5f, 0.3f };
		check_case(1, 20, 4, 2, 16, 0, 0, 0, 0, &sharp, pool);
		check_case(17, 20, 4, 2, 16, 0, 0, 0, 0, &sharp, pool);
		check_case(17, 5, 6, 3, 18, 0, 1, 0, 0, &sharp, pool);
		check_case(30, 4, 4, 1, 8, 6, 0, 0, 0, &flat, pool);
		check_case(25, 33, 6, 3, 8, 0, 0, 0, 1, &flat, pool);
		/* Few queries over pasts of 0..299: runs of keys split at odd
		 * places, windows cutting into them, calibrated spans in them. */
		const uint32_t hds[] = { 64, 20, 36 }, groups[] = { 1, 3, 4 }, pasts[] = { 0, 1, 7, 64, 65, 130, 299 };
		const uint32_t ns[] = { 1, 2, 5, 16 };
		for (uint32_t x = 0; x < 3; x++)
			for (uint32_t y = 0; y < 3; y++)
				for (uint32_t z = 0; z < 7; z++)
					for (uint32_t w = 0; w < 4; w++) {
						uint32_t n = ns[w], past = pasts[z], kvh = 1 + (x + z) % 3;
						uint32_t window = (x + y + z + w) % 3 == 0 ? 50 : (x + y + z + w) % 3 == 1 ? 3 : 0;
						const infs__calib *cal = past > 20 && (y + z) % 2 ? &sharp : NULL;
						check_case(n, past, kvh * groups[y], kvh, hds[x], cal ? 0 : window, 0, 0, 0, cal,
						           pool);
						if (w == 1) /* in place, and independent sequences */
							check_case(n + 1, past + n + 1, kvh * groups[y], kvh, hds[x], window, 0, 0,
							           1, NULL, pool);
						if (w == 2)
							check_case(n + 1, past, kvh * groups[y], kvh, hds[x], window, 0, 1, 0, NULL,
							           pool);
					}
		for (uint32_t x = 0; x < 3; x++)
			for (uint32_t z = 0; z < 7; z++) {
				uint32_t kvh = 1 + z % 3, bs = z % 2 ? 16 : 5;
				check_paged(1 + z % 3, pasts[z], kvh * groups[x], kvh, hds[x], z % 3 == 1 ? 40 : 0, NULL, bs,
				            pool);
				if (pasts[z] > 20)
					check_paged(2, pasts[z], kvh * groups[x], kvh, hds[x], 0, &sharp, bs, pool);
			}
		/* A past long enough for runs capped in length. */
		check_case(1, 1100, 12, 4, 64, 0, 0, 0, 0, NULL, pool);
		check_case(5, 1100, 6, 2, 20, 300, 0, 0, 0, NULL, pool);
		check_paged(3, 1100, 12, 4, 64, 0, NULL, 16, pool);
		check_paged(2, 1100, 6, 2, 36, 300, &sharp, 7, pool);
		infs__pool_free(pool);
	}
	CHECK_DONE();
}

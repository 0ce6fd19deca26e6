/* Exact top-k (the core of infs_retrieve) against brute force in double:
 * both metrics, k = 1, 7, n, more than n and 4096, single queries and
 * batches larger than one GEMM group, ties ordered by id. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "test_util.h"
#include "retrieve/topk.h"

typedef struct ref_hit {
	uint64_t id;
	double score;
} ref_hit;

static int ref_cmp(const void *a, const void *b)
{
	const ref_hit *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Checks one query's hits: the right count, best first with ties by id,
 * scores matching brute force, and nothing left out that scores higher. */
static void check_query(const infs_hit *h, size_t got, const ref_hit *all, size_t n, size_t k, int exact,
                        const char *what)
{
	size_t want = k < n ? k : n;
	if (got != want) {
		fprintf(stderr, "%s: %zu hits, expected %zu\n", what, got, want);
		check_failures++;
		return;
	}
	ref_hit *sorted = malloc(n * sizeof *sorted);
	memcpy(sorted, all, n * sizeof *sorted);
	qsort(sorted, n, sizeof *sorted, ref_cmp);
	for (size_t i = 0; i < got; i++) {
		if (i > 0 && !infs__hit_before(&h[i - 1], &h[i])) {
			fprintf(stderr, "%s: hit %zu (id %llu, %.9g) out of order\n", what, i, (unsigned long long)h[i].id,
			        h[i].score);
			check_failures++;
			break;
		}
		if (exact) {
			if (h[i].id != sorted[i].id || h[i].score != sorted[i].score) {
				fprintf(stderr, "%s: hit %zu is id %llu (%.9g), brute force says id %llu (%.9g)\n", what, i,
				        (unsigned long long)h[i].id, h[i].score, (unsigned long long)sorted[i].id,
				        sorted[i].score);
				check_failures++;
				break;
			}
			continue;
		}
		double ref = NAN;
		for (size_t j = 0; j < n; j++)
			if (all[j].id == h[i].id)
				ref = all[j].score;
		if (!(fabs(ref - h[i].score) <= 1e-5 * (1 + fabs(ref)))) {
			fprintf(stderr, "%s: hit %zu id %llu scores %.9g, brute force %.9g\n", what, i,
			        (unsigned long long)h[i].id, h[i].score, ref);
			check_failures++;
			break;
		}
		/* rank i holds what brute force ranks i, up to float rounding */
		if (fabs(sorted[i].score - ref) > 2e-5 * (1 + fabs(ref))) {
			fprintf(stderr, "%s: hit %zu scores %.9g where brute force's hit %zu scores %.9g\n", what, i, ref,
			        i, sorted[i].score);
			check_failures++;
			break;
		}
	}
	free(sorted);
}

static void random_case(size_t n, size_t dim, size_t nq, size_t k, int cosine)
{
	float *rows = malloc(n * dim * sizeof *rows), *q = malloc(nq * dim * sizeof *q);
	float *scale = malloc(n * sizeof *scale);
	uint64_t *ids = malloc(n * sizeof *ids);
	for (size_t i = 0; i < n * dim; i++)
		rows[i] = frnd();
	for (size_t i = 0; i < nq * dim; i++)
		q[i] = frnd();
	for (size_t i = 0; i < n; i++) {
		ids[i] = 1000 + 3 * i + (rnd() % 3); /* increasing, as the store gives them */
		double ss = 0;
		for (size_t d = 0; d < dim; d++)
			ss += (double)rows[i * dim + d] * rows[i * dim + d];
		scale[i] = (float)(1 / sqrt(ss));
	}
	infs_hit *out = malloc(nq * k * sizeof *out);
	size_t *out_n = malloc(nq * sizeof *out_n);
	CHECK_OK(infs__topk(out, out_n, rows, ids, cosine ? scale : NULL, n, dim, q, nq, k));
	ref_hit *all = malloc(n * sizeof *all);
	char what[128];
	for (size_t qi = 0; qi < nq; qi++) {
		for (size_t i = 0; i < n; i++) {
			double s = 0;
			for (size_t d = 0; d < dim; d++)
				s += (double)q[qi * dim + d] * rows[i * dim + d];
			all[i] = (ref_hit){ ids[i], cosine ? s * scale[i] : s };
		}
		snprintf(what, sizeof what, "n %zu dim %zu batch %zu k %zu %s query %zu", n, dim, nq, k,
		         cosine ? "cosine" : "ip", qi);
		check_query(out + qi * k, out_n[qi], all, n, k, 0, what);
	}
	free(all);
	free(out);
	free(out_n);
	free(rows);
	free(q);
	free(scale);
	free(ids);
}

/* Small integers make every score exact, so ties are real ties: the order
 * must be brute force's exactly, ties by id even when ids are not sorted. */
static void ties(size_t nq)
{
	size_t n = 3000, dim = 4, k = 500;
	float *rows = malloc(n * dim * sizeof *rows), *q = malloc(nq * dim * sizeof *q);
	uint64_t *ids = malloc(n * sizeof *ids);
	for (size_t i = 0; i < n * dim; i++)
		rows[i] = (float)((int)(rnd() % 5) - 2);
	for (size_t i = 0; i < nq * dim; i++)
		q[i] = (float)((int)(rnd() % 5) - 2);
	for (size_t i = 0; i < n; i++)
		ids[i] = (uint64_t)((i * 7919) % n) + 1; /* a permutation of 1..n */
	infs_hit *out = malloc(nq * k * sizeof *out);
	size_t *out_n = malloc(nq * sizeof *out_n);
	CHECK_OK(infs__topk(out, out_n, rows, ids, NULL, n, dim, q, nq, k));
	ref_hit *all = malloc(n * sizeof *all);
	for (size_t qi = 0; qi < nq; qi++) {
		for (size_t i = 0; i < n; i++) {
			double s = 0;
			for (size_t d = 0; d < dim; d++)
				s += (double)q[qi * dim + d] * rows[i * dim + d];
			all[i] = (ref_hit){ ids[i], s };
		}
		check_query(out + qi * k, out_n[qi], all, n, k, 1, "ties");
	}
	free(all);
	free(out);
	free(out_n);
	free(rows);
	free(q);
	free(ids);
}

/* A query's hits are the same alone as in a batch (GEMM or not). */
static void batch_independent(void)
{
	size_t n = 4000, dim = 40, nq = 9, k = 50;
	float *rows = malloc(n * dim * sizeof *rows), *q = malloc(nq * dim * sizeof *q), *scale = malloc(n * sizeof *scale);
	uint64_t *ids = malloc(n * sizeof *ids);
	for (size_t i = 0; i < n * dim; i++)
		rows[i] = frnd();
	for (size_t i = 0; i < nq * dim; i++)
		q[i] = frnd();
	for (size_t i = 0; i < n; i++) {
		ids[i] = i * 2 + 1;
		scale[i] = 0.5f + (float)(i % 7) / 8;
	}
	infs_hit *batch = malloc(nq * k * sizeof *batch), one[50];
	size_t bn[9], on;
	CHECK_OK(infs__topk(batch, bn, rows, ids, scale, n, dim, q, nq, k));
	for (size_t qi = 0; qi < nq; qi++) {
		CHECK_OK(infs__topk(one, &on, rows, ids, scale, n, dim, q + qi * dim, 1, k));
		CHECK(on == bn[qi]);
		for (size_t j = 0; j < on && j < bn[qi]; j++)
			CHECK(one[j].id == batch[qi * k + j].id && one[j].score == batch[qi * k + j].score);
	}
	free(batch);
	free(rows);
	free(q);
	free(scale);
	free(ids);
}

int main(void)
{
	batch_independent();
	static const size_t ks[] = { 1, 7, 0 /* n */, 1 /* n + 5 */, 4096 };
	static const size_t ns[] = { 1, 9, 300, 5000 };
	for (size_t ni = 0; ni < 4; ni++)
		for (size_t ki = 0; ki < 5; ki++)
			for (int cosine = 0; cosine < 2; cosine++) {
				size_t n = ns[ni], k = ki == 2 ? n : ki == 3 ? n + 5 : ks[ki];
				if (k > INFS_RETRIEVE_K_MAX)
					continue;
				random_case(n, 33, 1, k, cosine);
				random_case(n, 16, 5, k, cosine);
			}
	random_case(2000, 24, 70, 10, 1); /* more queries than one GEMM group */
	random_case(20000, 8, 3, 4096, 0); /* several row blocks, the largest k */
	ties(1);
	ties(9);

	/* NaN scores rank after every number; equal scores by id */
	infs_hit h[5] = { { 5, NAN }, { 4, 1.0f }, { 3, -INFINITY }, { 2, 1.0f }, { 1, 2.0f } };
	infs__hits_sort(h, 5);
	CHECK(h[0].id == 1 && h[1].id == 2 && h[2].id == 4 && h[3].id == 3 && h[4].id == 5);
	float rows[3] = { 1, NAN, 2 };
	uint64_t ids[3] = { 10, 11, 12 };
	float qv = 1;
	infs_hit out[3];
	size_t out_n;
	CHECK_OK(infs__topk(out, &out_n, rows, ids, NULL, 3, 1, &qv, 1, 3));
	CHECK(out_n == 3 && out[0].id == 12 && out[1].id == 10 && out[2].id == 11);
	CHECK_OK(infs__topk(out, &out_n, rows, ids, NULL, 0, 1, &qv, 1, 3));
	CHECK(out_n == 0);
	CHECK_DONE();
}

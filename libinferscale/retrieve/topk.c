/* Exact top-k: scores come a block of rows at a time (one GEMM for the whole
 * batch of queries when BLAS is there), and each query keeps its k best in a
 * bounded heap laid out in its own slice of the output, so selection costs
 * O(n log k) and no memory beyond the score block. The heap holds row
 * indexes in the id field until the final rescoring turns them into ids. */
#include "retrieve/topk.h"

#include <stdlib.h>

#ifdef INFS_HAVE_BLAS
#include <cblas.h>
#endif

#include "util/error.h"

/* a before b, where ids maps the id field (a row index) to the id, or is
 * NULL when the id field already holds the id */
static int before(const infs_hit *a, const infs_hit *b, const uint64_t *ids)
{
	if (!ids)
		return infs__hit_before(a, b);
	infs_hit x = { ids[a->id], a->score }, y = { ids[b->id], b->score };
	return infs__hit_before(&x, &y);
}

/* The heap's root is the worst hit kept: a candidate only has to beat it. */
static void sift_down(infs_hit *h, size_t n, size_t i, const uint64_t *ids)
{
	infs_hit x = h[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && before(&h[c], &h[c + 1], ids))
			c++;
		if (!before(&x, &h[c], ids))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

static void sift_up(infs_hit *h, size_t i, const uint64_t *ids)
{
	infs_hit x = h[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!before(&h[p], &x, ids))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = x;
}

static void heap_push(infs_hit *h, size_t *m, size_t k, infs_hit x, const uint64_t *ids)
{
	if (*m < k) {
		h[*m] = x;
		sift_up(h, (*m)++, ids);
	} else if (before(&x, &h[0], ids)) {
		h[0] = x;
		sift_down(h, k, 0, ids);
	}
}

void infs__hits_sort(infs_hit *hits, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift_down(hits, n, i, NULL);
	/* the worst goes to the end each round, leaving the best first */
	for (size_t e = n; e > 1; e--) {
		infs_hit t = hits[0];
		hits[0] = hits[e - 1];
		hits[e - 1] = t;
		sift_down(hits, e - 1, 0, NULL);
	}
}

void infs__hits_rescore(infs_hit *hits, size_t m, const float *rows, const uint64_t *ids, const float *row_scale,
                        size_t dim, const float *query)
{
	for (size_t i = 0; i < m; i++) {
		size_t r = (size_t)hits[i].id;
		const float *x = rows + r * dim;
		double s = 0;
		for (size_t d = 0; d < dim; d++)
			s += (double)query[d] * x[d];
		if (row_scale)
			s *= row_scale[r];
		hits[i] = (infs_hit){ ids[r], (float)s };
	}
	infs__hits_sort(hits, m);
}

#ifndef INFS_HAVE_BLAS
static float dot(const float *a, const float *b, size_t n)
{
	/* independent partial sums, so that the compiler can vectorise */
	float acc[8] = { 0 };
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += a[i + j] * b[i + j];
	float s = 0;
	for (; i < n; i++)
		s += a[i] * b[i];
	return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
#endif

/* scores[q * nb + j] = dot(query q, row j) for a block of nb rows. */
static void score_block(float *scores, const float *rows, size_t nb, size_t dim, const float *queries, size_t nq)
{
#ifdef INFS_HAVE_BLAS
	if (nq == 1)
		cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)nb, (int)dim, 1.0f, rows, (int)dim, queries, 1, 0.0f,
		            scores, 1);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nb, (int)dim, 1.0f, queries, (int)dim,
		            rows, (int)dim, 0.0f, scores, (int)nb);
#else
	for (size_t q = 0; q < nq; q++)
		for (size_t j = 0; j < nb; j++)
			scores[q * nb + j] = dot(queries + q * dim, rows + j * dim, dim);
#endif
}

/* Queries scored together: enough for a GEMM to pay, few enough that a
 * block of scores stays about 1 MiB. */
#define QUERY_GROUP 64

int infs__topk(infs_hit *out, size_t *out_n, const float *rows, const uint64_t *ids, const float *row_scale,
               size_t n, size_t dim, const float *queries, size_t n_queries, size_t k)
{
	for (size_t q = 0; q < n_queries; q++)
		out_n[q] = 0;
	if (n == 0)
		return INFS_OK;
	size_t group = n_queries < QUERY_GROUP ? n_queries : QUERY_GROUP;
	size_t block = (256u << 10) / group;
	if (block > n)
		block = n;
	float *scores = malloc(block * group * sizeof *scores);
	if (!scores)
		return infs__error(INFS_ENOMEM, "retrieve: out of memory for %zu scores", block * group);
	for (size_t q0 = 0; q0 < n_queries; q0 += group) {
		size_t nq = n_queries - q0 < group ? n_queries - q0 : group;
		for (size_t r0 = 0; r0 < n; r0 += block) {
			size_t nb = n - r0 < block ? n - r0 : block;
			score_block(scores, rows + r0 * dim, nb, dim, queries + q0 * dim, nq);
			for (size_t q = 0; q < nq; q++) {
				infs_hit *h = out + (q0 + q) * k;
				size_t *m = &out_n[q0 + q];
				const float *s = scores + q * nb;
				for (size_t j = 0; j < nb; j++) {
					float v = row_scale ? s[j] * row_scale[r0 + j] : s[j];
					/* most rows lose to the root outright */
					if (*m == k && v < h[0].score)
						continue;
					heap_push(h, m, k, (infs_hit){ r0 + j, v }, ids);
				}
			}
		}
	}
	for (size_t q = 0; q < n_queries; q++)
		infs__hits_rescore(out + q * k, out_n[q], rows, ids, row_scale, dim, queries + q * dim);
	free(scores);
	return INFS_OK;
}

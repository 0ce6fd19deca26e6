/* The FAISS backend: a "Flat" index returns exactly what the exact search
 * returns (ids, order and scores: both report the same rescored values) for
 * both metrics, up to k covering the whole namespace; HNSW and IVF find
 * most of the true neighbours, all of them with enough search effort set
 * after the factory string; FAISS's errors come back as infs errors with
 * FAISS's message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "test_util.h"
#include "retrieve/retrieve_faiss.h"
#include "retrieve/topk.h"

enum { N = 3000, DIM = 32, NQ = 20 };

int main(void)
{
	float *rows = malloc(N * DIM * sizeof *rows), *inv = malloc(N * sizeof *inv), q[NQ * DIM];
	uint64_t *ids = malloc(N * sizeof *ids);
	for (size_t i = 0; i < N; i++) {
		double ss = 0;
		for (size_t d = 0; d < DIM; d++) {
			rows[i * DIM + d] = frnd();
			ss += (double)rows[i * DIM + d] * rows[i * DIM + d];
		}
		inv[i] = (float)(1 / sqrt(ss));
		ids[i] = 5 + 2 * i;
	}
	for (size_t i = 0; i < NQ * DIM; i++)
		q[i] = frnd();
	/* cosine takes unit queries */
	float qn[NQ * DIM];
	for (size_t i = 0; i < NQ; i++) {
		double ss = 0;
		for (size_t d = 0; d < DIM; d++)
			ss += (double)q[i * DIM + d] * q[i * DIM + d];
		for (size_t d = 0; d < DIM; d++)
			qn[i * DIM + d] = (float)(q[i * DIM + d] / sqrt(ss));
	}

	static const size_t ks[] = { 1, 10, 100, 500, N + 5 };
	for (int cosine = 0; cosine < 2; cosine++) {
		void *flat = NULL;
		CHECK_OK(infs__faiss_build(&flat, "Flat", rows, cosine ? inv : NULL, N, DIM));
		const float *qq = cosine ? qn : q;
		for (size_t ki = 0; flat && ki < 5; ki++) {
			size_t k = ks[ki];
			infs_hit *a = malloc(NQ * k * sizeof *a), *b = malloc(NQ * k * sizeof *b);
			size_t an[NQ], bn[NQ];
			CHECK_OK(infs__faiss_search(a, an, flat, rows, ids, cosine ? inv : NULL, N, DIM, qq, NQ, k));
			CHECK_OK(infs__topk(b, bn, rows, ids, cosine ? inv : NULL, N, DIM, qq, NQ, k));
			int bad = 0;
			for (size_t i = 0; i < NQ && !bad; i++) {
				CHECK(an[i] == bn[i] && an[i] == (k < N ? k : N));
				for (size_t j = 0; j < an[i] && j < bn[i] && !bad; j++) {
					const infs_hit *x = &a[i * k + j], *y = &b[i * k + j];
					if (x->id != y->id || x->score != y->score) {
						fprintf(stderr, "%s k %zu query %zu rank %zu: FAISS id %llu %.9g, exact id %llu %.9g\n",
						        cosine ? "cosine" : "ip", k, i, j, (unsigned long long)x->id, x->score,
						        (unsigned long long)y->id, y->score);
						check_failures++;
						bad = 1;
					}
				}
			}
			free(a);
			free(b);
		}
		infs__faiss_index_free(flat);
	}

	/* approximate indexes find most of the true top 10; search parameters
	 * after the factory string buy the rest */
	enum { NQ2 = 200 };
	float *q2 = malloc(NQ2 * DIM * sizeof *q2);
	for (size_t i = 0; i < NQ2; i++) {
		double ss = 0;
		for (size_t d = 0; d < DIM; d++) {
			q2[i * DIM + d] = frnd();
			ss += (double)q2[i * DIM + d] * q2[i * DIM + d];
		}
		for (size_t d = 0; d < DIM; d++)
			q2[i * DIM + d] = (float)(q2[i * DIM + d] / sqrt(ss));
	}
	infs_hit *truth = malloc(NQ2 * 10 * sizeof *truth), *got = malloc(NQ2 * 10 * sizeof *got);
	size_t tn[NQ2], gn[NQ2];
	CHECK_OK(infs__topk(truth, tn, rows, ids, inv, N, DIM, q2, NQ2, 10));
	static const struct { const char *spec; double min_recall; } approx[] = {
		{ "HNSW32", 0.85 },
		{ "HNSW32 efSearch=128", 0.99 },
		{ "IVF16,Flat nprobe=16", 1.0 }, /* every list probed: exhaustive */
	};
	for (size_t a = 0; a < sizeof approx / sizeof approx[0]; a++) {
		void *ix = NULL;
		CHECK_OK(infs__faiss_build(&ix, approx[a].spec, rows, inv, N, DIM));
		if (!ix)
			continue;
		CHECK_OK(infs__faiss_search(got, gn, ix, rows, ids, inv, N, DIM, q2, NQ2, 10));
		size_t found = 0;
		for (size_t i = 0; i < NQ2; i++)
			for (size_t j = 0; j < tn[i]; j++)
				for (size_t m = 0; m < gn[i]; m++)
					found += got[i * 10 + m].id == truth[i * 10 + j].id;
		double recall = found / (double)(NQ2 * 10);
		printf("%-22s recall@10 %.3f\n", approx[a].spec, recall);
		CHECK(recall >= approx[a].min_recall);
		infs__faiss_index_free(ix);
	}
	free(q2);
	free(truth);
	free(got);

	/* FAISS's own errors, with its message */
	void *ix = NULL;
	CHECK_ERR(infs__faiss_build(&ix, "NoSuchIndex42", rows, NULL, N, DIM), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "NoSuchIndex42") && strstr(infs_error_last(), "index factory"));
	printf("bad factory: %s\n", infs_error_last());
	CHECK_ERR(infs__faiss_build(&ix, "IVF4096,Flat", rows, NULL, 100, DIM), INFS_EUNSUPPORTED);
	CHECK(strstr(infs_error_last(), "training") != NULL);
	printf("IVF on 100 rows: %s\n", infs_error_last());
	CHECK_ERR(infs__faiss_build(&ix, "HNSW32 noSuchParameter=3", rows, NULL, N, DIM), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "search parameters") && strstr(infs_error_last(), "noSuchParameter"));
	printf("bad parameter: %s\n", infs_error_last());
	CHECK(ix == NULL);

	free(rows);
	free(inv);
	free(ids);
	CHECK_DONE();
}

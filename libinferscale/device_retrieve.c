/* Exact retrieval on the store's device copy: a cuBLAS GEMM of the queries
 * (f16, unit length) against the namespace's f16 unit rows with f32
 * accumulation, the top-k kernels, then the host rescores the candidates
 * exactly as the CPU path does, from the store's own f32 matrix, so scores
 * and order are the CPU's. A margin of extra candidates absorbs the f16
 * rounding of the ranking. Called under the store's read lock. */
#include <cublas_v2.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device_copy.h"
#include "dtype.h"
#include "error.h"
#include "kernels.h"
#include "retrieve.h"
#include "topk.h"

/* f32 scores held at once on the whole-row path: larger batches run in
 * several rounds. */
#define SCORES_MAX (64u << 20)
/* Batches whose scores exceed this are scored in slices of SLICE_BYTES,
 * which the L2 cache keeps between the GEMM and the filter. */
#define SLICED_MIN (32u << 20)
#define SLICE_BYTES (16u << 20)

void infs__device_search_free(infs__device *d)
{
	if (d->blas)
		cublasDestroy((cublasHandle_t)d->blas);
	d->blas = NULL;
	cudaFree(d->scratch);
	cudaFree(d->io);
}

static int blas_error(cublasStatus_t st, const char *fn, const char *what)
{
	return infs__error(st == CUBLAS_STATUS_ALLOC_FAILED ? INFS_EBUDGET : INFS_EDEVICE, "%s: %s: cuBLAS error %d",
	                   fn, what, (int)st);
}

static size_t up256(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

static int grow(void **buf, size_t *have, size_t need, const char *fn)
{
	if (*have >= need)
		return INFS_OK;
	cudaFree(*buf);
	*buf = NULL;
	*have = 0;
	cudaError_t err = cudaMalloc(buf, need);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "allocating search scratch");
	*have = need;
	return INFS_OK;
}

/* scores[q][m] (ldc) = rows (row r at emb + r * lda) . queries[q0 + q] */
static int gemm(const infs__search *s, const uint16_t *emb, uint32_t m, uint32_t lda, uint32_t q0, uint32_t nq,
                float *scores, uint32_t ldc, const char *fn)
{
	const float one = 1.0f, zero = 0.0f;
	cublasStatus_t st = cublasGemmEx((cublasHandle_t)s->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)nq,
	                                 (int)s->dim, &one, emb, CUDA_R_16F, (int)lda, s->queries + (size_t)q0 * s->dim,
	                                 CUDA_R_16F, (int)s->dim, &zero, scores, CUDA_R_32F, (int)ldc,
	                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	return st == CUBLAS_STATUS_SUCCESS ? INFS_OK : blas_error(st, fn, "scoring the namespace");
}

static infs_k_topk_params topk_params(const infs__search *s, uint32_t q0, uint32_t nq, const float *scores,
                                      void *ws)
{
	infs_k_topk_params tp = {
		.scores = scores, .ld = s->rows, .n_rows = s->rows, .n_queries = nq, .k = s->k,
		.row_scale = s->row_scale, .dead = s->dead, .ids = s->ids,
		.out_id = s->out_id + (size_t)q0 * s->k, .out_score = s->out_score + (size_t)q0 * s->k,
		.out_n = s->out_n + q0, .workspace = ws,
	};
	return tp;
}

/* Queries q0 .. q0 + nq over whole score rows, in rounds. */
static int run_whole(const infs__search *s, uint32_t q0, uint32_t nq, const char *fn)
{
	uint32_t qc = SCORES_MAX / s->rows;
	qc = qc < 1 ? 1 : qc > nq ? nq : qc;
	const size_t s_bytes = up256((size_t)qc * s->rows * 4);
	int rc = grow(s->scratch, s->scratch_bytes, s_bytes + infs_k_topk_workspace_bytes(s->rows, qc, s->k), fn);
	for (uint32_t q = q0; q < q0 + nq && rc == INFS_OK; q += qc) {
		uint32_t n = q0 + nq - q < qc ? q0 + nq - q : qc;
		float *scores = *s->scratch;
		if ((rc = gemm(s, s->emb, s->rows, s->dim, q, n, scores, s->rows, fn)))
			break;
		infs_k_topk_params tp = topk_params(s, q, n, scores, (char *)*s->scratch + s_bytes);
		cudaError_t err = infs_k_topk(&tp, s->stream);
		if (err != cudaSuccess)
			rc = infs__cuda_error(err, fn, "selecting the top k");
	}
	return rc;
}

/* All queries, scored in slices of rows after a strided sample; *retry is
 * set when some query must be searched again whole. */
static int run_sliced(const infs__search *s, uint32_t stride, int *retry, const char *fn)
{
	const uint32_t nq = s->n_queries, n_samples = s->rows / stride;
	uint32_t slice = SLICE_BYTES / 4 / nq;
	slice = slice < 1024 ? 1024 : slice;
	const size_t sa_bytes = up256((size_t)nq * n_samples * 4), sl_bytes = up256((size_t)nq * slice * 4);
	const size_t ws_bytes = up256(infs_k_topk_workspace_bytes(s->rows, nq, s->k));
	int rc = grow(s->scratch, s->scratch_bytes, sa_bytes + sl_bytes + ws_bytes + up256(nq * 4), fn);
	if (rc)
		return rc;
	char *base = *s->scratch;
	float *samples = (float *)base, *scores = (float *)(base + sa_bytes);
	void *ws = base + sa_bytes + sl_bytes;
	infs_k_topk_params tp = topk_params(s, 0, nq, NULL, ws);
	if ((rc = gemm(s, s->emb, n_samples, stride * s->dim, 0, nq, samples, n_samples, fn)))
		return rc;
	cudaError_t err = infs_k_topk_sample(&tp, samples, s->stream);
	for (uint32_t r0 = 0; r0 < s->rows && err == cudaSuccess; r0 += slice) {
		uint32_t m = s->rows - r0 < slice ? s->rows - r0 : slice;
		if ((rc = gemm(s, s->emb + (size_t)r0 * s->dim, m, s->dim, 0, nq, scores, m, fn)))
			return rc;
		err = infs_k_topk_filter(&tp, scores, m, r0, m, s->stream);
	}
	if (err == cudaSuccess)
		err = infs_k_topk_select(&tp, s->stream);
	uint32_t *n = malloc(nq * sizeof *n);
	if (!n)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(n, s->out_n, nq * sizeof *n, cudaMemcpyDeviceToHost, s->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(s->stream);
	if (err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "selecting the top k");
	*retry = 0;
	for (uint32_t q = 0; q < nq && rc == INFS_OK; q++)
		if (n[q] == INFS_K_TOPK_RETRY)
			*retry = 1;
	free(n);
	return rc;
}

int infs__search_run(const infs__search *s, const char *fn)
{
	if (cublasSetStream((cublasHandle_t)s->blas, s->stream) != CUBLAS_STATUS_SUCCESS)
		return infs__error(INFS_EDEVICE, "%s: cublasSetStream failed", fn);
	uint32_t stride = infs_k_topk_sample_stride(s->rows, s->k);
	if (stride && (uint64_t)s->n_queries * s->rows * 4 > SLICED_MIN) {
		int retry = 0, rc = run_sliced(s, stride, &retry, fn);
		if (rc || !retry)
			return rc;
	}
	return run_whole(s, 0, s->n_queries, fn);
}

/* The row of id in the store's sorted fact ids, or n. */
static size_t row_of(const uint64_t *ids, size_t n, uint64_t id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ids[lo] == id ? lo : n;
}

/* The CPU's score of row x: the same sums in the same order as
 * infs__hits_rescore and infs__ns_cache_norms, so the same bits; the two
 * sums share one loop, as independent chains. */
static float exact_score(const float *q, const float *x, size_t dim, infs_metric metric)
{
	double s = 0, ss = 0;
	for (size_t d = 0; d < dim; d++) {
		s += (double)q[d] * x[d];
		ss += (double)x[d] * x[d];
	}
	if (metric == INFS_METRIC_COSINE)
		s *= ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
	return (float)s;
}

int infs__retrieve_device(infs_hit *out, size_t *out_n, infs_store *s, const char *ns, const float *queries,
                          size_t n_queries, size_t k, infs_metric metric)
{
	static const char fn[] = "infs_retrieve";
	infs__device *d = infs__device_of(s);
	const float *emb;
	const uint64_t *ids;
	size_t n;
	uint64_t gen;
	int rc = infs__store_ns_matrix(&emb, &ids, &n, &gen, s, ns);
	if (rc)
		return infs__error_wrap(rc, "%s", fn);
	infs__dev_ns *p = infs__device_ns(d, ns);
	if (!p || !n) {
		memset(out_n, 0, n_queries * sizeof *out_n);
		return INFS_OK;
	}
	if (n_queries > UINT32_MAX / INFS_K_TOPK_MAX)
		return infs__error(INFS_ERANGE, "%s: %zu queries at once is too many for the device", fn, n_queries);
	const uint32_t dim = d->embed_dim, nq = (uint32_t)n_queries;
	size_t kk = k + (k < 64 ? 16 : k / 4);
	kk = kk > INFS_K_TOPK_MAX ? INFS_K_TOPK_MAX : kk;
	const size_t q_bytes = up256((size_t)nq * dim * 2), id_bytes = up256((size_t)nq * kk * 8);
	const size_t sc_bytes = up256((size_t)nq * kk * 4), n_bytes = up256((size_t)nq * 4);
	uint16_t *q16 = malloc((size_t)nq * dim * 2);
	uint64_t *h_id = malloc((size_t)nq * kk * 8);
	uint32_t *h_n = malloc((size_t)nq * 4);
	infs_hit *hits = malloc(kk * sizeof *hits);
	if (!q16 || !h_id || !h_n || !hits) {
		rc = infs__error(INFS_ENOMEM, "%s: out of memory", fn);
		goto done;
	}
	/* Rank with unit queries: a positive scale changes no order, and large
	 * inner-product queries stay inside f16's range. */
	for (size_t q = 0; q < nq; q++) {
		const float *x = queries + q * dim;
		double ss = 0;
		for (size_t j = 0; j < dim; j++)
			ss += (double)x[j] * x[j];
		double len = sqrt(ss);
		for (size_t j = 0; j < dim; j++)
			q16[q * dim + j] = infs__f32_to_f16(len > 0 ? (float)(x[j] / len) : 0.0f);
	}

	pthread_mutex_lock(&d->scratch_lock);
	int prev;
	if ((rc = infs__device_enter(&prev, d->device, fn)))
		goto unlock;
	if ((rc = grow(&d->io, &d->io_bytes, q_bytes + id_bytes + sc_bytes + n_bytes, fn)))
		goto restore;
	if (!d->blas) {
		cublasHandle_t h;
		cublasStatus_t st = cublasCreate(&h);
		if (st != CUBLAS_STATUS_SUCCESS) {
			rc = blas_error(st, fn, "creating a handle");
			goto restore;
		}
		d->blas = h;
	}
	char *io = d->io;
	infs__search se = {
		.blas = d->blas, .stream = d->stream, .emb = p->emb,
		.row_scale = metric == INFS_METRIC_IP ? p->norm : NULL, .ids = p->ids,
		.dead = p->n_dead ? p->dead : NULL, .rows = p->n_rows, .dim = dim, .queries = (uint16_t *)io,
		.n_queries = nq, .k = (uint32_t)kk, .out_id = (uint64_t *)(io + q_bytes),
		.out_score = (float *)(io + q_bytes + id_bytes), .out_n = (uint32_t *)(io + q_bytes + id_bytes + sc_bytes),
		.scratch = &d->scratch, .scratch_bytes = &d->scratch_bytes,
	};
	cudaError_t err = cudaMemcpyAsync(io, q16, (size_t)nq * dim * 2, cudaMemcpyHostToDevice, d->stream);
	if (err != cudaSuccess) {
		rc = infs__cuda_error(err, fn, "uploading the queries");
		goto restore;
	}
	if ((rc = infs__search_run(&se, fn)))
		goto restore;
	err = cudaMemcpyAsync(h_id, se.out_id, (size_t)nq * kk * 8, cudaMemcpyDeviceToHost, d->stream);
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(h_n, se.out_n, (size_t)nq * 4, cudaMemcpyDeviceToHost, d->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(d->stream);
	if (err != cudaSuccess) {
		rc = infs__cuda_error(err, fn, "reading the results");
		goto restore;
	}
	for (size_t q = 0; q < nq; q++) {
		const float *x = queries + q * dim;
		size_t m = 0;
		for (size_t j = 0; j < h_n[q]; j++) {
			size_t r = row_of(ids, n, h_id[q * kk + j]);
			if (r < n)
				hits[m++] = (infs_hit){ ids[r], exact_score(x, emb + r * dim, dim, metric) };
		}
		infs__hits_sort(hits, m);
		m = m < k ? m : k;
		memcpy(out + q * k, hits, m * sizeof *hits);
		out_n[q] = m;
	}
restore:
	infs__device_restore(prev);
unlock:
	pthread_mutex_unlock(&d->scratch_lock);
done:
	free(q16), free(h_id), free(h_n), free(hits);
	return rc;
}

/* Exact retrieval on the store's device copy: the queries (f16, unit
 * length) against the namespace's f16 unit rows with f32 accumulation, the
 * best candidates selected on the device, then the host rescores them
 * exactly as the CPU path does, from the store's own f32 matrix, so scores
 * and order are the CPU's. A margin of extra candidates absorbs the f16
 * rounding of the ranking. The shapes the fused kernels take (one pass over
 * the rows, no score matrix; up to INFS_K_FUSED_MAX candidates for up to
 * INFS_K_FUSED_MAX_QUERIES queries), which they do faster at every size
 * measured (docs/benchmarks.md), go to them; the others to a cuBLAS GEMM
 * into f32 scores and the top-k kernel. Called under the store's read
 * lock. */
#include <cublas_v2.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device_copy.h"
#include "util/dtype.h"
#include "util/error.h"
#include "kernels.h"
#include "retrieve/retrieve.h"
#include "retrieve/topk.h"

static const char fn[] = "infs_retrieve";

/* f32 scores held at once: larger batches run in several rounds. */
#define SCORES_MAX (64u << 20)

void infs__device_blas_destroy(infs__device *d)
{
	if (d->blas)
		cublasDestroy((cublasHandle_t)d->blas);
	d->blas = NULL;
}

static int blas_error(cublasStatus_t st, const char *what)
{
	return infs__error(st == CUBLAS_STATUS_ALLOC_FAILED ? INFS_EBUDGET : INFS_EDEVICE, "%s: %s: cuBLAS error %d",
	                   fn, what, (int)st);
}

static size_t up256(size_t n)
{
	return (n + 255) & ~(size_t)255;
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
	const size_t dim = d->embed_dim, rows = p->n_rows;
	size_t kk = k + (k < 64 ? 16 : k / 4);
	if (kk > INFS_K_TOPK_MAX)
		kk = INFS_K_TOPK_MAX;
	int prev;
	if ((rc = infs__device_enter(&prev, d->device, fn)))
		return rc;
	const int fused = infs_k_fused_supported((uint32_t)dim, (uint32_t)n_queries, (uint32_t)kk);
	size_t qc = SCORES_MAX / rows;
	qc = fused ? n_queries : qc < 1 ? 1 : qc > n_queries ? n_queries : qc;

	const size_t q_bytes = up256(qc * dim * 2), s_bytes = fused ? 0 : up256(qc * rows * 4);
	const size_t ws_bytes =
		up256(fused ? infs_k_fused_workspace_bytes((uint32_t)rows, (uint32_t)dim, (uint32_t)qc, (uint32_t)kk)
		            : infs_k_topk_workspace_bytes((uint32_t)rows, (uint32_t)qc, (uint32_t)kk));
	const size_t id_bytes = up256(qc * kk * 8), sc_bytes = up256(qc * kk * 4), n_bytes = up256(qc * 4);
	const size_t seed_bytes = INFS_K_FUSED_SEEDS * 8;
	const size_t need = seed_bytes + q_bytes + s_bytes + ws_bytes + id_bytes + sc_bytes + n_bytes;
	uint16_t *q16 = malloc(qc * dim * 2);
	uint64_t *h_id = malloc(qc * kk * 8);
	uint32_t *h_n = malloc(qc * 4);
	infs_hit *hits = malloc(kk * sizeof *hits);
	if (!q16 || !h_id || !h_n || !hits) {
		rc = infs__error(INFS_ENOMEM, "%s: out of memory", fn);
		goto done;
	}

	pthread_mutex_lock(&d->scratch_lock);
	cudaError_t err = cudaSuccess;
	if (d->scratch_bytes < need) {
		cudaFree(d->scratch);
		d->scratch = NULL;
		d->scratch_bytes = 0;
		if ((err = cudaMalloc(&d->scratch, need)) != cudaSuccess) {
			rc = infs__cuda_error(err, fn, "allocating search scratch");
			goto unlock;
		}
		d->scratch_bytes = need;
		d->seed_epoch = 0;
	}
	/* Each fused search shares its seeds under an epoch of its own: the
	 * seeds are zeroed before the first, and again when the epochs run out. */
	if (fused) {
		if (d->seed_epoch == 0 || d->seed_epoch == UINT32_MAX) {
			if ((err = cudaMemsetAsync(d->scratch, 0, seed_bytes, d->stream)) != cudaSuccess) {
				rc = infs__cuda_error(err, fn, "clearing search seeds");
				goto unlock;
			}
			d->seed_epoch = 0;
		}
		d->seed_epoch++;
	}
	if (!d->blas) {
		cublasHandle_t h;
		cublasStatus_t st = cublasCreate(&h);
		if (st != CUBLAS_STATUS_SUCCESS) {
			rc = blas_error(st, "creating a handle");
			goto unlock;
		}
		d->blas = h;
	}
	cublasHandle_t blas = d->blas;
	cublasSetStream(blas, d->stream);
	char *base = (char *)d->scratch + seed_bytes;
	uint16_t *dq = (uint16_t *)base;
	float *scores = (float *)(base + q_bytes);
	void *ws = base + q_bytes + s_bytes;
	uint64_t *d_id = (uint64_t *)(base + q_bytes + s_bytes + ws_bytes);
	float *d_sc = (float *)((char *)d_id + id_bytes);
	uint32_t *d_n = (uint32_t *)((char *)d_sc + sc_bytes);

	for (size_t q0 = 0; q0 < n_queries && rc == INFS_OK; q0 += qc) {
		size_t qn = n_queries - q0 < qc ? n_queries - q0 : qc;
		/* Rank with unit queries: a positive scale changes no order, and
		 * large inner-product queries stay inside f16's range. */
		for (size_t q = 0; q < qn; q++) {
			const float *x = queries + (q0 + q) * dim;
			double ss = 0;
			for (size_t j = 0; j < dim; j++)
				ss += (double)x[j] * x[j];
			double len = sqrt(ss);
			for (size_t j = 0; j < dim; j++)
				q16[q * dim + j] = infs__f32_to_f16(len > 0 ? (float)(x[j] / len) : 0.0f);
		}
		const float one = 1.0f, zero = 0.0f;
		err = cudaMemcpyAsync(dq, q16, qn * dim * 2, cudaMemcpyHostToDevice, d->stream);
		if (err != cudaSuccess) {
			rc = infs__cuda_error(err, fn, "uploading the queries");
			break;
		}
		const float *row_scale = metric == INFS_METRIC_IP ? p->norm : NULL;
		const uint32_t *dead = p->n_dead ? p->dead : NULL;
		if (fused) {
			infs_k_fused_params fp = {
				.emb = p->emb, .queries = dq, .n_rows = (uint32_t)rows, .dim = (uint32_t)dim,
				.n_queries = (uint32_t)qn, .k = (uint32_t)kk, .row_scale = row_scale, .dead = dead,
				.ids = p->ids, .out_id = d_id, .out_score = d_sc, .out_n = d_n, .workspace = ws,
				.seeds = d->scratch, .seed_epoch = d->seed_epoch,
			};
			err = infs_k_fused_topk(&fp, d->stream);
		} else {
			cublasStatus_t st = cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)qn, (int)dim, &one,
			                                 p->emb, CUDA_R_16F, (int)dim, dq, CUDA_R_16F, (int)dim, &zero, scores,
			                                 CUDA_R_32F, (int)rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
			if (st != CUBLAS_STATUS_SUCCESS) {
				rc = blas_error(st, "scoring the namespace");
				break;
			}
			infs_k_topk_params tp = {
				.scores = scores, .ld = rows, .n_rows = (uint32_t)rows, .n_queries = (uint32_t)qn,
				.k = (uint32_t)kk, .row_scale = row_scale, .dead = dead, .ids = p->ids, .out_id = d_id,
				.out_score = d_sc, .out_n = d_n, .workspace = ws,
			};
			err = infs_k_topk(&tp, d->stream);
		}
		if (err == cudaSuccess)
			err = cudaMemcpyAsync(h_id, d_id, qn * kk * 8, cudaMemcpyDeviceToHost, d->stream);
		if (err == cudaSuccess)
			err = cudaMemcpyAsync(h_n, d_n, qn * 4, cudaMemcpyDeviceToHost, d->stream);
		if (err == cudaSuccess)
			err = cudaStreamSynchronize(d->stream);
		if (err != cudaSuccess) {
			rc = infs__cuda_error(err, fn, "selecting the top k");
			break;
		}
		for (size_t q = 0; q < qn; q++) {
			const float *x = queries + (q0 + q) * dim;
			size_t m = 0;
			for (size_t j = 0; j < h_n[q]; j++) {
				size_t r = row_of(ids, n, h_id[q * kk + j]);
				if (r < n)
					hits[m++] = (infs_hit){ ids[r], exact_score(x, emb + r * dim, dim, metric) };
			}
			infs__hits_sort(hits, m);
			m = m < k ? m : k;
			memcpy(out + (q0 + q) * k, hits, m * sizeof *hits);
			out_n[q0 + q] = m;
		}
	}
unlock:
	pthread_mutex_unlock(&d->scratch_lock);
done:
	infs__device_restore(prev);
	free(q16), free(h_id), free(h_n), free(hits);
	return rc;
}

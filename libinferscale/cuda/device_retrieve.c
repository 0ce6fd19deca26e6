/* Exact retrieval on the store's device copy, all of it on the device: the
 * queries made ready (kernels/retrieve_exact.cu), the namespace's f16 unit
 * rows ranked against them with f32 accumulation, keeping a margin of
 * extra candidates that absorbs the f16 rounding, then those candidates
 * scored from the f32 rows with the CPU's arithmetic and ordered as the
 * CPU orders them: the CPU's hits, with no host work but the copies. The
 * ranking takes the fused kernels for the shapes they take (one pass over
 * the rows, no score matrix; faster at every size measured,
 * docs/benchmarks.md), else a cuBLAS GEMM into f32 scores and the top-k
 * kernel.
 *
 * A searcher holds one stream's workspace. The host-pointer path
 * (infs_retrieve) takes searchers from a pool in the device copy, each with
 * its own stream, mapped pinned buffer and cuBLAS handle, growing them as
 * calls need: the queries written into the buffer, the kernels reading them
 * and writing the hits there over the bus (no copy to queue, each a few KB),
 * one wait. The device-pointer
 * path (infs_retrieve_device) uses the caller's searcher, sized when made,
 * on the caller's stream, and never waits or allocates. Both run under
 * the store's read lock. */
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device_copy.h"
#include "util/error.h"
#include "retrieve_kernels.h"
#include "retrieve/retrieve.h"

/* f32 scores held at once on the GEMM path: larger batches run in rounds. */
#define SCORES_MAX (64u << 20)
/* Queries the host path sends down at once. */
#define HOST_BATCH 1024u
#define BLAS_WORKSPACE (4u << 20)

struct infs_searcher {
	infs_store *store;
	int device;
	infs_metric metric;
	uint32_t max_queries, max_k;
	uint64_t max_rows;
	int pooled;                 /* the host path's: grows, owns stream, pinned buffer and cuBLAS */
	uint32_t epoch;             /* the host path's last seed epoch (0: seeds to zero) */
	cudaStream_t stream;
	cublasHandle_t blas;
	char *mem;
	size_t bytes;
	char *host;                 /* the host path's mapped pinned buffer ... */
	char *host_dev;             /* ... and its device address */
	size_t host_bytes;
	struct infs_searcher *next;
};

/* What a search needs: the ranking it takes, and its workspace, carved
 * from one allocation in this order. */
typedef struct plan {
	int fused;
	uint32_t kk;                /* candidates kept for exact scoring */
	uint32_t round;             /* queries ranked at once */
	size_t off[9], bytes;
} plan;

enum { SEEDS, EXACT, RANK, BAD, CAND_ID, CAND_SCORE, CAND_N, WS, SCORES };

static size_t up256(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

static uint32_t kept(size_t k)
{
	size_t kk = k + (k < 64 ? 16 : k / 4);
	return (uint32_t)(kk > INFS_K_TOPK_MAX ? INFS_K_TOPK_MAX : kk);
}

/* The plan for up to nq queries of k hits over rows rows. fused_only fails
 * (returns 0) where the fused kernels do not take the shapes. */
static int make_plan(plan *pl, uint32_t dim, uint64_t rows, uint32_t nq, uint32_t k, int fused_only)
{
	memset(pl, 0, sizeof *pl);
	pl->kk = kept(k);
	uint32_t round = nq < INFS_K_FUSED_MAX_QUERIES ? nq : INFS_K_FUSED_MAX_QUERIES;
	pl->fused = infs_k_fused_supported(dim, round, pl->kk);
	if (!pl->fused && fused_only)
		return 0;
	size_t ws;
	if (pl->fused) {
		ws = infs_k_fused_workspace_max((uint32_t)rows, dim, round, pl->kk);
	} else {
		uint64_t r = SCORES_MAX / (rows ? rows : 1);
		round = r < 1 ? 1 : r > nq ? nq : (uint32_t)r;
		ws = infs_k_topk_workspace_bytes((uint32_t)rows, round, pl->kk);
	}
	pl->round = round;
	const size_t sizes[9] = {
		INFS_K_FUSED_SEEDS * 8, (size_t)round * dim * 4, (size_t)round * dim * 2, (size_t)round * 4,
		(size_t)round * pl->kk * 8, (size_t)round * pl->kk * 4, (size_t)round * 4, ws,
		pl->fused ? 0 : (size_t)round * rows * 4,
	};
	for (int i = 0; i < 9; i++) {
		pl->off[i] = pl->bytes;
		pl->bytes += up256(sizes[i]);
	}
	return 1;
}

static int blas_error(cublasStatus_t st, const char *fn, const char *what)
{
	return infs__error(st == CUBLAS_STATUS_ALLOC_FAILED ? INFS_EBUDGET : INFS_EDEVICE, "%s: %s: cuBLAS error %d",
	                   fn, what, (int)st);
}

/* A search to queue: nq queries at in (device, f32; made unit on the
 * device when normalize is set), their hits to hits + q * k and counts to
 * counts + q. epoch: the fused kernels' seed epoch of its first round, the
 * seeds zeroed when the searcher's workspace was made; 0 when the prep
 * kernel zeroes them before each round (the epoch is then 1), as a graph
 * replaying the call needs. */
typedef struct job {
	const float *in;
	int normalize;
	uint32_t nq, k, epoch;
	void *hits;
	uint32_t *counts;
} job;

static int enqueue(infs_searcher *s, const plan *pl, const infs__dev_ns *p, const job *j, cudaStream_t stream,
                   const char *fn)
{
	const uint32_t dim = infs__device_of(s->store)->embed_dim, rows = p->n_rows, k = j->k;
	char *m = s->mem;
	const float *row_scale = s->metric == INFS_METRIC_IP ? p->norm : NULL;
	const uint32_t *dead = p->n_dead ? p->dead : NULL;
	uint64_t *cand_id = (uint64_t *)(m + pl->off[CAND_ID]);
	uint32_t *cand_n = (uint32_t *)(m + pl->off[CAND_N]);
	uint64_t *seeds = pl->fused ? (uint64_t *)(m + pl->off[SEEDS]) : NULL;
	cudaError_t err = cudaSuccess;
	for (uint32_t q0 = 0; q0 < j->nq && err == cudaSuccess; q0 += pl->round) {
		const uint32_t qn = j->nq - q0 < pl->round ? j->nq - q0 : pl->round;
		infs_k_query_params qp = {
			.queries = j->in + (size_t)q0 * dim, .n_queries = qn, .dim = dim, .normalize = j->normalize,
			.exact = (float *)(m + pl->off[EXACT]), .rank = (uint16_t *)(m + pl->off[RANK]),
			.bad = (uint32_t *)(m + pl->off[BAD]), .seeds = j->epoch ? NULL : seeds,
			.n_seeds = INFS_K_FUSED_SEEDS,
		};
		if ((err = infs_k_query_prep(&qp, stream)) != cudaSuccess)
			break;
		if (pl->fused) {
			infs_k_fused_params fp = {
				.emb = p->emb, .queries = qp.rank, .n_rows = rows, .dim = dim, .n_queries = qn, .k = pl->kk,
				.row_scale = row_scale, .dead = dead, .ids = p->ids, .out_id = cand_id,
				.out_score = (float *)(m + pl->off[CAND_SCORE]), .out_n = cand_n, .workspace = m + pl->off[WS],
				.seeds = seeds, .seed_epoch = j->epoch ? j->epoch + q0 / pl->round : 1,
			};
			err = infs_k_fused_topk(&fp, stream);
		} else {
			float *scores = (float *)(m + pl->off[SCORES]);
			const float one = 1.0f, zero = 0.0f;
			cublasStatus_t st = cublasSetStream(s->blas, stream);
			if (st == CUBLAS_STATUS_SUCCESS)
				st = cublasSetWorkspace(s->blas, m + pl->bytes, BLAS_WORKSPACE);
			if (st == CUBLAS_STATUS_SUCCESS)
				st = cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)qn, (int)dim, &one, p->emb,
				                  CUDA_R_16F, (int)dim, qp.rank, CUDA_R_16F, (int)dim, &zero, scores, CUDA_R_32F,
				                  (int)rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
			if (st != CUBLAS_STATUS_SUCCESS)
				return blas_error(st, fn, "ranking the namespace");
			infs_k_topk_params tp = {
				.scores = scores, .ld = rows, .n_rows = rows, .n_queries = qn, .k = pl->kk,
				.row_scale = row_scale, .dead = dead, .ids = p->ids, .out_id = cand_id,
				.out_score = (float *)(m + pl->off[CAND_SCORE]), .out_n = cand_n, .workspace = m + pl->off[WS],
			};
			err = infs_k_topk(&tp, stream);
		}
		if (err != cudaSuccess)
			break;
		infs_k_rescore_params rp = {
			.queries = qp.exact, .bad = qp.bad, .n_queries = qn, .dim = dim, .cand_id = cand_id,
			.cand_n = cand_n, .kk = pl->kk, .ids = p->ids, .n_rows = rows, .rows = p->emb32,
			.row_scale = s->metric == INFS_METRIC_COSINE ? p->inv : NULL, .k = k,
			.out_hits = (char *)j->hits + (size_t)q0 * k * sizeof(infs_hit), .out_n = j->counts + q0,
		};
		err = infs_k_rescore(&rp, stream);
	}
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "queueing the search");
}

static void searcher_release(infs_searcher *s)
{
	if (s->stream)
		cudaStreamDestroy(s->stream);
	if (s->blas)
		cublasDestroy(s->blas);
	cudaFree(s->mem);
	cudaFreeHost(s->host);
	free(s);
}

/* Room for plan pl in a pooled searcher (its last search has been waited
 * for), and its mapped pinned buffer of host_bytes. */
static int pooled_reserve(infs_searcher *s, const plan *pl, size_t host_bytes, const char *fn)
{
	cudaError_t err = cudaSuccess;
	size_t bytes = pl->bytes + (pl->fused ? 0 : BLAS_WORKSPACE);
	if (s->bytes < bytes) {
		cudaFree(s->mem);
		s->mem = NULL;
		s->bytes = 0;
		if ((err = cudaMalloc((void **)&s->mem, bytes)) != cudaSuccess)
			return infs__cuda_error(err, fn, "allocating the search workspace");
		s->bytes = bytes;
		s->epoch = 0;
	}
	if (s->host_bytes < host_bytes) {
		cudaFreeHost(s->host);
		s->host = NULL;
		s->host_bytes = 0;
		if ((err = cudaHostAlloc((void **)&s->host, host_bytes, cudaHostAllocMapped)) != cudaSuccess ||
		    (err = cudaHostGetDevicePointer((void **)&s->host_dev, s->host, 0)) != cudaSuccess)
			return infs__cuda_error(err, fn, "allocating the search's pinned buffer");
		s->host_bytes = host_bytes;
	}
	if (!pl->fused && !s->blas) {
		cublasStatus_t st = cublasCreate(&s->blas);
		if (st != CUBLAS_STATUS_SUCCESS)
			return blas_error(st, fn, "creating a handle");
	}
	return INFS_OK;
}

static int pool_take(infs_searcher **out, infs__device *d, infs_store *store, infs_metric metric, const char *fn)
{
	pthread_mutex_lock(&d->pool_lock);
	infs_searcher *s = d->pool;
	if (s)
		d->pool = s->next;
	pthread_mutex_unlock(&d->pool_lock);
	if (!s) {
		if (!(s = calloc(1, sizeof *s)))
			return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
		s->store = store;
		s->device = d->device;
		s->pooled = 1;
		cudaError_t err = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
		if (err != cudaSuccess) {
			free(s);
			return infs__cuda_error(err, fn, "creating a stream");
		}
	}
	s->metric = metric;
	*out = s;
	return INFS_OK;
}

static void pool_give(infs__device *d, infs_searcher *s)
{
	pthread_mutex_lock(&d->pool_lock);
	s->next = d->pool;
	d->pool = s;
	pthread_mutex_unlock(&d->pool_lock);
}

void infs__device_pool_free(infs__device *d)
{
	while (d->pool) {
		infs_searcher *s = d->pool;
		d->pool = s->next;
		searcher_release(s);
	}
}

int infs__retrieve_device(infs_hit *out, size_t *out_n, infs_store *store, const char *ns, const float *queries,
                          size_t n_queries, size_t k, infs_metric metric)
{
	static const char fn[] = "infs_retrieve";
	infs__device *d = infs__device_of(store);
	infs__dev_ns *p = infs__device_ns(d, ns);
	if (!p || p->n_rows == p->n_dead) {
		memset(out_n, 0, n_queries * sizeof *out_n);
		return INFS_OK;
	}
	const uint32_t dim = d->embed_dim;
	const uint32_t batch = n_queries < HOST_BATCH ? (uint32_t)n_queries : HOST_BATCH;
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	plan pl;
	make_plan(&pl, dim, p->n_rows, batch, (uint32_t)k, 0);
	/* the buffer: queries, then counts, then hits */
	const size_t at_counts = up256((size_t)batch * dim * 4), at_hits = at_counts + up256((size_t)batch * 4);
	infs_searcher *s = NULL;
	if ((rc = pool_take(&s, d, store, metric, fn))) {
		infs__device_restore(prev);
		return rc;
	}
	rc = pooled_reserve(s, &pl, at_hits + (size_t)batch * k * sizeof(infs_hit), fn);
	for (size_t q0 = 0; q0 < n_queries && rc == INFS_OK; q0 += batch) {
		const uint32_t qn = n_queries - q0 < batch ? (uint32_t)(n_queries - q0) : batch;
		memcpy(s->host, queries + q0 * dim, (size_t)qn * dim * 4);
		/* the seeds are zeroed when the workspace is made, and again when
		 * the epochs run out */
		const uint32_t rounds = (qn + pl.round - 1) / pl.round;
		if (s->epoch == 0 || s->epoch > UINT32_MAX - rounds - 1) {
			cudaError_t err = cudaMemsetAsync(s->mem + pl.off[SEEDS], 0, INFS_K_FUSED_SEEDS * 8, s->stream);
			if (err != cudaSuccess) {
				rc = infs__cuda_error(err, fn, "queueing the search");
				break;
			}
			s->epoch = 0;
		}
		const job j = { .in = (const float *)s->host_dev, .normalize = metric == INFS_METRIC_COSINE, .nq = qn,
			        .k = (uint32_t)k, .epoch = s->epoch + 1, .hits = s->host_dev + at_hits,
			        .counts = (uint32_t *)(s->host_dev + at_counts) };
		s->epoch += rounds;
		if ((rc = enqueue(s, &pl, p, &j, s->stream, fn)))
			break;
		cudaError_t err = cudaStreamSynchronize(s->stream);
		if (err != cudaSuccess) {
			rc = infs__cuda_error(err, fn, "waiting for the search");
			break;
		}
		memcpy(out + q0 * k, s->host + at_hits, (size_t)qn * k * sizeof(infs_hit));
		const uint32_t *n = (const uint32_t *)(s->host + at_counts);
		for (uint32_t q = 0; q < qn; q++)
			out_n[q0 + q] = n[q];
	}
	if (rc) {
		/* a failed stream may still be busy: this searcher is not reused */
		cudaStreamSynchronize(s->stream);
		searcher_release(s);
	} else {
		pool_give(d, s);
	}
	infs__device_restore(prev);
	return rc;
}

int infs__searcher_create(infs_searcher **out, infs_store *store, const infs_searcher_options *o)
{
	static const char fn[] = "infs_searcher_create";
	infs__device *d = infs__device_of(store);
	const uint32_t dim = d->embed_dim;
	uint64_t rows = o->max_facts;
	if (!rows) {
		infs__store_read_lock(store);
		for (const infs__dev_ns *p = d->ns; p; p = p->next)
			rows = p->n_rows > rows ? p->n_rows : rows;
		infs__store_read_unlock(store);
		rows = rows * 2 < 4096 ? 4096 : rows * 2;
	}
	if (rows > UINT32_MAX - 32)
		return infs__error(INFS_ERANGE, "%s: max_facts %llu is more than a namespace holds on a device", fn,
		                   (unsigned long long)rows);
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	plan pl;
	if (!make_plan(&pl, dim, rows, o->max_queries, o->max_k, 1)) {
		infs__device_restore(prev);
		return infs__error(INFS_EUNSUPPORTED,
		                   "%s: the device path does not take embeddings of %u dimensions (a multiple of 64 up to %u)",
		                   fn, dim, INFS_K_FUSED_MAX_DIM);
	}
	infs_k_exact_prepare();
	infs_searcher *s = calloc(1, sizeof *s);
	cudaError_t err = s ? cudaMalloc((void **)&s->mem, pl.bytes) : cudaSuccess;
	infs__device_restore(prev);
	if (!s)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	if (err != cudaSuccess) {
		free(s);
		return infs__cuda_error(err, fn, "allocating the search workspace");
	}
	s->store = store;
	s->device = d->device;
	s->metric = o->metric;
	s->max_queries = o->max_queries;
	s->max_k = o->max_k;
	s->max_rows = rows;
	s->bytes = pl.bytes;
	*out = s;
	return INFS_OK;
}

void infs__searcher_free(infs_searcher *s)
{
	int prev;
	if (infs__device_enter(&prev, s->device, "infs_searcher_free") == INFS_OK) {
		cudaDeviceSynchronize(); /* searches queued on any stream may still use the workspace */
		searcher_release(s);
		infs__device_restore(prev);
	}
}

int infs__retrieve_on_device(infs_searcher *s, const char *ns, const float *queries, size_t n_queries, size_t k,
                             infs_hit *hits, uint32_t *counts, void *stream)
{
	static const char fn[] = "infs_retrieve_device";
	if (n_queries == 0 || n_queries > s->max_queries)
		return infs__error(INFS_ERANGE, "%s: n_queries %zu is not in 1..%u (the searcher's max_queries)", fn,
		                   n_queries, s->max_queries);
	if (k == 0 || k > s->max_k)
		return infs__error(INFS_ERANGE, "%s: k %zu is not in 1..%u (the searcher's max_k)", fn, k, s->max_k);
	infs__device *d = infs__device_of(s->store);
	int prev, rc = infs__device_enter(&prev, s->device, fn);
	if (rc)
		return rc;
	infs__store_read_lock(s->store);
	const infs__dev_ns *p = infs__device_ns(d, ns);
	if (!p) {
		cudaError_t err = cudaMemsetAsync(counts, 0, n_queries * 4, (cudaStream_t)stream);
		if (err != cudaSuccess)
			rc = infs__cuda_error(err, fn, "queueing the search");
	} else if (p->n_rows > s->max_rows) {
		rc = infs__error(INFS_ERANGE,
		                 "%s: namespace '%s' has %u rows on the device, more than the searcher's max_facts %llu",
		                 fn, ns, p->n_rows, (unsigned long long)s->max_rows);
	} else {
		/* within the searcher's workspace: every part grows with rows,
		 * queries and k, and the shapes it was made for take the fused
		 * ranking, so these do too */
		plan pl;
		make_plan(&pl, d->embed_dim, p->n_rows, (uint32_t)n_queries, (uint32_t)k, 1);
		const job j = { .in = queries, .normalize = s->metric == INFS_METRIC_COSINE, .nq = (uint32_t)n_queries,
			        .k = (uint32_t)k, .hits = hits, .counts = counts };
		if (pl.bytes > s->bytes)
			rc = infs__error(INFS_ERANGE, "%s: the search needs %zu bytes of workspace, the searcher has %zu", fn,
			                 pl.bytes, s->bytes);
		else
			rc = enqueue(s, &pl, p, &j, (cudaStream_t)stream, fn);
	}
	infs__store_read_unlock(s->store);
	infs__device_restore(prev);
	return rc;
}

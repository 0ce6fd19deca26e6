/* Retrieval on the GPU: one query and batches of 4, 8 and 32 against 10K, 100K and 1M
 * facts of dimension 384 (f16) in one namespace, both ways infs_retrieve can
 * take: the fused kernels (kernels/retrieve.cu) and a cuBLAS GEMM (f32
 * accumulate) into f32 scores followed by the top-k selection. latency_us is
 * the way infs_retrieve takes for the batch size. Reports latency against
 * the memory-bound time: the embedding bytes over the bandwidth of a
 * cudaMemcpy that moves as many bytes (read + written), and over the
 * bandwidth of a 1 GiB copy.
 * Small sets are kept in several copies used in turn, so that the L2 cache
 * does not hold the timed call's embeddings. Then infs_retrieve itself on a
 * store with a device copy (10K and 100K facts): the host's exact rescoring
 * of the candidates and the copies included, timed by the host clock.
 * Usage: bench_retrieve [out.json]
 * White-box: it times the CUDA kernels themselves (kernels.h), which only
 * the library's internals reach, so it links the internal core. */
#include <cublas_v2.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "inferscale/inferscale.h"

#include <math.h>

#include "bench_gpu.h"
#include "retrieve_kernels.h"

enum { DIMS = 384, K = 10 };

typedef struct ctx {
	cublasHandle_t blas;
	cudaStream_t stream;
	const uint16_t *emb[64];
	int copies;
	uint32_t n, nq;
	const uint16_t *q;
	float *scores;
	infs_k_topk_params tp;
	infs_k_fused_params fp;
	int gemm_only;
	void *copy_dst;
	size_t copy_bytes;
} ctx;

/* Each call under a new seed epoch, as infs_retrieve's. */
static void fused_run(void *arg, int rep)
{
	ctx *c = arg;
	c->fp.emb = c->emb[rep % c->copies];
	c->fp.seed_epoch++;
	CUDA_OK(infs_k_fused_topk(&c->fp, c->stream));
}

/* A copy of half the embeddings: as many bytes read + written as a scan
 * reads. */
static void half_copy_run(void *arg, int rep)
{
	ctx *c = arg;
	CUDA_OK(cudaMemcpyAsync(c->copy_dst, c->emb[rep % c->copies], c->copy_bytes, cudaMemcpyDeviceToDevice,
	                        c->stream));
}

static void retrieve_run(void *arg, int rep)
{
	ctx *c = arg;
	const float one = 1.0f, zero = 0.0f;
	cublasStatus_t st = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)c->n, (int)c->nq, DIMS, &one,
	                                 c->emb[rep % c->copies], CUDA_R_16F, DIMS, c->q, CUDA_R_16F, DIMS, &zero,
	                                 c->scores, CUDA_R_32F, (int)c->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "cublasGemmEx: %d\n", (int)st);
		exit(1);
	}
	if (!c->gemm_only)
		CUDA_OK(infs_k_topk(&c->tp, c->stream));
}

int main(int argc, char **argv)
{
	FILE *out = bench_out(argc, argv);
	ctx c;
	memset(&c, 0, sizeof c);
	CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
	if (cublasCreate(&c.blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(c.blas, c.stream) != CUBLAS_STATUS_SUCCESS)
		return 1;

	float copy_us;
	double copy_bw = copy_bandwidth(1ull << 30, c.stream, &copy_us);
	fprintf(out, "{\n  \"benchmark\": \"retrieve\",\n");
	print_device(out);
	fprintf(out, "  \"dim\": %d, \"k\": %d, \"storage\": \"f16\", \"scores\": \"f32\", "
	             "\"copy_gbps\": %.1f,\n  \"results\": [\n", DIMS, K, copy_bw / 1e9);

	/* Random unit-ish rows, as f16 bits, made once on the host. */
	const uint32_t max_n = 1000000;
	uint16_t *host = malloc((size_t)max_n * DIMS * 2);
	uint64_t s = 1;
	for (size_t i = 0; i < (size_t)max_n * DIMS; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		/* 1/64 <= |x| < 1/32 with a random sign and mantissa */
		host[i] = (uint16_t)(((s >> 63) << 15) | 0x2400 | ((s >> 40) & 0x3ff));
	}
	uint64_t *ids_h = malloc(max_n * sizeof *ids_h);
	for (uint32_t i = 0; i < max_n; i++)
		ids_h[i] = 2ull * i + 1;
	uint64_t *ids;
	CUDA_OK(cudaMalloc((void **)&ids, max_n * sizeof *ids));
	CUDA_OK(cudaMemcpy(ids, ids_h, max_n * sizeof *ids, cudaMemcpyHostToDevice));
	uint16_t *q;
	CUDA_OK(cudaMalloc((void **)&q, 32 * DIMS * 2));
	CUDA_OK(cudaMemcpy(q, host + 12345 * DIMS, 32 * DIMS * 2, cudaMemcpyHostToDevice));
	c.q = q;

	const uint32_t ns[] = {10000, 100000, 1000000};
	const uint32_t nqs[] = {1, 4, 8, 32}, api_nqs[] = {1, 32};
	int first = 1;
	for (int a = 0; a < 3; a++) {
		uint32_t n = ns[a];
		size_t bytes = (size_t)n * DIMS * 2;
		c.copies = (int)((512ull << 20) / bytes);
		c.copies = c.copies < 1 ? 1 : c.copies > 64 ? 64 : c.copies;
		for (int i = 0; i < c.copies; i++) {
			uint16_t *e;
			CUDA_OK(cudaMalloc((void **)&e, bytes));
			CUDA_OK(cudaMemcpy(e, host + (size_t)i * 1000 % (max_n - n + 1) * DIMS, bytes, cudaMemcpyHostToDevice));
			c.emb[i] = e;
		}
		CUDA_OK(cudaMalloc(&c.copy_dst, bytes / 2));
		c.copy_bytes = bytes / 2;
		const float copy_same_us = time_us(half_copy_run, &c, 5, 50, c.stream);
		cudaFree(c.copy_dst);
		for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++) {
			uint32_t nq = nqs[b];
			c.n = n, c.nq = nq;
			CUDA_OK(cudaMalloc((void **)&c.scores, (size_t)nq * n * sizeof(float)));
			void *ws = NULL, *fws, *oid, *osc, *on;
			size_t wsb = infs_k_topk_workspace_bytes(n, nq, K);
			if (wsb)
				CUDA_OK(cudaMalloc(&ws, wsb));
			if (!infs_k_fused_supported(DIMS, nq, K)) {
				fprintf(stderr, "the fused kernels do not take %u queries of dimension %d\n", nq, DIMS);
				return 1;
			}
			CUDA_OK(cudaMalloc(&fws, infs_k_fused_workspace_bytes(n, DIMS, nq, K)));
			uint64_t *seeds;
			CUDA_OK(cudaMalloc((void **)&seeds, INFS_K_FUSED_SEEDS * 8));
			CUDA_OK(cudaMemset(seeds, 0, INFS_K_FUSED_SEEDS * 8));
			CUDA_OK(cudaMalloc(&oid, nq * K * 8));
			CUDA_OK(cudaMalloc(&osc, nq * K * 4));
			CUDA_OK(cudaMalloc(&on, nq * 4));
			infs_k_topk_params tp = {
				.scores = c.scores, .ld = n, .n_rows = n, .n_queries = nq, .k = K, .row_scale = NULL,
				.dead = NULL, .ids = ids, .out_id = oid, .out_score = osc, .out_n = on, .workspace = ws,
			};
			infs_k_fused_params fp = {
				.emb = c.emb[0], .queries = q, .n_rows = n, .dim = DIMS, .n_queries = nq, .k = K,
				.row_scale = NULL, .dead = NULL, .ids = ids, .out_id = oid, .out_score = osc, .out_n = on,
				.workspace = fws, .seeds = seeds,
			};
			c.tp = tp;
			c.fp = fp;
			c.gemm_only = 1;
			float gemm_us = time_us(retrieve_run, &c, 5, 50, c.stream);
			c.gemm_only = 0;
			float gemm_path_us = time_us(retrieve_run, &c, 5, 50, c.stream);
			/* the fused kernels: infs_retrieve takes them wherever they
			 * are supported, as they are here */
			float us = time_us(fused_run, &c, 5, 50, c.stream);
			double peak_us = bytes / copy_bw * 1e6;
			fprintf(out, "%s    {\"n\": %u, \"queries\": %u, \"latency_us\": %.2f, "
			             "\"gemm_path_us\": %.2f, \"gemm_us\": %.2f, \"embedding_bytes\": %zu, "
			             "\"memory_bound_us\": %.2f, \"ratio_vs_bound\": %.3f, \"peak_bound_us\": %.2f, "
			             "\"ratio_vs_peak_bound\": %.3f}",
			        first ? "" : ",\n", n, nq, us, gemm_path_us, gemm_us, bytes, copy_same_us,
			        us / copy_same_us, peak_us, us / peak_us);
			first = 0;
			fprintf(stderr,
			        "retrieve n=%u batch=%u: %.1f us (GEMM path %.1f, GEMM %.1f), memory bound %.1f us "
			        "(%.2fx), at peak copy bandwidth %.1f us (%.2fx)\n",
			        n, nq, us, gemm_path_us, gemm_us, copy_same_us, us / copy_same_us, peak_us,
			        us / peak_us);
			cudaFree(c.scores), cudaFree(ws), cudaFree(fws), cudaFree(seeds), cudaFree(oid), cudaFree(osc);
			cudaFree(on);
		}
		for (int i = 0; i < c.copies; i++)
			cudaFree((void *)c.emb[i]);
	}
	fprintf(out, "\n  ],\n  \"api\": [\n");

	/* infs_retrieve on a store with a device copy. */
	char dir[] = "/tmp/infs-bench-XXXXXX", path[64];
	if (!mkdtemp(dir))
		return 1;
	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = 1, g.n_kv_heads = 1, g.head_dim = 2, g.rotary_dim = 2, g.embed_dim = DIMS;
	float *embf = malloc(DIMS * sizeof *embf), *qs = malloc(32 * DIMS * sizeof *qs);
	for (int i = 0; i < 32 * DIMS; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		qs[i] = (float)((s >> 40) * (1.0 / (1 << 24)) - 0.5);
	}
	for (int qi = 0; qi < 32; qi++) { /* cosine queries are unit vectors */
		double ss = 0;
		for (int j = 0; j < DIMS; j++)
			ss += (double)qs[qi * DIMS + j] * qs[qi * DIMS + j];
		for (int j = 0; j < DIMS; j++)
			qs[qi * DIMS + j] = (float)(qs[qi * DIMS + j] / sqrt(ss));
	}
	const uint32_t api_ns[] = {10000, 100000};
	first = 1;
	for (int a = 0; a < 2; a++) {
		snprintf(path, sizeof path, "%s/store%d.infs", dir, a);
		infs_store_options so = INFS_STORE_OPTIONS_INIT;
		so.flags = INFS_OPEN_CREATE, so.geometry = &g, so.identity = "bench", so.sync = INFS_SYNC_OFF;
		so.device = 0;
		infs_store *st;
		if (infs_store_open(&st, path, &so)) {
			fprintf(stderr, "infs_store_open: %s\n", infs_error_last());
			return 1;
		}
		uint16_t kv[2] = {0, 0};
		int32_t tok = 0;
		for (uint32_t i = 0; i < api_ns[a]; i++) {
			for (int j = 0; j < DIMS; j++) {
				s = s * 6364136223846793005ull + 1442695040888963407ull;
				embf[j] = (float)((s >> 40) * (1.0 / (1 << 24)) - 0.5);
			}
			infs_fact f = INFS_FACT_INIT;
			f.n_tokens = 1, f.tokens = &tok, f.embedding = embf, f.k = kv, f.v = kv;
			uint64_t id;
			if (infs_fact_put(&id, st, "user", &f)) {
				fprintf(stderr, "infs_fact_put: %s\n", infs_error_last());
				return 1;
			}
		}
		for (int b = 0; b < 2; b++) {
			uint32_t nq = api_nqs[b];
			infs_hit hits[32 * K];
			size_t hn[32];
			infs_retrieve_options ro = INFS_RETRIEVE_OPTIONS_INIT;
			ro.backend = INFS_BACKEND_CUDA;
			float t[30];
			for (int r = 0; r < 35; r++) {
				struct timespec t0, t1;
				clock_gettime(CLOCK_MONOTONIC, &t0);
				if (infs_retrieve(hits, hn, st, "user", qs, nq, K, &ro)) {
					fprintf(stderr, "infs_retrieve: %s\n", infs_error_last());
					return 1;
				}
				clock_gettime(CLOCK_MONOTONIC, &t1);
				if (r >= 5)
					t[r - 5] = (float)((t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3);
			}
			float us = median(t, 30);
			fprintf(out, "%s    {\"n\": %u, \"queries\": %u, \"latency_us\": %.2f}", first ? "" : ",\n",
			        api_ns[a], nq, us);
			first = 0;
			fprintf(stderr, "infs_retrieve n=%u batch=%u: %.1f us\n", api_ns[a], nq, us);
		}
		infs_store_close(st);
		unlink(path);
	}
	rmdir(dir);
	free(embf), free(qs);
	fprintf(out, "\n  ]\n}\n");
	if (out != stdout)
		fclose(out);
	cublasDestroy(c.blas);
	free(host), free(ids_h);
	return 0;
}

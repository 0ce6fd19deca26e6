/* The top-k selection against a CPU sort: single queries and batches, from
 * empty rows to a million, k from 1 to the 4096 maximum, deleted rows, row
 * scales, and scores with many exact ties (which must come out by
 * increasing id), including rows where the sampled threshold cannot cut the
 * set down and the exact fallback runs. Results must equal the CPU's. */
#include <string.h>

#include "gpu.h"
#include "retrieve_kernels.h"

enum { TIES_NONE, TIES_SOME, TIES_ALL };

static void run_case(uint32_t n, uint32_t nq, uint32_t k, int ties, int with_scale, int with_dead, uint64_t seed)
{
	uint64_t rng = seed;
	size_t ld = n + (n % 3); /* a leading dimension above n */
	float *scores = malloc((ld * nq + 1) * sizeof *scores), *scale = malloc((n + 1) * sizeof *scale);
	uint64_t *ids = malloc((n + 1) * sizeof *ids);
	uint32_t *dead = calloc(n / 32 + 1, sizeof *dead);
	random_rows(ids, scale, dead, n, with_dead, &rng);
	for (size_t i = 0; i < ld * nq; i++) {
		float s = rng_float(&rng);
		scores[i] = ties == TIES_ALL ? 0.25f : ties == TIES_SOME ? (float)(int)(s * 64) / 64 : s;
	}

	float *d_scores, *d_scale;
	uint64_t *d_ids;
	uint32_t *d_dead;
	void *ws = NULL;
	size_t ws_bytes = infs_k_topk_workspace_bytes(n, nq, k);
	CUDA_OK(cudaMalloc((void **)&d_scores, (ld * nq + 1) * sizeof(float)));
	CUDA_OK(cudaMalloc((void **)&d_scale, (n + 1) * sizeof(float)));
	CUDA_OK(cudaMalloc((void **)&d_ids, (n + 1) * sizeof(uint64_t)));
	CUDA_OK(cudaMalloc((void **)&d_dead, (n / 32 + 1) * sizeof(uint32_t)));
	gpu_hits o;
	gpu_hits_alloc(&o, nq, k);
	if (ws_bytes)
		CUDA_OK(cudaMalloc(&ws, ws_bytes));
	CUDA_OK(cudaMemcpy(d_scores, scores, ld * nq * sizeof(float), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_scale, scale, n * sizeof(float), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_ids, ids, n * sizeof(uint64_t), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_dead, dead, (n / 32 + 1) * sizeof(uint32_t), cudaMemcpyHostToDevice));

	infs_k_topk_params p = {
		.scores = d_scores, .ld = ld, .n_rows = n, .n_queries = nq, .k = k,
		.row_scale = with_scale ? d_scale : NULL, .dead = with_dead ? d_dead : NULL, .ids = d_ids,
		.out_id = o.d_id, .out_score = o.d_score, .out_n = o.d_n, .workspace = ws,
	};
	CUDA_OK(infs_k_topk(&p, 0));
	CUDA_OK(cudaDeviceSynchronize());
	gpu_hits_fetch(&o);

	row_hit *h = malloc((n + 1) * sizeof *h);
	char what[64];
	snprintf(what, sizeof what, "n %u nq %u k %u", n, nq, k);
	int bad = 0;
	for (uint32_t q = 0; q < nq; q++) {
		uint32_t live = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (with_dead && (dead[i / 32] >> (i % 32) & 1))
				continue;
			float s = scores[q * ld + i];
			h[live].score = with_scale ? s * scale[i] : s;
			h[live++].row = i;
		}
		qsort(h, live, sizeof *h, row_hit_cmp);
		bad += hits_differ(what, q, h, live, ids, &o, bad);
	}
	CHECK(bad == 0);
	cudaFree(d_scores), cudaFree(d_scale), cudaFree(d_ids), cudaFree(d_dead), cudaFree(ws);
	gpu_hits_free(&o);
	free(scores), free(scale), free(ids), free(dead), free(h);
}

int main(void)
{
	gpu_require();
	/* Under compute-sanitizer the largest rows take minutes: INFS_TEST_SMALL
	 * leaves them out (every path still runs at 100000 rows). */
	const char *small = getenv("INFS_TEST_SMALL");
	const uint32_t n_max = small && *small == '1' ? 100000 : 1000000;
	uint64_t seed = 7;
	int cases = 0;
	const uint32_t ns[] = {0, 1, 5, 1000, 4097, 32768, 32769, 100000, 1000000};
	const uint32_t ks[] = {1, 10, 100, 4096};
	for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
		for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) {
			uint32_t n = ns[a], k = ks[b];
			if (n > n_max)
				continue;
			uint32_t nq = n >= 1000000 ? 2 : (uint32_t)(1 + (a + b) % 5);
			run_case(n, nq, k, (int)((a + b) % 2), (int)(b % 2), (int)(a % 2), seed++);
			cases++;
		}
	/* Many equal scores: the threshold cannot cut the set down. */
	run_case(100000, 3, 50, TIES_ALL, 0, 1, seed++);
	run_case(n_max > 100000 ? 200000 : 50000, 2, 4096, TIES_SOME, 1, 0, seed++);
	run_case(5000, 2, 4096, TIES_ALL, 0, 0, seed++);
	/* A batch of 32, as the benchmark runs it. */
	run_case(100000, 32, 10, TIES_NONE, 0, 0, seed++);
	cases += 4;
	printf("%d top-k cases equal to the CPU sort\n", cases);
	CHECK_DONE();
}

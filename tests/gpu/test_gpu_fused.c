/* The fused retrieval kernels against a CPU sort. Rows and queries hold
 * small multiples of 1/16, so every dot product is a multiple of 1/256
 * that f32 holds exactly whatever the order of the sums: the GPU's scores
 * must equal the CPU's bit for bit, and the many equal scores must come out
 * by increasing row. 1 to 32 queries, k from 1 to the maximum, deleted rows,
 * row scales, sets from one row to a million (partial tiles, blocks with
 * fewer rows than k, so that the merge takes its radix path), sets of
 * all-equal rows, where the order is the rows' alone, and dimensions from
 * 64 to the maximum. Most calls share seeds, as a store's calls do: one
 * buffer that every case, on other rows and queries, reuses under a new
 * epoch; the others run without. Sets of up to 2^17 rows take the path
 * where the scan keeps every score (each merge block bounding the k-th
 * best by the scores it loads); larger sets the one of per-block lists and
 * seeds, which the sanitizer's small run covers with one set of 140K rows. */
#include <string.h>

#include "util/dtype.h"
#include "gpu.h"
#include "retrieve_kernels.h"

enum { DIM = 384 };

static uint64_t *seeds;
static uint32_t epoch;

/* An integer in [-3, 3]. */
static int small_int(uint64_t *rng)
{
	return (int)(rng_next(rng) % 7) - 3;
}

static void run_case(uint32_t dim, uint32_t n, uint32_t nq, uint32_t k, int all_equal, int with_scale, int with_dead, uint64_t seed)
{
	uint64_t rng = seed;
	CHECK(infs_k_fused_supported(dim, nq, k));
	int8_t *e = malloc((size_t)n * dim), *qi = malloc((size_t)nq * dim);
	uint16_t *e16 = malloc((size_t)n * dim * 2), *q16 = malloc((size_t)nq * dim * 2);
	float *scale = malloc(n * sizeof *scale);
	uint64_t *ids = malloc(n * sizeof *ids);
	uint32_t *dead = calloc(n / 32 + 1, sizeof *dead);
	for (size_t i = 0; i < (size_t)n * dim; i++) {
		e[i] = (int8_t)(all_equal ? (int)(i % dim % 5) - 2 : small_int(&rng));
		e16[i] = infs__f32_to_f16(e[i] / 16.0f);
	}
	for (size_t i = 0; i < (size_t)nq * dim; i++) {
		qi[i] = (int8_t)small_int(&rng);
		q16[i] = infs__f32_to_f16(qi[i] / 16.0f);
	}
	random_rows(ids, scale, dead, n, with_dead, &rng);

	uint16_t *d_e, *d_q;
	float *d_scale;
	uint64_t *d_ids;
	uint32_t *d_dead;
	void *ws;
	CUDA_OK(cudaMalloc((void **)&d_e, (size_t)n * dim * 2));
	CUDA_OK(cudaMalloc((void **)&d_q, (size_t)nq * dim * 2));
	CUDA_OK(cudaMalloc((void **)&d_scale, n * sizeof(float)));
	CUDA_OK(cudaMalloc((void **)&d_ids, n * sizeof(uint64_t)));
	CUDA_OK(cudaMalloc((void **)&d_dead, (n / 32 + 1) * sizeof(uint32_t)));
	gpu_hits o;
	gpu_hits_alloc(&o, nq, k);
	CUDA_OK(cudaMalloc(&ws, infs_k_fused_workspace_bytes(n, dim, nq, k)));
	CUDA_OK(cudaMemcpy(d_e, e16, (size_t)n * dim * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_q, q16, (size_t)nq * dim * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_scale, scale, n * sizeof(float), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_ids, ids, n * sizeof(uint64_t), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_dead, dead, (n / 32 + 1) * sizeof(uint32_t), cudaMemcpyHostToDevice));

	infs_k_fused_params p = {
		.emb = d_e, .queries = d_q, .n_rows = n, .dim = dim, .n_queries = nq, .k = k,
		.row_scale = with_scale ? d_scale : NULL, .dead = with_dead ? d_dead : NULL, .ids = d_ids,
		.out_id = o.d_id, .out_score = o.d_score, .out_n = o.d_n, .workspace = ws,
		.seeds = seed % 4 ? seeds : NULL, .seed_epoch = ++epoch,
	};
	CUDA_OK(infs_k_fused_topk(&p, 0));
	CUDA_OK(cudaDeviceSynchronize());
	gpu_hits_fetch(&o);

	row_hit *h = malloc(n * sizeof *h);
	char what[64];
	snprintf(what, sizeof what, "dim %u n %u nq %u k %u", dim, n, nq, k);
	int bad = 0;
	for (uint32_t q = 0; q < nq; q++) {
		uint32_t live = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (with_dead && (dead[i / 32] >> (i % 32) & 1))
				continue;
			int32_t dot = 0;
			for (uint32_t d = 0; d < dim; d++)
				dot += qi[(size_t)q * dim + d] * e[(size_t)i * dim + d];
			float s = (float)dot / 256.0f;
			h[live].score = with_scale ? s * scale[i] : s;
			h[live++].row = i;
		}
		qsort(h, live, sizeof *h, row_hit_cmp);
		bad += hits_differ(what, q, h, live, ids, &o, bad);
	}
	CHECK(bad == 0);
	cudaFree(d_e), cudaFree(d_q), cudaFree(d_scale), cudaFree(d_ids), cudaFree(d_dead), cudaFree(ws);
	gpu_hits_free(&o);
	free(e), free(qi), free(e16), free(q16), free(scale), free(ids), free(dead), free(h);
}

int main(void)
{
	gpu_require();
	CUDA_OK(cudaMalloc((void **)&seeds, INFS_K_FUSED_SEEDS * sizeof *seeds));
	CUDA_OK(cudaMemset(seeds, 0, INFS_K_FUSED_SEEDS * sizeof *seeds));
	/* Under compute-sanitizer INFS_TEST_SMALL keeps the sets small. */
	const char *small = getenv("INFS_TEST_SMALL");
	const int full = !(small && *small == '1');
	uint64_t seed = 11;
	int cases = 0;
	/* Shapes the fused path is not for are refused. */
	CHECK(infs_k_fused_supported(DIM, 1, 10));
	CHECK(!infs_k_fused_supported(DIM, INFS_K_FUSED_MAX_QUERIES + 1, 10));
	CHECK(!infs_k_fused_supported(DIM, 1, INFS_K_FUSED_MAX + 1));
	CHECK(!infs_k_fused_supported(DIM, 0, 10));
	CHECK(!infs_k_fused_supported(DIM, 1, 0));
	CHECK(!infs_k_fused_supported(100, 1, 10));
	CHECK(!infs_k_fused_supported(INFS_K_FUSED_MAX_DIM + 64, 1, 10));
	const uint32_t ks[] = {1, 10, 16, 26, INFS_K_FUSED_MAX};
	const uint32_t nqs[] = {1, 32};
	for (size_t b = 0; b < 5; b++)
		for (size_t c = 0; c < 2; c++) {
			/* the row count not a multiple of 64: a partial last tile */
			run_case(DIM, full ? 100003 : 4099, nqs[c], ks[b], 0, (int)(b % 2), (int)((b + c) % 2), seed++);
			cases++;
		}
	/* Fewer rows than a tile, than k, than the blocks' lists hold. */
	const uint32_t tiny[][3] = {{1, 1, 1}, {1, 3, 10}, {63, 9, 10}, {65, 17, 128}, {1000, 24, 100}, {10000, 5, 128}};
	for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++, cases++)
		run_case(DIM, tiny[i][0], tiny[i][1], tiny[i][2], 0, (int)(i % 2), (int)(i % 3 == 0), seed++);
	/* Sets where each warp scores one tile. */
	const uint32_t one_round[][4] = {{10000, 32, 10, 0}, {10000, 16, 26, 1}, {3000, 9, 1, 0}};
	for (size_t i = 0; i < sizeof one_round / sizeof *one_round; i++, cases++)
		run_case(DIM, one_round[i][0], one_round[i][1], one_round[i][2], (int)one_round[i][3], (int)(i % 2), 0, seed++);
	/* Two rounds and more of kept scores, their merge split between blocks:
	 * with equal rows every key reaches the bound, more than the merge
	 * holds (a radix selection). Past the sets that keep their scores:
	 * lists, with seeds (seed % 4 != 0). */
	const uint32_t several[][4] = {{40000, 8, 10, 0}, {40000, 8, 10, 1}, {140000, 9, 16, 0}};
	for (size_t i = 0; i < sizeof several / sizeof *several; i++, cases++) {
		seed += seed % 4 == 0;
		run_case(DIM, several[i][0], several[i][1], several[i][2], (int)several[i][3], 0, (int)(i != 1), seed++);
	}
	/* All rows equal: the order is by row alone. */
	run_case(DIM, 5000, 3, 10, 1, 0, 0, seed++);
	run_case(DIM, 5000, 8, 128, 1, 0, 1, seed++);
	cases += 2;
	if (full) {
		run_case(DIM, 1000000, 2, 10, 0, 0, 1, seed++);
		run_case(DIM, 300000, 17, 100, 0, 1, 0, seed++);
		run_case(DIM, 200000, 32, 26, 1, 0, 0, seed++);
		cases += 3;
	}
	/* Other dimensions: other row lengths in the tiles' copies. */
	const uint32_t dims[] = {64, 128, 448, INFS_K_FUSED_MAX_DIM};
	for (size_t i = 0; i < sizeof dims / sizeof *dims; i++, cases++)
		run_case(dims[i], 20011, i % 2 ? 32 : 5, 26, 0, (int)(i % 2), (int)(i < 2), seed++);
	printf("%d fused retrieval cases equal to the CPU sort\n", cases);
	CHECK_DONE();
}

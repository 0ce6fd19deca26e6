/* The model runtime on a GPU against the CPU runtime, on every tiny
 * architecture (tests/fixtures/model) and on SmolLM2 when its GGUF is in
 * $INFS_CACHE. The same file is loaded on the host and on device 0; the
 * device runs over a vLLM-layout bf16 paged cache (block size 4, a shuffled
 * block table): a prefill of 7 tokens into the empty cache, a decode step
 * of 1 token at n_past 7, and a prefill of the remaining tokens over a
 * cache whose first 5 positions infs_inject_into_blocks wrote from the
 * CPU's K/V. Logits: top-1 identical at every position and max |diff|
 * within the bf16 bound of docs/model-runtime.md; the cache: K rotated and
 * V as the CPU computes them. Then the refusals. */
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "../model_compare.h"
#include "../model_store_util.h"
#include "inferscale/model.h"
#include "util/rope.h"

enum { BS = 4, NB = 8, MAX_T = 16 };
static const int32_t table[NB] = { 6, 2, 7, 0, 5, 1, 3, 4 };

typedef struct dev_cache {
	infs_kv_layout kl;
	void *k_layers[64], *v_layers[64];
	uint16_t *mem;
	size_t per_layer; /* elements */
	int32_t *table;
} dev_cache;

/* A vLLM cache (2, NB, BS, heads, dim) per layer, zeroed, in bf16, and
 * the block table on the device. */
static void cache_make(dev_cache *c, const infs_geometry *g)
{
	c->per_layer = gpu_vllm_cache(&c->kl, &c->mem, c->k_layers, c->v_layers, g, NB, BS);
	CUDA_OK(cudaMalloc((void **)&c->table, sizeof table));
	CUDA_OK(cudaMemcpy(c->table, table, sizeof table, cudaMemcpyHostToDevice));
}

static void cache_free(dev_cache *c)
{
	cudaFree(c->mem);
	cudaFree(c->table);
}

/* The device's logits of position t against the CPU's (want holds every
 * position's): top-1 identical unless the CPU's two best are within twice
 * the bound; returns the max |diff|. */
static float compare_row(const char *name, const char *step, uint32_t t, const float *g, const float *want,
                         uint32_t V, float bound)
{
	const float *w = want + (size_t)t * V;
	const float d = max_diff(g, w, V);
	const size_t top_cpu = argmax(w, V), top_dev = argmax(g, V);
	if (top_cpu != top_dev || !(d <= bound))
		fprintf(stderr, "%s %s position %u: top-1 device %zu (%g) cpu %zu (%g; device %g); max |diff| %g, bound %g\n",
		        name, step, t, top_dev, g[top_dev], top_cpu, w[top_cpu], g[top_cpu], d, bound);
	CHECK(top_cpu == top_dev || w[top_cpu] - w[top_dev] <= 2 * bound);
	return d;
}

/* Runs the device forward over tokens[first..first+n) at positions
 * first.. (passed explicitly when explicit_pos), n_past = first, and
 * compares its logits (all, or the last) with want (the CPU's logits of
 * every token). Returns the max |diff|. */
static float run_compare(const char *name, const char *step, const infs_model *md, dev_cache *c,
                         const int32_t *tokens, uint32_t first, uint32_t n, int all, int explicit_pos,
                         const float *want, uint32_t V, float bound)
{
	int32_t *d_tok, *d_pos;
	float *d_logits;
	const uint32_t rows = all ? n : 1;
	int32_t pos[MAX_T];
	for (uint32_t i = 0; i < n; i++)
		pos[i] = (int32_t)(first + i);
	CUDA_OK(cudaMalloc((void **)&d_tok, n * 4));
	CUDA_OK(cudaMalloc((void **)&d_pos, n * 4));
	CUDA_OK(cudaMalloc((void **)&d_logits, (size_t)rows * V * 4));
	CUDA_OK(cudaMemcpy(d_tok, tokens + first, n * 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_pos, pos, n * 4, cudaMemcpyHostToDevice));
	cudaStream_t stream;
	CUDA_OK(cudaStreamCreate(&stream));
	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	o.all_logits = all;
	o.cache = &c->kl;
	o.block_table = c->table;
	o.block_table_len = NB;
	o.n_past = first;
	o.stream = stream;
	CHECK_OK(infs_model_forward_device(d_logits, md, d_tok, explicit_pos ? d_pos : NULL, n, &o));
	CUDA_OK(cudaStreamSynchronize(stream));
	float *got = malloc((size_t)rows * V * sizeof *got);
	CUDA_OK(cudaMemcpy(got, d_logits, (size_t)rows * V * 4, cudaMemcpyDeviceToHost));
	float worst = 0;
	for (uint32_t r = 0; r < rows; r++) {
		const float d = compare_row(name, step, first + (all ? r : n - 1), got + (size_t)r * V, want, V, bound);
		worst = !(d <= worst) ? d : worst;
	}
	printf("  %s: %u tokens at n_past %u, max |logit diff| %.3g (bound %.3g)\n", step, n, first, worst, bound);
	CHECK(worst <= bound);
	free(got);
	cudaStreamDestroy(stream);
	cudaFree(d_tok);
	cudaFree(d_pos);
	cudaFree(d_logits);
	return worst;
}

/* Two sequences per call (n_seqs 2, each with its own block table, one
 * cache): a prefill of 7 and of 5 tokens of the prompt, then a decode step
 * of each with seq_n_past 7 and 5; the logits of each sequence's last
 * token against the CPU's. Then a sequence without tokens gets NaN. */
static void run_batch(const char *name, const infs_model *md, const infs_geometry *g, const int32_t *tokens,
                      const float *want, uint32_t V, float bound)
{
	static const int32_t tables[2][NB] = { { 6, 2, 7, 0, 5, 1, 3, 4 }, { 1, 5, 0, 3, 4, 6, 2, 7 } };
	dev_cache c;
	cache_make(&c, g);
	int32_t *d_tables, *d_tok, *d_starts, *d_past;
	float *d_logits, *got = malloc(2 * (size_t)V * sizeof *got);
	CUDA_OK(cudaMalloc((void **)&d_tables, sizeof tables));
	CUDA_OK(cudaMalloc((void **)&d_tok, 12 * 4));
	CUDA_OK(cudaMalloc((void **)&d_starts, 3 * 4));
	CUDA_OK(cudaMalloc((void **)&d_past, 2 * 4));
	CUDA_OK(cudaMalloc((void **)&d_logits, 2 * (size_t)V * 4));
	CUDA_OK(cudaMemcpy(d_tables, tables, sizeof tables, cudaMemcpyHostToDevice));
	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	o.cache = &c.kl;
	o.block_table = d_tables;
	o.block_table_len = NB;
	o.block_table_stride = NB;
	o.n_seqs = 2;
	o.seq_starts = d_starts;
	o.seq_n_past = d_past;
	o.max_context = 8;
	int32_t tok[12], starts[3] = { 0, 7, 12 }, past[2] = { 0, 0 };
	memcpy(tok, tokens, 7 * 4);
	memcpy(tok + 7, tokens, 5 * 4);
	const uint32_t last[2][2] = { { 6, 4 }, { 7, 5 } }; /* the positions whose logits each step gives */
	for (int step = 0; step < 2; step++) {
		if (step == 1) { /* one new token each */
			tok[0] = tokens[7], tok[1] = tokens[5];
			starts[1] = 1, starts[2] = 2, past[0] = 7, past[1] = 5;
		}
		const uint32_t n = (uint32_t)starts[2];
		CUDA_OK(cudaMemcpy(d_tok, tok, n * 4, cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(d_starts, starts, sizeof starts, cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(d_past, past, sizeof past, cudaMemcpyHostToDevice));
		CHECK_OK(infs_model_forward_device(d_logits, md, d_tok, NULL, n, &o));
		CUDA_OK(cudaMemcpy(got, d_logits, 2 * (size_t)V * 4, cudaMemcpyDeviceToHost));
		const char *what = step ? "batch decode" : "batch prefill";
		float worst = 0;
		for (int s = 0; s < 2; s++) {
			const float d = compare_row(name, what, last[step][s], got + (size_t)s * V, want, V, bound);
			worst = !(d <= worst) ? d : worst;
		}
		printf("  %s: 2 sequences of %d and %d tokens, max |logit diff| %.3g (bound %.3g)\n", what,
		       starts[1], starts[2] - starts[1], worst, bound);
		CHECK(worst <= bound);
	}
	starts[1] = 0; /* the first sequence has no tokens */
	CUDA_OK(cudaMemcpy(d_starts, starts, sizeof starts, cudaMemcpyHostToDevice));
	CHECK_OK(infs_model_forward_device(d_logits, md, d_tok, NULL, 2, &o));
	CUDA_OK(cudaMemcpy(got, d_logits, 2 * (size_t)V * 4, cudaMemcpyDeviceToHost));
	CHECK(isnan(got[0]) && isfinite(got[V]));
	free(got);
	cudaFree(d_tables);
	cudaFree(d_tok);
	cudaFree(d_starts);
	cudaFree(d_past);
	cudaFree(d_logits);
	cache_free(&c);
}

/* The cache at positions [0, n) holds K (the CPU's pre-RoPE key rotated to
 * the position) and V of every layer and head, within bound. */
static void check_cache(const char *name, const dev_cache *c, const infs_geometry *g, const float *k_pre,
                        const float *v_pre, uint32_t n_all, uint32_t n, float bound)
{
	const uint32_t L = g->n_layers, H = g->n_kv_heads, D = g->head_dim;
	uint16_t *host = malloc(L * c->per_layer * 2);
	CUDA_OK(cudaMemcpy(host, c->mem, L * c->per_layer * 2, cudaMemcpyDeviceToHost));
	infs__rope r;
	infs__rope_init(&r, g);
	float kv[1024];
	float worst = 0;
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t t = 0; t < n; t++) {
			for (uint32_t h = 0; h < H; h++) {
				rotated_k(kv, &r, k_pre, n_all, l, t, h, H, D);
				const float *vp = v_pre + (((size_t)l * n_all + t) * H + h) * D;
				const size_t off = l * c->per_layer + (size_t)table[t / BS] * c->kl.stride_block +
				                   (t % BS) * c->kl.stride_slot + h * c->kl.stride_head;
				const size_t voff = off + (size_t)NB * BS * H * D;
				for (uint32_t e = 0; e < D; e++) {
					float dk = fabsf(infs__bf16_to_f32(host[off + e]) - kv[e]);
					float dv = fabsf(infs__bf16_to_f32(host[voff + e]) - vp[e]);
					if (!(dk <= bound && dv <= bound) && worst <= bound)
						fprintf(stderr, "%s cache layer %u position %u head %u dim %u: K %g (cpu %g), V %g (cpu %g)\n",
						        name, l, t, h, e, infs__bf16_to_f32(host[off + e]), kv[e],
						        infs__bf16_to_f32(host[voff + e]), vp[e]);
					worst = !(dk <= worst) ? dk : worst;
					worst = !(dv <= worst) ? dv : worst;
				}
			}
		}
	printf("  cache K/V at positions 0..%u: max diff %.3g (bound %.3g)\n", n - 1, worst, bound);
	CHECK(worst <= bound);
	free(host);
}

static void refusals(const char *path, infs_model *mc, infs_model *md, const infs_geometry *g, uint32_t V)
{
	infs_model *m = NULL;
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.device = 0;
	mo.device_budget_bytes = 4096;
	CHECK_ERR(infs_model_load(&m, path, &mo), INFS_EBUDGET);
	CHECK(m == NULL && strstr(infs_error_last(), "above device_budget_bytes 4096"));
	printf("  budget: %s\n", infs_error_last());

	dev_cache c;
	cache_make(&c, g);
	int32_t *d_tok;
	float *d_logits;
	const int32_t host_tok[2] = { 1, 2 };
	CUDA_OK(cudaMalloc((void **)&d_tok, (MAX_T + 1) * 4));
	CUDA_OK(cudaMemset(d_tok, 0, (MAX_T + 1) * 4));
	CUDA_OK(cudaMalloc((void **)&d_logits, (size_t)(MAX_T + 1) * V * 4));
	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	o.cache = &c.kl;
	o.block_table = c.table;
	o.block_table_len = NB;
	CHECK_ERR(infs_model_forward_device(d_logits, mc, d_tok, NULL, 1, &o), INFS_EINVAL);
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, MAX_T + 1, &o), INFS_ERANGE);
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 0, &o), INFS_ERANGE);
	CHECK_ERR(infs_model_forward_device(NULL, md, d_tok, NULL, 1, &o), INFS_EINVAL);
	CHECK_ERR(infs_model_forward_device(d_logits, md, NULL, NULL, 1, &o), INFS_EINVAL);
	CHECK_ERR(infs_model_forward_device(d_logits, md, host_tok, NULL, 1, &o), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "tokens is not memory of device 0"));
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, NULL), INFS_EINVAL);
	o.block_table = table; /* host memory */
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_EINVAL);
	o.block_table = NULL;
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_EINVAL);
	o.block_table = c.table;
	o.n_past = NB * BS; /* the new token's block is past the table */
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_ERANGE);
	o.n_past = 0;
	c.kl.device = -1;
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_EMISMATCH);
	c.kl.device = 0;
	c.kl.n_kv_heads++;
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_EMISMATCH);
	c.kl.n_kv_heads--;
	/* Batches: starts and n_past are needed, tables must not overlap, one
	 * logits row per sequence must fit the workspace. */
	o.n_seqs = 2;
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_EINVAL);
	o.seq_starts = d_tok;
	o.seq_n_past = d_tok;
	o.block_table_stride = NB - 1;
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_ERANGE);
	CHECK(strstr(infs_error_last(), "the tables overlap"));
	o.block_table_stride = 0;
	o.n_seqs = MAX_T + 1;
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_ERANGE);
	o.n_seqs = 0;
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_EINVAL);
	o.seq_starts = o.seq_n_past = NULL;
	void *saved = c.k_layers[0];
	c.k_layers[0] = (void *)host_tok;
	CHECK_ERR(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o), INFS_EINVAL);
	c.k_layers[0] = saved;

	/* What only the device sees: a token outside the vocabulary, a
	 * position whose block entry is outside the cache. Logits are NaN, no
	 * access goes out of bounds (compute-sanitizer checks that). */
	float *got = malloc(V * sizeof *got);
	const int32_t bad_tok = (int32_t)V;
	CUDA_OK(cudaMemcpy(d_tok, &bad_tok, 4, cudaMemcpyHostToDevice));
	CHECK_OK(infs_model_forward_device(d_logits, md, d_tok, NULL, 1, &o));
	CUDA_OK(cudaMemcpy(got, d_logits, V * 4, cudaMemcpyDeviceToHost));
	CHECK(isnan(got[0]) && isnan(got[V - 1]));
	const int32_t bad_table[NB] = { 6, 2, 7, NB, 5, 1, 3, 4 }, far = 3 * BS + 1, tok0 = 0;
	CUDA_OK(cudaMemcpy(c.table, bad_table, sizeof bad_table, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_tok, &tok0, 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_tok + 1, &far, 4, cudaMemcpyHostToDevice));
	CHECK_OK(infs_model_forward_device(d_logits, md, d_tok, d_tok + 1, 1, &o));
	CUDA_OK(cudaMemcpy(got, d_logits, V * 4, cudaMemcpyDeviceToHost));
	CHECK(isnan(got[0]));
	CUDA_OK(cudaDeviceSynchronize());
	free(got);
	cudaFree(d_tok);
	cudaFree(d_logits);
	cache_free(&c);
}

static void check_model(const char *path, const char *name, int nth)
{
	printf("%s\n", name);
	infs_model *mc, *md;
	if (!gpu_load_pair(&mc, &md, path, MAX_T))
		return;
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, mc));
	infs_geometry g;
	CHECK_OK(infs_model_geometry(&g, mc, INFS_DTYPE_F32));
	const uint32_t N = 12, V = info.n_vocab, L = g.n_layers;
	int32_t tokens[12];
	for (uint32_t i = 0; i < N; i++)
		tokens[i] = (int32_t)((i * 37 + 11) % V);
	const size_t kv_n = (size_t)L * N * g.n_kv_heads * g.head_dim;
	float *want = malloc((size_t)N * V * sizeof *want), *k = malloc(kv_n * 4), *v = malloc(kv_n * 4);
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.all_logits = 1;
	CHECK_OK(infs_model_forward(want, k, v, mc, tokens, NULL, N, &fo));
	const float bound = bf16_bound(L, max_abs(want, (size_t)N * V));
	const float kv_bound = bf16_bound(L, fmaxf(max_abs(k, kv_n), max_abs(v, kv_n)));

	/* Prefill of 7 into the empty cache, then a decode step at n_past 7. */
	dev_cache c;
	cache_make(&c, &g);
	run_compare(name, "prefill", md, &c, tokens, 0, 7, 1, 0, want, V, bound);
	run_compare(name, "decode", md, &c, tokens, 7, 1, 0, 1, want, V, bound);
	check_cache(name, &c, &g, k, v, N, 8, kv_bound);
	cache_free(&c);
	run_batch(name, md, &g, tokens, want, V, bound);

	/* Positions 0..4 injected from a store of the CPU's K/V, the rest
	 * prefilled over them. */
	{
		enum { M = 5 };
		char spath[600];
		infs_store *st = model_store_create(mc, INFS_DTYPE_F32, 4, "gpu-model", "store.infs", spath, sizeof spath);
		const size_t row = (size_t)g.n_kv_heads * g.head_dim;
		float *fk = malloc(L * M * row * 4), *fv = malloc(L * M * row * 4);
		for (uint32_t l = 0; l < L; l++) {
			memcpy(fk + l * M * row, k + (size_t)l * N * row, M * row * 4);
			memcpy(fv + l * M * row, v + (size_t)l * N * row, M * row * 4);
		}
		float emb[4] = { 1, 0, 0, 0 };
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = M;
		f.tokens = tokens;
		f.embedding = emb;
		f.k = fk;
		f.v = fv;
		uint64_t id = 0;
		CHECK_OK(infs_fact_put(&id, st, "u", &f));
		cache_make(&c, &g);
		uint32_t next = 0;
		CHECK_OK(infs_inject_into_blocks(&next, st, "u", &id, 1, 0, table, NB, &c.kl, NULL));
		CHECK(next == M);
		CUDA_OK(cudaDeviceSynchronize());
		run_compare(name, "prefill over injected", md, &c, tokens, M, N - M, 1, 1, want, V, bound);
		check_cache(name, &c, &g, k, v, N, N, kv_bound);
		cache_free(&c);
		free(fk);
		free(fv);
		infs_store_close(st);
	}
	if (nth == 0)
		refusals(path, mc, md, &g, V);
	free(want);
	free(k);
	free(v);
	infs_model_free(mc);
	infs_model_free(md);
}

int main(int argc, char **argv)
{
	gpu_require();
	CHECK(argc >= 3);
	gpu_each_model(argc, argv, "comparison is", check_model);
	CHECK_DONE();
}

/* The model runtime on a GPU at Llama-3-8B geometry (32 layers, 4096
 * wide, 32 heads over 8 KV heads of 128, FFN 14336, vocabulary 128256,
 * RoPE theta 500000 with llama3 scaling, untied head), random bf16 weights
 * made on the device (speed does not depend on their values), over a
 * vLLM-layout bf16 paged cache (2, blocks, 16, heads, dim) per layer with a
 * shuffled block table. For k = 0, 10, 20, 50, 100, 200 facts the prompt is
 * 32 system + k x 24 fact + 32 question tokens (random ids):
 *   ours_full_ms      prefill of the whole prompt into the empty cache,
 *                     logits of the last token;
 *   ours_question_ms  prefill of the 32 question tokens over a cache that
 *                     holds the 32 + 24k tokens before them;
 * then decode_ms (1 token at n_past 32 + 50 x 24 + 32) and
 * weight_read_floor_ms (the bytes of weights a forward call reads over the
 * device-to-device copy bandwidth measured here, read + write, of 1 GiB).
 * Each time is the median of RUNS calls timed with CUDA events on one
 * stream after WARMUP calls. One sequence per call: the runtime has no
 * batched forward yet, so batch 32 is not measured.
 * Usage: bench_model_gpu out.json
 * White-box: the random model (infs__model_random_device, model/model.h)
 * is internal to the library, so it links the internal core. */
#include <math.h>
#include <stdint.h>

#include "inferscale/inferscale.h"

#include "bench_gpu.h"
#include "model/model.h"
#include "util/splitmix.h"

enum { SYS = 32, FACT = 24, QUESTION = 32, MAX_K = 200, DECODE_K = 50, BS = 16, WARMUP = 2, RUNS = 10 };
enum { MAX_TOKENS = SYS + MAX_K * FACT + QUESTION, NB = (MAX_TOKENS + 1 + BS - 1) / BS };

static infs__model_config llama3_8b(void)
{
	infs__model_config c;
	memset(&c, 0, sizeof c);
	c.arch = INFS_ARCH_LLAMA;
	c.n_vocab = 128256, c.n_embd = 4096, c.n_layers = 32, c.n_heads = 32, c.n_kv_heads = 8;
	c.head_dim = 128, c.n_ff = 14336, c.n_ctx_train = 8192, c.norm_eps = 1e-5f;
	infs_geometry_init(&c.geom, INFS_GEOMETRY_VERSION);
	infs_geometry *g = &c.geom;
	g->n_layers = c.n_layers, g->n_kv_heads = c.n_kv_heads, g->head_dim = c.head_dim, g->rotary_dim = c.head_dim;
	g->rope_style = INFS_ROPE_NEOX, g->rope_theta = 500000.0, g->rope_scaling = INFS_ROPE_SCALING_LLAMA3;
	g->rope_factor = 8.0, g->rope_low_freq_factor = 1.0, g->rope_high_freq_factor = 4.0;
	g->rope_original_max_pos = 8192;
	return c;
}

typedef struct call {
	const infs_model *m;
	float *logits;
	const int32_t *tokens;  /* device */
	uint32_t n_tokens;
	infs_device_forward_options o;
} call;

static void forward_run(void *arg, int rep)
{
	const call *c = arg;
	(void)rep;
	if (infs_model_forward_device(c->logits, c->m, c->tokens, NULL, c->n_tokens, &c->o)) {
		fprintf(stderr, "infs_model_forward_device (%u tokens, n_past %u): %s\n", c->n_tokens, c->o.n_past,
		        infs_error_last());
		exit(1);
	}
}

/* The median time of the call in milliseconds; stops the program when the
 * logits it leaves are not finite (a broken run measures nothing). */
static float time_ms(call *c, cudaStream_t stream, uint32_t n_vocab, float *host_logits)
{
	float ms = time_us(forward_run, c, WARMUP, RUNS, stream) / 1000.0f;
	CUDA_OK(cudaMemcpy(host_logits, c->logits, n_vocab * sizeof(float), cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < n_vocab; i++)
		if (!isfinite(host_logits[i])) {
			fprintf(stderr, "logit %u is %g after %u tokens at n_past %u\n", i, (double)host_logits[i],
			        c->n_tokens, c->o.n_past);
			exit(1);
		}
	return ms;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: bench_model_gpu out.json\n");
		return 2;
	}
	int n_dev = 0;
	if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
		fprintf(stderr, "no CUDA device\n");
		return 77;
	}
	CUDA_OK(cudaSetDevice(0));
	cudaStream_t stream;
	CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

	const infs__model_config cfg = llama3_8b();
	infs_model *m;
	if (infs__model_random_device(&m, &cfg, 0, MAX_TOKENS, 42)) {
		fprintf(stderr, "infs__model_random_device: %s\n", infs_error_last());
		return 1;
	}
	const uint64_t D = cfg.n_embd, qd = (uint64_t)cfg.n_heads * cfg.head_dim;
	const uint64_t kvd = (uint64_t)cfg.n_kv_heads * cfg.head_dim, ff = cfg.n_ff;
	/* What one forward call reads: every layer's matrices (bf16) and norms
	 * (f32), the head; of the embedding only the tokens' rows. */
	const uint64_t weight_bytes =
		cfg.n_layers * (2 * ((qd + 2 * kvd) * D + D * qd + 3 * ff * D) + 2 * 4 * D) + 2 * (uint64_t)cfg.n_vocab * D + 4 * D;

	/* The cache, and a block table of NB shuffled blocks. */
	const size_t row = kvd, layer_elems = 2 * (size_t)NB * BS * row;
	uint16_t *cache;
	CUDA_OK(cudaMalloc((void **)&cache, cfg.n_layers * layer_elems * 2));
	CUDA_OK(cudaMemset(cache, 0, cfg.n_layers * layer_elems * 2));
	void *lk[32], *lv[32];
	for (uint32_t l = 0; l < cfg.n_layers; l++) {
		lk[l] = cache + l * layer_elems;
		lv[l] = cache + l * layer_elems + layer_elems / 2;
	}
	infs_kv_layout kl = INFS_KV_LAYOUT_INIT;
	kl.device = 0, kl.dtype = INFS_DTYPE_BF16, kl.n_layers = cfg.n_layers, kl.n_kv_heads = cfg.n_kv_heads;
	kl.head_dim = cfg.head_dim, kl.n_blocks = NB, kl.block_size = BS, kl.k_layers = lk, kl.v_layers = lv;
	kl.stride_block = (int64_t)BS * row, kl.stride_slot = (int64_t)row, kl.stride_head = cfg.head_dim;
	kl.stride_dim = 1;
	uint64_t rng = 7;
	int32_t table[NB], tokens[MAX_TOKENS + 1];
	for (int b = 0; b < NB; b++)
		table[b] = b;
	for (int b = NB - 1; b > 0; b--) {
		int j = (int)(infs__splitmix64(&rng) % (uint64_t)(b + 1)), t = table[b];
		table[b] = table[j], table[j] = t;
	}
	for (int i = 0; i <= MAX_TOKENS; i++)
		tokens[i] = (int32_t)(infs__splitmix64(&rng) % (cfg.n_vocab - 1));
	int32_t *d_table, *d_tokens;
	float *d_logits, *logits = malloc(cfg.n_vocab * sizeof(float));
	if (!logits)
		return 1;
	CUDA_OK(cudaMalloc((void **)&d_table, sizeof table));
	CUDA_OK(cudaMalloc((void **)&d_tokens, sizeof tokens));
	CUDA_OK(cudaMalloc((void **)&d_logits, cfg.n_vocab * sizeof(float)));
	CUDA_OK(cudaMemcpy(d_table, table, sizeof table, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_tokens, tokens, sizeof tokens, cudaMemcpyHostToDevice));

	call c = { m, d_logits, d_tokens, 0, INFS_DEVICE_FORWARD_OPTIONS_INIT };
	c.o.cache = &kl, c.o.block_table = d_table, c.o.block_table_len = NB, c.o.stream = stream;

	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	fprintf(out, "[\n");
	static const int ks[] = { 0, 10, 20, 50, 100, 200 };
	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		const uint32_t ctx = SYS + (uint32_t)ks[ki] * FACT;
		/* The whole prompt from position 0; it leaves the context in the
		 * cache for the question alone. */
		c.tokens = d_tokens, c.n_tokens = ctx + QUESTION, c.o.n_past = 0;
		const float full = time_ms(&c, stream, cfg.n_vocab, logits);
		c.tokens = d_tokens + ctx, c.n_tokens = QUESTION, c.o.n_past = ctx;
		const float question = time_ms(&c, stream, cfg.n_vocab, logits);
		fprintf(out, " {\"k\": %d, \"batch\": 1, \"ctx_tokens\": %u, \"question_tokens\": %d, "
		             "\"ours_full_ms\": %.3f, \"ours_question_ms\": %.3f},\n",
		        ks[ki], ctx, QUESTION, full, question);
		fprintf(stderr, "k=%d: full (%u tokens) %.2f ms, question over %u %.2f ms\n", ks[ki], ctx + QUESTION,
		        full, ctx, question);
	}

	/* Decode: the k = 50 prompt in the cache, then one token after it. */
	const uint32_t dpast = SYS + DECODE_K * FACT + QUESTION;
	c.tokens = d_tokens, c.n_tokens = dpast, c.o.n_past = 0;
	forward_run(&c, 0);
	c.tokens = d_tokens + dpast, c.n_tokens = 1, c.o.n_past = dpast;
	const float decode = time_ms(&c, stream, cfg.n_vocab, logits);
	infs_model_free(m);
	CUDA_OK(cudaFree(cache));

	float copy_us;
	const size_t copy_bytes = (size_t)1 << 30;
	const double copy_bw = copy_bandwidth(copy_bytes, stream, &copy_us); /* read + write bytes per second */
	const double floor_ms = (double)weight_bytes / copy_bw * 1e3;
	fprintf(stderr, "decode at n_past %u: %.2f ms; weights %.2f GB, copy %.0f GB/s: floor %.2f ms\n", dpast,
	        decode, weight_bytes / 1e9, copy_bw / 1e9, floor_ms);
	fprintf(out, " {\n");
	print_device(out); /* "gpu" (the device's name) and its other properties */
	fprintf(out, "  \"decode_ms\": %.3f, \"decode_n_past\": %u, \"weight_read_floor_ms\": %.3f, "
	             "\"weight_bytes\": %llu, \"copy_read_plus_write_gbps\": %.1f, \"runs\": %d, "
	             "\"batch_32\": \"not measured: one sequence per forward call\"}\n]\n",
	        decode, dpast, floor_ms, (unsigned long long)weight_bytes, copy_bw / 1e9, RUNS);
	if (fclose(out) != 0) {
		perror(argv[1]);
		return 1;
	}
	free(logits);
	cudaFree(d_table);
	cudaFree(d_tokens);
	cudaFree(d_logits);
	cudaStreamDestroy(stream);
	return 0;
}

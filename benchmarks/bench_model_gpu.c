/* The model runtime on a GPU at Llama-3-8B geometry (32 layers, 4096
 * wide, 32 heads over 8 KV heads of 128, FFN 14336, vocabulary 128256,
 * RoPE theta 500000 with llama3 scaling, untied head), random bf16 weights
 * made on the device (speed does not depend on their values), over a
 * vLLM-layout bf16 paged cache (2, blocks, 16, heads, dim) per layer with a
 * shuffled block table. For k = 0, 10, 20, 50, 100, 200 facts the prompt is
 * 32 system + k x 24 fact + 32 question tokens (random ids). Batch 1:
 *   ours_full_ms            prefill of the whole prompt into the empty cache,
 *                           logits of the last token: the best of
 *                           ours_full_eager_ms (one call) and
 *                           ours_full_graph_ms (the call as a CUDA graph);
 *   ours_question_ms        the 32 question tokens over a cache that holds
 *                           the 32 + 24k tokens before them, as a CUDA graph
 *                           (ours_question_eager_ms: the call itself).
 * Batch 32 at k = 50, 32 sequences of random prompts, each with its own
 * block table (rows of one table) in one cache:
 *   ours_full_ms            the 32 prompts in one call (32 x 1264 tokens),
 *                           eager, as the reference times batch 32;
 *   ours_question_ms        32 x 32 question tokens over the 32 cached
 *                           contexts in one call, as a CUDA graph.
 * Then decode_ms and decode_batch32_ms: one decode step (1 and 32
 * sequences) captured once as a CUDA graph through the batch API; a loop
 * of DECODE_STEPS steps copies each step's n_past and tokens into the
 * graph's device inputs (cudaMemcpyAsync from pinned memory, on the stream)
 * and replays it, from n_past 32 + 50 x 24 + 32 = 1264; the time is the
 * loop's over DECODE_STEPS (the mean step), median of RUNS loops. And
 * weight_read_floor_ms (the bytes of weights a forward call reads over the
 * device-to-device copy bandwidth measured here, read + write, of 1 GiB).
 * Then encode_facts_per_s: fact encoding on the device (bench_encode).
 * Graphs are captured on a non-blocking stream in
 * cudaStreamCaptureModeGlobal. Each time is the median of RUNS calls (or
 * replays) timed with CUDA events on that stream after WARMUP ones (batch
 * 32 full prefill: B32_RUNS after B32_WARMUP); every logit the measured
 * case leaves must be finite, else the benchmark stops.
 * INFS_BENCH_WEIGHTS=fp8 in the environment runs the model with fp8
 * weights (infs_model_options.device_weights; the floor counts their
 * codes and scales); the last record's "weights" says which.
 * INFS_BENCH_ONLY=steps times the question and decoding steps alone
 * (each batch-1 prefill runs once, untimed: full times are null; no batch
 * 32 prefill, no encoding): a quick sweep.
 * INFS_BENCH_PATHS=unfused runs steps of few tokens as longer calls go
 * (RMSNorm, cuBLAS or the fp8 kernel, SwiGLU) instead of through the fused
 * products (infs__device_model_few_tokens); the last record's "paths"
 * says which.
 * Usage: bench_model_gpu out.json
 *        bench_model_gpu --profile K STEP   after a warm-up call, one
 *        STEP (full: prefill of the K-fact prompt; question: the question
 *        over it; decode: one token after it) between cudaProfilerStart and
 *        cudaProfilerStop, for ncu --profile-from-start off
 * White-box: the random model (infs__model_random_device, model/model.h)
 * is internal to the library, so it links the internal core. */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include <cuda_profiler_api.h>

#include "inferscale/inferscale.h"

#include "bench_gpu.h"
#include "cuda/device_copy.h"
#include "bench_llama3.h"
#include "cuda/device_model.h"
#include "model/model.h"
#include "util/splitmix.h"

enum { SYS = 32, FACT = 24, QUESTION = 32, MAX_K = 200, DECODE_K = 50, BS = 16, WARMUP = 2, RUNS = 10 };
enum { BATCH = 32, DECODE_STEPS = 32, B32_WARMUP = 1, B32_RUNS = 5 };
enum {
	MAX_TOKENS = SYS + MAX_K * FACT + QUESTION,     /* the largest batch-1 prompt */
	B_CTX = SYS + DECODE_K * FACT,                  /* the k = 50 context */
	B_PROMPT = B_CTX + QUESTION,                    /* the k = 50 prompt */
	B_TOKENS = BATCH * B_PROMPT,                    /* batch 32's full prefill */
	NB1 = (MAX_TOKENS + BS - 1) / BS,               /* batch 1's table */
	NBS = (B_PROMPT + DECODE_STEPS + BS - 1) / BS,  /* each batch-32 sequence's row */
	NB = BATCH * NBS,                               /* the cache */
};
_Static_assert(NB >= NB1, "batch 1's table is a prefix of the cache's blocks");
_Static_assert(B_PROMPT + DECODE_STEPS <= NB1 * BS, "batch 1's decode stays within its table");

typedef struct call {
	const infs_model *m;
	float *logits;          /* device, n_vocab per sequence */
	const int32_t *tokens;  /* device */
	uint32_t n_tokens;
	infs_device_forward_options o;
	const char *what;       /* names the case in messages */
	cudaGraphExec_t graph;  /* the call captured, for graph_run */
} call;

static void forward_run(void *arg, int rep)
{
	const call *c = arg;
	(void)rep;
	if (infs_model_forward_device(c->logits, c->m, c->tokens, NULL, c->n_tokens, &c->o)) {
		fprintf(stderr, "%s: infs_model_forward_device (%u tokens, %u sequences, n_past %u): %s\n", c->what,
		        c->n_tokens, c->o.n_seqs, c->o.n_past, infs_error_last());
		exit(1);
	}
}

static void graph_run(void *arg, int rep)
{
	const call *c = arg;
	(void)rep;
	CUDA_OK(cudaGraphLaunch(c->graph, c->o.stream));
}

/* Captures the call on its stream (cudaStreamCaptureModeGlobal: the call
 * must neither synchronise nor allocate) into c->graph; stops the program
 * with what broke the capture. */
static void capture(call *c)
{
	cudaStream_t s = c->o.stream;
	cudaGraph_t g = NULL;
	CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	const int rc = infs_model_forward_device(c->logits, c->m, c->tokens, NULL, c->n_tokens, &c->o);
	char err[512];
	snprintf(err, sizeof err, "%s", rc ? infs_error_last() : "ok");
	enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
	const cudaError_t is = cudaStreamIsCapturing(s, &status);
	const cudaError_t end = cudaStreamEndCapture(s, &g);
	if (rc || is != cudaSuccess || status != cudaStreamCaptureStatusActive || end != cudaSuccess || !g) {
		fprintf(stderr, "%s: capture failed: infs_model_forward_device: %s; capture status %d (%s; 1 = active, "
		                "2 = invalidated: the call synchronised, allocated or used the legacy stream); "
		                "cudaStreamEndCapture: %s\n",
		        c->what, err, (int)status, cudaGetErrorString(is), cudaGetErrorString(end));
		exit(1);
	}
	CUDA_OK(cudaGraphInstantiate(&c->graph, g, 0));
	CUDA_OK(cudaGraphDestroy(g));
}

/* Stops the program unless the n floats at d_logits are finite (a broken
 * run measures nothing). */
static void check_finite(const float *d_logits, size_t n, const char *what)
{
	float *h = malloc(n * sizeof *h);
	if (!h) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	CUDA_OK(cudaMemcpy(h, d_logits, n * sizeof *h, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < n; i++)
		if (!isfinite(h[i])) {
			fprintf(stderr, "%s: logit %zu is %g\n", what, i, (double)h[i]);
			exit(1);
		}
	free(h);
}

/* The median time of the eager call (graph: of its captured graph's
 * replays) in milliseconds, after checking the logits of its n_seqs
 * sequences (1 when n_seqs is 0). */
static float time_call(call *c, int graph, int warmup, int runs, uint32_t n_vocab)
{
	const float ms = time_us(graph ? graph_run : forward_run, c, warmup, runs, c->o.stream) / 1000.0f;
	check_finite(c->logits, (size_t)(c->o.n_seqs ? c->o.n_seqs : 1) * n_vocab, c->what);
	return ms;
}

/* The same call eager and as a graph: returns the graph's time, the
 * eager's in *eager. */
static float time_both(call *c, uint32_t n_vocab, float *eager)
{
	*eager = time_call(c, 0, WARMUP, RUNS, n_vocab);
	capture(c);
	const float ms = time_call(c, 1, WARMUP, RUNS, n_vocab);
	CUDA_OK(cudaGraphExecDestroy(c->graph));
	c->graph = NULL;
	return ms;
}

/* A decode loop: each step copies its n_past and tokens (pinned host
 * memory, n_seqs of each per step) into the captured graph's inputs on the
 * stream and replays the graph. */
typedef struct decode_loop {
	call *c;
	int32_t *d_n_past, *d_tokens;
	const int32_t *h_n_past, *h_tokens;
} decode_loop;

static void decode_run(void *arg, int rep)
{
	const decode_loop *d = arg;
	const uint32_t n = d->c->o.n_seqs;
	cudaStream_t s = d->c->o.stream;
	(void)rep;
	for (uint32_t i = 0; i < DECODE_STEPS; i++) {
		CUDA_OK(cudaMemcpyAsync(d->d_n_past, d->h_n_past + i * n, n * 4, cudaMemcpyHostToDevice, s));
		CUDA_OK(cudaMemcpyAsync(d->d_tokens, d->h_tokens + i * n, n * 4, cudaMemcpyHostToDevice, s));
		CUDA_OK(cudaGraphLaunch(d->c->graph, s));
	}
}

/* decode steps of n_seqs sequences (seq_starts 0, 1, ..., n_seqs) whose
 * contexts of B_PROMPT tokens are in the cache: the mean step of a loop of
 * DECODE_STEPS, median of RUNS loops, in milliseconds. */
static float time_decode(call *c, int32_t *d_n_past, int32_t *d_tokens, uint64_t *rng, uint32_t n_vocab)
{
	const uint32_t n = c->o.n_seqs;
	int32_t *h_n_past, *h_tokens;
	CUDA_OK(cudaMallocHost((void **)&h_n_past, (size_t)DECODE_STEPS * n * 4));
	CUDA_OK(cudaMallocHost((void **)&h_tokens, (size_t)DECODE_STEPS * n * 4));
	for (uint32_t i = 0; i < DECODE_STEPS; i++)
		for (uint32_t s = 0; s < n; s++) {
			h_n_past[i * n + s] = (int32_t)(B_PROMPT + i);
			h_tokens[i * n + s] = (int32_t)(infs__splitmix64(rng) % (n_vocab - 1));
		}
	c->tokens = d_tokens, c->n_tokens = n, c->o.seq_n_past = d_n_past;
	c->o.max_context = B_PROMPT + DECODE_STEPS;
	capture(c);
	decode_loop d = { c, d_n_past, d_tokens, h_n_past, h_tokens };
	const float ms = time_us(decode_run, &d, WARMUP, RUNS, c->o.stream) / 1000.0f / DECODE_STEPS;
	check_finite(c->logits, (size_t)n * n_vocab, c->what);
	CUDA_OK(cudaGraphExecDestroy(c->graph));
	c->graph = NULL;
	CUDA_OK(cudaFreeHost(h_n_past));
	CUDA_OK(cudaFreeHost(h_tokens));
	return ms;
}

/* A device copy of n int32 values. */
static int32_t *upload(const int32_t *h, size_t n)
{
	int32_t *d;
	CUDA_OK(cudaMalloc((void **)&d, n * 4));
	CUDA_OK(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
	return d;
}

/* Fact encoding below the store (cuda/device_encode.c): as many facts of
 * FACT random tokens as one forward call of the model's max tokens takes,
 * after a SYS-token context, through infs__device_encode_run with its
 * buffers allocated once: the context's prefill, the facts' forward, the
 * K/V (written in bf16 by the forward) copied to pinned host memory and
 * each fact's rows gathered, to a callback that keeps nothing. Facts per second, median of ENC_RUNS runs
 * timed on the host after one more; *n_facts receives the count. */
enum { ENC_RUNS = 3 };

static int encode_sink(void *user, size_t i, const void *k, const void *v)
{
	(void)k, (void)v;
	*(size_t *)user = i + 1;
	return 0;
}

static float bench_encode(const infs_model *m, uint64_t *rng, size_t *n_facts)
{
	const size_t B = m->device_max_tokens / FACT;
	int32_t ctx[SYS], *tokens = malloc(B * FACT * sizeof *tokens);
	const int32_t **tok = malloc(B * sizeof *tok), **own = calloc(B, sizeof *own);
	uint32_t *n_tok = malloc(B * sizeof *n_tok), *n_own = calloc(B, sizeof *n_own);
	if (!tokens || !tok || !own || !n_tok || !n_own) {
		fprintf(stderr, "encode: out of memory\n");
		exit(1);
	}
	for (int i = 0; i < SYS; i++)
		ctx[i] = (int32_t)(infs__splitmix64(rng) % m->cfg.n_vocab);
	for (size_t i = 0; i < B; i++) {
		for (int t = 0; t < FACT; t++)
			tokens[i * FACT + t] = (int32_t)(infs__splitmix64(rng) % m->cfg.n_vocab);
		tok[i] = tokens + i * FACT;
		n_tok[i] = FACT;
	}
	size_t done = 0;
	const infs__encode_job job = { ctx, SYS, B, own, n_own, tok, n_tok, INFS_DTYPE_BF16, encode_sink, &done };
	infs__encode_ws *w = NULL;
	if (infs__device_encode_begin(&w, m, SYS, INFS_DTYPE_BF16)) {
		fprintf(stderr, "infs__device_encode_begin: %s\n", infs_error_last());
		exit(1);
	}
	float rate[ENC_RUNS];
	for (int r = -1; r < ENC_RUNS; r++) {
		struct timespec t0, t1;
		done = 0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (infs__device_encode_run(w, &job) || done != B) {
			fprintf(stderr, "encode: %s (%zu of %zu facts)\n", infs_error_last(), done, B);
			exit(1);
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (r >= 0)
			rate[r] = (float)(B / ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)));
	}
	infs__device_encode_end(w);
	free(tokens), free(tok), free(own), free(n_tok), free(n_own);
	*n_facts = B;
	return median(rate, ENC_RUNS);
}

/* A time in JSON: ms with three decimals, null when not measured (NaN). */
static void json_ms(FILE *out, const char *key, float ms)
{
	if (isnan(ms))
		fprintf(out, "\"%s\": null, ", key);
	else
		fprintf(out, "\"%s\": %.3f, ", key, ms);
}

int main(int argc, char **argv)
{
	const int profile = argc == 4 && strcmp(argv[1], "--profile") == 0;
	if (argc != 2 && !profile) {
		fprintf(stderr, "usage: bench_model_gpu out.json | --profile K full|question|decode\n");
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
	const uint32_t V = cfg.n_vocab;
	const int fp8 = bench_fp8_weights();
	infs_model *m;
	if (infs__model_random_device(&m, &cfg, 0, B_TOKENS, 42, fp8 ? INFS_DTYPE_FP8_E4M3 : INFS_DTYPE_BF16)) {
		fprintf(stderr, "infs__model_random_device: %s\n", infs_error_last());
		return 1;
	}
	const char *paths = getenv("INFS_BENCH_PATHS");
	paths = paths && strcmp(paths, "unfused") == 0 ? paths : "fused";
	infs__device_model_few_tokens(m, strcmp(paths, "unfused") != 0);
	const char *only = getenv("INFS_BENCH_ONLY");
	const int steps = only && strcmp(only, "steps") == 0;
	const uint64_t D = cfg.n_embd, qd = (uint64_t)cfg.n_heads * cfg.head_dim;
	const uint64_t kvd = (uint64_t)cfg.n_kv_heads * cfg.head_dim, ff = cfg.n_ff;
	/* What one forward call reads: every layer's matrices (bf16, or fp8
	 * codes and a scale per row) and norms (f32), the head (bf16); of the
	 * embedding only the tokens' rows. */
	const uint64_t mat = (qd + 2 * kvd) * D + D * qd + 3 * ff * D, mat_rows = qd + 2 * kvd + D + 2 * ff + D;
	const uint64_t weight_bytes = cfg.n_layers * ((fp8 ? mat + 4 * mat_rows : 2 * mat) + 2 * 4 * D) +
	                              2 * (uint64_t)V * D + 4 * D;

	/* The cache, and a shuffled permutation of its blocks: batch 1's
	 * table is its first NB1 entries, batch 32's rows are NBS apart. */
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
	static int32_t table[NB], tokens[B_TOKENS], q32[BATCH * QUESTION];
	for (int b = 0; b < NB; b++)
		table[b] = b;
	for (int b = NB - 1; b > 0; b--) {
		int j = (int)(infs__splitmix64(&rng) % (uint64_t)(b + 1)), t = table[b];
		table[b] = table[j], table[j] = t;
	}
	for (int i = 0; i < B_TOKENS; i++)
		tokens[i] = (int32_t)(infs__splitmix64(&rng) % (V - 1));
	/* Batch 32: sequence s is tokens [s B_PROMPT, (s + 1) B_PROMPT); its
	 * question, the last QUESTION of them, is also packed into q32. */
	int32_t starts_full[BATCH + 1], starts_q[BATCH + 1], starts_1[BATCH + 1], zeros[BATCH], ctxs[BATCH];
	for (int s = 0; s <= BATCH; s++)
		starts_full[s] = s * B_PROMPT, starts_q[s] = s * QUESTION, starts_1[s] = s;
	for (int s = 0; s < BATCH; s++) {
		zeros[s] = 0, ctxs[s] = B_CTX;
		memcpy(q32 + s * QUESTION, tokens + s * B_PROMPT + B_CTX, QUESTION * 4);
	}
	int32_t *d_table = upload(table, NB), *d_tokens = upload(tokens, B_TOKENS);
	int32_t *d_q32 = upload(q32, BATCH * QUESTION), *d_starts_full = upload(starts_full, BATCH + 1);
	int32_t *d_starts_q = upload(starts_q, BATCH + 1), *d_starts_1 = upload(starts_1, BATCH + 1);
	int32_t *d_zeros = upload(zeros, BATCH), *d_ctxs = upload(ctxs, BATCH);
	int32_t *d_dec_n_past = upload(zeros, BATCH), *d_dec_tokens = upload(zeros, BATCH);
	float *d_logits;
	CUDA_OK(cudaMalloc((void **)&d_logits, (size_t)BATCH * V * sizeof(float)));

	call c = { m, d_logits, d_tokens, 0, INFS_DEVICE_FORWARD_OPTIONS_INIT, "", NULL };
	c.o.cache = &kl, c.o.block_table = d_table, c.o.block_table_len = NB1, c.o.stream = stream;

	if (profile) {
		const uint32_t ctx = SYS + (uint32_t)atoi(argv[2]) * FACT;
		if (ctx + QUESTION > B_TOKENS) {
			fprintf(stderr, "--profile %s: at most %d facts\n", argv[2], (B_TOKENS - SYS - QUESTION) / FACT);
			return 2;
		}
		const char *step = argv[3];
		c.what = "profiled full prefill";
		c.tokens = d_tokens, c.n_tokens = ctx + QUESTION, c.o.n_past = 0;
		forward_run(&c, 0);
		if (strcmp(step, "question") == 0) {
			c.what = "profiled question";
			c.tokens = d_tokens + ctx, c.n_tokens = QUESTION, c.o.n_past = ctx;
		} else if (strcmp(step, "decode") == 0) {
			c.what = "profiled decode";
			c.tokens = d_tokens + ctx + QUESTION, c.n_tokens = 1, c.o.n_past = ctx + QUESTION;
		} else if (strcmp(step, "full") != 0) {
			fprintf(stderr, "--profile: step %s is not full, question or decode\n", step);
			return 2;
		}
		forward_run(&c, 0); /* the warm-up */
		CUDA_OK(cudaStreamSynchronize(stream));
		CUDA_OK(cudaProfilerStart());
		forward_run(&c, 0);
		CUDA_OK(cudaStreamSynchronize(stream));
		CUDA_OK(cudaProfilerStop());
		return 0;
	}
	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	fprintf(out, "[\n");
	static const int ks[] = { 0, 10, 20, 50, 100, 200 };
	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		const uint32_t ctx = SYS + (uint32_t)ks[ki] * FACT;
		float full_eager, question_eager;
		/* The whole prompt from position 0; it leaves the context in the
		 * cache for the question alone. */
		c.what = "batch 1 full prefill";
		c.tokens = d_tokens, c.n_tokens = ctx + QUESTION, c.o.n_past = 0;
		float full_graph = NAN;
		full_eager = NAN;
		if (steps)
			forward_run(&c, 0);
		else
			full_graph = time_both(&c, V, &full_eager);
		const float full = full_graph < full_eager ? full_graph : full_eager;
		c.what = "batch 1 question";
		c.tokens = d_tokens + ctx, c.n_tokens = QUESTION, c.o.n_past = ctx;
		const float question = time_both(&c, V, &question_eager);
		fprintf(out, " {\"k\": %d, \"batch\": 1, \"ctx_tokens\": %u, \"question_tokens\": %d, ", ks[ki], ctx,
		        QUESTION);
		json_ms(out, "ours_full_ms", full);
		json_ms(out, "ours_full_eager_ms", full_eager);
		json_ms(out, "ours_full_graph_ms", full_graph);
		fprintf(out, "\"ours_question_ms\": %.3f, \"ours_question_eager_ms\": %.3f},\n", question, question_eager);
		fprintf(stderr, "k=%d: full (%u tokens) eager %.2f ms, graph %.2f ms; question over %u: graph %.2f ms, "
		                "eager %.2f ms\n",
		        ks[ki], ctx + QUESTION, full_eager, full_graph, ctx, question, question_eager);
	}

	/* Batch-1 decode: the k = 50 prompt in the cache (an eager prefill),
	 * then DECODE_STEPS tokens after it. */
	c.what = "batch 1 prefill before decode";
	c.tokens = d_tokens, c.n_tokens = B_PROMPT, c.o.n_past = 0;
	forward_run(&c, 0);
	c.what = "batch 1 decode step";
	c.o.n_past = 0, c.o.n_seqs = 1, c.o.seq_starts = d_starts_1;
	const float decode = time_decode(&c, d_dec_n_past, d_dec_tokens, &rng, V);
	fprintf(stderr, "decode (batch 1, graph) from n_past %d: %.3f ms a step\n", B_PROMPT, decode);

	/* Batch 32 at k = 50: each sequence has its row of NBS blocks. */
	c.o.block_table_len = NBS, c.o.block_table_stride = NBS, c.o.n_seqs = BATCH;
	c.what = "batch 32 full prefill";
	c.tokens = d_tokens, c.n_tokens = B_TOKENS, c.o.seq_starts = d_starts_full, c.o.seq_n_past = d_zeros;
	c.o.max_context = B_PROMPT;
	const float b32_full = steps ? NAN : time_call(&c, 0, B32_WARMUP, B32_RUNS, V);
	c.what = "batch 32 question";
	c.tokens = d_q32, c.n_tokens = BATCH * QUESTION, c.o.seq_starts = d_starts_q, c.o.seq_n_past = d_ctxs;
	float b32_question_eager;
	const float b32_question = time_both(&c, V, &b32_question_eager);
	fprintf(out, " {\"k\": %d, \"batch\": %d, \"ctx_tokens\": %d, \"question_tokens\": %d, ", DECODE_K, BATCH,
	        B_CTX, QUESTION);
	json_ms(out, "ours_full_ms", b32_full);
	json_ms(out, "ours_full_eager_ms", b32_full);
	fprintf(out, "\"ours_question_ms\": %.3f, \"ours_question_eager_ms\": %.3f},\n", b32_question,
	        b32_question_eager);
	fprintf(stderr, "batch 32, k=%d: full (%d x %d tokens, eager) %.2f ms; question (%d x %d) graph %.2f ms, "
	                "eager %.2f ms\n",
	        DECODE_K, BATCH, B_PROMPT, b32_full, BATCH, QUESTION, b32_question, b32_question_eager);
	c.what = "batch 32 decode step";
	c.o.seq_starts = d_starts_1;
	const float decode32 = time_decode(&c, d_dec_n_past, d_dec_tokens, &rng, V);
	fprintf(stderr, "decode (batch 32, graph) from n_past %d: %.3f ms a step\n", B_PROMPT, decode32);
	size_t enc_facts = 0;
	const float enc_rate = steps ? 0.0f : bench_encode(m, &rng, &enc_facts);
	fprintf(stderr, "encode: %zu facts of %d tokens after %d: %.0f facts/s\n", enc_facts, FACT, SYS, enc_rate);
	infs_model_free(m);
	CUDA_OK(cudaFree(cache));

	float copy_us;
	const size_t copy_bytes = (size_t)1 << 30;
	const double copy_bw = copy_bandwidth(copy_bytes, stream, &copy_us); /* read + write bytes per second */
	const double floor_ms = (double)weight_bytes / copy_bw * 1e3;
	fprintf(stderr, "weights %.2f GB, copy %.0f GB/s: floor %.2f ms\n", weight_bytes / 1e9, copy_bw / 1e9,
	        floor_ms);
	fprintf(out, " {\n");
	print_device(out); /* "gpu" (the device's name) and its other properties */
	fprintf(out, "  \"decode_ms\": %.3f, \"decode_batch32_ms\": %.3f, \"decode_n_past\": %d, "
	             "\"decode_steps\": %d, \"decode_time\": \"mean step of a graph-replay loop, median of runs\", "
	             "\"weight_read_floor_ms\": %.3f, \"weight_bytes\": %llu, \"copy_read_plus_write_gbps\": %.1f, "
	             "\"weights\": \"%s\", \"paths\": \"%s\", "
	             "\"runs\": %d, \"batch32_full_runs\": %d, \"encode_facts_per_s\": %.1f, \"encode_facts\": %zu, "
	             "\"encode_time\": \"%d-token facts after a %d-token context in batches of device_max_tokens: "
	             "context prefill, forward (K/V written in bf16), K/V copy to pinned host memory, each fact's rows gathered; buffers "
	             "allocated once, no store; median of %d runs\"}\n]\n",
	        decode, decode32, B_PROMPT, DECODE_STEPS, floor_ms, (unsigned long long)weight_bytes, copy_bw / 1e9,
	        fp8 ? "fp8" : "bf16", paths, RUNS, B32_RUNS, enc_rate, enc_facts, FACT, SYS, ENC_RUNS);
	if (fclose(out) != 0) {
		perror(argv[1]);
		return 1;
	}
	int32_t *bufs[] = { d_table, d_tokens, d_q32, d_starts_full, d_starts_q, d_starts_1, d_zeros, d_ctxs,
		            d_dec_n_past, d_dec_tokens };
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		CUDA_OK(cudaFree(bufs[i]));
	CUDA_OK(cudaFree(d_logits));
	CUDA_OK(cudaStreamDestroy(stream));
	return 0;
}

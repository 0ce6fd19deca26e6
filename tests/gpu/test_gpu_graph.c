/* infs_model_forward_device captured into CUDA graphs, on the tiny llama
 * fixture and on SmolLM2 when its GGUF is in $INFS_CACHE. Every capture
 * runs in cudaStreamCaptureModeGlobal, where a call that synchronises or
 * allocates breaks it. Over a vLLM-layout bf16 paged cache (block size 4,
 * a shuffled table of two rows):
 *   question  4 tokens at n_past 8 (all logits), captured once; replayed
 *             with its first ids and with new ids written into its input
 *             buffer, each replay gives bitwise the logits of an eager
 *             call on the same inputs over an identical cache, and the two
 *             replays differ (the replay read the new ids);
 *   decode    one step of 2 sequences through the batch API (contexts of 8
 *             and 5 tokens, each its own table row, seq_n_past in device
 *             memory), captured once and replayed for STEPS steps with
 *             n_past and the tokens advanced by cudaMemcpyAsync between
 *             replays: each step's logits are bitwise those of an eager
 *             batch call, within the bf16 bound of one eager call per
 *             sequence (n_seqs 0: the attention's work is split
 *             differently), and differ from the step before. */
#include <string.h>

#include "gpu.h"
#include "../model_compare.h"
#include "inferscale/model.h"

enum { BS = 4, NBS = 6, NB = 2 * NBS, MAX_T = 16, P = 8, Q = 4, STEPS = 4 };
/* Row s of the table is entries [s NBS, (s + 1) NBS). */
static const int32_t table[NB] = { 9, 2, 11, 0, 5, 7, 1, 10, 3, 6, 4, 8 };
/* The decode step's two contexts. */
static const uint32_t ctx_len[2] = { P, 5 };

typedef struct dev_cache {
	infs_kv_layout kl;
	void *k_layers[64], *v_layers[64];
	uint16_t *mem;
	size_t bytes;
} dev_cache;

/* A vLLM cache (2, NB, BS, heads, dim) per layer, zeroed, in bf16. */
static void cache_make(dev_cache *c, const infs_geometry *g)
{
	c->bytes = g->n_layers * gpu_vllm_cache(&c->kl, &c->mem, c->k_layers, c->v_layers, g, NB, BS) * 2;
}

/* The caches hold the same bytes (eager calls on the same inputs are
 * deterministic: the bitwise comparisons below rest on it). */
static void caches_same(const char *what, const dev_cache *a, const dev_cache *b)
{
	unsigned char *x = malloc(a->bytes), *y = malloc(b->bytes);
	CUDA_OK(cudaMemcpy(x, a->mem, a->bytes, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(y, b->mem, b->bytes, cudaMemcpyDeviceToHost));
	if (a->bytes != b->bytes || memcmp(x, y, a->bytes) != 0)
		fprintf(stderr, "%s: two caches filled by the same eager calls differ\n", what);
	CHECK(a->bytes == b->bytes && memcmp(x, y, a->bytes) == 0);
	free(x);
	free(y);
}

static int32_t *upload(const int32_t *h, size_t n)
{
	int32_t *d;
	CUDA_OK(cudaMalloc((void **)&d, n * 4));
	CUDA_OK(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
	return d;
}

/* A host copy of the n floats at d once stream is done. */
static float *fetch(const float *d, size_t n, cudaStream_t stream)
{
	float *h = malloc(n * sizeof *h);
	CUDA_OK(cudaStreamSynchronize(stream));
	CUDA_OK(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
	return h;
}

/* a and b are bitwise equal; else reports the first difference. */
static int same_bits(const char *what, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) {
			fprintf(stderr, "%s: logit %zu is %.9g from the graph, %.9g eager\n", what, i, a[i], b[i]);
			return 0;
		}
	return 1;
}

static int all_finite(const float *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(a[i]))
			return 0;
	return 1;
}

/* Captures one forward call on o->stream in cudaStreamCaptureModeGlobal
 * and instantiates it; NULL (a failed check saying what broke) when the
 * call failed under capture or broke it. */
static cudaGraphExec_t capture(const char *what, float *d_logits, const infs_model *md, const int32_t *d_tok,
                               uint32_t n, const infs_device_forward_options *o)
{
	cudaStream_t s = o->stream;
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	const int rc = infs_model_forward_device(d_logits, md, d_tok, NULL, n, o);
	char err[512];
	snprintf(err, sizeof err, "%s", rc ? infs_error_last() : "ok");
	enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
	const cudaError_t is = cudaStreamIsCapturing(s, &status);
	const cudaError_t end = cudaStreamEndCapture(s, &g);
	size_t nodes = 0;
	if (end == cudaSuccess && g)
		CUDA_OK(cudaGraphGetNodes(g, NULL, &nodes));
	if (rc || is != cudaSuccess || status != cudaStreamCaptureStatusActive || end != cudaSuccess || nodes == 0) {
		fprintf(stderr, "%s: capture in cudaStreamCaptureModeGlobal failed: infs_model_forward_device: %s; "
		                "capture status %d (%s; 1 = active, 2 = invalidated: the call synchronised, allocated "
		                "or used the legacy default stream); cudaStreamEndCapture: %s; %zu nodes\n",
		        what, err, (int)status, cudaGetErrorString(is), cudaGetErrorString(end), nodes);
		CHECK(!"capture");
		if (g)
			cudaGraphDestroy(g);
		(void)cudaGetLastError();
		return NULL;
	}
	CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
	CUDA_OK(cudaGraphDestroy(g));
	printf("  %s: captured in cudaStreamCaptureModeGlobal, %zu nodes\n", what, nodes);
	return exec;
}

/* Eager prefill of tokens[0..n) from position 0 into the cache through
 * the table row. */
static void prefill(const infs_model *md, dev_cache *c, const int32_t *d_table_row, const int32_t *d_tok,
                    uint32_t n, float *d_logits, cudaStream_t s)
{
	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	o.cache = &c->kl;
	o.block_table = d_table_row;
	o.block_table_len = NBS;
	o.stream = s;
	CHECK_OK(infs_model_forward_device(d_logits, md, d_tok, NULL, n, &o));
}

static void check_question(const char *name, const infs_model *md, const infs_geometry *g, const int32_t *tokens,
                           const int32_t *d_table, uint32_t V, cudaStream_t s)
{
	dev_cache cg, ce; /* replayed into, eager into */
	cache_make(&cg, g);
	cache_make(&ce, g);
	int32_t *d_ctx = upload(tokens, P), *d_q = upload(tokens + P, Q);
	float *d_lg, *d_le;
	CUDA_OK(cudaMalloc((void **)&d_lg, (size_t)Q * V * 4));
	CUDA_OK(cudaMalloc((void **)&d_le, (size_t)Q * V * 4));
	prefill(md, &cg, d_table, d_ctx, P, d_le, s);
	prefill(md, &ce, d_table, d_ctx, P, d_le, s);
	CUDA_OK(cudaStreamSynchronize(s));
	caches_same(name, &cg, &ce);

	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	o.all_logits = 1;
	o.cache = &cg.kl;
	o.block_table = d_table;
	o.block_table_len = NBS;
	o.n_past = P;
	o.stream = s;
	cudaGraphExec_t exec = capture("question", d_lg, md, d_q, Q, &o);
	if (exec) {
		infs_device_forward_options oe = o;
		oe.cache = &ce.kl;
		/* New ids, none equal to the first ones. */
		int32_t next[Q];
		for (uint32_t i = 0; i < Q; i++)
			next[i] = (tokens[P + i] + 1 + (int32_t)i) % (int32_t)V;
		float *first = NULL;
		for (int round = 0; round < 2; round++) {
			if (round == 1)
				CUDA_OK(cudaMemcpyAsync(d_q, next, sizeof next, cudaMemcpyHostToDevice, s));
			CUDA_OK(cudaGraphLaunch(exec, s));
			float *got = fetch(d_lg, (size_t)Q * V, s);
			CHECK_OK(infs_model_forward_device(d_le, md, d_q, NULL, Q, &oe));
			float *want = fetch(d_le, (size_t)Q * V, s);
			CHECK(all_finite(got, (size_t)Q * V));
			CHECK(same_bits(round ? "question replay, new ids" : "question replay", got, want, (size_t)Q * V));
			if (round == 0) {
				first = got;
			} else {
				CHECK(memcmp(first, got, (size_t)Q * V * 4) != 0);
				printf("  question: replay with the first and the new ids, bitwise equal to eager, "
				       "the two differ\n");
				free(got);
			}
			free(want);
		}
		free(first);
		CUDA_OK(cudaGraphExecDestroy(exec));
	}
	cudaFree(cg.mem);
	cudaFree(ce.mem);
	cudaFree(d_ctx);
	cudaFree(d_q);
	cudaFree(d_lg);
	cudaFree(d_le);
}

static void check_decode(const char *name, const infs_model *md, const infs_geometry *g, const int32_t *seqs[2],
                         const int32_t *d_table, uint32_t V, cudaStream_t s)
{
	dev_cache cg, cb, c1; /* replayed into, eager batch, eager one sequence at a time */
	cache_make(&cg, g);
	cache_make(&cb, g);
	cache_make(&c1, g);
	float *d_lg, *d_lb, *d_l1;
	CUDA_OK(cudaMalloc((void **)&d_lg, 2 * (size_t)V * 4));
	CUDA_OK(cudaMalloc((void **)&d_lb, 2 * (size_t)V * 4));
	CUDA_OK(cudaMalloc((void **)&d_l1, 2 * (size_t)V * 4));
	for (int q = 0; q < 2; q++) {
		int32_t *d_ctx = upload(seqs[q], ctx_len[q]);
		dev_cache *caches[3] = { &cg, &cb, &c1 };
		for (int i = 0; i < 3; i++)
			prefill(md, caches[i], d_table + q * NBS, d_ctx, ctx_len[q], d_l1, s);
		CUDA_OK(cudaStreamSynchronize(s));
		cudaFree(d_ctx);
	}
	caches_same(name, &cg, &cb);
	caches_same(name, &cg, &c1);

	/* Each step's n_past and tokens, pinned so that the copies are
	 * asynchronous like a real decode loop's. */
	int32_t *h_np, *h_tok;
	CUDA_OK(cudaMallocHost((void **)&h_np, STEPS * 2 * 4));
	CUDA_OK(cudaMallocHost((void **)&h_tok, STEPS * 2 * 4));
	for (uint32_t i = 0; i < STEPS; i++)
		for (int q = 0; q < 2; q++) {
			h_np[i * 2 + q] = (int32_t)(ctx_len[q] + i);
			h_tok[i * 2 + q] = seqs[q][ctx_len[q] + i];
		}
	const int32_t starts[3] = { 0, 1, 2 };
	int32_t *d_starts = upload(starts, 3), *d_np_g = upload(h_np, 2), *d_tok_g = upload(h_tok, 2);
	int32_t *d_np_b = upload(h_np, 2), *d_tok_b = upload(h_tok, 2);
	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	o.cache = &cg.kl;
	o.block_table = d_table;
	o.block_table_len = NBS;
	o.block_table_stride = NBS;
	o.n_seqs = 2;
	o.seq_starts = d_starts;
	o.seq_n_past = d_np_g;
	o.max_context = NBS * BS;
	o.stream = s;
	cudaGraphExec_t exec = capture("decode, 2 sequences", d_lg, md, d_tok_g, 2, &o);
	if (exec) {
		infs_device_forward_options ob = o, o1 = INFS_DEVICE_FORWARD_OPTIONS_INIT;
		ob.cache = &cb.kl;
		ob.seq_n_past = d_np_b;
		o1.cache = &c1.kl;
		o1.block_table_len = NBS;
		o1.stream = s;
		const float bound = bf16_bound(g->n_layers, 0); /* times 1 + the logits' scale below */
		float *prev = NULL, worst = 0;
		for (uint32_t i = 0; i < STEPS; i++) {
			CUDA_OK(cudaMemcpyAsync(d_np_g, h_np + i * 2, 2 * 4, cudaMemcpyHostToDevice, s));
			CUDA_OK(cudaMemcpyAsync(d_tok_g, h_tok + i * 2, 2 * 4, cudaMemcpyHostToDevice, s));
			CUDA_OK(cudaGraphLaunch(exec, s));
			CUDA_OK(cudaMemcpyAsync(d_np_b, h_np + i * 2, 2 * 4, cudaMemcpyHostToDevice, s));
			CUDA_OK(cudaMemcpyAsync(d_tok_b, h_tok + i * 2, 2 * 4, cudaMemcpyHostToDevice, s));
			CHECK_OK(infs_model_forward_device(d_lb, md, d_tok_b, NULL, 2, &ob));
			for (int q = 0; q < 2; q++) {
				o1.block_table = d_table + q * NBS;
				o1.n_past = (uint32_t)h_np[i * 2 + q];
				CHECK_OK(infs_model_forward_device(d_l1 + (size_t)q * V, md, d_tok_b + q, NULL, 1, &o1));
			}
			float *got = fetch(d_lg, 2 * (size_t)V, s), *batch = fetch(d_lb, 2 * (size_t)V, s);
			float *one = fetch(d_l1, 2 * (size_t)V, s);
			char what[64];
			snprintf(what, sizeof what, "decode step %u", i);
			CHECK(all_finite(got, 2 * (size_t)V));
			CHECK(same_bits(what, got, batch, 2 * (size_t)V));
			for (int q = 0; q < 2; q++) {
				const float *gq = got + (size_t)q * V, *oq = one + (size_t)q * V;
				const float d = max_diff(gq, oq, V), b = bound * (1 + max_abs(oq, V));
				if (!(d <= b))
					fprintf(stderr, "%s sequence %d: max |diff| %g from one eager call per sequence, "
					                "bound %g\n",
					        what, q, d, b);
				CHECK(d <= b);
				worst = !(d <= worst) ? d : worst;
			}
			if (prev)
				CHECK(memcmp(prev, got, 2 * (size_t)V * 4) != 0);
			free(prev);
			prev = got;
			free(batch);
			free(one);
		}
		printf("  decode: %d replays bitwise equal to eager batch calls; against one call per sequence max "
		       "|diff| %.3g\n",
		       STEPS, worst);
		free(prev);
		CUDA_OK(cudaGraphExecDestroy(exec));
	}
	CUDA_OK(cudaFreeHost(h_np));
	CUDA_OK(cudaFreeHost(h_tok));
	int32_t *bufs[] = { d_starts, d_np_g, d_tok_g, d_np_b, d_tok_b };
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		cudaFree(bufs[i]);
	cudaFree(cg.mem);
	cudaFree(cb.mem);
	cudaFree(c1.mem);
	cudaFree(d_lg);
	cudaFree(d_lb);
	cudaFree(d_l1);
}

static void check_model(const char *path, const char *name, int nth)
{
	printf("%s\n", name);
	infs_model *md = NULL;
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.device = 0;
	mo.device_max_tokens = MAX_T;
	CHECK_OK(infs_model_load(&md, path, &mo));
	if (!md)
		return;
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, md));
	infs_geometry g;
	CHECK_OK(infs_model_geometry(&g, md, INFS_DTYPE_F32));
	const uint32_t V = info.n_vocab;
	int32_t a[P + Q + STEPS], b[P + Q + STEPS];
	for (uint32_t i = 0; i < P + Q + STEPS; i++) {
		a[i] = (int32_t)((i * 37 + 11) % V);
		b[i] = (int32_t)((i * 53 + 7) % V);
	}
	cudaStream_t s;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	int32_t *d_table = upload(table, NB);
	check_question(name, md, &g, a, d_table, V, s);
	const int32_t *seqs[2] = { a, b };
	check_decode(name, md, &g, seqs, d_table, V, s);
	CUDA_OK(cudaDeviceSynchronize());
	cudaFree(d_table);
	CUDA_OK(cudaStreamDestroy(s));
	infs_model_free(md);
}

int main(int argc, char **argv)
{
	gpu_require();
	CHECK(argc >= 3);
	gpu_each_model(argc, argv, "graphs are", check_model);
	CHECK_DONE();
}

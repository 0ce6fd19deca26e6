/* infs_inject_device (fact ids, their count and the block table in device
 * memory) against infs_inject_into_blocks of the same ids: the same bytes
 * in the whole cache, for f16 and bf16 stores into bf16 caches in vLLM's
 * and FlashInfer's NHD layouts, ids read as uint64_t arrays (stride 8) and
 * straight from infs_hit arrays (stride 16), and next_pos right. Every
 * refusal on the device (a deleted, unknown, foreign or segment id, an
 * empty namespace, too many ids or tokens, a block id out of range, a
 * position past the block table) sets its status and leaves the cache and
 * next_pos as they were; the host-side checks return their codes. And a
 * call captured in a CUDA graph (cudaStreamCaptureModeGlobal, where a call
 * that allocates or waits fails) replays on new ids written to the same
 * device buffers. */
#include <string.h>

#include "../scratch_util.h"
#include "gpu.h"

enum { LAYERS = 4, HEADS = 2, DIM = 64, EMB = 16, BS = 16, BLOCKS = 64, N_FACTS = 40, MAX_IDS = 16,
       MAX_TOKENS = 256, CAP = 64 };

static uint64_t rng = 2024;

/* A bf16 paged cache on device 0: vLLM's (2, blocks, BS, heads, dim) per
 * layer, or FlashInfer's NHD (blocks, 2, BS, heads, dim). */
typedef struct cache {
	infs_kv_layout l;
	void *k[LAYERS], *v[LAYERS];
	char *mem;
	size_t bytes;
} cache;

static void cache_make(cache *c, int nhd)
{
	const size_t row = HEADS * DIM, half = (size_t)BLOCKS * BS * row, layer = 2 * half;
	c->bytes = LAYERS * layer * 2;
	CUDA_OK(cudaMalloc((void **)&c->mem, c->bytes));
	for (int i = 0; i < LAYERS; i++) {
		c->k[i] = c->mem + i * layer * 2;
		c->v[i] = c->mem + (i * layer + (nhd ? BS * row : half)) * 2;
	}
	infs_kv_layout l = INFS_KV_LAYOUT_INIT;
	l.device = 0, l.dtype = INFS_DTYPE_BF16, l.n_layers = LAYERS, l.n_kv_heads = HEADS, l.head_dim = DIM;
	l.n_blocks = BLOCKS, l.block_size = BS, l.k_layers = c->k, l.v_layers = c->v;
	l.stride_block = (int64_t)(nhd ? 2 : 1) * BS * row, l.stride_slot = row, l.stride_head = DIM;
	l.stride_dim = 1;
	c->l = l;
}

/* What one run shares: the store, cache a (infs_inject_device) and cache b
 * (infs_inject_into_blocks), their starting bytes, the device buffers of
 * the calls' arguments. */
typedef struct ctx {
	infs_store *st;
	cache a, b;
	unsigned char *fill, *got_a, *got_b;
	int32_t table[BLOCKS], *d_table;
	void *d_ids;
	uint32_t *d_n, *d_next;
	int32_t *d_status;
	cudaStream_t stream;
	infs_injector *inj;
} ctx;

/* Host to device in x's stream order, complete on return: the stream does
 * not wait for the legacy default stream. */
static void h2d(ctx *x, void *dst, const void *src, size_t n)
{
	CUDA_OK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, x->stream));
	CUDA_OK(cudaStreamSynchronize(x->stream));
}

static void reset(ctx *x)
{
	h2d(x, x->a.mem, x->fill, x->a.bytes);
	h2d(x, x->b.mem, x->fill, x->b.bytes);
}

/* ids[0..n_array) to the device as uint64_t (stride 8) or infs_hit
 * (stride 16, with scores), and n_count as their count. */
static void upload(ctx *x, const uint64_t *ids, uint32_t n_array, uint32_t n_count, size_t stride)
{
	unsigned char buf[CAP * sizeof(infs_hit)];
	CHECK(n_array <= CAP);
	memset(buf, 0xee, sizeof buf);
	for (uint32_t i = 0; i < n_array; i++) {
		if (stride == sizeof(infs_hit)) {
			infs_hit h = { ids[i], rng_float(&rng) };
			memcpy(buf + i * stride, &h, sizeof h);
		} else {
			memcpy(buf + i * stride, &ids[i], 8);
		}
	}
	h2d(x, x->d_ids, buf, sizeof buf);
	h2d(x, x->d_n, &n_count, 4);
}

/* Reads status and next_pos after the queued work, and cache a. */
static void finish(ctx *x, int32_t *status, uint32_t *next)
{
	CUDA_OK(cudaStreamSynchronize(x->stream));
	CUDA_OK(cudaMemcpy(status, x->d_status, 4, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(next, x->d_next, 4, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(x->got_a, x->a.mem, x->a.bytes, cudaMemcpyDeviceToHost));
}

/* One infs_inject_device call on x's buffers; status and next_pos preset
 * to values no call writes here. */
static void call(ctx *x, const char *ns, size_t stride, uint32_t start, size_t table_len, int32_t *status,
                 uint32_t *next)
{
	CUDA_OK(cudaMemsetAsync(x->d_status, 0x7f, 4, x->stream));
	CUDA_OK(cudaMemsetAsync(x->d_next, 0x7f, 4, x->stream));
	CHECK_OK(infs_inject_device(x->inj, ns, x->d_ids, stride, x->d_n, start, x->d_table, table_len, x->d_next,
	                            x->d_status, x->stream));
	finish(x, status, next);
}

/* Cache a, written by the device call, must equal cache b after
 * infs_inject_into_blocks of ids[0..n) in ns, byte for byte, next_pos
 * must be its, and the call must have written something. */
static void expect_same(ctx *x, const char *ns, const uint64_t *ids, uint32_t n, uint32_t start, int32_t status,
                        uint32_t next, const char *what)
{
	uint32_t next_h = 0;
	CHECK_OK(infs_inject_into_blocks(&next_h, x->st, ns, ids, n, start, x->table, BLOCKS, &x->b.l, NULL));
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(x->got_b, x->b.mem, x->b.bytes, cudaMemcpyDeviceToHost));
	CHECK(status == INFS_OK);
	CHECK(next == next_h);
	size_t diff = 0;
	for (size_t i = 0; i < x->a.bytes; i++)
		diff += x->got_a[i] != x->got_b[i];
	if (diff)
		fprintf(stderr, "%s: %zu bytes of the cache differ from infs_inject_into_blocks\n", what, diff);
	CHECK(diff == 0);
	CHECK(memcmp(x->got_a, x->fill, x->a.bytes) != 0);
}

/* A refused call: its status, next_pos = start, cache a untouched. */
static void expect_refused(ctx *x, const char *ns, size_t stride, uint32_t start, size_t table_len, int32_t code,
                           const char *what)
{
	int32_t status;
	uint32_t next;
	call(x, ns, stride, start, table_len, &status, &next);
	if (status != code)
		fprintf(stderr, "%s: status %d, expected %d\n", what, status, code);
	CHECK(status == code);
	CHECK(next == start);
	CHECK(memcmp(x->got_a, x->fill, x->a.bytes) == 0);
}

static uint64_t put(infs_store *st, const char *ns, infs_dtype dt, uint32_t n_tokens, int segment)
{
	const size_t n = (size_t)LAYERS * n_tokens * HEADS * DIM, es = infs_dtype_size(dt);
	char *k = malloc(n * es), *v = malloc(n * es);
	int32_t *tokens = calloc(n_tokens, sizeof *tokens);
	float emb[EMB];
	for (size_t i = 0; i < n; i++) {
		infs__store(k, dt, i, rng_float(&rng) * 3.0f);
		infs__store(v, dt, i, rng_float(&rng) * 3.0f);
	}
	for (int i = 0; i < EMB; i++)
		emb[i] = rng_float(&rng);
	infs_fact f = INFS_FACT_INIT;
	f.flags = segment ? INFS_FACT_SEGMENT : 0;
	f.n_tokens = n_tokens, f.tokens = tokens, f.embedding = segment ? NULL : emb, f.k = k, f.v = v;
	uint64_t id = 0;
	CHECK_OK(infs_fact_put(&id, st, ns, &f));
	free(k), free(v), free(tokens);
	return id;
}

/* n distinct facts of ids in random order. */
static void pick(uint64_t *out, const uint64_t *ids, uint32_t n_ids, uint32_t n)
{
	uint64_t *p = malloc(n_ids * sizeof *p);
	memcpy(p, ids, n_ids * sizeof *p);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = i + (uint32_t)(rng_next(&rng) % (n_ids - i));
		uint64_t t = p[i];
		p[i] = p[j];
		p[j] = t;
		out[i] = p[i];
	}
	free(p);
}

/* Captures one call on x's buffers in a graph, then replays it for each of
 * three sets of ids written to those buffers, each against the host path. */
static void graph_case(ctx *x, const uint64_t *facts)
{
	uint64_t gen0 = 0, gen1 = 1;
	CHECK_OK(infs_namespace_generation(&gen0, x->st, "u"));
	const uint32_t start = 21;
	uint64_t ids[MAX_IDS];
	pick(ids, facts, N_FACTS, 5);
	upload(x, ids, 5, 5, 8);
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CUDA_OK(cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeGlobal));
	int rc = infs_inject_device(x->inj, "u", x->d_ids, 8, x->d_n, start, x->d_table, BLOCKS, x->d_next, x->d_status,
	                            x->stream);
	cudaError_t end = cudaStreamEndCapture(x->stream, &graph);
	if (rc != INFS_OK || end != cudaSuccess) {
		fprintf(stderr, "capture failed: infs_inject_device: %s; cudaStreamEndCapture: %s\n",
		        rc ? infs_error_last() : "ok", cudaGetErrorString(end));
		check_failures++;
		return;
	}
	CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
	for (int round = 0; round < 3; round++) {
		const uint32_t n = 2 + 3 * (uint32_t)round;
		reset(x);
		pick(ids, facts, N_FACTS, n);
		upload(x, ids, n, n, 8);
		CUDA_OK(cudaMemsetAsync(x->d_status, 0x7f, 4, x->stream));
		CUDA_OK(cudaGraphLaunch(exec, x->stream));
		int32_t status;
		uint32_t next;
		finish(x, &status, &next);
		expect_same(x, "u", ids, n, start, status, next, "graph replay");
	}
	CHECK_OK(infs_namespace_generation(&gen1, x->st, "u"));
	CHECK(gen0 == gen1);
	CUDA_OK(cudaGraphExecDestroy(exec));
	CUDA_OK(cudaGraphDestroy(graph));
}

static void run(infs_dtype dt, int nhd, const char *file)
{
	char path[700];
	scratch_path(path, sizeof path, file);
	infs_geometry g = test_geometry(LAYERS, HEADS, DIM, dt);
	g.rope_theta = 500000.0, g.rope_scaling = INFS_ROPE_SCALING_LLAMA3, g.rope_factor = 8.0;
	g.embed_dim = EMB;
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE, so.geometry = &g, so.identity = "gpu-test", so.sync = INFS_SYNC_OFF;
	so.device = 0;
	ctx x;
	memset(&x, 0, sizeof x);
	CHECK_OK(infs_store_open(&x.st, path, &so));
	if (!x.st)
		return;

	/* u: facts of 1 to 24 tokens and a segment; v: one fact */
	uint64_t facts[N_FACTS];
	uint32_t ntok[N_FACTS];
	for (int i = 0; i < N_FACTS; i++) {
		ntok[i] = 1 + (uint32_t)(rng_next(&rng) % 24);
		facts[i] = put(x.st, "u", dt, ntok[i], 0);
	}
	const uint64_t segment = put(x.st, "u", dt, 5, 1), foreign = put(x.st, "v", dt, 3, 0);

	cache_make(&x.a, nhd);
	cache_make(&x.b, nhd);
	x.fill = malloc(x.a.bytes), x.got_a = malloc(x.a.bytes), x.got_b = malloc(x.a.bytes);
	for (size_t i = 0; i < x.a.bytes; i++)
		x.fill[i] = (unsigned char)(rng_next(&rng) >> 56);
	for (int i = 0; i < BLOCKS; i++)
		x.table[i] = (i * 37 + 11) % BLOCKS; /* scattered, distinct */
	CUDA_OK(cudaMalloc((void **)&x.d_table, sizeof x.table));
	CUDA_OK(cudaMalloc(&x.d_ids, CAP * sizeof(infs_hit)));
	CUDA_OK(cudaMalloc((void **)&x.d_n, 4));
	CUDA_OK(cudaMalloc((void **)&x.d_next, 4));
	CUDA_OK(cudaMalloc((void **)&x.d_status, 4));
	CUDA_OK(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking));
	h2d(&x, x.d_table, x.table, sizeof x.table);
	infs_injector_options io = INFS_INJECTOR_OPTIONS_INIT;
	io.max_ids = MAX_IDS, io.max_tokens = MAX_TOKENS;
	CHECK_OK(infs_injector_create(&x.inj, x.st, &x.a.l, &io));
	if (!x.inj)
		return;

	/* the same bytes as the host path: stride 8 and 16, counts below the
	 * array's length, one id, max_ids ids */
	int32_t status;
	uint32_t next;
	uint64_t ids[CAP];
	const uint32_t sizes[][3] = { { 7, 7, 8 }, { 7, 7, 16 }, { 12, 6, 16 }, { 9, 4, 8 }, { 1, 1, 8 },
		                      { MAX_IDS, MAX_IDS, 16 } };
	for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
		const uint32_t start = (uint32_t)(rng_next(&rng) % 200);
		reset(&x);
		pick(ids, facts, N_FACTS, sizes[c][0]);
		upload(&x, ids, sizes[c][0], sizes[c][1], sizes[c][2]);
		call(&x, "u", sizes[c][2], start, BLOCKS, &status, &next);
		expect_same(&x, "u", ids, sizes[c][1], start, status, next, "ids from device memory");
	}
	/* no ids: nothing written, next_pos = start_pos */
	reset(&x);
	upload(&x, ids, 3, 0, 8);
	call(&x, "u", 8, 40, BLOCKS, &status, &next);
	CHECK(status == INFS_OK && next == 40);
	CHECK(memcmp(x.got_a, x.fill, x.a.bytes) == 0);

	/* refusals on the device, the cache untouched */
	reset(&x);
	pick(ids, facts, N_FACTS, 4);
	ids[4] = 999999;
	upload(&x, ids, 5, 5, 8);
	expect_refused(&x, "u", 8, 0, BLOCKS, INFS_ENOTFOUND, "unknown id");
	ids[4] = segment;
	upload(&x, ids, 5, 5, 16);
	expect_refused(&x, "u", 16, 0, BLOCKS, INFS_ENOTFOUND, "segment id");
	ids[4] = foreign;
	upload(&x, ids, 5, 5, 8);
	expect_refused(&x, "u", 8, 0, BLOCKS, INFS_ENOTFOUND, "id of another namespace");
	upload(&x, ids, 5, 5, 8);
	expect_refused(&x, "nobody", 8, 0, BLOCKS, INFS_ENOTFOUND, "namespace without facts");
	upload(&x, ids, 5, 0, 8);
	call(&x, "nobody", 8, 9, BLOCKS, &status, &next);
	CHECK(status == INFS_OK && next == 9);
	CHECK(memcmp(x.got_a, x.fill, x.a.bytes) == 0);
	pick(ids, facts, N_FACTS, MAX_IDS + 1);
	upload(&x, ids, MAX_IDS + 1, MAX_IDS + 1, 8);
	expect_refused(&x, "u", 8, 0, BLOCKS, INFS_ERANGE, "more than max_ids ids");

	/* max_tokens: facts that fill it exactly pass, one more fact is refused */
	infs_injector *wide = x.inj, *narrow = NULL;
	uint32_t ntok_sum = ntok[0] + ntok[1] + ntok[2];
	io.max_tokens = ntok_sum;
	CHECK_OK(infs_injector_create(&narrow, x.st, &x.a.l, &io));
	if (narrow) {
		x.inj = narrow;
		reset(&x);
		upload(&x, facts, 3, 3, 8);
		call(&x, "u", 8, 3, BLOCKS, &status, &next);
		expect_same(&x, "u", facts, 3, 3, status, next, "exactly max_tokens tokens");
		CHECK(next == 3 + ntok_sum);
		reset(&x);
		upload(&x, facts, 4, 4, 16);
		expect_refused(&x, "u", 16, 3, BLOCKS, INFS_ERANGE, "more than max_tokens tokens");
		infs_injector_free(narrow);
		x.inj = wide;
	}

	/* the block table: an id out of range where it is used, and positions
	 * past its end, refused; an id out of range where it is not used is
	 * not looked at */
	upload(&x, facts, 3, 3, 8);
	int32_t bad[BLOCKS];
	const int32_t bad_ids[2] = { BLOCKS, -1 };
	for (int i = 0; i < 2; i++) {
		memcpy(bad, x.table, sizeof bad);
		bad[2] = bad_ids[i]; /* from position 2 * BS - 1, the second token's */
		h2d(&x, x.d_table, bad, sizeof bad);
		expect_refused(&x, "u", 8, 2 * BS - 1, BLOCKS, INFS_ERANGE, "block id out of range");
	}
	memcpy(bad, x.table, sizeof bad);
	bad[BLOCKS - 1] = -7;
	h2d(&x, x.d_table, bad, sizeof bad);
	call(&x, "u", 8, 0, BLOCKS, &status, &next);
	CHECK(status == INFS_OK && next == ntok_sum);
	h2d(&x, x.d_table, x.table, sizeof x.table);
	reset(&x);
	/* from position 2 * BS - 1, 3 tokens or more need 3 entries */
	expect_refused(&x, "u", 8, 2 * BS - 1, 2, INFS_ERANGE, "positions past the block table");
	expect_refused(&x, "u", 8, 5 * BS, 3, INFS_ERANGE, "start_pos past the block table");

	graph_case(&x, facts);

	/* host-side checks */
	infs_kv_layout l = x.a.l;
	l.device = -1;
	infs_injector *none = NULL;
	CHECK_ERR(infs_injector_create(&none, x.st, &l, NULL), INFS_EINVAL);
	l.device = 1; /* not the device copy's */
	CHECK_ERR(infs_injector_create(&none, x.st, &l, NULL), INFS_EMISMATCH);
	CHECK(none == NULL);
	CHECK_ERR(infs_inject_device(x.inj, "u", x.d_ids, 4, x.d_n, 0, x.d_table, BLOCKS, NULL, NULL, x.stream),
	          INFS_EINVAL);
	CHECK_ERR(infs_inject_device(x.inj, "u", x.d_ids, 12, x.d_n, 0, x.d_table, BLOCKS, NULL, NULL, x.stream),
	          INFS_EINVAL);
	CHECK_ERR(infs_inject_device(x.inj, "u", NULL, 8, x.d_n, 0, x.d_table, BLOCKS, NULL, NULL, x.stream),
	          INFS_EINVAL);
	CHECK_ERR(infs_inject_device(x.inj, "u", x.d_ids, 8, NULL, 0, x.d_table, BLOCKS, NULL, NULL, x.stream),
	          INFS_EINVAL);
	CHECK_ERR(infs_inject_device(x.inj, "u", x.d_ids, 8, x.d_n, 0, NULL, BLOCKS, NULL, NULL, x.stream),
	          INFS_EINVAL);
	CHECK_ERR(infs_inject_device(x.inj, "u", x.d_ids, 8, x.d_n, 0, x.d_table, 0, NULL, NULL, x.stream),
	          INFS_EINVAL);
	CHECK_ERR(infs_inject_device(x.inj, "u", (char *)x.d_ids + 4, 8, x.d_n, 0, x.d_table, BLOCKS, NULL, NULL,
	                             x.stream),
	          INFS_EINVAL);
	CHECK_ERR(infs_inject_device(x.inj, "u", x.d_ids, 8, x.d_n, 0, x.d_table, BLOCKS, NULL,
	                             (int32_t *)((char *)x.d_status + 2), x.stream),
	          INFS_EINVAL);
	CHECK_ERR(infs_inject_device(x.inj, "", x.d_ids, 8, x.d_n, 0, x.d_table, BLOCKS, NULL, NULL, x.stream),
	          INFS_EINVAL);
	CHECK_ERR(infs_inject_device(x.inj, "u", x.d_ids, 8, x.d_n, UINT32_MAX - MAX_TOKENS + 1, x.d_table, BLOCKS,
	                             NULL, NULL, x.stream),
	          INFS_ERANGE);
	/* the last start_pos that max_tokens allows; status and next_pos may be NULL */
	CHECK_OK(infs_inject_device(x.inj, "u", x.d_ids, 8, x.d_n, UINT32_MAX - MAX_TOKENS, x.d_table, BLOCKS, NULL,
	                            NULL, x.stream));
	CUDA_OK(cudaStreamSynchronize(x.stream));

	/* a deleted fact is refused; the others still inject */
	CHECK_OK(infs_fact_delete(x.st, "u", facts[1]));
	reset(&x);
	upload(&x, facts, 3, 3, 8);
	expect_refused(&x, "u", 8, 0, BLOCKS, INFS_ENOTFOUND, "deleted id");
	const uint64_t rest[2] = { facts[2], facts[0] };
	upload(&x, rest, 2, 2, 16);
	call(&x, "u", 16, 7, BLOCKS, &status, &next);
	expect_same(&x, "u", rest, 2, 7, status, next, "after a delete");

	infs_injector_free(x.inj);
	cudaFree(x.a.mem), cudaFree(x.b.mem), cudaFree(x.d_table), cudaFree(x.d_ids);
	cudaFree(x.d_n), cudaFree(x.d_next), cudaFree(x.d_status);
	CUDA_OK(cudaStreamDestroy(x.stream));
	free(x.fill), free(x.got_a), free(x.got_b);
	infs_store_close(x.st);
}

int main(void)
{
	gpu_require();
	scratch_init("gpu-inject-ids");
	run(INFS_DTYPE_BF16, 0, "bf16-vllm.infs");
	run(INFS_DTYPE_F16, 1, "f16-nhd.infs");
	run(INFS_DTYPE_BF16, 1, "bf16-nhd.infs");
	run(INFS_DTYPE_F16, 0, "f16-vllm.infs");
	scratch_cleanup();
	printf("infs_inject_device equal to infs_inject_into_blocks in 4 store and layout pairs, refusals and graph "
	       "replays checked\n");
	CHECK_DONE();
}

/* A serving stack's step with no host in it: infs_retrieve_device writes
 * the hits of a query held in device memory, infs_inject_device injects
 * them straight from those hits, both captured into one CUDA graph. The
 * graph is replayed with new queries written into the same buffer; each
 * replay's hits equal exact search on the CPU and its cache equals
 * infs_inject_into_blocks of those ids into a second cache, byte for byte,
 * with next_pos and status right. */
#include <string.h>

#include "../scratch_util.h"
#include "gpu.h"

enum { LAYERS = 3, HEADS = 2, DIM = 64, EMB = 128, BS = 16, BLOCKS = 48, N_FACTS = 300, K = 8, START = 5 };

static uint64_t rng = 31;

typedef struct cache {
	infs_kv_layout l;
	void *k[LAYERS], *v[LAYERS];
	char *mem;
	size_t bytes;
} cache;

/* A bf16 cache in vLLM's layout: (2, blocks, BS, heads, dim) per layer. */
static void cache_make(cache *c)
{
	const size_t half = (size_t)BLOCKS * BS * HEADS * DIM;
	c->bytes = LAYERS * 2 * half * 2;
	CUDA_OK(cudaMalloc((void **)&c->mem, c->bytes));
	for (int i = 0; i < LAYERS; i++) {
		c->k[i] = c->mem + (size_t)i * 2 * half * 2;
		c->v[i] = (char *)c->k[i] + half * 2;
	}
	infs_kv_layout l = INFS_KV_LAYOUT_INIT;
	l.device = 0, l.dtype = INFS_DTYPE_BF16, l.n_layers = LAYERS, l.n_kv_heads = HEADS, l.head_dim = DIM;
	l.n_blocks = BLOCKS, l.block_size = BS, l.k_layers = c->k, l.v_layers = c->v;
	l.stride_block = (int64_t)BS * HEADS * DIM, l.stride_slot = HEADS * DIM, l.stride_head = DIM, l.stride_dim = 1;
	c->l = l;
}

static void random_unit(float *x, int n)
{
	double ss = 0;
	for (int j = 0; j < n; j++) {
		x[j] = rng_float(&rng);
		ss += (double)x[j] * x[j];
	}
	for (int j = 0; j < n; j++)
		x[j] = (float)(x[j] / sqrt(ss));
}

int main(void)
{
	gpu_require();
	char path[600];
	scratch_make("gpu-serving", path, sizeof path, "store.infs");
	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = LAYERS, g.n_kv_heads = HEADS, g.head_dim = DIM, g.rotary_dim = DIM, g.embed_dim = EMB;
	g.kv_dtype = INFS_DTYPE_F16;
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE, so.geometry = &g, so.identity = "gpu-test", so.sync = INFS_SYNC_OFF;
	so.device = 0;
	infs_store *st;
	CHECK_OK(infs_store_open(&st, path, &so));

	/* facts of 1 to 12 tokens with random f16 K and V */
	const size_t token_elems = (size_t)LAYERS * HEADS * DIM;
	uint16_t *kv = malloc(2 * 12 * token_elems * sizeof *kv);
	int32_t tokens[12] = {0};
	float emb[EMB];
	for (int f = 0; f < N_FACTS; f++) {
		const uint32_t n = 1 + (uint32_t)(rng_next(&rng) % 12);
		for (size_t i = 0; i < 2 * n * token_elems; i++)
			kv[i] = infs__f32_to_f16(rng_float(&rng));
		random_unit(emb, EMB);
		infs_fact fact = INFS_FACT_INIT;
		fact.n_tokens = n, fact.tokens = tokens, fact.embedding = emb, fact.k = kv, fact.v = kv + n * token_elems;
		uint64_t id;
		CHECK_OK(infs_fact_put(&id, st, "alice", &fact));
	}
	free(kv);

	cache a, b;
	cache_make(&a);
	cache_make(&b);
	int32_t table[BLOCKS];
	for (int i = 0; i < BLOCKS; i++) /* scattered physical blocks */
		table[i] = (i * 7 + 3) % BLOCKS;
	cudaStream_t stream;
	CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	float *dq;
	infs_hit *dhits;
	uint32_t *dcounts, *dnext;
	int32_t *dtable, *dstatus;
	CUDA_OK(cudaMalloc((void **)&dq, EMB * sizeof *dq));
	CUDA_OK(cudaMalloc((void **)&dhits, K * sizeof *dhits));
	CUDA_OK(cudaMalloc((void **)&dcounts, 4));
	CUDA_OK(cudaMalloc((void **)&dnext, 4));
	CUDA_OK(cudaMalloc((void **)&dstatus, 4));
	CUDA_OK(cudaMalloc((void **)&dtable, sizeof table));
	CUDA_OK(cudaMemcpy(dtable, table, sizeof table, cudaMemcpyHostToDevice));

	infs_searcher_options sopt = INFS_SEARCHER_OPTIONS_INIT;
	sopt.max_queries = 1, sopt.max_k = K;
	infs_searcher *searcher;
	CHECK_OK(infs_searcher_create(&searcher, st, &sopt));
	infs_injector_options iopt = INFS_INJECTOR_OPTIONS_INIT;
	iopt.max_ids = K, iopt.max_tokens = K * 12;
	infs_injector *inj;
	CHECK_OK(infs_injector_create(&inj, st, &a.l, &iopt));

	/* one step, captured: retrieve, then inject from the hits */
	float q[EMB];
	random_unit(q, EMB);
	CUDA_OK(cudaMemcpy(dq, q, sizeof q, cudaMemcpyHostToDevice));
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
	CHECK_OK(infs_retrieve_device(searcher, "alice", dq, 1, K, dhits, dcounts, stream));
	CHECK_OK(infs_inject_device(inj, "alice", dhits, sizeof(infs_hit), dcounts, START, dtable, BLOCKS, dnext, dstatus,
	                            stream));
	CUDA_OK(cudaStreamEndCapture(stream, &graph));
	CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

	unsigned char *got_a = malloc(a.bytes), *got_b = malloc(b.bytes);
	for (int rep = 0; rep < 4; rep++) {
		random_unit(q, EMB);
		CUDA_OK(cudaMemcpyAsync(dq, q, sizeof q, cudaMemcpyHostToDevice, stream));
		CUDA_OK(cudaMemsetAsync(a.mem, 0, a.bytes, stream));
		CUDA_OK(cudaMemsetAsync(b.mem, 0, b.bytes, stream));
		CUDA_OK(cudaMemsetAsync(dstatus, 0xff, 4, stream));
		CUDA_OK(cudaGraphLaunch(exec, stream));
		infs_hit hits[K];
		uint32_t count = 0, next = 0;
		int32_t status = -1;
		CUDA_OK(cudaMemcpyAsync(hits, dhits, sizeof hits, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaMemcpyAsync(&count, dcounts, 4, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaMemcpyAsync(&next, dnext, 4, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaMemcpyAsync(&status, dstatus, 4, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaStreamSynchronize(stream));

		/* the CPU path: exact search, then host-pointer injection of its ids */
		infs_hit want[K];
		size_t want_n = 0;
		infs_retrieve_options ro = INFS_RETRIEVE_OPTIONS_INIT;
		ro.backend = INFS_BACKEND_EXACT;
		CHECK_OK(infs_retrieve(want, &want_n, st, "alice", q, 1, K, &ro));
		CHECK(count == want_n && want_n == K);
		uint64_t ids[K];
		for (size_t i = 0; i < want_n && i < count; i++) {
			CHECK(hits[i].id == want[i].id && hits[i].score == want[i].score);
			ids[i] = want[i].id;
		}
		uint32_t want_next = 0;
		infs_inject_options io = INFS_INJECT_OPTIONS_INIT;
		io.stream = stream;
		CHECK_OK(infs_inject_into_blocks(&want_next, st, "alice", ids, want_n, START, table, BLOCKS, &b.l, &io));
		CUDA_OK(cudaMemcpyAsync(got_a, a.mem, a.bytes, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaMemcpyAsync(got_b, b.mem, b.bytes, cudaMemcpyDeviceToHost, stream));
		CUDA_OK(cudaStreamSynchronize(stream));
		CHECK(status == INFS_OK);
		CHECK(next == want_next && next > START);
		CHECK(memcmp(got_a, got_b, a.bytes) == 0);
	}

	CUDA_OK(cudaGraphExecDestroy(exec));
	CUDA_OK(cudaGraphDestroy(graph));
	infs_injector_free(inj);
	infs_searcher_free(searcher);
	cudaFree(dq), cudaFree(dhits), cudaFree(dcounts), cudaFree(dnext), cudaFree(dstatus), cudaFree(dtable);
	cudaFree(a.mem), cudaFree(b.mem);
	CUDA_OK(cudaStreamDestroy(stream));
	free(got_a), free(got_b);
	infs_store_close(st);
	scratch_cleanup();
	printf("retrieve + inject captured in one graph: 4 replays equal to the CPU path\n");
	CHECK_DONE();
}

/* Injection on the GPU: Llama-3-8B geometry (32 layers, 8 KV heads, head
 * dim 128, bf16), facts of 24 tokens, k = 10, 50, 200 facts per call into a
 * vLLM-layout cache (2, blocks, 16, heads, dim) per layer with the call's
 * blocks scattered over the cache. Reports the kernel's effective bandwidth
 * (bytes read + written) against cudaMemcpy device to device of the same
 * byte count. Each timed call injects other facts into other blocks than the
 * last, so the L2 cache holds none of its data. Then the same through the
 * public API, infs_inject_into_blocks on a store with a device copy: the
 * host-side checks, the table upload and the launch included.
 * Usage: bench_inject [out.json]
 * White-box: it times the CUDA kernels themselves (kernels.h), which only
 * the library's internals reach, so it links the internal core. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "inferscale/inferscale.h"

#include "bench_gpu.h"
#include "inject_kernels.h"
#include "util/rope.h"
#include "util/splitmix.h"

enum { LAYERS = 32, HEADS = 8, DIM = 128, TOKENS = 24, FACTS = 800, BLOCKS = 4096, BS = 16, SETS = 8 };

typedef struct call {
	infs_k_inject_params p[SETS];
	cudaStream_t stream;
	/* the API path */
	infs_store *store;
	uint64_t *ids;
	int k;
	int32_t *table[SETS];
	infs_kv_layout *layout;
} call;

static void api_run(void *arg, int rep)
{
	call *c = arg;
	uint32_t next;
	infs_inject_options o = INFS_INJECT_OPTIONS_INIT;
	o.stream = c->stream;
	int s = rep % SETS;
	if (infs_inject_into_blocks(&next, c->store, "user", c->ids + s * 7, (size_t)c->k, 37, c->table[s], BLOCKS,
	                            c->layout, &o)) {
		fprintf(stderr, "infs_inject_into_blocks: %s\n", infs_error_last());
		exit(1);
	}
}

static void inject_run(void *arg, int rep)
{
	call *c = arg;
	CUDA_OK(infs_k_inject(&c->p[rep % SETS], c->stream));
}

int main(int argc, char **argv)
{
	FILE *out = bench_out(argc, argv);
	cudaStream_t stream;
	CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = LAYERS, g.n_kv_heads = HEADS, g.head_dim = DIM, g.rotary_dim = DIM;
	g.rope_theta = 500000.0, g.rope_scaling = INFS_ROPE_SCALING_LLAMA3, g.rope_factor = 8.0;
	g.kv_dtype = INFS_DTYPE_BF16;
	infs__rope rope;
	infs__rope_init(&rope, &g);

	/* Facts: K then V, [layers][tokens][heads][dim] each, back to back. */
	const size_t fact_elems = 2ull * LAYERS * TOKENS * HEADS * DIM, half = fact_elems / 2;
	const size_t layer_elems = 2ull * BLOCKS * BS * HEADS * DIM;
	uint16_t *pool, *cache;
	CUDA_OK(cudaMalloc((void **)&pool, FACTS * fact_elems * 2));
	CUDA_OK(cudaMalloc((void **)&cache, LAYERS * layer_elems * 2));
	CUDA_OK(cudaMemset(pool, 0x3c, FACTS * fact_elems * 2));
	CUDA_OK(cudaMemset(cache, 0, LAYERS * layer_elems * 2));

	void *lk[LAYERS], *lv[LAYERS], **d_lk, **d_lv;
	for (int l = 0; l < LAYERS; l++) {
		lk[l] = cache + l * layer_elems;
		lv[l] = cache + l * layer_elems + layer_elems / 2;
	}
	CUDA_OK(cudaMalloc((void **)&d_lk, sizeof lk));
	CUDA_OK(cudaMalloc((void **)&d_lv, sizeof lv));
	CUDA_OK(cudaMemcpy(d_lk, lk, sizeof lk, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_lv, lv, sizeof lv, cudaMemcpyHostToDevice));
	float *d_freq;
	CUDA_OK(cudaMalloc((void **)&d_freq, rope.n_pairs * sizeof(float)));
	CUDA_OK(cudaMemcpy(d_freq, rope.inv_freq, rope.n_pairs * sizeof(float), cudaMemcpyHostToDevice));

	fprintf(out, "{\n  \"benchmark\": \"inject\",\n");
	print_device(out);
	fprintf(out, "  \"geometry\": {\"layers\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"dtype\": \"bf16\", "
	             "\"fact_tokens\": %d, \"layout\": \"vllm (2, blocks, %d, heads, dim) per layer\", "
	             "\"cache_blocks\": %d},\n  \"results\": [\n",
	        LAYERS, HEADS, DIM, TOKENS, BS, BLOCKS);
	const int ks[] = {10, 50, 200};
	uint64_t rng = 42;
	for (int ki = 0; ki < 3; ki++) {
		const int k = ks[ki];
		const uint32_t T = (uint32_t)k * TOKENS, start = 37; /* after a short system prompt */
		const uint32_t nblk = (start + T - 1) / BS - start / BS + 1;
		call c;
		c.stream = stream;
		for (int s = 0; s < SETS; s++) {
			const void *sk[200], *sv[200];
			uintptr_t bits = (uintptr_t)cache;
			uint32_t first[201];
			int32_t blocks[512];
			first[0] = 0;
			for (int f = 0; f < k; f++) {
				size_t id = (size_t)(s * 211 + f * 3) % FACTS;
				sk[f] = pool + id * fact_elems;
				sv[f] = pool + id * fact_elems + half;
				bits |= (uintptr_t)sk[f] | (uintptr_t)sv[f];
				first[f + 1] = first[f] + TOKENS;
			}
			for (uint32_t b = 0; b < nblk; b++) /* distinct random blocks */
				blocks[b] = (int32_t)((s * 509 + b * 13 + infs__splitmix64(&rng) % 13) % BLOCKS);
			void *d_sk, *d_sv, *d_first, *d_blocks;
			CUDA_OK(cudaMalloc(&d_sk, k * sizeof(void *)));
			CUDA_OK(cudaMalloc(&d_sv, k * sizeof(void *)));
			CUDA_OK(cudaMalloc(&d_first, (k + 1) * sizeof(uint32_t)));
			CUDA_OK(cudaMalloc(&d_blocks, nblk * sizeof(int32_t)));
			CUDA_OK(cudaMemcpy(d_sk, sk, k * sizeof(void *), cudaMemcpyHostToDevice));
			CUDA_OK(cudaMemcpy(d_sv, sv, k * sizeof(void *), cudaMemcpyHostToDevice));
			CUDA_OK(cudaMemcpy(d_first, first, (k + 1) * sizeof(uint32_t), cudaMemcpyHostToDevice));
			CUDA_OK(cudaMemcpy(d_blocks, blocks, nblk * sizeof(int32_t), cudaMemcpyHostToDevice));
			infs_k_inject_params p = {
				.src_k = d_sk, .src_v = d_sv, .fact_first = d_first, .n_facts = (uint32_t)k,
				.n_tokens = T, .start_pos = start, .block_size = BS, .blocks = d_blocks,
				.dst_k = (void *const *)d_lk, .dst_v = (void *const *)d_lv,
				.stride_block = BS * HEADS * DIM, .stride_slot = HEADS * DIM, .stride_head = DIM,
				.stride_dim = 1, .n_layers = LAYERS, .n_heads = HEADS, .head_dim = DIM,
				.rotary_dim = DIM, .style = 0, .attn_scale = rope.attn_scale, .inv_freq = d_freq,
				.src_dtype = INFS_DTYPE_BF16, .dst_dtype = INFS_DTYPE_BF16, .ptr_bits = bits | (uintptr_t)(layer_elems / 2 * 2),
			};
			c.p[s] = p;
		}
		const size_t bytes = (size_t)T * LAYERS * HEADS * DIM * 2 * 2; /* K and V, read once */
		float us = time_us(inject_run, &c, 5, 100, stream), copy_us;
		double bw = 2.0 * bytes / (us * 1e-6);
		double copy_bw = copy_bandwidth(bytes, stream, &copy_us);
		fprintf(out, "    {\"k\": %d, \"tokens\": %u, \"bytes_read\": %zu, \"bytes_written\": %zu, "
		             "\"path\": %d, \"inject_us\": %.2f, \"inject_gbps\": %.1f, \"memcpy_us\": %.2f, "
		             "\"memcpy_gbps\": %.1f, \"ratio_vs_memcpy\": %.3f}%s\n",
		        k, T, bytes, bytes, infs_k_inject_path(&c.p[0]), us, bw / 1e9, copy_us, copy_bw / 1e9,
		        bw / copy_bw, ki < 2 ? "," : "");
		fprintf(stderr, "inject k=%d: %.1f us, %.0f GB/s; memcpy %.1f us, %.0f GB/s; ratio %.2f\n", k, us,
		        bw / 1e9, copy_us, copy_bw / 1e9, bw / copy_bw);
	}
	fprintf(out, "  ],\n");

	/* The public API on a store with a device copy of API_FACTS facts. */
	enum { API_FACTS = 260 };
	char dir[] = "/tmp/infs-bench-XXXXXX", path[64];
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/store.infs", dir);
	g.embed_dim = 4;
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE, so.geometry = &g, so.identity = "bench", so.sync = INFS_SYNC_OFF, so.device = 0;
	infs_store *st;
	if (infs_store_open(&st, path, &so)) {
		fprintf(stderr, "infs_store_open: %s\n", infs_error_last());
		return 1;
	}
	const size_t half_bytes = fact_elems; /* K (or V) bytes of a fact: half the elements, 2 bytes each */
	uint16_t *hkv = malloc(half_bytes);
	memset(hkv, 0x3c, half_bytes);
	uint64_t ids[API_FACTS];
	int32_t tokens[TOKENS] = {0};
	float emb[4] = {1, 0, 0, 0};
	for (int i = 0; i < API_FACTS; i++) {
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = TOKENS, f.tokens = tokens, f.embedding = emb, f.k = hkv, f.v = hkv;
		if (infs_fact_put(&ids[i], st, "user", &f)) {
			fprintf(stderr, "infs_fact_put: %s\n", infs_error_last());
			return 1;
		}
	}
	free(hkv);
	infs_kv_layout layout = INFS_KV_LAYOUT_INIT;
	layout.device = 0, layout.dtype = INFS_DTYPE_BF16, layout.n_layers = LAYERS, layout.n_kv_heads = HEADS;
	layout.head_dim = DIM, layout.n_blocks = BLOCKS, layout.block_size = BS;
	layout.k_layers = lk, layout.v_layers = lv;
	layout.stride_block = BS * HEADS * DIM, layout.stride_slot = HEADS * DIM, layout.stride_head = DIM;
	layout.stride_dim = 1;
	call api;
	memset(&api, 0, sizeof api);
	api.stream = stream, api.store = st, api.ids = ids, api.layout = &layout;
	for (int s = 0; s < SETS; s++) {
		api.table[s] = malloc(BLOCKS * sizeof(int32_t));
		for (int b = 0; b < BLOCKS; b++)
			api.table[s][b] = (int32_t)((s * 509 + b * 13 + infs__splitmix64(&rng) % 13) % BLOCKS);
	}
	fprintf(out, "  \"api\": [\n");
	for (int ki = 0; ki < 3; ki++) {
		api.k = ks[ki];
		float us = time_us(api_run, &api, 5, 100, stream);
		const size_t bytes = (size_t)ks[ki] * TOKENS * LAYERS * HEADS * DIM * 2 * 2;
		fprintf(out, "    {\"k\": %d, \"inject_us\": %.2f, \"inject_gbps\": %.1f}%s\n", ks[ki], us,
		        2.0 * bytes / (us * 1e-6) / 1e9, ki < 2 ? "," : "");
		fprintf(stderr, "infs_inject_into_blocks k=%d: %.1f us\n", ks[ki], us);
	}
	fprintf(out, "  ]\n}\n");
	infs_store_close(st);
	unlink(path);
	rmdir(dir);
	if (out != stdout)
		fclose(out);
	return 0;
}

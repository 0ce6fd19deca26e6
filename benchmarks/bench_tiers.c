/* Injection from each tier of a store's fact KV (docs/cuda.md, "Tiers") at
 * Llama-3-8B geometry (32 layers, 8 KV heads of 128; facts of 24 tokens,
 * bf16 and fp8 e4m3), k = 50 facts per call into a bf16 vLLM-layout cache
 * through infs_inject_into_blocks: from the device tier, from pinned host
 * memory (the copy engine into scratch, then the kernel), from the same
 * pinned memory by device ids (infs_inject_device: the kernel reads it
 * through the mapping), and from the page-cached store file (staged
 * through pinned buffers). Each is timed against a copy of the same bytes
 * over the same path: device to device, pinned host to device, pageable
 * (the store file's own mapped pages) to device; the device tier also
 * against a copy that moves as many bytes as the injection reads and
 * writes (fp8 codes read, bf16 written: copy_moved_us). Times are wall clock
 * from the call to the end of its stream's work, medians of REPS calls on
 * rotating sets of facts. Each tier has a store of its own, whose budgets
 * keep its facts there (a move up finds no room). Then a capacity table:
 * a fact's bytes per dtype, facts per GB, users of 200 and 300 facts (a
 * LoCoMo conversation) per H200 once an 8B model's 16 GB of bf16 weights
 * are loaded. The TTFT with facts on the pinned tier comes from
 * bench_engine_gpu (its "host_tier" object); scripts/gpu-check.sh merges
 * both into tiers-h200.json.
 * Usage: bench_tiers [out.json]. White-box only in its helpers. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inferscale/inferscale.h"

#include "bench_common.h"
#include "bench_gpu.h"
#include "util/splitmix.h"

enum { LAYERS = 32, HEADS = 8, DIM = 128, TOKENS = 24, FACTS = 64, K = 50, BLOCKS = 1024, BS = 16, EMB = 8,
       WARMUP = 3, REPS = 20 };

typedef struct bench {
	infs_store *st;
	uint64_t ids[FACTS];
	infs_kv_layout layout;
	int32_t *table;
	cudaStream_t stream;
	/* infs_inject_device */
	infs_injector *inj;
	uint64_t *d_ids;
	uint32_t *d_n;
	int32_t *d_table, *d_status;
	/* the copy */
	void *dst;
	const void *src;
	size_t bytes;
	enum cudaMemcpyKind kind;
} bench;

static void run_api(bench *b, int rep)
{
	uint32_t next;
	infs_inject_options o = INFS_INJECT_OPTIONS_INIT;
	o.stream = b->stream;
	bench_ok(infs_inject_into_blocks(&next, b->st, "user", b->ids + rep % (FACTS - K + 1), K, 0, b->table, BLOCKS,
	                           &b->layout, &o),
	   "infs_inject_into_blocks");
}

static void run_ids(bench *b, int rep)
{
	bench_ok(infs_inject_device(b->inj, "user", b->d_ids + rep % (FACTS - K + 1), 8, b->d_n, 0, b->d_table, BLOCKS, NULL,
	                      b->d_status, b->stream),
	   "infs_inject_device");
}

static void run_copy(bench *b, int rep)
{
	(void)rep;
	CUDA_OK(cudaMemcpyAsync(b->dst, b->src, b->bytes, b->kind, b->stream));
}

/* The median wall time of run, each call until its stream is done. */
static double wall_us(void (*run)(bench *, int), bench *b)
{
	float t[REPS];
	for (int i = 0; i < WARMUP; i++)
		run(b, i);
	CUDA_OK(cudaStreamSynchronize(b->stream));
	for (int i = 0; i < REPS; i++) {
		double t0 = bench_now_us();
		run(b, i);
		CUDA_OK(cudaStreamSynchronize(b->stream));
		t[i] = (float)(bench_now_us() - t0);
	}
	return median(t, REPS);
}

/* A store of FACTS facts on device 0 with these budgets, prefetched and
 * settled; its tier checked against want. */
static infs_store *make_store(const char *path, infs_dtype dtype, uint64_t budget, uint64_t host_budget,
                              infs_tier want, uint64_t *ids)
{
	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = LAYERS, g.n_kv_heads = HEADS, g.head_dim = DIM, g.rotary_dim = DIM;
	g.rope_theta = 500000.0, g.rope_scaling = INFS_ROPE_SCALING_LLAMA3, g.rope_factor = 8.0;
	g.kv_dtype = dtype, g.embed_dim = EMB;
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE, so.geometry = &g, so.identity = "bench-tiers", so.sync = INFS_SYNC_OFF;
	so.device = 0, so.device_budget_bytes = budget, so.host_budget_bytes = host_budget;
	unlink(path);
	infs_store *st;
	bench_ok(infs_store_open(&st, path, &so), "infs_store_open");
	infs_geometry gf = g;
	gf.kv_dtype = INFS_DTYPE_F32;
	const size_t elems = (size_t)TOKENS * infs_geometry_kv_token_bytes(&gf) / 4;
	const size_t bytes = (size_t)TOKENS * infs_geometry_kv_token_bytes(&g);
	float *x = malloc(elems * 4);
	void *k = malloc(bytes), *v = malloc(bytes);
	uint64_t rng = 7;
	for (size_t i = 0; i < elems; i++)
		x[i] = (float)((int64_t)(infs__splitmix64(&rng) % 2001) - 1000) / 1000.0f;
	bench_ok(infs_kv_convert(k, dtype, x, INFS_DTYPE_F32, &g, TOKENS), "infs_kv_convert");
	bench_ok(infs_kv_convert(v, dtype, x, INFS_DTYPE_F32, &g, TOKENS), "infs_kv_convert");
	int32_t tok[TOKENS] = { 0 };
	float emb[EMB] = { 1 };
	for (int i = 0; i < FACTS; i++) {
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = TOKENS, f.tokens = tok, f.embedding = emb, f.k = k, f.v = v;
		bench_ok(infs_fact_put(&ids[i], st, "user", &f), "infs_fact_put");
	}
	free(x), free(k), free(v);
	bench_ok(infs_prefetch(st, "user"), "infs_prefetch");
	bench_ok(infs_tier_wait(st), "infs_tier_wait");
	infs_tier t;
	bench_ok(infs_namespace_tier(&t, st, "user"), "infs_namespace_tier");
	if (t != want) {
		fprintf(stderr, "the store's facts are in tier %d, not %d\n", (int)t, (int)want);
		exit(1);
	}
	return st;
}

int main(int argc, char **argv)
{
	FILE *out = bench_out(argc, argv);
	char dir[] = "/tmp/infs-bench-tiers-XXXXXX", path[64];
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/store.infs", dir);

	bench b;
	memset(&b, 0, sizeof b);
	CUDA_OK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
	/* the cache: bf16, vLLM layout (2, blocks, 16, heads, dim) per layer */
	const size_t layer_elems = 2ull * BLOCKS * BS * HEADS * DIM;
	uint16_t *cache;
	CUDA_OK(cudaMalloc((void **)&cache, LAYERS * layer_elems * 2));
	void *lk[LAYERS], *lv[LAYERS];
	for (int l = 0; l < LAYERS; l++) {
		lk[l] = cache + l * layer_elems;
		lv[l] = cache + l * layer_elems + layer_elems / 2;
	}
	infs_kv_layout *lay = &b.layout;
	*lay = (infs_kv_layout)INFS_KV_LAYOUT_INIT;
	lay->device = 0, lay->dtype = INFS_DTYPE_BF16, lay->n_layers = LAYERS, lay->n_kv_heads = HEADS;
	lay->head_dim = DIM, lay->n_blocks = BLOCKS, lay->block_size = BS, lay->k_layers = lk, lay->v_layers = lv;
	lay->stride_block = BS * HEADS * DIM, lay->stride_slot = HEADS * DIM, lay->stride_head = DIM, lay->stride_dim = 1;
	b.table = malloc(BLOCKS * sizeof *b.table);
	uint64_t rng = 3;
	for (int i = 0; i < BLOCKS; i++) /* a permutation: the call's blocks scattered */
		b.table[i] = i;
	for (int i = BLOCKS - 1; i > 0; i--) {
		int j = (int)(infs__splitmix64(&rng) % (uint64_t)(i + 1)), t = b.table[i];
		b.table[i] = b.table[j], b.table[j] = t;
	}
	CUDA_OK(cudaMalloc((void **)&b.d_table, BLOCKS * 4 + 4));
	b.d_status = b.d_table + BLOCKS;
	CUDA_OK(cudaMemcpy(b.d_table, b.table, BLOCKS * 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMalloc((void **)&b.d_ids, FACTS * 8));
	CUDA_OK(cudaMalloc((void **)&b.d_n, 4));
	const uint32_t k = K;
	CUDA_OK(cudaMemcpy(b.d_n, &k, 4, cudaMemcpyHostToDevice));

	fprintf(out, "{\n  \"benchmark\": \"tiers\",\n");
	print_device(out);
	fprintf(out, "  \"geometry\": {\"layers\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"fact_tokens\": %d, "
	             "\"cache\": \"bf16, vllm (2, blocks, %d, heads, dim) per layer\"},\n  \"rows\": [\n",
	        LAYERS, HEADS, DIM, TOKENS, BS);
	static const infs_dtype dtypes[2] = { INFS_DTYPE_BF16, INFS_DTYPE_FP8_E4M3 };
	static const char *const dnames[2] = { "bf16", "fp8" };
	size_t fact_bytes[2];
	int first = 1;
	for (int di = 0; di < 2; di++) {
		infs_geometry g = INFS_GEOMETRY_INIT;
		g.n_layers = LAYERS, g.n_kv_heads = HEADS, g.head_dim = DIM, g.kv_dtype = dtypes[di];
		fact_bytes[di] = 2 * (size_t)TOKENS * infs_geometry_kv_token_bytes(&g);
		const size_t bytes = (size_t)K * fact_bytes[di];
		/* what the injection writes into the bf16 cache, and a copy that
		 * moves as many bytes (read plus written) as it does */
		const size_t written = (size_t)K * 2 * TOKENS * LAYERS * HEADS * DIM * 2, moved = (bytes + written) / 2;
		const size_t alloc = moved > bytes ? moved : bytes;
		/* device: no budget; host: a device budget too small for a fact's
		 * KV (the rows fit), all in pinned memory; file: no pinned tier */
		for (int tier = 0; tier < 3; tier++) {
			const uint64_t budget = tier ? 1 << 20 : 0, host_budget = tier == 1 ? 2 * FACTS * fact_bytes[di] : 0;
			b.st = make_store(path, dtypes[di], budget, host_budget, (infs_tier)tier, b.ids);
			void *pinned = NULL, *dev = NULL;
			const void *mapped = NULL;
			size_t map_len = 0;
			CUDA_OK(cudaMalloc(&dev, alloc));
			b.dst = dev, b.bytes = bytes;
			if (tier == 0) {
				void *src;
				CUDA_OK(cudaMalloc(&src, alloc));
				CUDA_OK(cudaMemset(src, 1, alloc));
				b.src = src, b.kind = cudaMemcpyDeviceToDevice;
			} else if (tier == 1) {
				CUDA_OK(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
				memset(pinned, 1, bytes);
				b.src = pinned, b.kind = cudaMemcpyHostToDevice;
			} else { /* the store file's own pages, in the page cache since the puts */
				int fd = open(path, O_RDONLY);
				struct stat sb;
				if (fd < 0 || fstat(fd, &sb) || (size_t)sb.st_size < bytes)
					return 1;
				map_len = (size_t)sb.st_size;
				mapped = mmap(NULL, map_len, PROT_READ, MAP_SHARED, fd, 0);
				close(fd);
				if (mapped == MAP_FAILED)
					return 1;
				b.src = mapped, b.kind = cudaMemcpyHostToDevice;
			}
			const double copy_us = wall_us(run_copy, &b), inject_us = wall_us(run_api, &b);
			double moved_us = copy_us;
			if (tier == 0) {
				b.bytes = moved;
				moved_us = wall_us(run_copy, &b);
				b.bytes = bytes;
			}
			static const char *const tnames[3] = { "device", "host", "file" };
			fprintf(out, "%s    {\"tier\": \"%s\", \"dtype\": \"%s\", \"k\": %d, \"inject_us\": %.1f, "
			             "\"copy_us\": %.1f, \"bytes\": %zu",
			        first ? "" : ",\n", tnames[tier], dnames[di], K, inject_us, copy_us, bytes);
			if (tier == 0)
				fprintf(out, ", \"written_bytes\": %zu, \"copy_moved_us\": %.1f, \"inject_vs_copy_moved\": %.2f",
				        written, moved_us, inject_us / moved_us);
			fputc('}', out);
			first = 0;
			fprintf(stderr, "%s from the %s: inject %.1f us, copy %.1f us (%.2fx)\n", dnames[di], tnames[tier],
			        inject_us, copy_us, inject_us / copy_us);
			if (tier < 2) { /* device ids: the device tier, and pinned memory through the mapping */
				infs_injector_options io = INFS_INJECTOR_OPTIONS_INIT;
				io.max_ids = K, io.max_tokens = K * TOKENS;
				bench_ok(infs_injector_create(&b.inj, b.st, lay, &io), "infs_injector_create");
				CUDA_OK(cudaMemcpy(b.d_ids, b.ids, FACTS * 8, cudaMemcpyHostToDevice));
				const double ids_us = wall_us(run_ids, &b);
				int32_t status = 0;
				CUDA_OK(cudaMemcpy(&status, b.d_status, 4, cudaMemcpyDeviceToHost));
				if (status) {
					fprintf(stderr, "infs_inject_device: status %d\n", status);
					return 1;
				}
				fprintf(out, ",\n    {\"tier\": \"%s\", \"dtype\": \"%s\", \"k\": %d, \"inject_us\": %.1f, "
				             "\"copy_us\": %.1f, \"bytes\": %zu",
				        tier ? "host-mapped" : "device-ids", dnames[di], K, ids_us, copy_us, bytes);
				if (tier == 0)
					fprintf(out, ", \"written_bytes\": %zu, \"copy_moved_us\": %.1f, "
					             "\"inject_vs_copy_moved\": %.2f", written, moved_us, ids_us / moved_us);
				fputc('}', out);
				fprintf(stderr, "%s from the %s by device ids: %.1f us (%.2fx)\n", dnames[di], tnames[tier],
				        ids_us, ids_us / copy_us);
				infs_injector_free(b.inj);
				b.inj = NULL;
			}
			if (tier == 0)
				cudaFree((void *)b.src);
			cudaFreeHost(pinned);
			if (mapped)
				munmap((void *)mapped, map_len);
			cudaFree(dev);
			infs_store_close(b.st);
		}
	}
	/* capacity: what the device holds once the weights are loaded */
	struct cudaDeviceProp prop;
	CUDA_OK(cudaGetDeviceProperties(&prop, 0));
	const double weights = 16e9, free_bytes = (double)prop.totalGlobalMem - weights;
	fprintf(out, "\n  ],\n  \"capacity\": {\"device_bytes\": %zu, \"weights_bytes\": %.0f, \"rows\": [\n",
	        prop.totalGlobalMem, weights);
	for (int di = 0; di < 2; di++)
		fprintf(out, "    {\"dtype\": \"%s\", \"fact_bytes\": %zu, \"facts_per_gb\": %.0f, "
		             "\"users_200_facts\": %.0f, \"users_300_facts\": %.0f}%s\n",
		        dnames[di], fact_bytes[di], 1e9 / fact_bytes[di], free_bytes / (200.0 * fact_bytes[di]),
		        free_bytes / (300.0 * fact_bytes[di]), di ? "" : ",");
	fprintf(out, "  ]}\n}\n");
	cudaFree(cache);
	unlink(path);
	rmdir(dir);
	if (out != stdout)
		fclose(out);
	return 0;
}

/* The injection kernel against the CPU reference (libinferscale/util/rope.c and
 * dtype.h): every paged layout, every source and cache dtype, both RoPE
 * pairings, partial rotary, every frequency scaling, block sizes from 1 up,
 * positions near the int32 limit, the vector and the scalar path, and
 * several host threads injecting on their own streams at once.
 * V must match bit for bit, K within one unit in the last place (cos and
 * sin come from the GPU's double-precision libm), and no element outside
 * the injected slots may change. */
#include <pthread.h>
#include <string.h>

#include "gpu.h"
#include "inject_kernels.h"
#include "util/rope.h"

enum { L_VLLM, L_NHD, L_HND, L_PACKED, L_STRIDED, L_MISALIGNED, L_COUNT };
static const char *layout_name[L_COUNT] = {"vllm", "flashinfer-nhd", "hnd", "kv-packed", "dim-strided", "misaligned"};

typedef struct cfg {
	uint32_t n_layers, n_heads, head_dim, rotary_dim;
	infs_rope_style style;
	infs_rope_scaling scaling;
	infs_dtype src, dst;
	int layout;
	uint32_t block_size, start_pos, n_facts, max_fact_tokens;
	uint64_t seed;
} cfg;

typedef struct layout {
	size_t layer_elems; /* elements of one layer's buffer */
	size_t k_off, v_off;
	int64_t sb, ss, sh, sd;
} cache_layout;

static cache_layout make_layout(const cfg *c, uint32_t nb)
{
	cache_layout l;
	size_t bs = c->block_size, H = c->n_heads, D = c->head_dim;
	memset(&l, 0, sizeof l);
	switch (c->layout) {
	case L_VLLM: case L_MISALIGNED: /* (2, blocks, slots, heads, dim) */
		l.sb = bs * H * D, l.ss = H * D, l.sh = D, l.sd = 1;
		l.v_off = nb * bs * H * D;
		l.layer_elems = 2 * l.v_off;
		break;
	case L_NHD: /* (blocks, 2, slots, heads, dim) */
		l.sb = 2 * bs * H * D, l.ss = H * D, l.sh = D, l.sd = 1;
		l.v_off = bs * H * D;
		l.layer_elems = nb * l.sb;
		break;
	case L_HND: /* (blocks, 2, heads, slots, dim) */
		l.sb = 2 * bs * H * D, l.sh = bs * D, l.ss = D, l.sd = 1;
		l.v_off = H * bs * D;
		l.layer_elems = nb * l.sb;
		break;
	case L_PACKED: /* (blocks, slots, heads, 2 * dim) */
		l.sb = bs * H * 2 * D, l.ss = H * 2 * D, l.sh = 2 * D, l.sd = 1;
		l.v_off = D;
		l.layer_elems = nb * l.sb;
		break;
	case L_STRIDED: /* (blocks, slots, heads, dim, 2): K and V interleaved per element */
		l.sb = bs * H * D * 2, l.ss = H * D * 2, l.sh = D * 2, l.sd = 2;
		l.v_off = 1;
		l.layer_elems = nb * l.sb;
		break;
	}
	if (c->layout == L_MISALIGNED) {
		l.k_off = 1;
		l.v_off += 1;
		l.layer_elems += 1;
	}
	return l;
}

static infs_geometry make_geom(const cfg *c)
{
	infs_geometry g = test_geometry(c->n_layers, c->n_heads, c->head_dim, c->src);
	g.rotary_dim = c->rotary_dim;
	g.rope_style = c->style;
	g.rope_theta = 500000.0;
	g.rope_scaling = c->scaling;
	g.rope_factor = c->scaling == INFS_ROPE_SCALING_YARN ? 4.0 : 8.0;
	g.rope_original_max_pos = c->scaling == INFS_ROPE_SCALING_YARN ? 4096 : 8192;
	g.embed_dim = 0;
	return g;
}

/* Runs one injection on stream and compares with the CPU. Returns the
 * number of K elements that differ by one ulp (none may differ by more). */
static size_t run_case(const cfg *c, cudaStream_t stream, int *path)
{
	uint64_t rng = c->seed;
	const size_t L = c->n_layers, H = c->n_heads, D = c->head_dim;
	const size_t ssz = infs_dtype_size(c->src), dsz = infs_dtype_size(c->dst);
	infs_geometry g = make_geom(c);
	CHECK_OK(infs_geometry_validate(&g));
	infs__rope rope;
	infs__rope_init(&rope, &g);

	/* Facts, each aligned to 16 bytes in one source pool. */
	uint32_t nf = c->n_facts, first[65];
	size_t fact_off[64], pool_elems = 0;
	first[0] = 0;
	for (uint32_t f = 0; f < nf; f++) {
		uint32_t n = 1 + (uint32_t)(rng_next(&rng) % c->max_fact_tokens);
		first[f + 1] = first[f] + n;
		fact_off[f] = pool_elems;
		pool_elems += 2 * L * n * H * D;
		pool_elems = (pool_elems * ssz + 15) / 16 * 16 / ssz;
	}
	const uint32_t T = first[nf];
	char *pool = malloc(pool_elems * ssz);
	for (size_t i = 0; i < pool_elems; i++)
		infs__store(pool, c->src, i, rng_float(&rng) * 4.0f);

	/* A scattered block table covering the positions. */
	uint32_t bs = c->block_size, b0 = c->start_pos / bs, b1 = (c->start_pos + T - 1) / bs;
	uint32_t nblk = b1 - b0 + 1, nb = nblk * 2 + 3;
	int32_t *perm = malloc(nb * sizeof *perm), *blocks = malloc(nblk * sizeof *blocks);
	for (uint32_t i = 0; i < nb; i++)
		perm[i] = (int32_t)i;
	for (uint32_t i = nb - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(rng_next(&rng) % (i + 1));
		int32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	memcpy(blocks, perm, nblk * sizeof *blocks);

	cache_layout lo = make_layout(c, nb);
	size_t cache_elems = L * lo.layer_elems;
	char *ref = malloc(cache_elems * dsz), *got = malloc(cache_elems * dsz);
	unsigned char *kind = calloc(cache_elems, 1); /* 0 untouched, 1 K, 2 V */
	for (size_t i = 0; i < cache_elems; i++)
		infs__store(ref, c->dst, i, rng_float(&rng) * 100.0f);

	/* The CPU reference. */
	float cosv[INFS_ROPE_MAX_PAIRS], sinv[INFS_ROPE_MAX_PAIRS], *x = malloc(D * sizeof *x);
	for (uint32_t f = 0; f < nf; f++) {
		size_t n = first[f + 1] - first[f];
		for (size_t t = 0; t < n; t++) {
			uint32_t pos = c->start_pos + first[f] + (uint32_t)t;
			infs__rope_cos_sin(&rope, pos, cosv, sinv);
			int64_t off = (int64_t)blocks[pos / bs - b0] * lo.sb + (int64_t)(pos % bs) * lo.ss;
			for (size_t l = 0; l < L; l++)
				for (size_t kv = 0; kv < 2; kv++)
					for (size_t h = 0; h < H; h++) {
						size_t src = fact_off[f] + kv * L * n * H * D + ((l * n + t) * H + h) * D;
						for (size_t d = 0; d < D; d++)
							x[d] = infs__load(pool, c->src, src + d);
						if (!kv)
							infs__rope_apply(&rope, x, cosv, sinv);
						for (size_t d = 0; d < D; d++) {
							size_t e = l * lo.layer_elems + (kv ? lo.v_off : lo.k_off) + off +
							           h * lo.sh + d * lo.sd;
							infs__store(ref, c->dst, e, x[d]);
							kind[e] = (unsigned char)(1 + kv);
						}
					}
		}
	}

	/* The same on the GPU, over a cache that starts as the reference's did. */
	char *dpool, *dcache;
	CUDA_OK(cudaMalloc((void **)&dpool, pool_elems * ssz));
	CUDA_OK(cudaMalloc((void **)&dcache, cache_elems * dsz));
	CUDA_OK(cudaMemcpy(dpool, pool, pool_elems * ssz, cudaMemcpyHostToDevice));
	memcpy(got, ref, cache_elems * dsz);
	for (size_t i = 0; i < cache_elems; i++) /* restore the untouched cache */
		if (kind[i])
			memset(got + i * dsz, 0x5a, dsz);
	CUDA_OK(cudaMemcpy(dcache, got, cache_elems * dsz, cudaMemcpyHostToDevice));

	const void *hk[64], *hv[64];
	void *lk[256], *lv[256];
	uintptr_t bits = 0;
	for (uint32_t f = 0; f < nf; f++) {
		hk[f] = dpool + fact_off[f] * ssz;
		hv[f] = dpool + (fact_off[f] + L * (first[f + 1] - first[f]) * H * D) * ssz;
		bits |= (uintptr_t)hk[f] | (uintptr_t)hv[f];
	}
	for (size_t l = 0; l < L; l++) {
		lk[l] = dcache + (l * lo.layer_elems + lo.k_off) * dsz;
		lv[l] = dcache + (l * lo.layer_elems + lo.v_off) * dsz;
		bits |= (uintptr_t)lk[l] | (uintptr_t)lv[l];
	}
	void *dk, *dv, *dl_k, *dl_v, *dfirst, *dblocks, *dfreq;
	CUDA_OK(cudaMalloc(&dk, nf * sizeof(void *)));
	CUDA_OK(cudaMalloc(&dv, nf * sizeof(void *)));
	CUDA_OK(cudaMalloc(&dl_k, L * sizeof(void *)));
	CUDA_OK(cudaMalloc(&dl_v, L * sizeof(void *)));
	CUDA_OK(cudaMalloc(&dfirst, (nf + 1) * sizeof(uint32_t)));
	CUDA_OK(cudaMalloc(&dblocks, nblk * sizeof(int32_t)));
	CUDA_OK(cudaMalloc(&dfreq, rope.n_pairs * sizeof(float)));
	CUDA_OK(cudaMemcpy(dk, hk, nf * sizeof(void *), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dv, hv, nf * sizeof(void *), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dl_k, lk, L * sizeof(void *), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dl_v, lv, L * sizeof(void *), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dfirst, first, (nf + 1) * sizeof(uint32_t), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dblocks, blocks, nblk * sizeof(int32_t), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dfreq, rope.inv_freq, rope.n_pairs * sizeof(float), cudaMemcpyHostToDevice));

	infs_k_inject_params p = {
		.src_k = dk, .src_v = dv, .fact_first = dfirst, .n_facts = nf, .n_tokens = T,
		.start_pos = c->start_pos, .block_size = bs, .blocks = dblocks,
		.dst_k = dl_k, .dst_v = dl_v,
		.stride_block = lo.sb, .stride_slot = lo.ss, .stride_head = lo.sh, .stride_dim = lo.sd,
		.n_layers = c->n_layers, .n_heads = c->n_heads, .head_dim = c->head_dim,
		.rotary_dim = c->rotary_dim, .style = c->style, .attn_scale = rope.attn_scale,
		.inv_freq = dfreq, .src_dtype = c->src, .dst_dtype = c->dst, .ptr_bits = bits,
	};
	*path = infs_k_inject_path(&p);
	CUDA_OK(infs_k_inject(&p, stream));
	CUDA_OK(cudaStreamSynchronize(stream));
	CUDA_OK(cudaMemcpy(got, dcache, cache_elems * dsz, cudaMemcpyDeviceToHost));

	size_t k_ulp1 = 0, bad = 0;
	for (size_t i = 0; i < cache_elems; i++) {
		uint64_t u = ulp_diff(ref, got, c->dst, i);
		if (u == 0)
			continue;
		if (kind[i] == 1 && u == 1) {
			k_ulp1++;
			continue;
		}
		if (bad++ < 5)
			fprintf(stderr, "  element %zu (%s): expected %g, got %g (%llu ulp)\n", i,
			        kind[i] == 0 ? "untouched" : kind[i] == 1 ? "K" : "V", infs__load(ref, c->dst, i),
			        infs__load(got, c->dst, i), (unsigned long long)u);
	}
	if (bad)
		fprintf(stderr, "layout %s, dtypes %d->%d, style %d, scaling %d, rotary %u/%u, block %u, pos %u: %zu bad\n",
		        layout_name[c->layout], c->src, c->dst, c->style, c->scaling, c->rotary_dim, c->head_dim,
		        bs, c->start_pos, bad);
	CHECK(bad == 0);

	cudaFree(dk), cudaFree(dv), cudaFree(dl_k), cudaFree(dl_v), cudaFree(dfirst), cudaFree(dblocks);
	cudaFree(dfreq), cudaFree(dpool), cudaFree(dcache);
	free(pool), free(perm), free(blocks), free(ref), free(got), free(kind), free(x);
	return k_ulp1;
}

static cfg base_cfg(uint64_t seed)
{
	cfg c = {3, 2, 64, 64, INFS_ROPE_NEOX, INFS_ROPE_SCALING_NONE, INFS_DTYPE_BF16, INFS_DTYPE_BF16,
	         L_VLLM, 16, 0, 5, 9, seed};
	return c;
}

typedef struct worker {
	int id;
	size_t ulp1;
} worker;

static void *worker_main(void *arg)
{
	worker *w = arg;
	cudaStream_t s;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (int i = 0; i < 8; i++) {
		cfg c = base_cfg(1000 + 100 * (uint64_t)w->id + (uint64_t)i);
		c.layout = (w->id + i) % L_COUNT;
		c.n_facts = 8;
		int vec;
		w->ulp1 += run_case(&c, s, &vec);
	}
	CUDA_OK(cudaStreamDestroy(s));
	return NULL;
}

int main(void)
{
	gpu_require();
	size_t ulp1 = 0, cases = 0, paths[3] = {0, 0, 0};
	uint64_t seed = 1;
	int vec;

	/* Every layout with every pair of dtypes. */
	for (int layout = 0; layout < L_COUNT; layout++)
		for (int s = 0; s < 3; s++)
			for (int d = 0; d < 3; d++) {
				cfg c = base_cfg(seed++);
				c.layout = layout;
				c.src = (infs_dtype)s;
				c.dst = (infs_dtype)d;
				c.style = (infs_rope_style)((s + d) % 2);
				c.block_size = (uint32_t[]){16, 1, 7}[(layout + s) % 3];
				c.start_pos = (uint32_t)(rng_next(&seed) % 5000);
				ulp1 += run_case(&c, 0, &vec);
				cases++;
				paths[vec]++;
				CHECK((vec != 0) == (layout != L_STRIDED && layout != L_MISALIGNED));
			}

	/* Every RoPE variant, full and partial rotary, both pairings, one
	 * geometry whose halves do not split into vectors (scalar path), and
	 * positions near the int32 limit. */
	const uint32_t dims[][2] = {{128, 128}, {128, 64}, {96, 32}, {80, 40}, {64, 2}};
	for (int sc = 0; sc < 4; sc++)
		for (int st = 0; st < 2; st++)
			for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
				cfg c = base_cfg(seed++);
				c.scaling = (infs_rope_scaling)sc;
				c.style = (infs_rope_style)st;
				c.head_dim = dims[di][0];
				c.rotary_dim = dims[di][1];
				c.dst = (infs_dtype)(di % 3);
				c.src = (infs_dtype)((di + 1) % 3);
				c.start_pos = di % 2 ? 2147483000u : (uint32_t)(rng_next(&seed) % 100000);
				c.layout = (int)(di % 4);
				ulp1 += run_case(&c, 0, &vec);
				cases++;
				paths[vec]++;
			}

	/* Few tokens over many layers, and many tokens over few. */
	cfg wide = base_cfg(seed++);
	wide.n_layers = 40, wide.n_facts = 1, wide.max_fact_tokens = 1;
	ulp1 += run_case(&wide, 0, &vec);
	cfg tall = base_cfg(seed++);
	tall.n_layers = 1, tall.n_facts = 64, tall.max_fact_tokens = 40, tall.n_heads = 8, tall.head_dim = 128;
	tall.rotary_dim = 128;
	ulp1 += run_case(&tall, 0, &vec);
	cases += 2;
	/* Layers too large to stage in shared memory: vectors through registers. */
	cfg big = base_cfg(seed++);
	big.n_layers = 2, big.n_heads = 40, big.head_dim = 256, big.rotary_dim = 128, big.n_facts = 2;
	big.max_fact_tokens = 3, big.src = INFS_DTYPE_F32, big.dst = INFS_DTYPE_BF16;
	ulp1 += run_case(&big, 0, &vec);
	CHECK(vec == 1);
	paths[vec]++;
	cases++;

	/* Host threads injecting on their own streams at once. */
	worker w[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		w[i].id = i;
		w[i].ulp1 = 0;
		CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ulp1 += w[i].ulp1;
		cases += 8;
	}

	printf("%zu injections (%zu scalar, %zu vectors, %zu staged, 32 from threads), %zu K elements 1 ulp off "
	       "the CPU, V bit-exact\n", cases, paths[0], paths[1], paths[2], ulp1);
	CHECK(paths[0] > 0 && paths[1] > 0 && paths[2] > 0);
	CHECK_DONE();
}

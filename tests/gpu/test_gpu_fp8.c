/* Injection from an fp8 e4m3 store on the GPU against the CPU: the same
 * facts, from the store's device copy and uploaded from a host-only store,
 * into caches of f32, bf16 and f16, contiguous (vector path) and with
 * interleaved K/V elements (scalar path), NeoX and GPT-J, full and partial
 * rotary. V must match bit for bit, K within one unit in the last place
 * (cos and sin come from the GPU's libm, as in test_gpu_inject.c), and
 * nothing outside the injected slots may change. */
#include <string.h>

#include "gpu.h"
#include "../scratch_util.h"

typedef struct cfg {
	uint32_t L, H, D, R;
	infs_rope_style style;
	infs_dtype dst;
	int interleaved; /* K and V alternate per element: stride_dim 2 */
} cfg;

enum { NB = 6, BS = 4, N_FACTS = 3 };

static infs_store *make_store(const char *path, const infs_geometry *g, int device)
{
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = g;
	o.identity = "fp8-gpu";
	o.sync = INFS_SYNC_OFF;
	o.device = device;
	infs_store *s = NULL;
	CHECK_OK(infs_store_open(&s, path, &o));
	return s;
}

/* One layer's K at k[l], V at k[l] + v_off elements; the layout over base pointers. */
static infs_kv_layout layout_of(const cfg *c, void **k, void **v, int device)
{
	infs_kv_layout l = INFS_KV_LAYOUT_INIT;
	l.device = device;
	l.dtype = c->dst;
	l.n_layers = c->L;
	l.n_kv_heads = c->H;
	l.head_dim = c->D;
	l.n_blocks = NB;
	l.block_size = BS;
	if (c->interleaved)
		l.stride_block = 2 * BS * c->H * c->D, l.stride_slot = 2 * c->H * c->D, l.stride_head = 2 * c->D,
		l.stride_dim = 2;
	else
		l.stride_block = BS * c->H * c->D, l.stride_slot = c->H * c->D, l.stride_head = c->D, l.stride_dim = 1;
	l.k_layers = k;
	l.v_layers = v;
	return l;
}

static void run(const cfg *c, int nth)
{
	infs_geometry g = test_geometry(c->L, c->H, c->D, INFS_DTYPE_FP8_E4M3);
	g.rotary_dim = c->R;
	g.rope_style = c->style;
	char pd[600], ph[600];
	scratch_make("gpu-fp8", pd, sizeof pd, "dev.infs");
	scratch_path(ph, sizeof ph, "host.infs");
	infs_store *sd = make_store(pd, &g, 0), *sh = make_store(ph, &g, -1);
	uint64_t idd[N_FACTS], idh[N_FACTS];
	const uint32_t nt[N_FACTS] = { 3, 7, 2 };
	uint32_t total = 0;
	for (int f = 0; f < N_FACTS; f++) {
		infs_geometry gf = g;
		gf.kv_dtype = INFS_DTYPE_F32;
		size_t n = (size_t)nt[f] * infs_geometry_kv_token_bytes(&gf) / 4;
		float *x = malloc(n * 4), *y = malloc(n * 4);
		for (size_t i = 0; i < n; i++)
			x[i] = 3 * frnd(), y[i] = frnd();
		size_t qb = nt[f] * infs_geometry_kv_token_bytes(&g);
		unsigned char *k = malloc(qb), *v = malloc(qb);
		CHECK_OK(infs_kv_convert(k, INFS_DTYPE_FP8_E4M3, x, INFS_DTYPE_F32, &g, nt[f]));
		CHECK_OK(infs_kv_convert(v, INFS_DTYPE_FP8_E4M3, y, INFS_DTYPE_F32, &g, nt[f]));
		int32_t tokens[8] = { 0 };
		infs_fact fa = INFS_FACT_INIT;
		fa.n_tokens = nt[f];
		fa.tokens = tokens;
		fa.embedding = (const float[8]){ 1 };
		fa.k = k, fa.v = v;
		CHECK_OK(infs_fact_put(&idd[f], sd, "u", &fa));
		CHECK_OK(infs_fact_put(&idh[f], sh, "u", &fa));
		total += nt[f];
		free(x), free(y), free(k), free(v);
	}

	const size_t es = infs_dtype_size(c->dst), per = (size_t)NB * BS * c->H * c->D;
	const size_t layer_bytes = 2 * per * es; /* K and V of a layer */
	unsigned char *host = malloc(c->L * layer_bytes), *got = malloc(c->L * layer_bytes);
	memset(host, 0xa5, c->L * layer_bytes);
	void *hk[8], *hv[8], *dk[8], *dv[8];
	unsigned char *dev = NULL;
	CUDA_OK(cudaMalloc((void **)&dev, c->L * layer_bytes));
	for (uint32_t l = 0; l < c->L; l++) {
		size_t v_off = c->interleaved ? es : per * es;
		hk[l] = host + l * layer_bytes, hv[l] = host + l * layer_bytes + v_off;
		dk[l] = dev + l * layer_bytes, dv[l] = dev + l * layer_bytes + v_off;
	}
	infs_kv_layout lh = layout_of(c, hk, hv, -1), ld = layout_of(c, dk, dv, 0);
	const int32_t bt[NB] = { 4, 1, 5, 0, 2, 3 };
	const uint32_t start = 5;
	uint32_t next = 0;
	CHECK_OK(infs_inject_into_blocks(&next, sh, "u", idh, N_FACTS, start, bt, NB, &lh, NULL));
	CHECK(next == start + total);
	for (int from = 0; from < 2; from++) { /* the device copy, then uploads */
		CUDA_OK(cudaMemset(dev, 0xa5, c->L * layer_bytes));
		CHECK_OK(infs_inject_into_blocks(&next, from ? sh : sd, "u", from ? idh : idd, N_FACTS, start, bt, NB, &ld,
		                                 NULL));
		CUDA_OK(cudaDeviceSynchronize());
		CUDA_OK(cudaMemcpy(got, dev, c->L * layer_bytes, cudaMemcpyDeviceToHost));
		size_t worst = 0, diff = 0;
		for (size_t i = 0; i < c->L * layer_bytes / es; i++) {
			uint32_t a = 0, b = 0;
			memcpy(&a, host + i * es, es);
			memcpy(&b, got + i * es, es);
			if (a == b)
				continue;
			diff++;
			size_t d = a > b ? a - b : b - a;
			worst = d > worst ? d : worst;
			/* V (and everything but rotated K) must be exact */
			size_t in_layer = i % (layer_bytes / es);
			int is_v = c->interleaved ? (int)(in_layer % 2) : in_layer >= per;
			if (is_v)
				check_failures++, fprintf(stderr, "config %d: V element %zu differs\n", nth, i);
		}
		printf("fp8 config %d (%ux%ux%u rotary %u %s, %s cache%s) from the %s: %zu K elements 1 ulp apart\n", nth,
		       c->L, c->H, c->D, c->R, c->style ? "gptj" : "neox",
		       c->dst == INFS_DTYPE_F32 ? "f32" : c->dst == INFS_DTYPE_BF16 ? "bf16" : "f16",
		       c->interleaved ? ", interleaved" : "", from ? "host (uploaded)" : "device copy", diff);
		CHECK(worst <= 1);
	}
	CUDA_OK(cudaFree(dev));
	free(host);
	free(got);
	infs_store_close(sd);
	infs_store_close(sh);
	scratch_cleanup();
}

int main(void)
{
	gpu_require();
	const cfg cfgs[] = {
		{ 3, 4, 64, 64, INFS_ROPE_NEOX, INFS_DTYPE_BF16, 0 },
		{ 3, 4, 64, 64, INFS_ROPE_NEOX, INFS_DTYPE_F16, 0 },
		{ 3, 4, 64, 64, INFS_ROPE_NEOX, INFS_DTYPE_F32, 0 },
		{ 2, 2, 32, 16, INFS_ROPE_GPTJ, INFS_DTYPE_BF16, 0 },
		{ 2, 3, 20, 12, INFS_ROPE_NEOX, INFS_DTYPE_BF16, 0 },
		{ 2, 2, 32, 24, INFS_ROPE_NEOX, INFS_DTYPE_F32, 1 },
		{ 2, 2, 16, 16, INFS_ROPE_GPTJ, INFS_DTYPE_F16, 1 },
	};
	for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++)
		run(&cfgs[i], (int)i);
	if (check_failures)
		fprintf(stderr, "%d check(s) failed\n", check_failures);
	return check_failures != 0;
}

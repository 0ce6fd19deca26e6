/* The forward pass of every supported architecture and RoPE variant against
 * transformers: tiny random models in tests/fixtures/model/<name>/ with
 * goldens made by make_tiny.py (logits of every token, pre-RoPE K and V of
 * every layer), and GGUF conversions of some (gguf_<name>.gguf, quantised,
 * make_tiny_gguf.py). Then the paged path: a prefix written into a paged cache
 * and the rest attending to it gives the logits of one plain pass. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "util/dtype.h"
#include "golden.h"
#include "model_compare.h"
#include "model/model.h"
#include "util/rope.h"

static void check_paged_as(const infs_model *model, const int32_t *tokens, uint32_t n, const float *want_logits,
                           uint32_t n_vocab, const float *k_pre, const float *v_pre, const infs_geometry *g,
                           infs_dtype dt)
{
	const uint32_t bs = 4, n_blocks = 8, m = 5;
	uint32_t L = g->n_layers, H = g->n_kv_heads, D = g->head_dim;
	size_t es = infs_dtype_size(dt), per_layer = (size_t)n_blocks * 2 * bs * H * D;
	char *cache = calloc(L * per_layer, es);
	void **k_layers = calloc(L, sizeof *k_layers), **v_layers = calloc(L, sizeof *v_layers);
	for (uint32_t l = 0; l < L; l++) {
		k_layers[l] = cache + l * per_layer * es;
		v_layers[l] = cache + (l * per_layer + (size_t)bs * H * D) * es;
	}
	infs_kv_layout kl = INFS_KV_LAYOUT_INIT;
	kl.dtype = dt;
	kl.n_layers = L;
	kl.n_kv_heads = H;
	kl.head_dim = D;
	kl.n_blocks = n_blocks;
	kl.block_size = bs;
	kl.k_layers = k_layers;
	kl.v_layers = v_layers;
	kl.stride_block = 2 * bs * H * D;
	kl.stride_slot = dt == INFS_DTYPE_F32 ? H * D : D;
	kl.stride_head = dt == INFS_DTYPE_F32 ? D : bs * D;
	kl.stride_dim = 1;
	const int32_t table[] = { 6, 2, 7, 0 };
	float tol = dt == INFS_DTYPE_F32 ? 1e-4f : 2e-2f;

/* Prefix of m tokens into a paged cache (block size 4, blocks in a
 * shuffled order), then the rest with the prefix as past. f32 in the NHD
 * layout (K and V of a block side by side) must match the plain pass to
 * rounding; f16 in the HND layout (heads outermost within a block) to f16
 * precision. */
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.cache = &kl;
	fo.block_table = table;
	fo.block_table_len = 4;
	fo.write_cache = 1;
	fo.all_logits = 1;
	float *logits = malloc((size_t)n * n_vocab * sizeof *logits);
	CHECK_OK(infs_model_forward(logits, NULL, NULL, model, tokens, NULL, m, &fo));
	fo.n_past = m;
	int32_t pos[64];
	for (uint32_t i = m; i < n; i++)
		pos[i - m] = (int32_t)i;
	CHECK_OK(infs_model_forward(logits + (size_t)m * n_vocab, NULL, NULL, model, tokens + m, pos, n - m, &fo));
	float d = max_diff(logits, want_logits, (size_t)n * n_vocab);
	printf("  paged %s: max |logit - plain| %.3g\n", dt == INFS_DTYPE_F32 ? "f32" : "f16", d);
	CHECK(d < tol * (1 + max_abs(want_logits, (size_t)n * n_vocab)));

	/* The cache holds every token's V and its K rotated to its position. */
	infs__rope r;
	infs__rope_init(&r, g);
	float kv[1024];
	float worst = 0;
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t t = 0; t < n; t++) {
			for (uint32_t h = 0; h < H; h++) {
				rotated_k(kv, &r, k_pre, n, l, t, h, H, D);
				size_t off = (size_t)table[t / bs] * kl.stride_block + (t % bs) * kl.stride_slot + h * kl.stride_head;
				const float *vp = v_pre + (((size_t)l * n + t) * H + h) * D;
				float dk = 0, dv = 0;
				for (uint32_t e = 0; e < D; e++) {
					float a = fabsf(infs__load(k_layers[l], dt, off + e) - kv[e]);
					float b = fabsf(infs__load(v_layers[l], dt, off + e) - vp[e]);
					dk = a > dk ? a : dk;
					dv = b > dv ? b : dv;
				}
				worst = dk > worst ? dk : worst;
				worst = dv > worst ? dv : worst;
			}
		}
	printf("  cache K/V: max diff %.3g\n", worst);
	CHECK(worst < (dt == INFS_DTYPE_F32 ? 1e-5f : 1e-3f) * (1 + max_abs(k_pre, (size_t)L * n * H * D)));

	/* Positions beyond the block table and a device cache are refused. */
	int32_t far = (int32_t)(4 * bs);
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, model, tokens, &far, 1, &fo), INFS_ERANGE);
	kl.device = 0;
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, model, tokens, NULL, 1, &fo), INFS_EUNSUPPORTED);
	free(logits);
	free(cache);
	free(k_layers);
	free(v_layers);
}

/* Prefix of m tokens into a paged cache (block size 4, blocks in a
 * shuffled order), then the rest with the prefix as past. f32 in the NHD
 * layout (K and V of a block side by side) must match the plain pass to
 * rounding; f16 in the HND layout (heads outermost within a block) to f16
 * precision. */
static void check_paged(const infs_model *model, const int32_t *tokens, uint32_t n, const float *want_logits,
                        uint32_t n_vocab, const float *k_pre, const float *v_pre, const infs_geometry *g)
{
	check_paged_as(model, tokens, n, want_logits, n_vocab, k_pre, v_pre, g, INFS_DTYPE_F32);
	check_paged_as(model, tokens, n, want_logits, n_vocab, k_pre, v_pre, g, INFS_DTYPE_F16);
}

static void check_variant(const char *dir, const char *name)
{
	char path[1024], gpath[1100];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	size_t len = strlen(path);
	if (len > 5 && strcmp(path + len - 5, ".gguf") == 0) /* x.gguf: goldens in x.golden.bin */
		snprintf(gpath, sizeof gpath, "%.*s.golden.bin", (int)(len - 5), path);
	else
		snprintf(gpath, sizeof gpath, "%s/golden.bin", path);
	printf("%s\n", name);
	golden gd;
	if (golden_load(&gd, gpath)) {
		CHECK(0);
		return;
	}
	infs_model *model = NULL;
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.n_threads = 2;
	CHECK_OK(infs_model_load(&model, path, &mo));
	if (!model) {
		golden_free(&gd);
		return;
	}
	infs_model_info info = model_info(model);
	infs_geometry g;
	CHECK_OK(infs_model_geometry(&g, model, INFS_DTYPE_F32));
	CHECK_OK(infs_geometry_validate(&g));

	uint32_t n, np, nl, nk, nv;
	int32_t *tokens = golden_copy(&gd, "tokens", &n);
	int32_t *pos = golden_copy(&gd, "positions", &np);
	float *want = golden_copy(&gd, "logits", &nl);
	float *want_k = golden_copy(&gd, "k", &nk);
	float *want_v = golden_copy(&gd, "v", &nv);
	size_t kv_n = (size_t)g.n_layers * n * g.n_kv_heads * g.head_dim;
	CHECK(np == n && nl == n * info.n_vocab && nk == kv_n && nv == kv_n);

	float *logits = malloc((size_t)nl * sizeof *logits);
	float *k = malloc(kv_n * sizeof *k), *v = malloc(kv_n * sizeof *v);
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.all_logits = 1;
	CHECK_OK(infs_model_forward(logits, k, v, model, tokens, pos, n, &fo));
	float dl = max_diff(logits, want, nl), dk = max_diff(k, want_k, kv_n), dv = max_diff(v, want_v, kv_n);
	printf("  %s: max |logit diff| %.3g (of %.3g), |K diff| %.3g, |V diff| %.3g\n", info.architecture, dl,
	       max_abs(want, nl), dk, dv);
	CHECK(dl < 1e-4f * (1 + max_abs(want, nl)));
	CHECK(dk < 1e-4f * (1 + max_abs(want_k, kv_n)));
	CHECK(dv < 1e-4f * (1 + max_abs(want_v, kv_n)));

	/* The last token's logits alone, and K/V in f16 and bf16. */
	float *last = malloc(info.n_vocab * sizeof *last);
	uint16_t *k16 = malloc(kv_n * 2);
	fo.all_logits = 0;
	fo.kv_dtype = INFS_DTYPE_F16;
	CHECK_OK(infs_model_forward(last, k16, NULL, model, tokens, pos, n, &fo));
	CHECK(max_diff(last, logits + (size_t)(n - 1) * info.n_vocab, info.n_vocab) < 1e-5f * (1 + max_abs(last, info.n_vocab)));
	float worst = 0;
	for (size_t i = 0; i < kv_n; i++) {
		float d = fabsf(infs__f16_to_f32(k16[i]) - k[i]);
		worst = d > worst ? d : worst;
	}
	CHECK(worst <= 1e-3f * (1 + max_abs(k, kv_n)));

	/* Three sequences in one call (seq_ids) give what each gives alone. */
	{
		const uint32_t seq_len[3] = { 5, 4, 3 };
		int32_t seq[12], spos[12];
		for (uint32_t s = 0, i = 0; s < 3; s++)
			for (uint32_t t = 0; t < seq_len[s]; t++, i++) {
				seq[i] = (int32_t)s;
				spos[i] = (int32_t)t;
			}
		size_t row = (size_t)g.n_kv_heads * g.head_dim;
		float *bl = malloc((size_t)n * info.n_vocab * sizeof *bl), *bk = malloc(kv_n * sizeof *bk);
		float *al = malloc((size_t)n * info.n_vocab * sizeof *al), *ak = malloc(kv_n * sizeof *ak);
		infs_forward_options so = INFS_FORWARD_OPTIONS_INIT;
		so.all_logits = 1;
		so.seq_ids = seq;
		CHECK(n == 12);
		CHECK_OK(infs_model_forward(bl, bk, NULL, model, tokens, spos, 12, &so));
		so.seq_ids = NULL;
		float sworst = 0;
		for (uint32_t s = 0, first = 0; s < 3; first += seq_len[s], s++) {
			CHECK_OK(infs_model_forward(al, ak, NULL, model, tokens + first, NULL, seq_len[s], &so));
			sworst = fmaxf(sworst, max_diff(al, bl + (size_t)first * info.n_vocab, (size_t)seq_len[s] * info.n_vocab));
			for (uint32_t l = 0; l < g.n_layers; l++)
				sworst = fmaxf(sworst, max_diff(ak + (size_t)l * seq_len[s] * row,
				                              bk + ((size_t)l * n + first) * row, seq_len[s] * row));
		}
		printf("  3 sequences in one call vs alone: max diff %.3g\n", sworst);
		CHECK(sworst < 1e-4f * (1 + max_abs(want, nl)));
		free(bl);
		free(bk);
		free(al);
		free(ak);
	}

	/* Plain positions 0.. for the paged check, then the paged check. */
	fo.all_logits = 1;
	fo.kv_dtype = INFS_DTYPE_F32;
	CHECK_OK(infs_model_forward(logits, k, v, model, tokens, NULL, n, &fo));
	check_paged(model, tokens, n, logits, info.n_vocab, k, v, &g);

	free(last);
	free(k16);
	free(logits);
	free(k);
	free(v);
	free(tokens);
	free(pos);
	free(want);
	free(want_k);
	free(want_v);
	infs_model_free(model);
	golden_free(&gd);
}

/* infs_model_options version 2: a device is refused where CUDA is not
 * built in and a bad device everywhere; a version-1 struct reads no device
 * (the model stays on the host, whatever lies past its bytes); the device
 * forward pass refuses a model on the host. */
static void device_options(const char *dir)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/llama", dir);
	infs_model *m = NULL;
	infs_model_options mo;
	CHECK_OK(infs_model_options_init(&mo, 2));
	CHECK(mo.device == -1 && mo.device_budget_bytes == 0 && mo.device_max_tokens == 0);
	mo.device = -2;
	CHECK_ERR(infs_model_load(&m, path, &mo), INFS_EINVAL);
	mo.device = 0;
	if (!(infs_features() & INFS_FEATURE_CUDA)) {
		CHECK_ERR(infs_model_load(&m, path, &mo), INFS_EUNSUPPORTED);
		CHECK(m == NULL && strstr(infs_error_last(), "no CUDA support") != NULL);
	}
	mo.version = 1;
	CHECK_OK(infs_model_load(&m, path, &mo));
	int32_t tok = 1;
	float logit = 0;
	infs_device_forward_options dfo = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	CHECK_ERR(infs_model_forward_device(&logit, m, &tok, NULL, 1, &dfo), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "loaded on the host") != NULL);
	CHECK_ERR(infs_model_forward_device(&logit, NULL, &tok, NULL, 1, &dfo), INFS_EINVAL);
	infs_model_free(m);
}

int main(int argc, char **argv)
{
	CHECK(argc >= 3);
	device_options(argv[1]);
	for (int i = 2; i < argc; i++)
		check_variant(argv[1], argv[i]);
	CHECK_DONE();
}

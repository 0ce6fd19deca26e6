/* SmolLM2-135M-Instruct.Q4_1.gguf against transformers loading the same
 * file (goldens: tests/fixtures/model/smollm2.bin, made by
 * make_smollm2.py from chat-formatted LoCoMo questions with facts). For
 * every prompt, at a quarter, half way and the last token: the top-1 token
 * equals transformers', and every one of transformers' top-32 logits is
 * matched within LOGIT_BOUND. Pre-RoPE K and V of three layers are checked
 * too. argv: golden file [number of prompts to run, default all]. */
#include <math.h>
#include <string.h>

#include "cache_path.h"
#include "check.h"
#include "model_compare.h"
#include "golden.h"

/* Documented in docs/model-runtime.md: f32 arithmetic in another order
 * than torch's over 30 layers. */
#define LOGIT_BOUND 4e-4f
#define KV_BOUND 2e-4f
#define INT8_NMSE_BOUND 4e-3

/* infs_model_options.int8_activations against the f32 path: each prompt's
 * last 4 tokens as a sequence of their own (a call of 4 tokens: every
 * product on 8-bit activations), all logits of both models. The measure is
 * llama.cpp's for its quantized products (test-backend-ops): the
 * normalized mean squared error sum (a - b)^2 / sum b^2 of a row. */
static void check_int8(const char *path, const infs_model *f32, golden *gd, int n_prompts, uint32_t V)
{
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.int8_activations = 1;
	infs_model *m = NULL;
	CHECK_OK(infs_model_load(&m, path, &mo));
	if (!m)
		return;
	float *a = malloc((size_t)4 * V * sizeof *a), *b = malloc((size_t)4 * V * sizeof *b);
	double worst_nmse = 0, worst_abs = 0;
	int same = 0, rows = 0;
	for (int p = 0; p < n_prompts; p++) {
		char key[32];
		uint32_t n;
		snprintf(key, sizeof key, "p%d.tokens", p);
		const int32_t *tokens = golden_get(gd, key, &n);
		if (!tokens || n < 4)
			continue;
		infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
		fo.all_logits = 1;
		CHECK_OK(infs_model_forward(a, NULL, NULL, m, tokens + n - 4, NULL, 4, &fo));
		CHECK_OK(infs_model_forward(b, NULL, NULL, f32, tokens + n - 4, NULL, 4, &fo));
		for (int r = 0; r < 4; r++, rows++) {
			const float *x = a + (size_t)r * V, *y = b + (size_t)r * V;
			double num = 0, den = 0;
			uint32_t ta = 0, tb = 0;
			for (uint32_t t = 0; t < V; t++) {
				double d = (double)x[t] - y[t];
				num += d * d;
				den += (double)y[t] * y[t];
				worst_abs = fabs(d) > worst_abs ? fabs(d) : worst_abs;
				ta = x[t] > x[ta] ? t : ta;
				tb = y[t] > y[tb] ? t : tb;
			}
			const double nmse = num / (den + 1e-30);
			worst_nmse = nmse > worst_nmse || nmse != nmse ? nmse : worst_nmse;
			same += ta == tb;
		}
	}
	printf("int8 activations, 4-token calls: top-1 as f32 at %d of %d rows; max |logit diff| %.3g; "
	       "max NMSE %.3g (bound %.3g)\n", same, rows, worst_abs, worst_nmse, INT8_NMSE_BOUND);
	CHECK(rows > 0 && worst_nmse < INT8_NMSE_BOUND);
	free(a);
	free(b);
	infs_model_free(m);
}

int main(int argc, char **argv)
{
	CHECK(argc >= 2);
	if (argc < 2)
		CHECK_DONE();
	golden gd;
	CHECK(golden_load(&gd, argv[1]) == 0);
	if (!gd.buf)
		CHECK_DONE();
	char path[1024];
	cache_path(path, sizeof path, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	infs_model *model = NULL;
	CHECK_OK(infs_model_load(&model, path, NULL));
	if (!model)
		CHECK_DONE();
	infs_model_info info = model_info(model);
	CHECK(strcmp(info.architecture, "llama") == 0 && info.n_layers == 30 && info.n_embd == 576 &&
	      info.n_heads == 9 && info.n_kv_heads == 3 && info.head_dim == 64 && info.n_vocab == 49152);
	infs_geometry g;
	CHECK_OK(infs_model_geometry(&g, model, INFS_DTYPE_F16));
	CHECK(g.rope_theta == 100000.0 && g.rotary_dim == 64 && g.rope_style == INFS_ROPE_NEOX &&
	      g.kv_dtype == INFS_DTYPE_F16);

	uint32_t cnt;
	const int32_t *np_p = golden_get(&gd, "n_prompts", &cnt);
	int32_t n_prompts = 0;
	if (np_p)
		memcpy(&n_prompts, np_p, 4);
	CHECK(n_prompts >= 20);
	if (argc > 2 && atoi(argv[2]) < n_prompts)
		n_prompts = atoi(argv[2]);

	float worst = 0;
	int top1_same = 0, top1_total = 0;
	for (int p = 0; p < n_prompts; p++) {
		char key[32];
		uint32_t n, nw, nti, ntv;
		snprintf(key, sizeof key, "p%d.tokens", p);
		int32_t *tokens = golden_copy(&gd, key, &n);
		snprintf(key, sizeof key, "p%d.where", p);
		int32_t *where = golden_copy(&gd, key, &nw);
		snprintf(key, sizeof key, "p%d.top_ids", p);
		int32_t *top_ids = golden_copy(&gd, key, &nti);
		snprintf(key, sizeof key, "p%d.top_vals", p);
		float *top_vals = golden_copy(&gd, key, &ntv);
		CHECK(tokens && where && top_ids && top_vals && nti == ntv && nti % nw == 0);
		if (!tokens || !where || !top_ids || !top_vals)
			break;
		uint32_t k = nti / nw, V = info.n_vocab;
		float *logits = malloc((size_t)n * V * sizeof *logits);
		infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
		fo.all_logits = 1;
		CHECK_OK(infs_model_forward(logits, NULL, NULL, model, tokens, NULL, n, &fo));
		for (uint32_t w = 0; w < nw; w++) {
			const float *row = logits + (size_t)where[w] * V;
			uint32_t best = 0;
			for (uint32_t t = 1; t < V; t++)
				if (row[t] > row[best])
					best = t;
			top1_total++;
			if ((int32_t)best == top_ids[w * k])
				top1_same++;
			else
				fprintf(stderr, "prompt %d position %d: top-1 %u, transformers %d\n", p, where[w], best,
				        top_ids[w * k]);
			for (uint32_t j = 0; j < k; j++) {
				float d = fabsf(row[top_ids[w * k + j]] - top_vals[w * k + j]);
				worst = d > worst || isnan(d) ? d : worst;
			}
		}
		free(logits);
		free(tokens);
		free(where);
		free(top_ids);
		free(top_vals);
	}
	printf("%d prompts: top-1 identical at %d of %d positions; max |logit diff| over the top-32: %.4g (bound %.3g)\n",
	       n_prompts, top1_same, top1_total, worst, LOGIT_BOUND);
	CHECK(top1_same == top1_total);
	CHECK(worst < LOGIT_BOUND);

	/* Pre-RoPE K and V of the first prompt's first tokens. */
	uint32_t n, nl, nk, nv;
	int32_t *tokens = golden_copy(&gd, "p0.tokens", &n);
	int32_t *layers = golden_copy(&gd, "kv.layers", &nl);
	float *want_k = golden_copy(&gd, "kv.k", &nk), *want_v = golden_copy(&gd, "kv.v", &nv);
	size_t row = (size_t)info.n_kv_heads * info.head_dim;
	uint32_t nt = nl ? (uint32_t)(nk / nl / row) : 0;
	CHECK(tokens && layers && want_k && want_v && nk == nv && nt > 0 && nt <= n);
	if (tokens && layers && want_k && want_v && nt > 0 && nt <= n) {
		size_t all = (size_t)info.n_layers * nt * row;
		float *k = malloc(all * sizeof *k), *v = malloc(all * sizeof *v);
		infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
		CHECK_OK(infs_model_forward(NULL, k, v, model, tokens, NULL, nt, &fo));
		float dk = 0, dv = 0;
		for (uint32_t i = 0; i < nl; i++) {
			const float *gk = k + (size_t)layers[i] * nt * row, *gv = v + (size_t)layers[i] * nt * row;
			for (size_t e = 0; e < nt * row; e++) {
				float a = fabsf(gk[e] - want_k[i * nt * row + e]);
				float b = fabsf(gv[e] - want_v[i * nt * row + e]);
				dk = a > dk || isnan(a) ? a : dk;
				dv = b > dv || isnan(b) ? b : dv;
			}
		}
		printf("pre-RoPE K of layers");
		for (uint32_t i = 0; i < nl; i++)
			printf(" %d", layers[i]);
		printf(" over %u tokens: max |K diff| %.3g, |V diff| %.3g (bound %.3g)\n", nt, dk, dv, KV_BOUND);
		CHECK(dk < KV_BOUND && dv < KV_BOUND);
		free(k);
		free(v);
	}
	free(tokens);
	free(layers);
	free(want_k);
	free(want_v);

	const infs_tokenizer *tok = infs_model_tokenizer(model);
	CHECK(tok && infs_tokenizer_vocab_size(tok) == 49152 && infs_tokenizer_eos(tok) == 2);

	char *id = NULL;
	CHECK_OK(infs_model_identity(&id, model, INFS_DTYPE_F16));
	CHECK(id && strstr(id, "arch=llama") && strstr(id, "kv=f16") && !strstr(id, "tokenizer=0000000000000000"));
	infs_free(id);
	check_int8(path, model, &gd, n_prompts, info.n_vocab);
	infs_model_free(model);
	golden_free(&gd);
	CHECK_DONE();
}

/* The correctness gate of fact encoding and injection, per model:
 * (a) a fact encoded alone (infs_fact_encode) and injected at position p
 *     gives the K and V that running the model on the same tokens alone at
 *     positions p, p+1, ... writes into a cache (keys rotated);
 * (b) with one fact encoded after an encoding context equal to the real
 *     preceding prompt (the header), and the footer after header + fact,
 *     injecting header, fact and footer and prefilling only the question
 *     gives the next-token logits of one prefill of the whole prompt, with
 *     the same argmax.
 * Tolerances (relative to the largest magnitude compared): f32 KV 1e-4;
 * f16 KV 4e-3 for (a) (two roundings of a value and its rotation) and 2e-2
 * for (b) (f16 rounding of every cached K and V through every layer). fp8
 * e4m3 KV in the store (injected into f32 caches): 1/14 for (a), half an
 * e4m3 step of the top binade (16/448 of the row's amax) at most doubled by
 * the rotation, and FP8_LOGIT_TOL for (b).
 * argv: a directory, then model names in it, or absolute paths (the real
 * SmolLM2 is $INFS_CACHE/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, named
 * "smollm2"). Models with a tokenizer use the engine's real prompt layout. */
#include <math.h>
#include <string.h>

#include "cache_path.h"
#include "check.h"
#include "engine/compose.h"
#include "model_store_util.h"

/* Largest |a - b| and largest |b| over n floats read from two caches'
 * positions [p0, p0 + n) through their block tables. */
typedef struct cmp {
	float worst, big;
} cmp;

static float elem(const infs_kv_layout *l, void *const *layers, const int32_t *table, uint32_t layer,
                  uint32_t pos, uint32_t h, uint32_t d)
{
	int64_t off = table[pos / l->block_size] * l->stride_block + (pos % l->block_size) * l->stride_slot +
	              h * l->stride_head + d * l->stride_dim;
	if (l->dtype == INFS_DTYPE_F32)
		return ((const float *)layers[layer])[off];
	if (l->dtype == INFS_DTYPE_BF16) {
		uint32_t bits = (uint32_t)((const uint16_t *)layers[layer])[off] << 16;
		float f;
		memcpy(&f, &bits, 4);
		return f;
	}
	uint16_t x = ((const uint16_t *)layers[layer])[off];
	/* f16 to f32 (normal and subnormal numbers; KV holds no inf or NaN) */
	uint32_t e = (x >> 10) & 31, f = x & 1023;
	float v = e ? ldexpf(1.0f + f / 1024.0f, (int)e - 15) : ldexpf(f / 1024.0f, -14);
	return x & 0x8000 ? -v : v;
}

/* fp8 (b): max |logit diff| <= FP8_LOGIT_TOL (1 + max |logit|); measured
 * up to FP8_LOGIT_SEEN on these models. */
#define FP8_LOGIT_TOL 0.2f

static const char *dt_name(infs_dtype dt)
{
	return dt == INFS_DTYPE_F32 ? "f32" : dt == INFS_DTYPE_F16 ? "f16" : "fp8";
}

/* The engine's cache for a store of dt: fp8 is dequantized into f32, so that
 * the gate measures what fp8 costs alone. */
static infs_dtype cache_dt(infs_dtype dt)
{
	return dt == INFS_DTYPE_FP8_E4M3 ? INFS_DTYPE_F32 : dt;
}

/* Gate (a): fact of n tokens encoded alone, injected at p, against the model
 * run on the same tokens at positions p.. writing a cache. */
static void gate_a(const infs_model *m, const char *name, infs_dtype dt, const int32_t *tokens, uint32_t n,
                   uint32_t p)
{
	char path[600];
	infs_store *st = model_store_create(m, dt, 4, "gate", "store.infs", path, sizeof path);
	float emb[4] = { 0, 1, 0, 0 };
	infs_fact_input in = INFS_FACT_INPUT_INIT;
	in.tokens = tokens;
	in.n_tokens = n;
	in.embedding = emb;
	uint64_t id = 0;
	CHECK_OK(infs_fact_encode(&id, st, "u", m, &in, 1, NULL));

	infs_engine_options eo = INFS_ENGINE_OPTIONS_INIT;
	eo.n_ctx = p + n;
	eo.block_size = 5;
	eo.kv_dtype = cache_dt(dt);
	infs_engine *inj = NULL;
	CHECK_OK(infs_engine_create(&inj, m, &eo));
	/* Positions below p are filled by a prefill of other tokens. */
	int32_t *pad = malloc((p ? p : 1) * sizeof *pad);
	for (uint32_t i = 0; i < p; i++)
		pad[i] = tokens[i % n];
	if (p)
		CHECK_OK(infs_engine_prefill(inj, pad, p));
	CHECK_OK(infs_engine_inject(inj, st, "u", &id, 1));
	CHECK(infs_engine_n_past(inj) == p + n);

	/* The reference: the tokens alone at positions p.., written into a cache of the same kind. */
	infs_engine *ref = NULL;
	eo.kv_dtype = INFS_DTYPE_F32;
	CHECK_OK(infs_engine_create(&ref, m, &eo));
	const infs__engine_view *vi = infs__engine_view_of(inj), *vr = infs__engine_view_of(ref);
	int32_t *pos = malloc(n * sizeof *pos);
	for (uint32_t i = 0; i < n; i++)
		pos[i] = (int32_t)(p + i);
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.cache = vr->layout;
	fo.block_table = vr->table;
	fo.block_table_len = vr->layout->n_blocks;
	fo.write_cache = 1;
	CHECK_OK(infs_model_forward(NULL, NULL, NULL, m, tokens, pos, n, &fo));

	cmp k = { 0, 0 }, v = { 0, 0 };
	const infs_kv_layout *li = vi->layout, *lr = vr->layout;
	for (uint32_t l = 0; l < li->n_layers; l++)
		for (uint32_t t = p; t < p + n; t++)
			for (uint32_t h = 0; h < li->n_kv_heads; h++)
				for (uint32_t d = 0; d < li->head_dim; d++) {
					float a = elem(li, li->k_layers, vi->table, l, t, h, d);
					float b = elem(lr, lr->k_layers, vr->table, l, t, h, d);
					k.worst = fmaxf(k.worst, fabsf(a - b));
					k.big = fmaxf(k.big, fabsf(b));
					a = elem(li, li->v_layers, vi->table, l, t, h, d);
					b = elem(lr, lr->v_layers, vr->table, l, t, h, d);
					v.worst = fmaxf(v.worst, fabsf(a - b));
					v.big = fmaxf(v.big, fabsf(b));
				}
	float tol = dt == INFS_DTYPE_F32 ? 1e-4f : dt == INFS_DTYPE_F16 ? 4e-3f : 1.0f / 14;
	printf("gate (a) %-24s %s KV, %u tokens at %u: max |K diff| %.3g (of %.3g), |V diff| %.3g (of %.3g)\n",
	       name, dt_name(dt), n, p, k.worst, k.big, v.worst, v.big);
	CHECK(k.worst <= tol * k.big && v.worst <= tol * v.big);
	CHECK(k.big > 0 && v.big > 0);
	free(pad);
	free(pos);
	infs_engine_free(inj);
	infs_engine_free(ref);
	infs_store_close(st);
	scratch_cleanup();
}

/* Gate (b): header H, fact F (encoded after H), footer T (encoded after H+F),
 * question Q prefilled, against one prefill of H F T Q. */
static void gate_b(const infs_model *m, const char *name, infs_dtype dt, const int32_t *hdr, uint32_t nh,
                   const int32_t *fact, uint32_t nf, const int32_t *foot, uint32_t nt, const int32_t *q,
                   uint32_t nq)
{
	char path[600];
	infs_store *st = model_store_create(m, dt, 4, "gate", "store.infs", path, sizeof path);
	float emb[4] = { 1, 0, 0, 0 };
	uint64_t ids[3] = { 0, 0, 0 };
	infs_fact_input in[3] = { INFS_FACT_INPUT_INIT, INFS_FACT_INPUT_INIT, INFS_FACT_INPUT_INIT };
	in[0].flags = INFS_FACT_SEGMENT;
	in[0].tokens = hdr;
	in[0].n_tokens = nh;
	CHECK_OK(infs_fact_encode(&ids[0], st, "seg", m, &in[0], 1, NULL));
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = hdr;
	eo.n_context = nh;
	in[1].tokens = fact;
	in[1].n_tokens = nf;
	in[1].embedding = emb;
	in[2].flags = INFS_FACT_SEGMENT;
	in[2].tokens = foot;
	in[2].n_tokens = nt;
	in[2].context = fact; /* after the shared header, the fact itself */
	in[2].n_context = nf;
	uint64_t two[2];
	CHECK_OK(infs_fact_encode(two, st, "u", m, &in[1], 2, &eo));
	ids[1] = two[0];
	ids[2] = two[1];

	infs_engine_options o = INFS_ENGINE_OPTIONS_INIT;
	o.n_ctx = nh + nf + nt + nq;
	o.block_size = 7;
	o.kv_dtype = cache_dt(dt);
	infs_engine *e = NULL;
	CHECK_OK(infs_engine_create(&e, m, &o));
	CHECK_OK(infs_engine_inject(e, st, "seg", &ids[0], 1));
	CHECK_OK(infs_engine_inject(e, st, "u", &ids[1], 2));
	CHECK(infs_engine_n_past(e) == nh + nf + nt);
	CHECK_OK(infs_engine_prefill(e, q, nq));
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, m));
	float *inj = malloc(info.n_vocab * sizeof *inj);
	const float *lg = infs_engine_logits(e);
	CHECK(lg != NULL);
	if (lg)
		memcpy(inj, lg, info.n_vocab * sizeof *inj);

	int32_t *all = malloc((size_t)o.n_ctx * sizeof *all);
	memcpy(all, hdr, nh * sizeof *all);
	memcpy(all + nh, fact, nf * sizeof *all);
	memcpy(all + nh + nf, foot, nt * sizeof *all);
	memcpy(all + nh + nf + nt, q, nq * sizeof *all);
	infs_engine_reset(e);
	CHECK_OK(infs_engine_prefill(e, all, o.n_ctx));
	const float *full = infs_engine_logits(e);
	float worst = 0, big = 0;
	for (uint32_t i = 0; full && i < info.n_vocab; i++) {
		worst = fmaxf(worst, fabsf(inj[i] - full[i]));
		big = fmaxf(big, fabsf(full[i]));
	}
	int ai = 0, af = 0;
	for (uint32_t i = 1; full && i < info.n_vocab; i++) {
		ai = inj[i] > inj[ai] ? (int)i : ai;
		af = full[i] > full[af] ? (int)i : af;
	}
	printf("gate (b) %-24s %s KV, %u+%u+%u injected, %u prefilled: max |logit diff| %.3g (of %.3g), argmax %d / %d\n",
	       name, dt_name(dt), nh, nf, nt, nq, worst, big, ai, af);
	CHECK(full != NULL);
	CHECK(worst <= (dt == INFS_DTYPE_F32 ? 1e-4f : dt == INFS_DTYPE_F16 ? 2e-2f : FP8_LOGIT_TOL) * (1 + big));
	CHECK(ai == af);
	free(inj);
	free(all);
	infs_engine_free(e);
	infs_store_close(st);
	scratch_cleanup();
}

static int32_t *tokens_of(const infs_model *m, const char *text, uint32_t *n, unsigned flags)
{
	const infs_tokenizer *tok = infs_model_tokenizer(m);
	size_t cnt = 0;
	CHECK_OK(infs_tokenize(tok, text, strlen(text), flags, NULL, 0, &cnt));
	int32_t *t = malloc((cnt ? cnt : 1) * sizeof *t);
	CHECK_OK(infs_tokenize(tok, text, strlen(text), flags, t, cnt, &cnt));
	*n = (uint32_t)cnt;
	return t;
}

static void gate_model(const char *path, const char *name)
{
	infs_model *m = NULL;
	CHECK_OK(infs_model_load(&m, path, NULL));
	if (!m)
		return;
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, m));
	infs_engine *e = NULL;
	CHECK_OK(infs_engine_create(&e, m, NULL));
	const int32_t *hdr = NULL;
	uint32_t nh = 0;
	if (e && infs_engine_header(&hdr, &nh, e) == INFS_OK) {
		/* The real layout: the engine's header and footer, a rendered fact, a question. */
		char *fact_text = NULL;
		CHECK_OK(infs_fact_render(&fact_text, "Maya adopted a three-legged cat named Biscuit.",
		                          "{\"date\": \"2026-01-14\", \"speaker\": \"Maya\"}"));
		uint32_t nf = 0, nq = 0;
		int32_t *fact = tokens_of(m, fact_text, &nf, 0), *q = NULL;
		const infs__engine_view *v = infs__engine_view_of(e);
		CHECK_OK(infs__compose_question(&q, &nq, v->prompt, m, "What is the name of Maya's cat?"));
		for (int d = 0; d < 3; d++) {
			infs_dtype dt = d == 2 ? INFS_DTYPE_FP8_E4M3 : d ? INFS_DTYPE_F16 : INFS_DTYPE_F32;
			gate_a(m, name, dt, fact, nf, 37);
			/* q opens with the footer: gate (b) takes the question after it. */
			gate_b(m, name, dt, hdr, nh, fact, nf, v->prompt->footer, v->prompt->n_footer, q + v->prompt->n_footer,
			       nq - v->prompt->n_footer);
		}
		free(fact);
		free(q);
		infs_free(fact_text);
	} else {
		/* No tokenizer: token ids of the same shape. */
		enum { NH = 9, NF = 7, NT = 4, NQ = 6 };
		int32_t t[NH + NF + NT + NQ];
		for (int i = 0; i < NH + NF + NT + NQ; i++)
			t[i] = (int32_t)((i * 53 + 17) % info.n_vocab);
		for (int d = 0; d < 3; d++) {
			infs_dtype dt = d == 2 ? INFS_DTYPE_FP8_E4M3 : d ? INFS_DTYPE_F16 : INFS_DTYPE_F32;
			gate_a(m, name, dt, t + NH, NF, 0);
			gate_a(m, name, dt, t + NH, NF, 23);
			gate_b(m, name, dt, t, NH, t + NH, NF, t + NH + NF, NT, t + NH + NF + NT, NQ);
		}
	}
	infs_engine_free(e);
	infs_model_free(m);
}

int main(int argc, char **argv)
{
	CHECK(argc >= 3);
	for (int i = 2; i < argc; i++) {
		char path[1024];
		if (!strcmp(argv[i], "smollm2"))
			cache_path(path, sizeof path, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
		else
			snprintf(path, sizeof path, "%s/%s", argv[1], argv[i]);
		gate_model(path, argv[i]);
	}
	CHECK_DONE();
}

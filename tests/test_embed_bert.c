/* The BERT forward pass against transformers' BertModel on a small random
 * model (tests/fixtures/embed/tiny_bert.json, made by make_goldens.py): every
 * pooling mode, packing versus one sequence at a time, and thread counts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embed/bert.h"
#include "check.h"
#include "util/json.h"
#include "read_file.h"

/* The weights, converted to float, kept alive for the test. */
static float *arena[64];
static int n_arena;

static const float *floats(const infs__json *v, size_t expect)
{
	if (!v || v->type != INFS_JSON_ARRAY || v->len != expect || n_arena == 64) {
		fprintf(stderr, "weight array of %zu floats missing or of another size\n", expect);
		exit(1);
	}
	float *f = malloc(expect * sizeof *f);
	for (size_t i = 0; i < expect; i++)
		f[i] = (float)v->items[i].number;
	arena[n_arena++] = f;
	return f;
}

static const float *weight(const infs__json *ws, const char *name, size_t n)
{
	return floats(infs__json_get(ws, name), n);
}

static const float *layer_weight(const infs__json *ws, unsigned l, const char *name, size_t n)
{
	char key[128];
	snprintf(key, sizeof key, "encoder.layer.%u.%s", l, name);
	return weight(ws, key, n);
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
	float m = 0;
	for (size_t i = 0; i < n; i++)
		m = fmaxf(m, fabsf(a[i] - b[i]));
	return m;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_embed_bert FIXTURE-DIR\n");
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/tiny_bert.json", argv[1]);
	size_t len;
	char *text = read_file(path, &len);
	CHECK(text != NULL);
	if (!text)
		CHECK_DONE();
	infs__json *root = NULL;
	CHECK_OK(infs__json_parse(&root, text, len));
	free(text);
	if (!root)
		CHECK_DONE();

	const infs__json *c = infs__json_get(root, "config");
	infs__bert_config cfg = {
		.n_vocab = (uint32_t)infs__json_number(infs__json_get(c, "vocab_size"), 0),
		.n_pos = (uint32_t)infs__json_number(infs__json_get(c, "max_position_embeddings"), 0),
		.n_types = (uint32_t)infs__json_number(infs__json_get(c, "type_vocab_size"), 0),
		.dim = (uint32_t)infs__json_number(infs__json_get(c, "hidden_size"), 0),
		.n_layers = (uint32_t)infs__json_number(infs__json_get(c, "num_hidden_layers"), 0),
		.n_heads = (uint32_t)infs__json_number(infs__json_get(c, "num_attention_heads"), 0),
		.n_ffn = (uint32_t)infs__json_number(infs__json_get(c, "intermediate_size"), 0),
		.ln_eps = (float)infs__json_number(infs__json_get(c, "layer_norm_eps"), 0),
	};
	CHECK(cfg.dim == 12 && cfg.n_layers == 2 && cfg.n_heads == 3);
	size_t d = cfg.dim, f = cfg.n_ffn;

	const infs__json *ws = infs__json_get(root, "weights");
	infs__bert_layer layers[2];
	for (unsigned l = 0; l < cfg.n_layers && l < 2; l++) {
		layers[l] = (infs__bert_layer){
			.wq = layer_weight(ws, l, "attention.self.query.weight", d * d),
			.bq = layer_weight(ws, l, "attention.self.query.bias", d),
			.wk = layer_weight(ws, l, "attention.self.key.weight", d * d),
			.bk = layer_weight(ws, l, "attention.self.key.bias", d),
			.wv = layer_weight(ws, l, "attention.self.value.weight", d * d),
			.bv = layer_weight(ws, l, "attention.self.value.bias", d),
			.wo = layer_weight(ws, l, "attention.output.dense.weight", d * d),
			.bo = layer_weight(ws, l, "attention.output.dense.bias", d),
			.ln1_w = layer_weight(ws, l, "attention.output.LayerNorm.weight", d),
			.ln1_b = layer_weight(ws, l, "attention.output.LayerNorm.bias", d),
			.w_up = layer_weight(ws, l, "intermediate.dense.weight", f * d),
			.b_up = layer_weight(ws, l, "intermediate.dense.bias", f),
			.w_down = layer_weight(ws, l, "output.dense.weight", d * f),
			.b_down = layer_weight(ws, l, "output.dense.bias", d),
			.ln2_w = layer_weight(ws, l, "output.LayerNorm.weight", d),
			.ln2_b = layer_weight(ws, l, "output.LayerNorm.bias", d),
		};
	}
	infs__bert_weights w = {
		.word = weight(ws, "embeddings.word_embeddings.weight", cfg.n_vocab * d),
		.pos = weight(ws, "embeddings.position_embeddings.weight", cfg.n_pos * d),
		.type = weight(ws, "embeddings.token_type_embeddings.weight", cfg.n_types * d),
		.ln_w = weight(ws, "embeddings.LayerNorm.weight", d),
		.ln_b = weight(ws, "embeddings.LayerNorm.bias", d),
		.layers = layers,
	};

	/* Pack the sequences back to back. */
	const infs__json *seqs = infs__json_get(root, "sequences");
	const infs__json *hidden = infs__json_get(root, "hidden");
	const infs__json *mean = infs__json_get(root, "mean_normalized");
	CHECK(seqs && hidden && mean && seqs->len == 4 && hidden->len == 4 && mean->len == 4);
	uint32_t n_seq = 4, offsets[5] = {0};
	int32_t ids[64];
	for (uint32_t s = 0; s < n_seq; s++) {
		const infs__json *sq = &seqs->items[s];
		offsets[s + 1] = offsets[s] + (uint32_t)sq->len;
		for (size_t t = 0; t < sq->len; t++)
			ids[offsets[s] + t] = (int32_t)sq->items[t].number;
	}
	uint32_t n_tok = offsets[n_seq];
	const float *want_mean = NULL, *want_hidden[4];
	{
		float *m = malloc(n_seq * d * sizeof *m);
		for (uint32_t s = 0; s < n_seq; s++) {
			for (size_t i = 0; i < d; i++)
				m[s * d + i] = (float)mean->items[s].items[i].number;
			want_hidden[s] = floats(&hidden->items[s], (offsets[s + 1] - offsets[s]) * d);
		}
		arena[n_arena++] = m;
		want_mean = m;
	}

	infs__pool *pools[3] = {NULL, NULL, NULL};
	for (uint32_t i = 0; i < 3; i++)
		CHECK_OK(infs__pool_create(&pools[i], i + 1));
	if (!pools[0] || !pools[1] || !pools[2])
		CHECK_DONE();
	infs__pool *pool = pools[1];
	float *scratch = malloc(infs__bert_scratch_floats(&cfg, n_tok, 3) * sizeof *scratch);
	float out[4 * 12], one[12], want[4 * 12];

	/* Mean pooling over the mask, normalised: sentence-transformers' recipe. */
	for (unsigned i = 0; i < 3; i++) {
		infs__bert_encode(&cfg, &w, ids, offsets, n_seq, INFS__POOL_MEAN, 1, pools[i], scratch,
		                  out);
		CHECK(max_abs_diff(out, want_mean, n_seq * d) < 2e-5f);
	}
	/* Each sequence alone gives what it gives in the packed batch. */
	for (uint32_t s = 0; s < n_seq; s++) {
		uint32_t o1[2] = {0, offsets[s + 1] - offsets[s]};
		infs__bert_encode(&cfg, &w, ids + offsets[s], o1, 1, INFS__POOL_MEAN, 1, pool, scratch, one);
		CHECK(max_abs_diff(one, want_mean + s * d, d) < 2e-5f);
	}

	/* CLS, max and mean/sqrt(len), unnormalised, from the hidden states. */
	for (uint32_t s = 0; s < n_seq; s++)
		memcpy(want + s * d, want_hidden[s], d * sizeof *want);
	infs__bert_encode(&cfg, &w, ids, offsets, n_seq, INFS__POOL_CLS, 0, pool, scratch, out);
	CHECK(max_abs_diff(out, want, n_seq * d) < 5e-5f);

	for (uint32_t s = 0; s < n_seq; s++) {
		uint32_t n = offsets[s + 1] - offsets[s];
		for (size_t i = 0; i < d; i++) {
			float mx = -INFINITY, sum = 0;
			for (uint32_t t = 0; t < n; t++) {
				mx = fmaxf(mx, want_hidden[s][t * d + i]);
				sum += want_hidden[s][t * d + i];
			}
			want[s * d + i] = mx;
			out[s * d + i] = sum / sqrtf((float)n);
		}
	}
	float sqrt_len[4 * 12];
	memcpy(sqrt_len, out, sizeof sqrt_len);
	infs__bert_encode(&cfg, &w, ids, offsets, n_seq, INFS__POOL_MAX, 0, pool, scratch, out);
	CHECK(max_abs_diff(out, want, n_seq * d) < 5e-5f);
	infs__bert_encode(&cfg, &w, ids, offsets, n_seq, INFS__POOL_MEAN_SQRT_LEN, 0, pools[0], scratch,
	                  out);
	CHECK(max_abs_diff(out, sqrt_len, n_seq * d) < 1e-4f);

	/* Normalised output has unit length. */
	infs__bert_encode(&cfg, &w, ids, offsets, n_seq, INFS__POOL_MAX, 1, pools[2], scratch, out);
	for (uint32_t s = 0; s < n_seq; s++) {
		double n2 = 0;
		for (size_t i = 0; i < d; i++)
			n2 += (double)out[s * d + i] * out[s * d + i];
		CHECK(fabs(n2 - 1.0) < 1e-5);
	}

	free(scratch);
	for (uint32_t i = 0; i < 3; i++)
		infs__pool_free(pools[i]);
	for (int i = 0; i < n_arena; i++)
		free(arena[i]);
	infs__json_free(root);
	CHECK_DONE();
}

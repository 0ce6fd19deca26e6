/* The embedder on the real all-MiniLM-L6-v2 ($INFS_CACHE/minilm, fetched by
 * scripts/fetch-models.sh) against sentence-transformers' goldens in
 * tests/fixtures/embed (make_goldens.py): token ids equal to the reference
 * tokenizer's, and cosine similarity >= 0.999 with its embeddings, on the
 * hand-written edge cases and on every LoCoMo fact and question (read from
 * the LoCoMo directory: argv[2], or $INFS_LOCOMO). Also the API's argument
 * checks, prompts, truncation, threads and batch independence.
 *
 * usage: test_embed_model FIXTURE-DIR LOCOMO-DIR */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_path.h"
#include "check.h"
#include "embed/embedder.h"
#include "util/json.h"
#include "read_file.h"

#define MIN_COSINE 0.999

static infs__json *load_json(const char *path)
{
	size_t len;
	char *text = read_file(path, &len);
	if (!text) {
		fprintf(stderr, "cannot read %s\n", path);
		return NULL;
	}
	infs__json *root = NULL;
	CHECK_OK(infs__json_parse(&root, text, len));
	free(text);
	return root;
}

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

static double cosine(const float *a, const float *b, size_t n)
{
	double ab = 0, aa = 0, bb = 0;
	for (size_t i = 0; i < n; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
	}
	return ab / sqrt(aa * bb);
}

static uint32_t rd32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

struct stats {
	size_t texts, id_mismatch, below;
	double min_cos, sum_cos;
};

static void stats_add(struct stats *s, double c)
{
	if (s->texts == 0 || c < s->min_cos)
		s->min_cos = c;
	s->sum_cos += c;
	s->texts++;
	if (!(c >= MIN_COSINE))
		s->below++;
}

static int ids_equal(const infs_embedder *e, const char *text, const int32_t *want, uint32_t n_want)
{
	int32_t ids[512];
	uint32_t n = 0;
	CHECK_OK(infs__embedder_tokenize(e, text, ids, &n));
	if (n != n_want)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] != want[i])
			return 0;
	return 1;
}

/* The hand-written cases of cases.json. */
static void check_cases(const infs_embedder *e, const char *fixtures, struct stats *st)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/cases.json", fixtures);
	infs__json *root = load_json(path);
	CHECK(root != NULL);
	if (!root)
		return;
	const infs__json *cases = infs__json_get(root, "cases");
	CHECK(cases && cases->type == INFS_JSON_ARRAY && cases->len > 0);
	size_t n = cases ? cases->len : 0, dim = infs_embedder_dim(e);
	const char **texts = calloc(n, sizeof *texts);
	float *out = malloc(n * dim * sizeof *out), *want = malloc(dim * sizeof *want);
	for (size_t i = 0; i < n; i++) {
		const infs__json *c = &cases->items[i];
		texts[i] = infs__json_str(infs__json_get(c, "text"), "");
		const infs__json *ids = infs__json_get(c, "ids");
		int32_t w[512];
		uint32_t nw = ids ? (uint32_t)ids->len : 0;
		for (uint32_t t = 0; t < nw && t < 512; t++)
			w[t] = (int32_t)ids->items[t].number;
		if (!ids_equal(e, texts[i], w, nw)) {
			fprintf(stderr, "case %zu: token ids differ from the reference\n", i);
			st->id_mismatch++;
		}
	}
	CHECK_OK(infs_embed(out, e, texts, n, NULL));
	for (size_t i = 0; i < n; i++) {
		const infs__json *c = &cases->items[i];
		double scale = infs__json_number(infs__json_get(c, "scale"), 0);
		const char *hex = infs__json_str(infs__json_get(c, "q"), "");
		CHECK(strlen(hex) == 2 * dim);
		for (size_t k = 0; k < dim && strlen(hex) == 2 * dim; k++) {
			unsigned byte;
			sscanf(hex + 2 * k, "%2x", &byte);
			want[k] = (float)((int8_t)byte * scale);
		}
		double cs = cosine(out + i * dim, want, dim);
		if (!(cs >= MIN_COSINE))
			fprintf(stderr, "case %zu: cosine %.6f\n", i, cs);
		stats_add(st, cs);
	}
	free(texts);
	free(out);
	free(want);
	infs__json_free(root);
}

/* Every control byte alone and in text against the reference tokenizer
 * (tests/fixtures/tokenizer/control_bytes.json): BERT's cleaning drops them
 * or makes them spaces. The embedder takes C strings, so the cases holding
 * a NUL are not user text and are left out. */
static void check_control_bytes(const infs_embedder *e, const char *fixtures)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/../tokenizer/control_bytes.json", fixtures);
	infs__json *root = load_json(path);
	CHECK(root != NULL);
	const infs__json *cases = infs__json_get(infs__json_get(root, "minilm"), "cases");
	CHECK(cases && cases->type == INFS_JSON_ARRAY && cases->len == 33 * 7);
	size_t checked = 0;
	for (size_t i = 0; cases && i < cases->len; i++) {
		const char *hex = infs__json_str(infs__json_get(&cases->items[i], "hex"), "");
		char text[128];
		size_t len = strlen(hex) / 2, nul = 0;
		CHECK(len < sizeof text);
		for (size_t k = 0; k < len && k < sizeof text - 1; k++) {
			unsigned byte;
			sscanf(hex + 2 * k, "%2x", &byte);
			text[k] = (char)byte;
			nul += byte == 0;
		}
		text[len < sizeof text ? len : sizeof text - 1] = '\0';
		if (nul)
			continue;
		const infs__json *ids = infs__json_get(&cases->items[i], "ids");
		int32_t w[128];
		uint32_t nw = ids ? (uint32_t)ids->len : 0;
		for (uint32_t t = 0; t < nw && t < 128; t++)
			w[t] = (int32_t)ids->items[t].number;
		if (!ids_equal(e, text, w, nw)) {
			fprintf(stderr, "control case %s: token ids differ from the reference\n", hex);
			check_failures++;
		}
		checked++;
	}
	CHECK(checked == 32 * 7);
	infs__json_free(root);
}

/* The texts of one LoCoMo conversation in make_goldens.py's order: the facts
 * of each session_K_observation, then every question. */
static size_t locomo_texts(const infs__json *conv, const char **texts, size_t cap)
{
	size_t n = 0;
	for (size_t k = 0; k < conv->len; k++) {
		const char *key = conv->keys[k];
		size_t kl = strlen(key);
		if (strncmp(key, "session_", 8) != 0 || kl < 12 || strcmp(key + kl - 12, "_observation"))
			continue;
		const infs__json *sess = &conv->items[k];
		for (size_t s = 0; s < sess->len; s++)
			for (size_t f = 0; f < sess->items[s].len; f++)
				if (n < cap)
					texts[n++] = infs__json_str(&sess->items[s].items[f].items[0], "");
	}
	const infs__json *qa = infs__json_get(conv, "qa");
	for (size_t q = 0; qa && q < qa->len; q++)
		if (n < cap)
			texts[n++] = infs__json_str(infs__json_get(&qa->items[q], "question"), "");
	return n;
}

static void check_locomo(const infs_embedder *e, const char *fixtures, const char *locomo,
                         const char *conv_name, struct stats *st)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.json", locomo, conv_name);
	infs__json *conv = load_json(path);
	snprintf(path, sizeof path, "%s/locomo-%s.bin", fixtures, conv_name);
	size_t len;
	uint8_t *gold = (uint8_t *)read_file(path, &len);
	CHECK(conv != NULL && gold != NULL);
	if (!conv || !gold) {
		infs__json_free(conv);
		free(gold);
		return;
	}
	size_t dim = infs_embedder_dim(e);
	CHECK(len >= 16 && memcmp(gold, "INFSEMB1", 8) == 0 && rd32(gold + 12) == dim);
	size_t n_gold = rd32(gold + 8);
	const char **texts = calloc(4096, sizeof *texts);
	size_t n = locomo_texts(conv, texts, 4096);
	CHECK(n == n_gold);
	float *out = malloc(n * dim * sizeof *out), *want = malloc(dim * sizeof *want);
	CHECK_OK(infs_embed(out, e, texts, n, NULL));
	size_t at = 16;
	for (size_t i = 0; i < n && i < n_gold; i++) {
		if (at + 12 > len)
			break;
		uint64_t h = rd32(gold + at) | (uint64_t)rd32(gold + at + 4) << 32;
		uint32_t n_ids = rd32(gold + at + 8);
		at += 12;
		if (at + 2 * (size_t)n_ids + 4 + dim > len || n_ids > 512)
			break;
		CHECK(h == fnv1a64(texts[i])); /* the data is the one the goldens came from */
		int32_t w[512];
		for (uint32_t t = 0; t < n_ids; t++)
			w[t] = gold[at + 2 * t] | gold[at + 2 * t + 1] << 8;
		at += 2 * (size_t)n_ids;
		if (!ids_equal(e, texts[i], w, n_ids)) {
			fprintf(stderr, "%s text %zu: token ids differ from the reference\n", conv_name, i);
			st->id_mismatch++;
		}
		uint32_t sb = rd32(gold + at);
		float scale;
		memcpy(&scale, &sb, 4);
		at += 4;
		for (size_t k = 0; k < dim; k++)
			want[k] = (int8_t)gold[at + k] * scale;
		at += dim;
		double cs = cosine(out + i * dim, want, dim);
		if (!(cs >= MIN_COSINE))
			fprintf(stderr, "%s text %zu: cosine %.6f\n", conv_name, i, cs);
		stats_add(st, cs);
	}
	CHECK(at == len);
	free(texts);
	free(out);
	free(want);
	free(gold);
	infs__json_free(conv);
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
	float m = 0;
	for (size_t i = 0; i < n; i++)
		m = fmaxf(m, fabsf(a[i] - b[i]));
	return m;
}

/* infs_embed on one embedder from several threads at once. */
struct concurrent {
	const infs_embedder *e;
	const char *const *texts;
	size_t n;
	float *out;
	int rc;
};

static void *embed_thread(void *arg)
{
	struct concurrent *c = arg;
	c->rc = infs_embed(c->out, c->e, c->texts, c->n, NULL);
	return NULL;
}

static void check_concurrent(const infs_embedder *e)
{
	static const char *const texts[] = {
		"Maya ran along the river at dawn.", "Tomas builds furniture from cork oak.",
		"What does Maya study?", "Tomas ran a charity race in Lisbon.",
		"When did Tomas sign up for a pottery class?", "Maya is learning the cello.",
	};
	size_t n = sizeof texts / sizeof texts[0], dim = infs_embedder_dim(e);
	float *ref = malloc(n * dim * sizeof *ref);
	CHECK_OK(infs_embed(ref, e, texts, n, NULL));
	struct concurrent c[3];
	pthread_t t[3];
	for (int i = 0; i < 3; i++) {
		c[i] = (struct concurrent){e, texts, n, malloc(n * dim * sizeof(float)), -1};
		CHECK(pthread_create(&t[i], NULL, embed_thread, &c[i]) == 0);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		CHECK(c[i].rc == INFS_OK);
		CHECK(max_abs_diff(c[i].out, ref, n * dim) < 1e-6f);
		free(c[i].out);
	}
	free(ref);
}

static void check_api(const char *dir, const infs_embedder *e)
{
	infs_embedder *x = NULL;
	infs_embedder_options o;
	CHECK_OK(infs_embedder_options_init(&o, INFS_EMBEDDER_OPTIONS_VERSION));
	CHECK(o.device == -1 && o.n_threads == 0 && o.max_seq_length == 0);
	CHECK_ERR(infs_embedder_options_init(&o, 99), INFS_EINVAL);
	CHECK_ERR(infs_embedder_options_init(NULL, INFS_EMBEDDER_OPTIONS_VERSION), INFS_EINVAL);
	CHECK_ERR(infs_embedder_load(NULL, dir, NULL), INFS_EINVAL);
	CHECK_ERR(infs_embedder_load(&x, NULL, NULL), INFS_EINVAL);
	CHECK_ERR(infs_embedder_load(&x, "/nonexistent/model", NULL), INFS_ENOTFOUND);
	o.device = 0; /* with CUDA built in, the gpu suite's gpu-embed loads it */
	if (!(infs_features() & INFS_FEATURE_CUDA))
		CHECK_ERR(infs_embedder_load(&x, dir, &o), INFS_EUNSUPPORTED);
	o.device = -2;
	CHECK_ERR(infs_embedder_load(&x, dir, &o), INFS_EINVAL);
	o.device = -1;
	o.max_seq_length = 1;
	CHECK_ERR(infs_embedder_load(&x, dir, &o), INFS_ERANGE);
	o.max_seq_length = 513;
	CHECK_ERR(infs_embedder_load(&x, dir, &o), INFS_ERANGE);
	o.version = 7;
	o.max_seq_length = 0;
	CHECK_ERR(infs_embedder_load(&x, dir, &o), INFS_EINVAL);
	CHECK(x == NULL);
	infs_embedder_free(NULL);
	CHECK(infs_embedder_dim(NULL) == 0 && infs_embedder_max_seq_length(NULL) == 0);

	size_t dim = infs_embedder_dim(e);
	const char *texts[] = {"Maya ran along the river at dawn.", NULL, "What is Tomas's hobby?"};
	float *out = malloc(3 * dim * sizeof *out), *ref = malloc(3 * dim * sizeof *ref);
	for (size_t i = 0; i < 3 * dim; i++)
		out[i] = 42.0f;
	infs_embed_options eo;
	CHECK_OK(infs_embed_options_init(&eo, INFS_EMBED_OPTIONS_VERSION));
	CHECK(eo.prompt == NULL);
	CHECK_ERR(infs_embed_options_init(&eo, 0), INFS_EINVAL);
	CHECK_ERR(infs_embed(NULL, e, texts, 1, NULL), INFS_EINVAL);
	CHECK_ERR(infs_embed(out, NULL, texts, 1, NULL), INFS_EINVAL);
	CHECK_ERR(infs_embed(out, e, NULL, 1, NULL), INFS_EINVAL);
	CHECK_ERR(infs_embed(out, e, texts, 3, NULL), INFS_EINVAL); /* texts[1] is NULL */
	eo.version = 5;
	CHECK_ERR(infs_embed(out, e, texts, 1, &eo), INFS_EINVAL);
	CHECK_OK(infs_embed(out, e, texts, 0, NULL));
	CHECK_OK(infs_embed(out, e, NULL, 0, NULL));
	int untouched = 1;
	for (size_t i = 0; i < 3 * dim; i++)
		untouched &= out[i] == 42.0f;
	CHECK(untouched);

	/* Unit length, and a text's vector does not depend on its batch. */
	texts[1] = "Tomas paints sunsets.";
	CHECK_OK(infs_embed(out, e, texts, 3, NULL));
	for (size_t i = 0; i < 3; i++) {
		double n2 = 0;
		for (size_t k = 0; k < dim; k++)
			n2 += (double)out[i * dim + k] * out[i * dim + k];
		CHECK(fabs(n2 - 1) < 1e-5);
		CHECK_OK(infs_embed(ref, e, texts + i, 1, NULL));
		CHECK(max_abs_diff(out + i * dim, ref, dim) < 1e-5f);
	}

	/* A prompt is prepended to the text. */
	const char *prompted[] = {"query: What is Tomas's hobby?"};
	eo.version = INFS_EMBED_OPTIONS_VERSION;
	eo.prompt = "query: ";
	CHECK_OK(infs_embed(out, e, texts + 2, 1, &eo));
	CHECK_OK(infs_embed(ref, e, prompted, 1, NULL));
	CHECK(max_abs_diff(out, ref, dim) < 1e-6f);
	CHECK(cosine(out, ref + 0, dim) > 0.99999);
	CHECK_OK(infs_embed(ref, e, texts + 2, 1, NULL));
	CHECK(cosine(out, ref, dim) < 0.9999); /* and it changes the vector */

	/* One thread gives what the default threads give; a shorter
	 * max_seq_length truncates. */
	CHECK_OK(infs_embedder_options_init(&o, INFS_EMBEDDER_OPTIONS_VERSION));
	o.n_threads = 1;
	o.max_seq_length = 8;
	CHECK_OK(infs_embedder_load(&x, dir, &o));
	CHECK(infs_embedder_max_seq_length(x) == 8);
	if (x) {
		int32_t ids[8];
		uint32_t n = 0;
		CHECK_OK(infs__embedder_tokenize(x, "one two three four five six seven eight", ids, &n));
		CHECK(n == 8 && ids[0] == 101 && ids[7] == 102 && ids[1] == 2028 && ids[6] == 2416);
		CHECK_OK(infs__embedder_tokenize(x, texts[1], ids, &n));
		CHECK(n < 8);
		CHECK_OK(infs_embed(out, x, texts + 1, 1, NULL)); /* fits whole */
		CHECK_OK(infs_embed(ref, e, texts + 1, 1, NULL));
		CHECK(max_abs_diff(out, ref, dim) < 1e-5f);
		const char *longer[] = {"one two three four five six seven eight",
		                        "one two three four five six"};
		CHECK_OK(infs_embed(out, x, longer, 2, NULL));
		CHECK(max_abs_diff(out, out + dim, dim) < 1e-5f);
	}
	infs_embedder_free(x);
	free(out);
	free(ref);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test_embed_model FIXTURE-DIR LOCOMO-DIR\n");
		return 2;
	}
	const char *fixtures = argv[1];
	const char *locomo = getenv("INFS_LOCOMO") && *getenv("INFS_LOCOMO") ? getenv("INFS_LOCOMO")
	                                                                     : argv[2];
	char dir[4096];
	cache_path(dir, sizeof dir, "minilm");
	infs_embedder *e = NULL;
	CHECK_OK(infs_embedder_load(&e, dir, NULL));
	if (!e)
		CHECK_DONE();
	CHECK(infs_embedder_dim(e) == 384);
	CHECK(infs_embedder_max_seq_length(e) == 256);

	check_api(dir, e);
	check_concurrent(e);

	struct stats cases = {0}, conv = {0};
	check_cases(e, fixtures, &cases);
	check_control_bytes(e, fixtures);
	static const char *const convs[] = {"conv-26", "conv-30", "conv-41", "conv-42", "conv-43"};
	for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
		check_locomo(e, fixtures, locomo, convs[i], &conv);
	printf("edge cases: %zu texts, %zu token mismatches, cosine min %.6f mean %.6f\n",
	       cases.texts, cases.id_mismatch, cases.min_cos, cases.sum_cos / (double)cases.texts);
	printf("LoCoMo: %zu texts, %zu token mismatches, cosine min %.6f mean %.6f\n", conv.texts,
	       conv.id_mismatch, conv.min_cos, conv.sum_cos / (double)conv.texts);
	CHECK(cases.texts == 31 && cases.id_mismatch == 0 && cases.below == 0);
	CHECK(conv.texts == 2209 && conv.id_mismatch == 0 && conv.below == 0);
	infs_embedder_free(e);
	CHECK_DONE();
}

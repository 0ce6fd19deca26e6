/* The reference engine's pieces that need no real model: the sampler
 * (greedy, temperature, top-p, seeds), fact rendering, and the engine's
 * argument checks and state on errors, on a tiny model. argv[1]:
 * tests/fixtures/model. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "engine/sampling.h"
#include "model_store_util.h"

static void sampler(void)
{
	float tie[4] = { 1, 3, 3, 2 };
	CHECK(infs__argmax(tie, 4) == 1);
	infs__sampler s;
	CHECK_OK(infs__sampler_init(&s, 4, 0, 1, 0));
	CHECK(infs__sample(&s, tie) == 1);
	infs__sampler_free(&s);

	/* Temperature 1 over logits (0, ln 3): token 1 with probability 3/4. */
	float two[2] = { 0, logf(3) };
	CHECK_OK(infs__sampler_init(&s, 2, 1, 1, 7));
	int ones = 0;
	for (int i = 0; i < 4000; i++)
		ones += infs__sample(&s, two) == 1;
	infs__sampler_free(&s);
	printf("temperature 1: token 1 drawn %d of 4000 times (expected 3000)\n", ones);
	CHECK(ones > 2850 && ones < 3150);

	/* Temperature 0.5 sharpens to 9/10. */
	CHECK_OK(infs__sampler_init(&s, 2, 0.5f, 1, 7));
	ones = 0;
	for (int i = 0; i < 4000; i++)
		ones += infs__sample(&s, two) == 1;
	infs__sampler_free(&s);
	CHECK(ones > 3500 && ones < 3700);

	/* top-p keeps the smallest set reaching p: with p 0.7 only token 1 (0.75). */
	CHECK_OK(infs__sampler_init(&s, 2, 1, 0.7f, 3));
	for (int i = 0; i < 200; i++)
		CHECK(infs__sample(&s, two) == 1);
	infs__sampler_free(&s);

	/* A seed fixes the draws; another seed gives others. */
	float flat[16];
	for (int i = 0; i < 16; i++)
		flat[i] = 0;
	int32_t a[32], b[32], c[32];
	infs__sampler s1, s2, s3;
	CHECK_OK(infs__sampler_init(&s1, 16, 1, 1, 11));
	CHECK_OK(infs__sampler_init(&s2, 16, 1, 1, 11));
	CHECK_OK(infs__sampler_init(&s3, 16, 1, 1, 12));
	for (int i = 0; i < 32; i++) {
		a[i] = infs__sample(&s1, flat);
		b[i] = infs__sample(&s2, flat);
		c[i] = infs__sample(&s3, flat);
		CHECK(a[i] >= 0 && a[i] < 16);
	}
	CHECK(!memcmp(a, b, sizeof a));
	CHECK(memcmp(a, c, sizeof a) != 0);
	infs__sampler_free(&s1);
	infs__sampler_free(&s2);
	infs__sampler_free(&s3);
}

static void render(void)
{
	char *s = NULL;
	CHECK_OK(infs_fact_render(&s, "Likes tea.", NULL));
	CHECK(s && !strcmp(s, "- Likes tea.\n"));
	infs_free(s);
	CHECK_OK(infs_fact_render(&s, "Likes tea.", "{\"speaker\": \"Ann\", \"date\": \"8 May 2023\", \"x\": 1}"));
	CHECK(s && !strcmp(s, "- (8 May 2023) Ann: Likes tea.\n"));
	infs_free(s);
	CHECK_OK(infs_fact_render(&s, "Likes tea.", "{\"speaker\": \"Ann\"}"));
	CHECK(s && !strcmp(s, "- Ann: Likes tea.\n"));
	infs_free(s);
	s = NULL;
	CHECK_ERR(infs_fact_render(&s, "x", "{not json"), INFS_EFORMAT);
	CHECK(s == NULL);
	CHECK_ERR(infs_fact_render(NULL, "x", NULL), INFS_EINVAL);
	CHECK_ERR(infs_fact_render(&s, NULL, NULL), INFS_EINVAL);
}

static void engine(const char *dir)
{
	char path[1024], spath[600];
	snprintf(path, sizeof path, "%s/llama", dir);
	infs_model *m = NULL;
	CHECK_OK(infs_model_load(&m, path, NULL));
	if (!m)
		return;
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, m));

	CHECK_ERR(infs_engine_create(NULL, m, NULL), INFS_EINVAL);
	infs_engine *e = NULL;
	CHECK_ERR(infs_engine_create(&e, NULL, NULL), INFS_EINVAL);
	infs_engine_options o = INFS_ENGINE_OPTIONS_INIT;
	o.version = 0;
	CHECK_ERR(infs_engine_create(&e, m, &o), INFS_EINVAL);
	o = (infs_engine_options)INFS_ENGINE_OPTIONS_INIT;
	o.n_ctx = 8;
	o.block_size = 16;
	CHECK_ERR(infs_engine_create(&e, m, &o), INFS_ERANGE);
	o.block_size = 3;
	o.kv_dtype = (infs_dtype)9;
	CHECK_ERR(infs_engine_create(&e, m, &o), INFS_EINVAL);
	o.kv_dtype = INFS_DTYPE_F16;
	/* A device engine needs the model on that device (and a CUDA build). */
	o.device = -2;
	CHECK_ERR(infs_engine_create(&e, m, &o), INFS_EINVAL);
	o.device = 0;
	int rc = infs_engine_create(&e, m, &o);
	CHECK(rc == INFS_EUNSUPPORTED || rc == INFS_EINVAL);
	CHECK(e == NULL);
	/* Version 1 of the options: a host engine. */
	o.version = 1;
	CHECK_OK(infs_engine_create(&e, m, &o));
	infs_engine_free(e);
	e = NULL;
	o.version = INFS_ENGINE_OPTIONS_VERSION;
	o.device = -1;
	CHECK_OK(infs_engine_create(&e, m, &o));
	if (!e) {
		infs_model_free(m);
		return;
	}
	CHECK(infs_engine_logits(e) == NULL);

	/* A model without a tokenizer runs token ids but has no prompt layout. */
	const int32_t *hdr;
	uint32_t nh;
	CHECK_ERR(infs_engine_header(&hdr, &nh, e), INFS_EUNSUPPORTED);
	char *text = NULL;
	CHECK_ERR(infs_engine_generate(&text, NULL, e, NULL), INFS_EUNSUPPORTED);

	int32_t t[9];
	for (int i = 0; i < 9; i++)
		t[i] = (int32_t)((i * 13 + 1) % info.n_vocab);
	CHECK_ERR(infs_engine_prefill(e, t, 0), INFS_EINVAL);
	CHECK_ERR(infs_engine_prefill(e, NULL, 2), INFS_EINVAL);
	CHECK_ERR(infs_engine_prefill(e, t, 10), INFS_ERANGE);
	CHECK(infs_engine_n_past(e) == 0);
	CHECK_OK(infs_engine_prefill(e, t, 5));
	CHECK(infs_engine_n_past(e) == 5 && infs_engine_logits(e) != NULL);
	/* The capacity is rounded up to whole blocks: 9 tokens, 3 blocks of 3. */
	CHECK_ERR(infs_engine_prefill(e, t, 5), INFS_ERANGE);
	CHECK(infs_engine_n_past(e) == 5);

	/* Prefilling in pieces gives the logits of one prefill. */
	float *one = malloc(info.n_vocab * sizeof *one);
	CHECK_OK(infs_engine_prefill(e, t + 5, 4));
	memcpy(one, infs_engine_logits(e), info.n_vocab * sizeof *one);
	infs_engine_reset(e);
	CHECK(infs_engine_n_past(e) == 0 && infs_engine_logits(e) == NULL);
	CHECK_OK(infs_engine_prefill(e, t, 9));
	/* To the f16 rounding of the first piece's cached KV. */
	float worst = 0, big = 0;
	for (uint32_t i = 0; i < info.n_vocab; i++) {
		worst = fmaxf(worst, fabsf(one[i] - infs_engine_logits(e)[i]));
		big = fmaxf(big, fabsf(one[i]));
	}
	CHECK(worst < 2e-2f * (1 + big));
	free(one);

	/* Injection: unknown ids and a full cache change nothing. */
	infs_store *st = model_store_create(m, INFS_DTYPE_F16, 2, "engine", "s.infs", spath, sizeof spath);
	float emb[2] = { 1, 0 };
	infs_fact_input in = INFS_FACT_INPUT_INIT;
	in.tokens = t;
	in.n_tokens = 4;
	in.embedding = emb;
	uint64_t id = 0;
	CHECK_OK(infs_fact_encode(&id, st, "u", m, &in, 1, NULL));
	infs_engine_reset(e);
	uint64_t missing = id + 100;
	CHECK_ERR(infs_engine_inject(e, st, "u", &missing, 1), INFS_ENOTFOUND);
	CHECK_ERR(infs_engine_inject(e, st, "v", &id, 1), INFS_ENOTFOUND);
	CHECK(infs_engine_n_past(e) == 0);
	CHECK_OK(infs_engine_inject(e, st, "u", &id, 1));
	CHECK_OK(infs_engine_inject(e, st, "u", &id, 1));
	CHECK(infs_engine_n_past(e) == 8);
	CHECK_ERR(infs_engine_inject(e, st, "u", &id, 1), INFS_ERANGE);
	CHECK(infs_engine_n_past(e) == 8 && infs_engine_logits(e) == NULL);

	infs_answer *ans = NULL;
	CHECK_ERR(infs_engine_ask(&ans, e, st, NULL, "u", "q", NULL), INFS_EUNSUPPORTED);
	CHECK_ERR(infs_engine_prepare(e, st), INFS_EUNSUPPORTED);
	CHECK_ERR(infs_engine_ask(NULL, e, st, NULL, "u", "q", NULL), INFS_EINVAL);
	CHECK(ans == NULL);
	const char *qs[2] = { "q", NULL };
	infs_answer *many[2] = { (infs_answer *)1, (infs_answer *)1 };
	CHECK_ERR(infs_engine_ask_batch(many, e, st, NULL, "u", qs, 2, NULL), INFS_EINVAL); /* a NULL question */
	CHECK(many[0] == NULL && many[1] == NULL);
	CHECK_ERR(infs_engine_ask_batch(many, e, st, NULL, "u", qs, 1, NULL), INFS_EUNSUPPORTED); /* no template */
	CHECK_ERR(infs_engine_ask_batch(NULL, e, st, NULL, "u", qs, 1, NULL), INFS_EINVAL);

	infs_store_close(st);
	scratch_cleanup();
	infs_engine_free(e);
	infs_engine_free(NULL);
	infs_answer_free(NULL);
	infs_model_free(m);
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	sampler();
	render();
	engine(argv[1]);

	infs_generate_options go;
	CHECK_OK(infs_generate_options_init(&go, INFS_GENERATE_OPTIONS_VERSION));
	CHECK(go.top_p == 1 && go.temperature == 0);
	infs_ask_options ao;
	CHECK_ERR(infs_ask_options_init(&ao, 5), INFS_EINVAL);
	CHECK_OK(infs_ask_options_init(&ao, INFS_ASK_OPTIONS_VERSION));
	CHECK(ao.generate.version == INFS_GENERATE_OPTIONS_VERSION);
	infs_engine_options eo;
	CHECK_OK(infs_engine_options_init(&eo, INFS_ENGINE_OPTIONS_VERSION));
	CHECK_ERR(infs_engine_options_init(NULL, INFS_ENGINE_OPTIONS_VERSION), INFS_EINVAL);
	CHECK_DONE();
}

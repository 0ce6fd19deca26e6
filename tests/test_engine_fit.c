/* A fact longer than the engine's context (issue 38): it is refused when
 * checked before it is stored (infs_engine_fact_check, against
 * infs_engine_fact_limit), and one stored anyway (by a program that did not
 * check, or with a larger n_ctx) is left out of the prompts it cannot fit,
 * reported in infs_answer.n_left_out, instead of making every question of
 * its namespace fail: ask, ask_batch and full recompute on SmolLM2. */
#include <string.h>

#include "check.h"
#include "model_store_util.h"

/* "Maya likes tea. " 300 times: about 1500 tokens, above n_ctx 1024. */
static char *long_text(void)
{
	static const char piece[] = "Maya likes tea. ";
	char *s = malloc(300 * (sizeof piece - 1) + 1);
	s[0] = '\0';
	for (int i = 0; i < 300; i++)
		strcat(s, piece);
	return s;
}

/* Encodes text (rendered) after the engine's header; its id. */
static uint64_t encode(infs_store *st, const infs_engine *e, const infs_model *m, const infs_embedder *emb,
                       const char *text)
{
	char *r = NULL;
	CHECK_OK(infs_fact_render(&r, text, NULL));
	uint64_t id = 0;
	const char *texts[1] = { r }, *bare[1] = { text };
	encode_after_header(&id, st, "maya", e, m, emb, texts, bare, 1);
	infs_free(r);
	return id;
}

int main(void)
{
	char spath[600];
	infs_model *m;
	infs_embedder *emb;
	infs_store *st;
	if (!smollm2_memory(&m, &emb, &st, spath, sizeof spath, "engine-fit", NULL, NULL, NULL, 0))
		CHECK_DONE();
	infs_engine *e = host_engine_f16(m, 1024);
	if (!e)
		CHECK_DONE();
	CHECK_OK(infs_engine_prepare(e, st));

	/* The limit: n_ctx less the header, the footer, the answer's opening and
	 * the question's room. */
	uint32_t limit = 0;
	const int32_t *hdr;
	uint32_t nh;
	CHECK_OK(infs_engine_header(&hdr, &nh, e));
	CHECK_OK(infs_engine_fact_limit(&limit, e));
	printf("n_ctx 1024: header %u tokens, a fact at most %u\n", nh, limit);
	CHECK(limit > 0 && limit < 1024 - nh - INFS_ENGINE_QUESTION_ROOM);
	CHECK_ERR(infs_engine_fact_limit(NULL, e), INFS_EINVAL);

	/* The check: the rendered fact's tokens, as infs_fact_encode counts them. */
	char *tea = long_text();
	const char *cat = "Maya has a cat named Biscuit.";
	uint32_t n = 0;
	CHECK_OK(infs_engine_fact_check(&n, e, cat, "{\"speaker\": \"Maya\"}"));
	char *r = NULL;
	CHECK_OK(infs_fact_render(&r, cat, "{\"speaker\": \"Maya\"}"));
	size_t want = 0;
	CHECK_OK(infs_tokenize(infs_model_tokenizer(m), r, strlen(r), 0, NULL, 0, &want));
	infs_free(r);
	CHECK(n == want && n > 5);
	CHECK_ERR(infs_engine_fact_check(&n, e, tea, NULL), INFS_ERANGE);
	printf("refused: %s\n", infs_error_last());
	CHECK(n > 1024);
	CHECK(strstr(infs_error_last(), "1024 (n_ctx)") && strstr(infs_error_last(), "split the fact or raise n_ctx"));
	CHECK_ERR(infs_engine_fact_check(NULL, e, "", NULL), INFS_EINVAL);
	CHECK_ERR(infs_engine_fact_check(NULL, e, " \n\t", NULL), INFS_EINVAL);
	CHECK_ERR(infs_engine_fact_check(NULL, e, NULL, NULL), INFS_EINVAL);
	CHECK_ERR(infs_engine_fact_check(NULL, e, "x", "{not json"), INFS_EFORMAT);

	/* Stored without the check: the long fact ranks first for a question
	 * about tea and cannot fit any prompt of this engine. */
	const uint64_t id_tea = encode(st, e, m, emb, tea);
	const uint64_t id_cat = encode(st, e, m, emb, cat);
	float qv[384];
	const char *drink = "Does Maya like tea?";
	CHECK(infs_embedder_dim(emb) == 384);
	CHECK_OK(infs_embed(qv, emb, &drink, 1, NULL));
	infs_hit hits[2];
	size_t n_hits = 0;
	CHECK_OK(infs_retrieve(hits, &n_hits, st, "maya", qv, 1, 2, NULL));
	CHECK(n_hits == 2 && hits[0].id == id_tea);
	infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
	ao.k = 2;
	ao.generate.max_tokens = 8;
	for (int full = 0; full < 2; full++) {
		ao.full_recompute = full;
		infs_answer *a = NULL;
		CHECK_OK(infs_engine_ask(&a, e, st, emb, "maya", drink, &ao));
		if (!a)
			continue;
		printf("%s: %zu fact(s) used, %zu left out, %u prompt positions: %s\n", full ? "full recompute" : "injection",
		       a->n_facts, a->n_left_out, a->n_prompt, a->text);
		CHECK(a->n_left_out == 1 && a->n_facts == 1 && a->fact_ids[0] == id_cat && a->n_prompt < 1024);
		infs_answer_free(a);
	}
	ao.full_recompute = 0;
	const char *qs[2] = { drink, "What is the name of Maya's cat?" };
	infs_answer *as[2] = { NULL, NULL };
	CHECK_OK(infs_engine_ask_batch(as, e, st, emb, "maya", qs, 2, &ao));
	for (int i = 0; i < 2; i++) {
		CHECK(as[i] && as[i]->n_left_out == 1 && as[i]->n_facts == 1 && as[i]->fact_ids[0] == id_cat);
		infs_answer_free(as[i]);
	}

	/* Facts that fit one by one but not together: the best-ranked that fit
	 * are kept, in rank order. Given ids [big, cat, big2]: big and cat fit,
	 * big2 no longer does. */
	char *half = malloc(strlen(tea) + 1);
	strcpy(half, tea);
	half[strlen(tea) * 2 / 5] = '\0'; /* about 600 tokens */
	CHECK_OK(infs_engine_fact_check(&n, e, half, NULL));
	CHECK(n > limit / 2);
	const uint64_t id_big = encode(st, e, m, emb, half);
	half[0] = 'S'; /* another text, as long */
	const uint64_t id_big2 = encode(st, e, m, emb, half);
	const uint64_t given[3] = { id_big, id_cat, id_big2 };
	ao.fact_ids = given;
	ao.n_fact_ids = 3;
	infs_answer *a = NULL;
	CHECK_OK(infs_engine_ask(&a, e, st, NULL, "maya", "What is the name of Maya's cat?", &ao));
	CHECK(a && a->n_left_out == 1 && a->n_facts == 2 && a->fact_ids[0] == id_big && a->fact_ids[1] == id_cat);
	infs_answer_free(a);
	/* An id that does not exist is still an error. */
	const uint64_t missing[1] = { id_big2 + 100 };
	ao.fact_ids = missing;
	ao.n_fact_ids = 1;
	a = NULL;
	CHECK_ERR(infs_engine_ask(&a, e, st, NULL, "maya", "Who?", &ao), INFS_ENOTFOUND);
	CHECK(a == NULL);

	/* The store closed and opened again (at the same address or not): what
	 * prepare kept for the old open is not taken for the new one. */
	infs_store_close(st);
	st = NULL;
	CHECK_OK(infs_store_open(&st, spath, NULL));
	ao.fact_ids = given;
	ao.n_fact_ids = 2;
	a = NULL;
	CHECK_ERR(infs_engine_ask(&a, e, st, NULL, "maya", "Who?", &ao), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "infs_engine_prepare") != NULL);
	CHECK_OK(infs_engine_prepare(e, st));
	CHECK_OK(infs_engine_ask(&a, e, st, NULL, "maya", "Who?", &ao));
	infs_answer_free(a);

	free(half);
	free(tea);
	infs_engine_free(e);
	infs_store_close(st);
	scratch_cleanup();
	infs_embedder_free(emb);
	infs_model_free(m);
	CHECK_DONE();
}

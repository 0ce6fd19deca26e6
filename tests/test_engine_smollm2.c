/* The main job end to end on the real models (SmolLM2 and all-MiniLM-L6-v2
 * from $INFS_CACHE): facts of the shipped example memory encoded after the
 * engine's header, a question answered by retrieval, injection and prefill
 * of only the question, and by full recompute of the same prompt; greedy
 * answers name the fact's content, the prompt is the same length both ways,
 * sampling is reproducible from its seed, budget and stop strings hold.
 * argv[1]: examples/memory/facts.jsonl (the first lines are used). */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "model_store_util.h"

enum { N_FACTS = 12 };

/* One thread's question on a shared engine. */
typedef struct asker {
	infs_engine *e;
	infs_store *st;
	const infs_embedder *emb;
	const char *q;
	infs_answer *a;
	int rc;
} asker;

static void *ask_thread(void *arg)
{
	asker *k = arg;
	infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
	ao.k = 4;
	ao.generate.max_tokens = 8;
	k->rc = infs_engine_ask(&k->a, k->e, k->st, k->emb, "maya", k->q, &ao);
	return NULL;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	/* The first facts of the example memory. */
	char spath[600], *texts[N_FACTS], *rendered[N_FACTS];
	infs_model *m;
	infs_embedder *emb;
	infs_store *st;
	if (!smollm2_memory(&m, &emb, &st, spath, sizeof spath, "engine-smollm2", argv[1], texts, rendered, N_FACTS))
		CHECK_DONE();

	infs_engine *e = host_engine_f16(m, 1024);
	if (!e)
		CHECK_DONE();
	infs_answer *ans = NULL;
	CHECK_ERR(infs_engine_ask(&ans, e, st, emb, "maya", "Who?", NULL), INFS_EINVAL); /* not prepared */
	CHECK_OK(infs_engine_prepare(e, st));
	uint64_t n_seg = 0;
	CHECK_OK(infs_fact_count(&n_seg, st, INFS_SEGMENT_NAMESPACE));
	CHECK(n_seg == 2);
	CHECK_OK(infs_engine_prepare(e, st)); /* once per store */
	CHECK_OK(infs_fact_count(&n_seg, st, INFS_SEGMENT_NAMESPACE));
	CHECK(n_seg == 2);

	uint64_t ids[N_FACTS];
	encode_after_header(ids, st, "maya", e, m, emb, (const char *const *)rendered, (const char *const *)texts, N_FACTS);
	infs_fact_record *r = NULL;
	CHECK_OK(infs_fact_get(&r, st, "maya", ids[4]));
	CHECK(r && !strcmp(r->text, rendered[4]) && r->embedding != NULL);
	infs_fact_record_free(r);

	/* Injection and full recompute of the same prompt. */
	const char *q = "What is the name of Maya's cat?";
	infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
	ao.k = 4;
	ao.generate.max_tokens = 24;
	infs_answer *inj = NULL, *full = NULL;
	CHECK_OK(infs_engine_ask(&inj, e, st, emb, "maya", q, &ao));
	ao.full_recompute = 1;
	CHECK_OK(infs_engine_ask(&full, e, st, emb, "maya", q, &ao));
	if (inj && full) {
		printf("injection:      \"%s\" (TTFT %.1f ms: embed %.1f, retrieve %.2f, inject %.1f, prefill %.1f; %u of %u prefilled)\n",
		       inj->text, inj->ttft_ms, inj->embed_ms, inj->retrieve_ms, inj->inject_ms, inj->prefill_ms,
		       inj->n_prefilled, inj->n_prompt);
		printf("full recompute: \"%s\" (TTFT %.1f ms, %u prefilled)\n", full->text, full->ttft_ms, full->n_prefilled);
		CHECK(inj->n_facts == 4 && full->n_facts == 4);
		CHECK(!memcmp(inj->fact_ids, full->fact_ids, 4 * sizeof *inj->fact_ids));
		/* The cat fact is the best hit (the fifth line of the memory). */
		CHECK(inj->fact_ids[0] == ids[4]);
		CHECK(inj->scores[0] >= inj->scores[1] && inj->scores[1] >= inj->scores[3]);
		CHECK(inj->n_prompt == full->n_prompt);
		CHECK(inj->n_prefilled < 25 && full->n_prefilled == full->n_prompt); /* footer and question */
		CHECK(strstr(inj->text, "Biscuit") != NULL);
		CHECK(strstr(full->text, "Biscuit") != NULL);
		CHECK(inj->n_tokens >= 1 && inj->n_tokens <= 24);
		CHECK(inj->embed_ms >= 0 && inj->retrieve_ms >= 0 && inj->inject_ms >= 0 && inj->prefill_ms > 0);
		CHECK(inj->ttft_ms >= inj->prefill_ms);
	}
	infs_answer_free(inj);
	infs_answer_free(full);

	/* Given facts skip retrieval; the budget and a stop string cut the answer. */
	ao = (infs_ask_options)INFS_ASK_OPTIONS_INIT;
	ao.fact_ids = &ids[4];
	ao.n_fact_ids = 1;
	ao.generate.max_tokens = 3;
	CHECK_OK(infs_engine_ask(&ans, e, st, NULL, "maya", q, &ao));
	CHECK(ans && ans->n_tokens <= 3 && ans->n_facts == 1 && ans->embed_ms == 0);
	infs_answer_free(ans);
	ao.generate.max_tokens = 24;
	ao.generate.stop = "Biscuit";
	CHECK_OK(infs_engine_ask(&ans, e, st, NULL, "maya", q, &ao));
	CHECK(ans && !strstr(ans->text, "Biscuit"));
	infs_answer_free(ans);

	/* Sampling: one seed, one answer. */
	ao.generate.stop = NULL;
	ao.generate.temperature = 1.0f;
	ao.generate.top_p = 0.9f;
	ao.generate.seed = 5;
	infs_answer *s1 = NULL, *s2 = NULL;
	CHECK_OK(infs_engine_ask(&s1, e, st, NULL, "maya", q, &ao));
	CHECK_OK(infs_engine_ask(&s2, e, st, NULL, "maya", q, &ao));
	CHECK(s1 && s2 && !strcmp(s1->text, s2->text));
	infs_answer_free(s1);
	infs_answer_free(s2);

	/* A batch on the host: the questions one after another, as asked alone. */
	ao = (infs_ask_options)INFS_ASK_OPTIONS_INIT;
	ao.k = 4;
	ao.generate.max_tokens = 8;
	const char *qs[2] = { q, "Where does Maya live?" };
	infs_answer *many[2] = { NULL, NULL };
	CHECK_OK(infs_engine_ask_batch(many, e, st, emb, "maya", qs, 2, &ao));
	for (int i = 0; i < 2; i++) {
		CHECK_OK(infs_engine_ask(&ans, e, st, emb, "maya", qs[i], &ao));
		CHECK(many[i] && ans && !strcmp(many[i]->text, ans->text) && many[i]->n_prompt == ans->n_prompt);
		CHECK(many[i] && ans && !memcmp(many[i]->first_logits, ans->first_logits, ans->n_vocab * sizeof(float)));
		infs_answer_free(many[i]);
		infs_answer_free(ans);
	}
	/* Two threads asking one engine at once: their calls take turns, each
	 * answer is the one its question gets alone. */
	asker ks[2] = { { e, st, emb, qs[0], NULL, 0 }, { e, st, emb, qs[1], NULL, 0 } };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&th[i], NULL, ask_thread, &ks[i]) == 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		CHECK_OK(ks[i].rc);
		CHECK_OK(infs_engine_ask(&ans, e, st, emb, "maya", qs[i], &ao));
		CHECK(ks[i].a && ans && !strcmp(ks[i].a->text, ans->text));
		CHECK(ks[i].a && ans && !memcmp(ks[i].a->first_logits, ans->first_logits, ans->n_vocab * sizeof(float)));
		infs_answer_free(ks[i].a);
		infs_answer_free(ans);
	}

	/* ignore_eos: the budget is spent whatever the model says. */
	ao.ignore_eos = 1;
	ao.generate.max_tokens = 40;
	CHECK_OK(infs_engine_ask(&ans, e, st, emb, "maya", q, &ao));
	CHECK(ans && ans->n_tokens == 40);
	infs_answer_free(ans);

	/* A namespace with no facts: header, footer and the question only. */
	CHECK_OK(infs_engine_ask(&ans, e, st, emb, "nobody", q, NULL));
	CHECK(ans && ans->n_facts == 0);
	infs_answer_free(ans);

	for (int i = 0; i < N_FACTS; i++) {
		free(texts[i]);
		infs_free(rendered[i]);
	}
	infs_engine_free(e);
	infs_store_close(st);
	scratch_cleanup();
	infs_embedder_free(emb);
	infs_model_free(m);
	CHECK_DONE();
}

/* Continuous batching on the host (infs_engine_options.max_seqs > 1 on the
 * CPU), on the real models: infs_engine_ask_batch runs the questions
 * together over the engine's block pool, and each answer is the one its
 * question gets alone from infs_engine_ask (text, prompt, facts; first
 * logits to float tolerance), with injection, accuracy recovery and full
 * recompute, and a pool too small for them all at once.
 * argv[1]: examples/memory/facts.jsonl. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "model_store_util.h"

enum { N_FACTS = 12, N_Q = 4 };

static const char *const questions[N_Q] = {
	"What is the name of Maya's cat?", "Where does Maya live?", "What is Maya's job?", "Who is Biscuit?",
};

/* The largest |a - b| over n floats, relative to the largest |b|. */
static double rel_diff(const float *a, const float *b, uint32_t n)
{
	double d = 0, m = 1e-30;
	for (uint32_t i = 0; i < n; i++) {
		d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
		m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
	}
	return d / m;
}

/* ask_batch on engine eb against ask one by one on e (a host engine that
 * answers one by one), under options ao; the answers that were admitted
 * together (all of them when slots and blocks allow) share their embedding
 * and prefill times: they ran as one step. Returns how many distinct
 * prefill times the batch's answers show. */
static int compare(infs_engine *eb, infs_engine *e, infs_store *st, const infs_embedder *emb,
                   const infs_ask_options *ao, const char *what)
{
	infs_answer *many[N_Q] = { NULL };
	CHECK_OK(infs_engine_ask_batch(many, eb, st, emb, "maya", questions, N_Q, ao));
	int groups = 0;
	for (int i = 0; i < N_Q; i++) {
		infs_answer *one = NULL;
		CHECK_OK(infs_engine_ask(&one, e, st, emb, "maya", questions[i], ao));
		if (!many[i] || !one) {
			infs_answer_free(one);
			continue;
		}
		const double d = rel_diff(many[i]->first_logits, one->first_logits, one->n_vocab);
		printf("%s %d: \"%s\" / alone \"%s\"; first logits differ by %.2g of their scale; prefill %.1f ms\n",
		       what, i, many[i]->text, one->text, d, many[i]->prefill_ms);
		CHECK(!strcmp(many[i]->text, one->text));
		CHECK(many[i]->n_prompt == one->n_prompt && many[i]->n_prefilled == one->n_prefilled);
		CHECK(many[i]->n_tokens == one->n_tokens && many[i]->n_facts == one->n_facts);
		CHECK(!memcmp(many[i]->fact_ids, one->fact_ids, one->n_facts * sizeof *one->fact_ids));
		CHECK(many[i]->n_recomputable == one->n_recomputable && many[i]->n_recomputed == one->n_recomputed);
		CHECK(d < 1e-4);
		int seen = 0;
		for (int j = 0; j < i; j++)
			seen |= many[j] && many[j]->prefill_ms == many[i]->prefill_ms &&
			        many[j]->embed_ms == many[i]->embed_ms;
		groups += !seen;
		infs_answer_free(one);
	}
	for (int i = 0; i < N_Q; i++)
		infs_answer_free(many[i]);
	return groups;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	char spath[600], *texts[N_FACTS], *rendered[N_FACTS];
	infs_model *m;
	infs_embedder *emb;
	infs_store *st;
	if (!smollm2_memory(&m, &emb, &st, spath, sizeof spath, "engine-host-batch", argv[1], texts, rendered, N_FACTS))
		CHECK_DONE();

	infs_engine_options eo = INFS_ENGINE_OPTIONS_INIT;
	eo.n_ctx = 512;
	eo.kv_dtype = INFS_DTYPE_F16;
	infs_engine *e = NULL, *eb = NULL, *small = NULL;
	CHECK_OK(infs_engine_create(&e, m, &eo));
	eo.max_seqs = N_Q;
	CHECK_OK(infs_engine_create(&eb, m, &eo));
	/* Four slots and the blocks of one sequence of n_ctx (32; a question
	 * needs about 9): the pool, not the slots, holds the last one back. */
	eo.max_seqs = 4;
	eo.n_blocks = 512 / 16;
	CHECK_OK(infs_engine_create(&small, m, &eo));
	if (!e || !eb || !small)
		CHECK_DONE();
	CHECK_OK(infs_engine_prepare(e, st));
	CHECK_OK(infs_engine_prepare(eb, st));
	CHECK_OK(infs_engine_prepare(small, st));
	uint64_t ids[N_FACTS];
	encode_after_header(ids, st, "maya", e, m, emb, (const char *const *)rendered, (const char *const *)texts, N_FACTS);

	infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
	ao.k = 4;
	ao.generate.max_tokens = 8;
	/* Slots for all: one group, one embedding, one prefill step. */
	CHECK(compare(eb, e, st, emb, &ao, "injection") == 1);
	/* Fewer slots and blocks than questions: later ones are admitted as
	 * earlier ones end. */
	CHECK(compare(small, e, st, emb, &ao, "small pool") > 1);
	ao.full_recompute = 1;
	CHECK(compare(eb, e, st, emb, &ao, "full recompute") == 1);
	ao.full_recompute = 0;
	ao.recompute_ratio = 0.3f;
	ao.check_layer = 2;
	ao.query_weight = 0.5f;
	CHECK(compare(eb, e, st, emb, &ao, "recovery") == 1);

	/* Sequence ops still run on the host engine's own cache. */
	CHECK_OK(infs_engine_inject(eb, st, "maya", ids, 1));
	CHECK(infs_engine_n_past(eb) > 0);

	/* A host engine's pool is bounded like a device engine's. */
	infs_engine *bad = NULL;
	eo.max_seqs = 5000;
	eo.n_blocks = 0;
	CHECK_ERR(infs_engine_create(&bad, m, &eo), INFS_ERANGE);
	eo.max_seqs = 2;
	eo.n_blocks = 4; /* less than one sequence of n_ctx */
	CHECK_ERR(infs_engine_create(&bad, m, &eo), INFS_ERANGE);

	for (int i = 0; i < N_FACTS; i++) {
		free(texts[i]);
		infs_free(rendered[i]);
	}
	infs_engine_free(small);
	infs_engine_free(eb);
	infs_engine_free(e);
	infs_store_close(st);
	scratch_cleanup();
	infs_embedder_free(emb);
	infs_model_free(m);
	CHECK_DONE();
}

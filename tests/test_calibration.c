/* Attention calibration for injected facts (infs_ask_options.
 * fact_temperature, fact_scale) in the host engine, on the real models
 * (SmolLM2 and all-MiniLM-L6-v2 from $INFS_CACHE) and the example memory:
 * at 1:1 an answer is plain injection bit for bit (header and facts
 * injected by hand, the footer and question prefilled by hand); a
 * calibration is the prefill with the calibrated attention over exactly
 * the facts' positions (the same by hand through the engine's own state);
 * the default is off; scale 0 (1 / sqrt(facts)) moves the first logits with
 * four facts and is plain injection with one; decoding sees the
 * calibration too; bad values are refused. argv[1]: examples/memory/facts.jsonl. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "engine/compose.h"
#include "engine/engine_impl.h"
#include "model_store_util.h"

enum { N_FACTS = 12 };

static const char question[] = "What is the name of Maya's cat?";

/* The question's first logits by hand: header and facts injected, then the
 * footer, question and suffix prefilled, calibrated by c (NULL: not). */
static float *by_hand(infs_engine *e, infs_store *st, const uint64_t *order, size_t n, const infs__calib *c)
{
	int32_t *qt = NULL;
	uint32_t nq = 0;
	float *out = malloc((size_t)e->n_vocab * sizeof *out);
	infs_engine_reset(e);
	CHECK_OK(infs__compose_question(&qt, &nq, &e->prompt, e->model, question));
	CHECK_OK(infs_engine_inject(e, st, INFS_SEGMENT_NAMESPACE, &e->header_id, 1));
	CHECK_OK(infs_engine_inject(e, st, "maya", order, n));
	if (c) {
		e->calib = *c;
		e->calib.lo = e->prompt.n_header;
		e->calib.hi = infs_engine_n_past(e);
		e->have_calib = 1;
	}
	CHECK_OK(infs_engine_prefill(e, qt, nq));
	if (out && infs_engine_logits(e))
		memcpy(out, infs_engine_logits(e), (size_t)e->n_vocab * sizeof *out);
	infs_engine_reset(e);
	free(qt);
	return out;
}

static float max_diff(const float *a, const float *b, uint32_t n)
{
	float d = 0;
	for (uint32_t i = 0; i < n; i++)
		d = fabsf(a[i] - b[i]) > d ? fabsf(a[i] - b[i]) : d;
	return d;
}

static infs_answer *ask(infs_engine *e, infs_store *st, const uint64_t *best_first, size_t n, float t, float s,
                        uint32_t max_tokens)
{
	infs_ask_options o = INFS_ASK_OPTIONS_INIT;
	o.fact_ids = best_first;
	o.n_fact_ids = n;
	o.fact_temperature = t;
	o.fact_scale = s;
	o.generate.max_tokens = max_tokens;
	infs_answer *a = NULL;
	CHECK_OK(infs_engine_ask(&a, e, st, NULL, "maya", question, &o));
	return a;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	char spath[600], *texts[N_FACTS], *rendered[N_FACTS];
	infs_model *m;
	infs_embedder *emb;
	infs_store *st;
	if (!smollm2_memory(&m, &emb, &st, spath, sizeof spath, "calibration", argv[1], texts, rendered, N_FACTS))
		CHECK_DONE();
	infs_engine *e = host_engine_f16(m, 1024);
	if (!e)
		CHECK_DONE();
	CHECK_OK(infs_engine_prepare(e, st));
	uint64_t ids[N_FACTS];
	encode_after_header(ids, st, "maya", e, m, emb, (const char *const *)rendered, (const char *const *)texts, N_FACTS);

	/* Four facts, best (the cat) first; injected best last. */
	const uint64_t best_first[4] = { ids[4], ids[1], ids[7], ids[2] };
	const uint64_t order[4] = { ids[2], ids[7], ids[1], ids[4] };
	const uint32_t V = e->n_vocab;
	float *plain = by_hand(e, st, order, 4, NULL);
	const infs__calib sharp = { 0, 0, 1.0f / 0.5f, logf(0.25f) };
	float *cal_hand = by_hand(e, st, order, 4, &sharp);
	infs_answer *off = ask(e, st, best_first, 4, 1.0f, 1.0f, 1);
	infs_answer *cal = ask(e, st, best_first, 4, 0.5f, 0.25f, 1);
	infs_answer *dflt = ask(e, st, best_first, 4, 1.0f, 0.0f, 1); /* 1 / sqrt(4) */
	infs_answer *half = ask(e, st, best_first, 4, 1.0f, 0.5f, 1);
	if (plain && cal_hand && off && cal && dflt && half) {
		const size_t bytes = V * sizeof(float);
		CHECK(!memcmp(off->first_logits, plain, bytes));        /* 1:1 is plain injection */
		infs_answer *init = NULL;
		infs_ask_options io = INFS_ASK_OPTIONS_INIT;              /* the default: off */
		io.fact_ids = best_first;
		io.n_fact_ids = 4;
		io.generate.max_tokens = 1;
		CHECK_OK(infs_engine_ask(&init, e, st, NULL, "maya", question, &io));
		CHECK(init && !memcmp(init->first_logits, plain, bytes));
		infs_answer_free(init);
		CHECK(!memcmp(cal->first_logits, cal_hand, bytes));     /* over exactly the facts */
		CHECK(!memcmp(dflt->first_logits, half->first_logits, bytes)); /* 1 / sqrt(4) */
		const float moved = max_diff(cal->first_logits, plain, V), dmoved = max_diff(dflt->first_logits, plain, V);
		printf("first logits moved by 0.5:0.25 %.3f, by 1:auto %.3f\n", moved, dmoved);
		CHECK(moved > 1.0f && dmoved > 0.1f);
	}
	/* One fact: auto is off, bit for bit. */
	infs_answer *one_off = ask(e, st, best_first, 1, 1.0f, 1.0f, 4);
	infs_answer *one_dflt = ask(e, st, best_first, 1, 1.0f, 0.0f, 4);
	if (one_off && one_dflt) {
		CHECK(!memcmp(one_off->first_logits, one_dflt->first_logits, V * sizeof(float)));
		CHECK(!strcmp(one_off->text, one_dflt->text));
	}
	/* Decoding sees it too: the same first token, then answers apart. */
	infs_answer *long_off = ask(e, st, best_first, 4, 1.0f, 1.0f, 24);
	infs_answer *long_cal = ask(e, st, best_first, 4, 1.0f, 0.05f, 24);
	if (long_off && long_cal) {
		printf("1:1 \"%s\"; 1:0.05 \"%s\"\n", long_off->text, long_cal->text);
		CHECK(strcmp(long_off->text, long_cal->text) != 0);
	}
	/* Refusals. */
	infs_ask_options o = INFS_ASK_OPTIONS_INIT;
	o.fact_ids = best_first;
	o.n_fact_ids = 4;
	infs_answer *bad = NULL;
	const float temps[] = { 0.0f, -1.0f, NAN, INFINITY, 1001.0f }, scales[] = { -0.5f, NAN, INFINITY, 1001.0f };
	for (size_t i = 0; i < sizeof temps / sizeof *temps; i++) {
		o.fact_temperature = temps[i];
		CHECK_ERR(infs_engine_ask(&bad, e, st, NULL, "maya", question, &o), INFS_ERANGE);
	}
	o.fact_temperature = 1.0f;
	for (size_t i = 0; i < sizeof scales / sizeof *scales; i++) {
		o.fact_scale = scales[i];
		CHECK_ERR(infs_engine_ask(&bad, e, st, NULL, "maya", question, &o), INFS_ERANGE);
	}
	infs_answer *all[] = { off, cal, dflt, half, one_off, one_dflt, long_off, long_cal };
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		infs_answer_free(all[i]);
	free(plain);
	free(cal_hand);
	for (int i = 0; i < N_FACTS; i++) {
		free(texts[i]);
		infs_free(rendered[i]);
	}
	infs_engine_free(e);
	infs_store_close(st);
	infs_embedder_free(emb);
	infs_model_free(m);
	CHECK_DONE();
}

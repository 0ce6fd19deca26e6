/* Accuracy recovery (infs_ask_options.recompute_ratio) on the real models
 * (SmolLM2 and all-MiniLM-L6-v2 from $INFS_CACHE), over the example
 * memory's facts and questions: ratio 0 is plain injection bit for bit,
 * ratio 1 full recompute bit for bit; every fact token
 * recomputed through every layer (check layer the last) gives full
 * recompute's logits up to float rounding; a partial recompute keeps the
 * share asked for, is deterministic, and brings the first-token
 * distribution nearer full recompute's on average; bad ratios and layers
 * are refused. With a third argument "modes", the modes of version 3
 * instead (modes()): prefix recompute and query-aware selection. argv[1],
 * argv[2]: examples/memory/facts.jsonl and questions.jsonl. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "util/json.h"
#include "model_store_util.h"

enum { N_FACTS = 24, N_Q = 4, K = 6 };

/* KL(p || q) of the softmaxes of logits lp and lq, nats. */
static double kl(const float *lp, const float *lq, uint32_t n)
{
	double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0, r = 0;
	for (uint32_t i = 0; i < n; i++)
		mp = lp[i] > mp ? lp[i] : mp, mq = lq[i] > mq ? lq[i] : mq;
	for (uint32_t i = 0; i < n; i++)
		zp += exp(lp[i] - mp), zq += exp(lq[i] - mq);
	for (uint32_t i = 0; i < n; i++) {
		double a = lp[i] - mp - log(zp), b = lq[i] - mq - log(zq);
		r += exp(a) * (a - b);
	}
	return r;
}

static size_t argmax(const float *x, uint32_t n)
{
	size_t b = 0;
	for (uint32_t i = 1; i < n; i++)
		b = x[i] > x[b] ? i : b;
	return b;
}

/* n lines of a JSONL file: the string member key of each. */
static int read_member(char **out, const char *path, const char *key, int n)
{
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	if (!f)
		return 0;
	char line[2048];
	int i = 0;
	while (i < n && fgets(line, sizeof line, f)) {
		infs__json *o = NULL;
		CHECK_OK(infs__json_parse(&o, line, strlen(line)));
		out[i++] = strdup(infs__json_str(infs__json_get(o, key), "?"));
		infs__json_free(o);
	}
	fclose(f);
	return i;
}

/* Everything recomputed in place: full recompute's logits up to rounding. */
static void check_near_full(const infs_answer *x, const infs_answer *full)
{
	float worst = 0, top = 0;
	for (uint32_t i = 0; i < full->n_vocab; i++) {
		worst = fmaxf(worst, fabsf(x->first_logits[i] - full->first_logits[i]));
		top = fmaxf(top, fabsf(full->first_logits[i]));
	}
	CHECK(worst <= 1e-3f * top);
	CHECK(argmax(x->first_logits, full->n_vocab) == argmax(full->first_logits, full->n_vocab));
	CHECK(x->n_recomputed == x->n_recomputable && x->n_recomputable > 0);
}

/* Prefix recompute and query-aware selection (infs_ask_options v3) on the
 * first two questions: at prefix 0 and ratio 0 they are plain injection
 * exactly, a version 2 struct never reads their fields, a prefix that
 * covers every fact is full recompute up to rounding (alone
 * and with a ratio that would keep less: the prefixes are always kept), as
 * is query-aware selection past the last layer (the question's tokens run
 * with the facts but never change them); the counts are the prefixes' and
 * the share's, the selection is deterministic, and the prefix and the
 * question's weight each change the answer's logits. */
static void modes(infs_engine *e, infs_store *st, const infs_embedder *emb, char **qs, uint32_t n_layers)
{
	int weight_changed = 0;
	for (int q = 0; q < 2; q++) {
		infs_ask_options o = INFS_ASK_OPTIONS_INIT;
		o.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
		o.k = K;
		o.generate.max_tokens = 4;
		infs_answer *inj = NULL, *full = NULL, *zero = NULL, *v2 = NULL, *pall = NULL, *pmix = NULL,
			    *qall = NULL, *q1 = NULL, *q2 = NULL, *dev = NULL, *pre = NULL, *pre5 = NULL, *v2ref = NULL;
		CHECK_OK(infs_engine_ask(&inj, e, st, emb, "maya", qs[q], &o));
		if (!inj)
			break;
		o.fact_ids = inj->fact_ids;
		o.n_fact_ids = inj->n_facts;
		o.full_recompute = 1;
		CHECK_OK(infs_engine_ask(&full, e, st, NULL, "maya", qs[q], &o));
		o.full_recompute = 0;
		o.query_weight = 0.5f; /* ratio 0: nothing to select */
		CHECK_OK(infs_engine_ask(&zero, e, st, NULL, "maya", qs[q], &o));
		o.version = 2; /* its bytes end before prefix_tokens: the later fields are the defaults */
		o.prefix_tokens = 3;
		o.fact_scale = 0.5f;
		CHECK_OK(infs_engine_ask(&v2, e, st, NULL, "maya", qs[q], &o));
		o.version = INFS_ASK_OPTIONS_VERSION;
		o.prefix_tokens = 0;
		o.fact_scale = 1.0f;
		CHECK_OK(infs_engine_ask(&v2ref, e, st, NULL, "maya", qs[q], &o));
		o.query_weight = 0;
		o.prefix_tokens = 4096;
		CHECK_OK(infs_engine_ask(&pall, e, st, NULL, "maya", qs[q], &o));
		o.prefix_tokens = 2;
		CHECK_OK(infs_engine_ask(&pre, e, st, NULL, "maya", qs[q], &o));
		o.recompute_ratio = 0.05f;
		o.check_layer = 2;
		CHECK_OK(infs_engine_ask(&pre5, e, st, NULL, "maya", qs[q], &o));
		o.prefix_tokens = 0;
		o.recompute_ratio = 0.25f;
		CHECK_OK(infs_engine_ask(&dev, e, st, NULL, "maya", qs[q], &o));
		o.query_weight = 0.5f;
		CHECK_OK(infs_engine_ask(&q1, e, st, NULL, "maya", qs[q], &o));
		if (q == 0) { /* once each: they take as long as the rest */
			CHECK_OK(infs_engine_ask(&q2, e, st, NULL, "maya", qs[q], &o));
			o.query_weight = 1.0f;
			o.recompute_ratio = 0.5f;
			o.check_layer = n_layers - 1;
			CHECK_OK(infs_engine_ask(&qall, e, st, NULL, "maya", qs[q], &o));
			o.query_weight = 0;
			o.prefix_tokens = 4096;
			o.recompute_ratio = 0.05f;
			o.check_layer = 2;
			CHECK_OK(infs_engine_ask(&pmix, e, st, NULL, "maya", qs[q], &o));
		}
		if (!full || !zero || !v2 || !v2ref || !pall || !pre || !pre5 || !dev || !q1 || (q == 0 && (!q2 || !qall || !pmix)))
			break;
		const uint32_t V = inj->n_vocab, n = pall->n_recomputable, n_pre = 2 * (uint32_t)inj->n_facts;
		const size_t bytes = V * sizeof(float);
		CHECK(!memcmp(zero->first_logits, inj->first_logits, bytes) && !strcmp(zero->text, inj->text));
		CHECK(!memcmp(v2->first_logits, v2ref->first_logits, bytes) && zero->n_recomputed == 0 && v2->n_recomputed == 0);
		check_near_full(pall, full);
		if (q == 0) {
			check_near_full(qall, full);
			check_near_full(pmix, full);
			CHECK(!memcmp(q1->first_logits, q2->first_logits, bytes) && !strcmp(q1->text, q2->text));
		}
		/* Two tokens of each of the facts (all longer); the footer is prefilled. */
		CHECK(pre->n_recomputed == n_pre && pre->n_recomputable == n);
		CHECK(memcmp(pre->first_logits, inj->first_logits, bytes) != 0);
		const uint32_t share = (uint32_t)(0.05 * n + 0.5);
		CHECK(pre5->n_recomputed == (share > n_pre ? share : n_pre));
		CHECK(q1->n_recomputed == (uint32_t)(0.25 * n + 0.5) && q1->n_recomputed == dev->n_recomputed);
		weight_changed |= memcmp(q1->first_logits, dev->first_logits, bytes) != 0;
		printf("%-45s KL(full||inj) %.4f  prefix 2 %.4f  25%%@2 deviation %.4f  query %.4f\n", qs[q],
		       kl(full->first_logits, inj->first_logits, V), kl(full->first_logits, pre->first_logits, V),
		       kl(full->first_logits, dev->first_logits, V), kl(full->first_logits, q1->first_logits, V));
		infs_answer *as[] = { inj, full, zero, v2, v2ref, pall, pmix, qall, q1, q2, dev, pre, pre5 };
		for (size_t i = 0; i < sizeof as / sizeof as[0]; i++)
			infs_answer_free(as[i]);
	}
	CHECK(weight_changed);

	infs_ask_options o = INFS_ASK_OPTIONS_INIT;
	o.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
	infs_answer *ans = NULL;
	o.recompute_ratio = 0.5f;
	const float bad[] = { -0.1f, 1.5f, NAN };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		o.query_weight = bad[i];
		CHECK_ERR(infs_engine_ask(&ans, e, st, emb, "maya", qs[0], &o), INFS_ERANGE);
		CHECK(ans == NULL && strstr(infs_error_last(), "query_weight"));
	}
}

int main(int argc, char **argv)
{
	CHECK(argc == 3 || (argc == 4 && !strcmp(argv[3], "modes")));
	char spath[600];
	infs_model *m;
	infs_embedder *emb;
	char *texts[N_FACTS], *rendered[N_FACTS], *qs[N_Q];
	if (!load_smollm2(&m, &emb) || read_member(texts, argv[1], "text", N_FACTS) != N_FACTS ||
	    read_member(qs, argv[2], "question", N_Q) != N_Q)
		CHECK_DONE();
	for (int i = 0; i < N_FACTS; i++)
		CHECK_OK(infs_fact_render(&rendered[i], texts[i], NULL));
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, m));

	infs_store *st = model_store_create(m, INFS_DTYPE_F32, infs_embedder_dim(emb), "recovery", "maya.infs", spath,
	                                    sizeof spath);
	infs_engine_options eo = INFS_ENGINE_OPTIONS_INIT;
	eo.n_ctx = 1024;
	infs_engine *e = NULL;
	CHECK_OK(infs_engine_create(&e, m, &eo));
	if (!st || !e)
		CHECK_DONE();
	CHECK_OK(infs_engine_prepare(e, st));
	uint64_t ids[N_FACTS];
	encode_after_header(ids, st, "maya", e, m, emb, (const char *const *)rendered, (const char *const *)texts,
	                    N_FACTS);

	double kl_inj = 0, kl_part = 0;
	if (argc == 4) {
		modes(e, st, emb, qs, info.n_layers);
		goto done;
	}
	for (int q = 0; q < N_Q; q++) {
		infs_ask_options o = INFS_ASK_OPTIONS_INIT;
		o.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
		o.k = K;
		o.generate.max_tokens = 8;
		infs_answer *inj = NULL, *full = NULL, *zero = NULL, *one = NULL, *all = NULL, *p1 = NULL, *p2 = NULL;
		CHECK_OK(infs_engine_ask(&inj, e, st, emb, "maya", qs[q], &o));
		if (!inj)
			break;
		o.fact_ids = inj->fact_ids;
		o.n_fact_ids = inj->n_facts;
		o.full_recompute = 1;
		CHECK_OK(infs_engine_ask(&full, e, st, NULL, "maya", qs[q], &o));
		o.full_recompute = 0;
		o.check_layer = 3;
		CHECK_OK(infs_engine_ask(&zero, e, st, NULL, "maya", qs[q], &o));
		o.recompute_ratio = 1.0f;
		CHECK_OK(infs_engine_ask(&one, e, st, NULL, "maya", qs[q], &o));
		o.recompute_ratio = 0.5f;
		o.check_layer = info.n_layers - 1;
		CHECK_OK(infs_engine_ask(&all, e, st, NULL, "maya", qs[q], &o));
		o.recompute_ratio = 0.25f;
		o.check_layer = 2;
		CHECK_OK(infs_engine_ask(&p1, e, st, NULL, "maya", qs[q], &o));
		if (q == 0) /* once: it takes as long as the rest */
			CHECK_OK(infs_engine_ask(&p2, e, st, NULL, "maya", qs[q], &o));
		if (!full || !zero || !one || !all || !p1 || (q == 0 && !p2))
			break;
		const uint32_t V = inj->n_vocab;
		const size_t bytes = V * sizeof(float);
		/* The two ends: plain injection and full recompute, exactly. */
		CHECK(!memcmp(zero->first_logits, inj->first_logits, bytes) && !strcmp(zero->text, inj->text));
		CHECK(zero->n_recomputed == 0);
		CHECK(!memcmp(one->first_logits, full->first_logits, bytes) && !strcmp(one->text, full->text));
		CHECK(one->n_prefilled == full->n_prompt && one->n_recomputed == one->n_recomputable);
		CHECK(one->n_recomputable == all->n_recomputable && full->n_recomputable == 0);
		/* Everything recomputed in place is full recompute up to rounding. */
		float worst = 0, top = 0;
		for (uint32_t i = 0; i < V; i++) {
			worst = fmaxf(worst, fabsf(all->first_logits[i] - full->first_logits[i]));
			top = fmaxf(top, fabsf(full->first_logits[i]));
		}
		CHECK(worst <= 1e-3f * top);
		CHECK(argmax(all->first_logits, V) == argmax(full->first_logits, V));
		/* A partial recompute: the share asked, deterministic. */
		const uint32_t n = p1->n_recomputable;
		CHECK(n == all->n_recomputable && n > 0 && n < full->n_prompt);
		CHECK(p1->n_recomputed == (uint32_t)(0.25 * n + 0.5));
		CHECK(!p2 || (!memcmp(p1->first_logits, p2->first_logits, bytes) && !strcmp(p1->text, p2->text)));
		CHECK(p1->n_prefilled == inj->n_prefilled);
		const double ki = kl(full->first_logits, inj->first_logits, V);
		const double kp = kl(full->first_logits, p1->first_logits, V);
		kl_inj += ki / N_Q;
		kl_part += kp / N_Q;
		printf("%-45s KL(full||inj) %.4f  KL(full||25%%@2) %.4f  all-in-place max diff %.2g  \"%s\" / \"%s\" / \"%s\"\n",
		       qs[q], ki, kp, worst, inj->text, p1->text, full->text);
		infs_answer *as[] = { inj, full, zero, one, all, p1, p2 };
		for (size_t i = 0; i < sizeof as / sizeof as[0]; i++)
			infs_answer_free(as[i]);
	}
	printf("mean first-token KL against full recompute: injection %.4f, 25%% recomputed past layer 2 %.4f\n",
	       kl_inj, kl_part);
	CHECK(kl_part < kl_inj);

	/* Refusals. */
	infs_ask_options o = INFS_ASK_OPTIONS_INIT;
	o.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
	infs_answer *ans = NULL;
	o.recompute_ratio = -0.1f;
	CHECK_ERR(infs_engine_ask(&ans, e, st, emb, "maya", qs[0], &o), INFS_ERANGE);
	o.recompute_ratio = 1.5f;
	CHECK_ERR(infs_engine_ask(&ans, e, st, emb, "maya", qs[0], &o), INFS_ERANGE);
	o.recompute_ratio = NAN;
	CHECK_ERR(infs_engine_ask(&ans, e, st, emb, "maya", qs[0], &o), INFS_ERANGE);
	o.recompute_ratio = 0.5f;
	o.check_layer = info.n_layers;
	CHECK_ERR(infs_engine_ask(&ans, e, st, emb, "maya", qs[0], &o), INFS_ERANGE);
	CHECK(ans == NULL && strstr(infs_error_last(), "check_layer"));

done:
	for (int i = 0; i < N_FACTS; i++) {
		free(texts[i]);
		infs_free(rendered[i]);
	}
	for (int q = 0; q < N_Q; q++)
		free(qs[q]);
	infs_engine_free(e);
	infs_store_close(st);
	infs_embedder_free(emb);
	infs_model_free(m);
	CHECK_DONE();
}

/* infs_fact_encode on a tiny model: the stored KV is the model's pre-RoPE
 * KV of the fact's tokens computed after the encoding context (shared and
 * per fact), progress and cancellation, and bad arguments that leave the
 * store unchanged. argv[1]: tests/fixtures/model. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "model_store_util.h"

typedef struct calls {
	size_t n, last_done, total, cancel_at;
} calls;

static int on_progress(void *user, size_t done, size_t total)
{
	calls *c = user;
	CHECK(done == c->last_done + 1);
	c->n++;
	c->last_done = done;
	c->total = total;
	return c->cancel_at && done == c->cancel_at;
}

static uint64_t count(infs_store *st, const char *ns)
{
	uint64_t n = 0;
	CHECK_OK(infs_fact_count(&n, st, ns));
	return n;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	char path[1024], spath[600];
	snprintf(path, sizeof path, "%s/llama", argv[1]);
	infs_model *m = NULL;
	CHECK_OK(infs_model_load(&m, path, NULL));
	if (!m)
		CHECK_DONE();
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, m));
	infs_geometry g;
	CHECK_OK(infs_model_geometry(&g, m, INFS_DTYPE_F32));
	infs_store *st = model_store_create(m, INFS_DTYPE_F32, 3, "encode", "store.infs", spath, sizeof spath);

	enum { NC = 6, NO = 3, NF = 5 };
	int32_t ctx[NC], own[NO], fact[NF], all[NC + NO + NF];
	for (int i = 0; i < NC + NO + NF; i++)
		all[i] = (int32_t)((i * 29 + 5) % info.n_vocab);
	memcpy(ctx, all, sizeof ctx);
	memcpy(own, all + NC, sizeof own);
	memcpy(fact, all + NC + NO, sizeof fact);
	size_t row = (size_t)g.n_kv_heads * g.head_dim, L = g.n_layers;

	/* The stored KV is the tail of one pass over context + own context + fact. */
	float emb[3] = { 1, 2, 3 };
	infs_fact_input in = INFS_FACT_INPUT_INIT;
	in.tokens = fact;
	in.n_tokens = NF;
	in.embedding = emb;
	in.context = own;
	in.n_context = NO;
	in.text = "a fact";
	in.metadata = "{\"speaker\":\"A\"}";
	in.source_id = 42;
	in.timestamp = -7;
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = ctx;
	eo.n_context = NC;
	uint64_t id = 0;
	CHECK_OK(infs_fact_encode(&id, st, "u", m, &in, 1, &eo));
	CHECK(id != 0);
	float *k = malloc(L * (NC + NO + NF) * row * sizeof *k), *v = malloc(L * (NC + NO + NF) * row * sizeof *v);
	CHECK_OK(infs_model_forward(NULL, k, v, m, all, NULL, NC + NO + NF, NULL));
	infs_fact_record *r = NULL;
	CHECK_OK(infs_fact_get(&r, st, "u", id));
	if (r) {
		CHECK(r->n_tokens == NF && !memcmp(r->tokens, fact, sizeof fact));
		CHECK(!strcmp(r->text, "a fact") && !strcmp(r->metadata, "{\"speaker\":\"A\"}"));
		CHECK(r->source_id == 42 && r->timestamp == -7);
		CHECK(r->embedding && r->embedding[2] == 3);
		float worst = 0, big = 0;
		for (size_t l = 0; l < L; l++)
			for (size_t t = 0; t < NF; t++)
				for (size_t j = 0; j < row; j++) {
					size_t a = (l * (NC + NO + NF) + NC + NO + t) * row + j, b = (l * NF + t) * row + j;
					worst = fmaxf(worst, fabsf(((const float *)r->k)[b] - k[a]));
					worst = fmaxf(worst, fabsf(((const float *)r->v)[b] - v[a]));
					big = fmaxf(big, fabsf(k[a]));
				}
		printf("encoded after %u + %u context tokens vs one pass: max |KV diff| %.3g (of %.3g)\n", NC, NO,
		       worst, big);
		CHECK(worst <= 1e-5f * big && big > 0);
	}
	infs_fact_record_free(r);

	/* Without context: exactly the fact run alone. */
	in.context = NULL;
	in.n_context = 0;
	CHECK_OK(infs_fact_encode(&id, st, "u", m, &in, 1, NULL));
	CHECK_OK(infs_model_forward(NULL, k, v, m, fact, NULL, NF, NULL));
	CHECK_OK(infs_fact_get(&r, st, "u", id));
	if (r)
		CHECK(!memcmp(r->k, k, L * NF * row * sizeof *k) && !memcmp(r->v, v, L * NF * row * sizeof *v));
	infs_fact_record_free(r);
	CHECK(count(st, "u") == 2);

	/* A batch with progress, then one canceled after its second fact. */
	infs_fact_input batch[5];
	for (int i = 0; i < 5; i++) {
		batch[i] = in;
		batch[i].n_tokens = (uint32_t)(1 + i);
	}
	uint64_t ids[5];
	calls c = { 0, 0, 0, 0 };
	eo.progress = on_progress;
	eo.progress_user = &c;
	CHECK_OK(infs_fact_encode(ids, st, "b", m, batch, 5, &eo));
	CHECK(c.n == 5 && c.total == 5);
	for (int i = 0; i < 5; i++)
		CHECK(ids[i] != 0 && (i == 0 || ids[i] > ids[i - 1]));
	calls c2 = { 0, 0, 0, 2 };
	eo.progress_user = &c2;
	CHECK_ERR(infs_fact_encode(ids, st, "c", m, batch, 5, &eo), INFS_ECANCELED);
	CHECK(ids[0] && ids[1] && !ids[2] && !ids[3] && !ids[4]);
	CHECK(count(st, "c") == 2);

	/* Many facts in one call share forward passes (more tokens than one
	 * pass takes): each fact's KV is what it gets encoded alone. */
	enum { NB = 40 };
	infs_fact_input many[NB];
	int32_t toks[NB][24];
	uint64_t many_ids[NB], one_id = 0;
	for (int i = 0; i < NB; i++) {
		many[i] = in;
		many[i].n_tokens = (uint32_t)(1 + (i * 7) % 20);
		for (uint32_t t = 0; t < many[i].n_tokens; t++)
			toks[i][t] = (int32_t)((i * 31 + t * 17 + 3) % info.n_vocab);
		many[i].tokens = toks[i];
		many[i].context = i % 3 ? own : NULL;
		many[i].n_context = i % 3 ? (uint32_t)(i % 3) : 0;
	}
	eo.progress = NULL;
	CHECK_OK(infs_fact_encode(many_ids, st, "many", m, many, NB, &eo));
	float worst_b = 0, big_b = 0;
	for (int i = 0; i < NB; i++) {
		infs_fact_record *rb = NULL, *r1 = NULL;
		CHECK_OK(infs_fact_encode(&one_id, st, "one", m, &many[i], 1, &eo));
		CHECK_OK(infs_fact_get(&rb, st, "many", many_ids[i]));
		CHECK_OK(infs_fact_get(&r1, st, "one", one_id));
		if (rb && r1) {
			CHECK(rb->n_tokens == many[i].n_tokens && r1->n_tokens == many[i].n_tokens);
			for (size_t e2 = 0; e2 < L * many[i].n_tokens * row; e2++) {
				const float *kb = rb->k, *k1 = r1->k, *vb = rb->v, *v1 = r1->v;
				worst_b = fmaxf(worst_b, fmaxf(fabsf(kb[e2] - k1[e2]), fabsf(vb[e2] - v1[e2])));
				big_b = fmaxf(big_b, fabsf(k1[e2]));
			}
		}
		infs_fact_record_free(rb);
		infs_fact_record_free(r1);
	}
	printf("%d facts in shared passes vs each alone: max |KV diff| %.3g (of %.3g)\n", NB, worst_b, big_b);
	CHECK(worst_b <= 1e-5f * big_b && big_b > 0);

	/* Bad arguments: an error, and nothing stored. */
	infs_fact_input bad = in;
	CHECK_ERR(infs_fact_encode(NULL, st, "d", m, &in, 1, NULL), INFS_EINVAL);
	CHECK_ERR(infs_fact_encode(ids, NULL, "d", m, &in, 1, NULL), INFS_EINVAL);
	CHECK_ERR(infs_fact_encode(ids, st, NULL, m, &in, 1, NULL), INFS_EINVAL);
	CHECK_ERR(infs_fact_encode(ids, st, "d", NULL, &in, 1, NULL), INFS_EINVAL);
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, NULL, 1, NULL), INFS_EINVAL);
	bad.version = 99;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &bad, 1, NULL), INFS_EINVAL);
	bad = in;
	bad.tokens = NULL;
	bad.text = NULL;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &bad, 1, NULL), INFS_EINVAL);
	bad = in;
	bad.text = NULL;
	bad.tokens = NULL;
	bad.text = "tokenized text needs a tokenizer";
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &bad, 1, NULL), INFS_EINVAL);
	bad = in;
	bad.n_tokens = 0;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &bad, 1, NULL), INFS_ERANGE);
	int32_t oov[2] = { 1, (int32_t)info.n_vocab };
	bad = in;
	bad.tokens = oov;
	bad.n_tokens = 2;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &bad, 1, NULL), INFS_EINVAL);
	bad = in;
	bad.embedding = NULL;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &bad, 1, NULL), INFS_EINVAL);
	bad = in;
	bad.context = NULL;
	bad.n_context = 3;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &bad, 1, NULL), INFS_EINVAL);
	bad = in;
	bad.flags = 0x80;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &bad, 1, NULL), INFS_EINVAL);
	infs_encode_options be = INFS_ENCODE_OPTIONS_INIT;
	be.context = oov;
	be.n_context = 2;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &in, 1, &be), INFS_EINVAL);
	be.version = 0;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, &in, 1, &be), INFS_EINVAL);
	/* The second fact is bad: the first is not stored either. */
	infs_fact_input two[2] = { in, in };
	two[1].tokens = oov;
	two[1].n_tokens = 2;
	CHECK_ERR(infs_fact_encode(ids, st, "d", m, two, 2, NULL), INFS_EINVAL);
	CHECK(count(st, "d") == 0);

	/* A store made for another model. */
	infs_model *other = NULL;
	snprintf(path, sizeof path, "%s/qwen2", argv[1]);
	CHECK_OK(infs_model_load(&other, path, NULL));
	CHECK_ERR(infs_fact_encode(ids, st, "d", other, &in, 1, NULL), INFS_EMISMATCH);
	CHECK(count(st, "d") == 0);
	infs_model_free(other);

	CHECK_ERR(infs_encode_options_init(NULL, INFS_ENCODE_OPTIONS_VERSION), INFS_EINVAL);
	CHECK_ERR(infs_fact_input_init(&bad, 0), INFS_EINVAL);
	CHECK_OK(infs_fact_input_init(&bad, INFS_FACT_INPUT_VERSION));
	CHECK(bad.text == NULL && bad.version == INFS_FACT_INPUT_VERSION);

	free(k);
	free(v);
	infs_store_close(st);
	scratch_cleanup();
	infs_model_free(m);
	CHECK_DONE();
}

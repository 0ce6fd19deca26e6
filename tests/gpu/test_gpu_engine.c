/* The engine on a device, on the real models (SmolLM2 on the GPU, the
 * embedder, facts of the example memory encoded on the GPU after the
 * engine's header into a store with a device copy): the correctness gate
 * (one fact in its encoding context: injection answers as full recompute
 * does), attention calibration (applied, as the host engine applies it,
 * and off at 1:1 bit for bit, alone and with prefix recovery), retrieval, injection and question-only prefill answering the
 * demo's question, batches with continuous batching equal to requests one
 * at a time, a pool too small to run everything at once, a prompt longer
 * than a sequence refused, a question's prefill as a graph from its first
 * time, one question's device path (the host path's answer bit for bit:
 * with either embedder, calibrated, a question of over 64 tokens, a bound
 * on the facts past 2,048 keys (its prefill run again), facts past the
 * store's bound (the host path answers), and not tried where the facts'
 * KV is only in the store file), sampling and stop strings, the refusals
 * of a device engine. argv[1]: examples/memory/facts.jsonl. Exits 77 without a
 * device, or without the models in $INFS_CACHE (scripts/gpu-check.sh
 * carries them). */
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "engine/encode.h"
#include "engine/engine_impl.h"
#include "store/store_impl.h"
#include "../model_store_util.h"

enum { N_FACTS = 12, CAT = 4 };

static const char *questions[] = {
	"What is the name of Maya's cat?",
	"Where does Maya live?",
	"What is Maya allergic to?",
	"Who is Maya's partner?",
	"What instrument is Maya learning?",
	"When does Maya go running?",
};
enum { N_Q = sizeof questions / sizeof *questions };

static infs_engine *device_engine(const infs_model *m, uint32_t n_ctx, uint32_t max_seqs, uint32_t n_blocks)
{
	infs_engine_options eo = INFS_ENGINE_OPTIONS_INIT;
	eo.n_ctx = n_ctx;
	eo.kv_dtype = INFS_DTYPE_BF16;
	eo.device = 0;
	eo.max_seqs = max_seqs;
	eo.n_blocks = n_blocks;
	infs_engine *e = NULL;
	CHECK_OK(infs_engine_create(&e, m, &eo));
	return e;
}

static uint32_t first_token(const infs_answer *a)
{
	uint32_t best = 0;
	for (uint32_t i = 1; i < a->n_vocab; i++)
		if (a->first_logits[i] > a->first_logits[best])
			best = i;
	return best;
}

/* ask_batch on e answers as single asks on e do: same facts, same prompt,
 * same first token, first logits within bf16 noise of batching. */
static void batch_matches(infs_engine *e, infs_store *st, const infs_embedder *emb, const infs_answer *const *one,
                          int n_q, const char *what)
{
	infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
	ao.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
	ao.k = 4;
	ao.generate.max_tokens = 16;
	infs_answer *many[N_Q] = { 0 };
	CHECK_OK(infs_engine_ask_batch(many, e, st, emb, "maya", questions, (size_t)n_q, &ao));
	for (int i = 0; i < n_q; i++) {
		if (!many[i] || !one[i]) {
			CHECK(0);
			continue;
		}
		float diff = 0;
		for (uint32_t j = 0; j < many[i]->n_vocab; j++) {
			float d = fabsf(many[i]->first_logits[j] - one[i]->first_logits[j]);
			diff = d > diff ? d : diff;
		}
		printf("%s %d: \"%s\" (alone: \"%s\"), first logits max |diff| %.3f, TTFT %.2f ms\n", what, i,
		       many[i]->text, one[i]->text, diff, many[i]->ttft_ms);
		CHECK(many[i]->n_facts == 4 && !memcmp(many[i]->fact_ids, one[i]->fact_ids, 4 * sizeof(uint64_t)));
		CHECK(many[i]->n_prompt == one[i]->n_prompt && many[i]->n_prefilled == one[i]->n_prefilled);
		CHECK(first_token(many[i]) == first_token(one[i]));
		CHECK(diff < 0.5f);
		CHECK(many[i]->n_tokens >= 1 && many[i]->n_tokens <= 16);
		infs_answer_free(many[i]);
	}
}

static float max_diff(const infs_answer *a, const infs_answer *b)
{
	float d = 0;
	for (uint32_t i = 0; i < a->n_vocab; i++)
		d = fabsf(a->first_logits[i] - b->first_logits[i]) > d ? fabsf(a->first_logits[i] - b->first_logits[i]) : d;
	return d;
}

/* Attention calibration on the device engine (single asks, a batch, and
 * fused with prefix recovery) against the host engine's over the same
 * store: 1:1 is plain injection bit for bit; a strong calibration moves
 * the first logits far (so it is applied) and to where the host's
 * calibrated ones are, within bf16 noise of them. */
static void calibration(infs_engine *e, infs_store *st, const infs_model *m, const uint64_t *ids, int small)
{
	infs_engine *host = NULL;
	CHECK_OK(infs_engine_create(&host, m, NULL));
	if (!host)
		return;
	CHECK_OK(infs_engine_prepare(host, st));
	const uint64_t pick[4] = { ids[CAT], ids[1], ids[7], ids[2] };
	for (int prefix = 0; prefix <= (small ? 0 : 2); prefix += 2) {
		infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
		ao.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
		ao.fact_ids = pick;
		ao.n_fact_ids = 4;
		ao.prefix_tokens = (uint32_t)prefix;
		ao.generate.max_tokens = 8;
		infs_answer *plain = NULL, *one = NULL, *cal = NULL, *hcal = NULL, *hplain = NULL, *batch[2] = { 0 };
		CHECK_OK(infs_engine_ask(&plain, e, st, NULL, "maya", questions[0], &ao));
		CHECK_OK(infs_engine_ask(&hplain, host, st, NULL, "maya", questions[0], &ao));
		ao.fact_temperature = 1.0f;
		ao.fact_scale = 1.0f;
		CHECK_OK(infs_engine_ask(&one, e, st, NULL, "maya", questions[0], &ao));
		ao.fact_temperature = 0.5f;
		ao.fact_scale = 0.25f;
		CHECK_OK(infs_engine_ask(&cal, e, st, NULL, "maya", questions[0], &ao));
		CHECK_OK(infs_engine_ask(&hcal, host, st, NULL, "maya", questions[0], &ao));
		const char *two[2] = { questions[0], questions[2] };
		CHECK_OK(infs_engine_ask_batch(batch, e, st, NULL, "maya", two, 2, &ao));
		if (plain && one && cal && hcal && hplain && batch[0]) {
			const size_t bytes = plain->n_vocab * sizeof(float);
			CHECK(!memcmp(plain->first_logits, one->first_logits, bytes) && !strcmp(plain->text, one->text));
			const float near = max_diff(cal, hcal), moved = max_diff(cal, plain), host_moved = max_diff(hcal, hplain);
			printf("calibration 0.5:0.25, prefix %d: device vs host %.3f; moved %.3f (host %.3f); \"%s\" / \"%s\"\n",
			       prefix, near, moved, host_moved, cal->text, hcal->text);
			CHECK(host_moved > 1.0f && moved > 4 * near);
			CHECK(max_diff(batch[0], cal) < 0.5f * moved && first_token(batch[0]) == first_token(cal));
		}
		infs_answer *all[] = { plain, one, cal, hcal, hplain, batch[0], batch[1] };
		for (size_t i = 0; i < sizeof all / sizeof *all; i++)
			infs_answer_free(all[i]);
	}
	infs_engine_free(host);
}

/* How the device path is expected to take a question. */
enum { BY_HOST, BY_DEVICE, BY_DEVICE_REPLANNED, FELL_BACK };

/* One ask (the device path's where it takes the question: `how`, checked
 * by the engine's counters) and the same by the host path: the same hits,
 * scores, prompt, first logits bit for bit and answer. */
static void same_as_host(infs_engine *e, infs_store *st, const infs_embedder *emb, const char *ns,
                         const infs_ask_options *ao, const char *question, int how, const char *what)
{
	infs_answer *dev = NULL, *host = NULL;
	const uint64_t n0 = e->device_asks, r0 = e->device_replans, f0 = e->device_fallbacks;
	CHECK_OK(infs_engine_ask(&dev, e, st, emb, ns, question, ao));
	CHECK(e->device_asks == n0 + (how == BY_DEVICE || how == BY_DEVICE_REPLANNED));
	CHECK(e->device_replans == r0 + (how == BY_DEVICE_REPLANNED));
	CHECK(e->device_fallbacks == f0 + (how == FELL_BACK));
	e->no_device_path = 1;
	CHECK_OK(infs_engine_ask(&host, e, st, emb, ns, question, ao));
	e->no_device_path = 0;
	if (dev && host) {
		const size_t n = dev->n_facts;
		printf("device path (%s): \"%s\" / host path \"%s\"; %u positions, TTFT %.2f ms (embed %.3f, retrieve "
		       "%.3f, inject %.3f, prefill %.3f) / %.2f ms\n", what, dev->text, host->text, dev->n_prompt,
		       dev->ttft_ms, dev->embed_ms, dev->retrieve_ms, dev->inject_ms, dev->prefill_ms, host->ttft_ms);
		CHECK(n == host->n_facts && n == ao->k && dev->n_left_out == 0);
		CHECK(!memcmp(dev->fact_ids, host->fact_ids, n * sizeof *dev->fact_ids));
		CHECK(!memcmp(dev->scores, host->scores, n * sizeof *dev->scores));
		CHECK(dev->n_prompt == host->n_prompt && dev->n_prefilled == host->n_prefilled);
		CHECK(!memcmp(dev->first_logits, host->first_logits, dev->n_vocab * sizeof(float)));
		CHECK(!strcmp(dev->text, host->text) && dev->n_tokens == host->n_tokens);
		CHECK(dev->prefill_ms > 0 && dev->inject_ms >= 0 && dev->retrieve_ms >= 0 && dev->embed_ms >= 0);
		CHECK(dev->ttft_ms >= dev->embed_ms + dev->retrieve_ms + dev->inject_ms);
	}
	infs_answer_free(dev);
	infs_answer_free(host);
}

/* The device path against the host path: a host embedder (its vector
 * copied to the device) and one on the device, plain and calibrated
 * (1 / sqrt(facts), and a fixed temperature and scale: the first token
 * and the decoding after it), a question longer than a graph's first
 * capture, and facts past the store's bound (a bound made too small here:
 * the injection refuses, the host path answers). */
static void device_path(infs_engine *e, infs_store *st, const infs_embedder *emb, const infs_embedder *gemb,
                        int small)
{
	infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
	ao.fact_scale = 1.0f; /* uncalibrated */
	ao.k = 4;
	ao.generate.max_tokens = small ? 2 : 12; /* the first token and one decoding step at least */
	same_as_host(e, st, emb, "maya", &ao, questions[0], BY_DEVICE, "host embedder");
	for (int q = 0; q < (small ? 1 : 3); q++)
		same_as_host(e, st, gemb, "maya", &ao, questions[q], BY_DEVICE, "device embedder");
	char long_q[600];
	size_t at = 0;
	for (int i = 0; i < 6; i++)
		at += (size_t)snprintf(long_q + at, sizeof long_q - at, "Thinking of week %d, what did Maya say she would "
		                       "do after running? ", i + 1);
	same_as_host(e, st, gemb, "maya", &ao, long_q, BY_DEVICE, "a question of over 64 tokens");
	ao.fact_scale = 0.0f; /* 1 / sqrt(facts) */
	same_as_host(e, st, gemb, "maya", &ao, questions[2], BY_DEVICE, "1 / sqrt(facts)");
	ao.fact_temperature = 0.5f;
	ao.fact_scale = 0.25f;
	ao.k = 7;
	same_as_host(e, st, gemb, "maya", &ao, questions[3], BY_DEVICE, "0.5:0.25, k 7");
	ao.fact_temperature = ao.fact_scale = 1.0f;
	ao.k = 4;
	infs__store_read_lock(st);
	infs__ns *p = infs__index_ns(&st->ix, "maya");
	const uint32_t real = p->max_tokens;
	p->max_tokens = 1;
	infs__store_read_unlock(st);
	same_as_host(e, st, gemb, "maya", &ao, questions[0], FELL_BACK, "facts past the bound");
	p->max_tokens = real;
}

/* A namespace whose bound on the facts' positions lies past the
 * attention's few-keys bound (2,048 keys) while the facts retrieved fall
 * short of it: the device path's prefill runs again from where they ended,
 * as the host path plans it. The twelve facts and one of some 300 tokens
 * in namespace "long", asked with k 8 on an engine of 4,096 positions. */
static void replanned(const infs_model *m, infs_store *st, const infs_embedder *gemb, char *const *rendered,
                      char *const *texts, int small)
{
	infs_engine *e = device_engine(m, 4096, 4, 0);
	if (!e)
		return;
	char *facts[N_FACTS + 1], *bare[N_FACTS + 1], diary[2400];
	size_t at = 0;
	for (int i = 0; i < 14; i++)
		at += (size_t)snprintf(diary + at, sizeof diary - at, "On hike %d Maya wrote down the birds she saw, the "
		                       "weather and how her knees felt. ", i + 1);
	for (int i = 0; i < N_FACTS; i++) {
		facts[i] = rendered[i];
		bare[i] = texts[i];
	}
	facts[N_FACTS] = bare[N_FACTS] = diary;
	uint64_t ids[N_FACTS + 1];
	encode_after_header(ids, st, "long", e, m, gemb, (const char *const *)facts, (const char *const *)bare,
	                    N_FACTS + 1);
	CHECK_OK(infs_engine_prepare(e, st));
	size_t n = 0;
	uint32_t longest = 0;
	infs__store_read_lock(st);
	CHECK_OK(infs__store_ns_bound(&n, &longest, st, "long"));
	infs__store_read_unlock(st);
	printf("namespace long: %zu facts, the longest %u tokens\n", n, longest);
	CHECK(n == N_FACTS + 1 && 8 * longest > 2048);
	infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
	ao.k = 8;
	ao.generate.max_tokens = small ? 2 : 12;
	same_as_host(e, st, gemb, "long", &ao, questions[4], BY_DEVICE_REPLANNED, "bound past 2,048 keys");
	infs_engine_free(e);
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	gpu_require();
	/* under compute-sanitizer (scripts/gpu-check.sh, where it is the one
	 * run on the real models and the longest): three questions instead of
	 * six, fewer tokens, one calibration pass, no second pool; every
	 * kernel and path still runs */
	const int small = getenv("INFS_TEST_SMALL") != NULL;
	char mpath[1024], epath[1024], spath[600];
	cache_path(mpath, sizeof mpath, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	cache_path(epath, sizeof epath, "minilm");
	infs_model *m = NULL;
	infs_embedder *emb = NULL;
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.device = 0;
	mo.device_max_tokens = 512;
	if (infs_model_load(&m, mpath, &mo) || infs_embedder_load(&emb, epath, NULL)) {
		printf("SmolLM2 or the embedder is not in $INFS_CACHE (%s): skipped\n", infs_error_last());
		return 77;
	}

	char *texts[N_FACTS], *rendered[N_FACTS];
	const int n = read_facts(argv[1], texts, rendered, N_FACTS);
	CHECK(n == N_FACTS);
	if (n != N_FACTS)
		CHECK_DONE();

	/* Facts encoded on the GPU after the device engine's header; the store
	 * reopened with a device copy, so retrieval and injection read it. */
	infs_engine *e = device_engine(m, 1024, 4, 0);
	infs_store *st = model_store_create(m, INFS_DTYPE_BF16, infs_embedder_dim(emb), "gpu-engine", "maya.infs", spath,
	                                    sizeof spath);
	if (!e || !st)
		CHECK_DONE();
	uint64_t ids[N_FACTS];
	encode_after_header(ids, st, "maya", e, m, emb, (const char *const *)rendered, (const char *const *)texts, N_FACTS);
	CHECK_OK(infs_engine_prepare(e, st));
	infs_store_close(st);
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.device = 0;
	st = NULL;
	CHECK_OK(infs_store_open(&st, spath, &so));
	if (!st)
		CHECK_DONE();
	infs_answer *ans = NULL;
	CHECK_OK(infs_engine_prepare(e, st));

	/* The gate: the cat fact alone, right after the header where it was
	 * encoded (the footer prefilled with the question), answers as full
	 * recompute of the same prompt does. */
	infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
	ao.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
	ao.fact_ids = &ids[CAT];
	ao.n_fact_ids = 1;
	ao.generate.max_tokens = 24;
	infs_answer *inj = NULL, *full = NULL;
	CHECK_OK(infs_engine_ask(&inj, e, st, NULL, "maya", questions[0], &ao));
	ao.full_recompute = 1;
	CHECK_OK(infs_engine_ask(&full, e, st, NULL, "maya", questions[0], &ao));
	if (inj && full) {
		double kl = 0, zi = 0, zf = 0, mi = -INFINITY, mf = -INFINITY;
		for (uint32_t i = 0; i < inj->n_vocab; i++) {
			mi = inj->first_logits[i] > mi ? inj->first_logits[i] : mi;
			mf = full->first_logits[i] > mf ? full->first_logits[i] : mf;
		}
		for (uint32_t i = 0; i < inj->n_vocab; i++) {
			zi += exp(inj->first_logits[i] - mi);
			zf += exp(full->first_logits[i] - mf);
		}
		for (uint32_t i = 0; i < inj->n_vocab; i++) {
			const double lf = full->first_logits[i] - mf - log(zf), li = inj->first_logits[i] - mi - log(zi);
			kl += exp(lf) * (lf - li);
		}
		printf("gate: injection \"%s\", full recompute \"%s\"; first tokens %u / %u, KL %.5f\n", inj->text,
		       full->text, first_token(inj), first_token(full), kl);
		CHECK(kl < 0.1);
		CHECK(inj->n_prompt == full->n_prompt && full->n_prefilled == full->n_prompt);
		CHECK(strstr(inj->text, "Biscuit") != NULL);
	}
	infs_answer_free(inj);
	infs_answer_free(full);
	calibration(e, st, m, ids, small);

	/* Retrieval on the device copy, injection, question-only prefill. */
	ao = (infs_ask_options)INFS_ASK_OPTIONS_INIT;
	ao.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
	ao.k = 4;
	ao.generate.max_tokens = 16;
	/* under the sanitizer three questions, all at once in the batch below */
	const int n_q = small ? 3 : N_Q;
	infs_answer *one[N_Q] = { 0 };
	for (int i = 0; i < n_q; i++)
		CHECK_OK(infs_engine_ask(&one[i], e, st, emb, "maya", questions[i], &ao));
	if (one[0]) {
		infs_answer *a = one[0];
		printf("injection: \"%s\" (TTFT %.2f ms: embed %.2f, retrieve %.3f, inject %.3f, prefill %.2f; %u of %u "
		       "prefilled)\n", a->text, a->ttft_ms, a->embed_ms, a->retrieve_ms, a->inject_ms, a->prefill_ms,
		       a->n_prefilled, a->n_prompt);
		CHECK(a->fact_ids[0] == ids[CAT] && strstr(a->text, "Biscuit") != NULL);
		CHECK(a->n_prefilled < 25 && a->prefill_ms > 0 && a->ttft_ms >= a->prefill_ms);
	}

	/* Six questions, four sequences at once: the last two wait for slots. */
	batch_matches(e, st, emb, (const infs_answer *const *)one, n_q, "batch");
	infs_engine_free(e);
	/* A pool for about two of these requests at a time (sequences of up to
	 * 256 positions, 16 blocks): admission waits for blocks and never
	 * overruns them (not under the sanitizer: the same kernels as above). */
	e = small ? NULL : device_engine(m, 256, 8, 17);
	if (e) {
		CHECK_OK(infs_engine_prepare(e, st));
		batch_matches(e, st, emb, (const infs_answer *const *)one, n_q, "small pool");
		infs_engine_free(e);
	}
	/* Facts that do not fit in a sequence beside the question are left out,
	 * the best-ranked that fit kept (infs_engine_fact_limit); a question
	 * that cannot fit even alone is refused. */
	e = device_engine(m, 64, 4, 0);
	if (e) {
		CHECK_OK(infs_engine_prepare(e, st));
		CHECK_OK(infs_engine_ask(&ans, e, st, emb, "maya", questions[0], &ao));
		if (ans) {
			printf("fitted: %zu facts kept, %zu left out, %u positions\n", ans->n_facts, ans->n_left_out,
			       ans->n_prompt);
			CHECK(ans->n_left_out > 0 && ans->n_facts + ans->n_left_out == ao.k && ans->n_prompt <= 64);
			infs_answer_free(ans);
			ans = NULL;
		}
		char long_q[1024];
		size_t at = 0;
		while (at + 40 < sizeof long_q)
			at += (size_t)snprintf(long_q + at, sizeof long_q - at, "What did Maya do on Tuesday morning? ");
		CHECK_ERR(infs_engine_ask(&ans, e, st, emb, "maya", long_q, &ao), INFS_ERANGE);
		printf("refused: %s\n", infs_error_last());
		infs_engine_free(e);
	}
	for (int i = 0; i < N_Q; i++)
		infs_answer_free(one[i]);

	e = device_engine(m, 1024, 4, 0);
	CHECK_OK(infs_engine_prepare(e, st));
	/* A question's prefill runs as a graph captured the first time its
	 * length is seen, replayed the next; full recompute's runs eagerly.
	 * One token an answer: no decoding step. */
	if (e) {
		infs_ask_options go = INFS_ASK_OPTIONS_INIT;
		go.k = 4;
		go.generate.max_tokens = 1;
		const uint64_t g0 = e->ops->graph_runs(e->dev);
		for (int i = 0; i < 3; i++) {
			go.full_recompute = i == 2;
			CHECK_OK(infs_engine_ask(&ans, e, st, emb, "maya", questions[1], &go));
			infs_answer_free(ans);
			ans = NULL;
			CHECK(e->ops->graph_runs(e->dev) == g0 + (i ? 2 : 1));
		}
	}
	infs_embedder *gemb = NULL;
	infs_embedder_options go = INFS_EMBEDDER_OPTIONS_INIT;
	go.device = 0;
	CHECK_OK(infs_embedder_load(&gemb, epath, &go));
	if (e && gemb)
		device_path(e, st, emb, gemb, small);
	/* Sampling: one seed, one answer; a stop string cuts it. */
	ao.generate.max_tokens = small ? 3 : 16;
	ao.generate.temperature = 1.0f;
	ao.generate.top_p = 0.9f;
	ao.generate.seed = 5;
	infs_answer *s1 = NULL, *s2 = NULL;
	CHECK_OK(infs_engine_ask(&s1, e, st, emb, "maya", questions[0], &ao));
	CHECK_OK(infs_engine_ask(&s2, e, st, emb, "maya", questions[0], &ao));
	CHECK(s1 && s2 && !strcmp(s1->text, s2->text));
	infs_answer_free(s1);
	infs_answer_free(s2);
	ao = (infs_ask_options)INFS_ASK_OPTIONS_INIT;
	ao.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
	ao.k = 4;
	ao.generate.max_tokens = small ? 8 : 24;
	ao.generate.stop = "Biscuit";
	CHECK_OK(infs_engine_ask(&ans, e, st, emb, "maya", questions[0], &ao));
	CHECK(ans && !strstr(ans->text, "Biscuit"));
	infs_answer_free(ans);

	/* What a device engine refuses. */
	int32_t tok = 1;
	CHECK_ERR(infs_engine_prefill(e, &tok, 1), INFS_EUNSUPPORTED);
	ao.generate.stop = NULL;
	/* (accuracy recovery runs here too: tests/gpu/test_gpu_recovery.c) */
	infs_engine_options eo = INFS_ENGINE_OPTIONS_INIT;
	eo.device = 1; /* the model is on device 0 */
	infs_engine *bad = NULL;
	CHECK_ERR(infs_engine_create(&bad, m, &eo), INFS_EINVAL);
	eo.device = 0;
	eo.n_ctx = 1024;
	eo.n_blocks = 10; /* below one sequence of 64 blocks */
	CHECK_ERR(infs_engine_create(&bad, m, &eo), INFS_ERANGE);

	infs_engine_free(e); /* one device engine per model at a time */
	if (gemb)
		replanned(m, st, gemb, rendered, texts, small);
	infs_embedder_free(gemb);
	for (int i = 0; i < n; i++) {
		free(texts[i]);
		infs_free(rendered[i]);
	}
	/* The facts' KV only in the store file (a device budget for the
	 * retrieval rows alone): the host path answers, the device path not
	 * even tried. */
	infs_store_close(st);
	st = NULL;
	so.device_budget_bytes = 128u << 10;
	CHECK_OK(infs_store_open(&st, spath, &so));
	e = device_engine(m, 1024, 4, 0);
	if (e && st) {
		CHECK_OK(infs_engine_prepare(e, st));
		infs_tier tier = INFS_TIER_DEVICE;
		CHECK_OK(infs_namespace_tier(&tier, st, "maya"));
		CHECK(tier == INFS_TIER_FILE);
		ao.k = 4;
		ao.generate.max_tokens = small ? 2 : 12;
		same_as_host(e, st, emb, "maya", &ao, questions[0], BY_HOST, "KV in the file");
	}
	infs_engine_free(e);
	infs_store_close(st);
	scratch_cleanup();
	infs_embedder_free(emb);
	infs_model_free(m);
	CHECK_DONE();
}

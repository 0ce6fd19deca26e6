/* The main job on a GPU at Llama-3-8B geometry (the model of
 * bench_model_gpu: random bf16 weights made on the device) with SmolLM2's
 * tokenizer and chat template (its ids fit the 128256-row vocabulary), the
 * built-in embedder (all-MiniLM-L6-v2, on the device when the build has
 * its CUDA path), a store with a device copy holding 1,000 synthetic facts
 * of 24 tokens (random token ids, one random pre-RoPE K/V pattern, random
 * unit embeddings), and a device engine (bf16 vLLM-layout pool, n_ctx
 * 8192, 32 sequences at once).
 *
 * TTFT, for k = 0, 10, 20, 50, 100, 200 (median of RUNS questions of about
 * 32 tokens after WARMUP): infs_engine_ask with a budget of one token,
 * question text in, first token's logits out, in its parts (embed,
 * retrieve, inject, prefill of the question): by the device path where it
 * takes the question (k <= 100: one wait, the parts timed on the device;
 * "device_path"), beside the same question by the host path (a wait after
 * each part, "ttft_host_path_ms"); then full recompute of the
 * same prompt in the same engine (the same facts in the same order), its
 * TTFT counted as the injection run's embed + retrieve plus its own
 * reading of the facts' tokens and prefill, as the CPU benchmark does.
 *
 * Throughput: BATCH questions at k = 50 through infs_engine_ask_batch
 * (continuous batching, all admitted at once), answers of ANSWER tokens
 * (ignore_eos); requests/s and output tokens/s of the whole call, by
 * injection and by full recompute; and the prefill phase alone (a budget
 * of one token): prompt positions (injected or prefilled) served per
 * second, and the injected one's best call in its parts (embed, retrieve,
 * inject, prefill of the group; "other" the rest of its wall time).
 *
 * Then TTFT at k = 50 with the facts on the pinned host tier (docs/cuda.md,
 * "Tiers"): the store reopened with a device budget that holds the
 * retrieval rows but no fact's KV and a pinned budget
 * that holds them all, the namespace prefetched there; full recompute of
 * the same prompt beside it ("host_tier").
 *
 * Before that, accuracy recovery on the device engine ("recovery"): TTFT
 * at k = 10, 20, 50 of prefix recompute (2 tokens a chunk) and of prefix
 * plus query-aware selection (15 % past layer 2, query weight 0.5), each
 * beside full recompute of the same prompt; the device engine runs the
 * recompute and the question's prefill as one pass (docs/eval.md, "On the
 * GPU engine"), its time in prefill_ms.
 * Usage: bench_engine_gpu out.json (needs $INFS_CACHE's smollm2 GGUF and
 * minilm). White-box: the random model and its borrowed tokenizer. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inferscale/inferscale.h"

#include "../tests/cache_path.h"
#include "bench_common.h"
#include "bench_gpu.h"
#include "bench_llama3.h"
#include "engine/engine_impl.h"
#include "model/model.h"
#include "util/splitmix.h"

enum { N_FACTS = 1000, FACT = 24, MAX_T = 8192, N_CTX = 8192, BATCH = 32, ANSWER = 32, WARMUP = 3, RUNS = 10 };

static double median_d(double *v, int n)
{
	float f[64];
	for (int i = 0; i < n; i++)
		f[i] = (float)v[i];
	return median(f, n);
}

/* Question i: with the chat template's end of turn, about 32 tokens. */
static void question(char *buf, size_t n, int i)
{
	static const char *topics[] = { "the garden", "her sister", "the marathon", "the new job", "the cello lessons",
		                        "the trip to Porto", "the adopted cat", "the book club" };
	snprintf(buf, n, "Looking back, what exactly did I tell you about %s during week %d, and what did I say "
	         "I would do next?", topics[i % 8], 1 + i % 13);
}

typedef struct parts {
	double ttft, embed, retrieve, inject, prefill;
} parts;

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: bench_engine_gpu out.json\n");
		return 2;
	}
	int n_dev = 0;
	if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
		fprintf(stderr, "no CUDA device\n");
		return 77;
	}
	char tpath[1024], epath[1024];
	cache_path(tpath, sizeof tpath, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	cache_path(epath, sizeof epath, "minilm");
	infs_tokenizer *tok = NULL;
	bench_ok(infs_tokenizer_load(&tok, tpath), "SmolLM2's tokenizer");
	infs_embedder *emb = NULL;
	infs_embedder_options eo = INFS_EMBEDDER_OPTIONS_INIT;
	eo.device = 0;
	const char *embed_where = "device";
	if (infs_embedder_load(&emb, epath, &eo) == INFS_EUNSUPPORTED) {
		embed_where = "host";
		eo.device = -1;
		bench_ok(infs_embedder_load(&emb, epath, &eo), "the embedder");
	} else if (!emb) {
		bench_ok(1, "the embedder");
	}
	const infs__model_config cfg = llama3_8b();
	infs_model *m = NULL;
	const int fp8 = bench_fp8_weights();
	bench_ok(infs__model_random_device(&m, &cfg, 0, MAX_T, 42, fp8 ? INFS_DTYPE_FP8_E4M3 : INFS_DTYPE_BF16),
	         "the random model");
	m->tok = tok; /* freed with the model */

	/* The store: a device copy, facts put with one K/V pattern. */
	char dir[] = "/tmp/inferscale-bench-XXXXXX", spath[1100];
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(spath, sizeof spath, "%s/facts.infs", dir);
	infs_geometry g;
	bench_ok(infs_model_geometry(&g, m, INFS_DTYPE_BF16), "geometry");
	const uint32_t dim = infs_embedder_dim(emb);
	g.embed_dim = dim;
	char *identity = NULL;
	bench_ok(infs_model_identity(&identity, m, INFS_DTYPE_BF16), "identity");
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE;
	so.geometry = &g;
	so.identity = identity;
	so.sync = INFS_SYNC_OFF;
	so.device = 0;
	infs_store *st = NULL;
	bench_ok(infs_store_open(&st, spath, &so), "the store");
	const size_t kv_elems = (size_t)cfg.n_layers * FACT * cfg.n_kv_heads * cfg.head_dim;
	uint16_t *kv = malloc(kv_elems * sizeof *kv);
	uint64_t rng = 11;
	for (size_t i = 0; i < kv_elems; i++) {
		const float x = (float)((int64_t)(infs__splitmix64(&rng) % 2001) - 1000) / 1000.0f;
		uint32_t bits;
		memcpy(&bits, &x, 4);
		kv[i] = (uint16_t)(bits >> 16);
	}
	const size_t tv = infs_tokenizer_vocab_size(tok);
	double t0 = bench_now_ms();
	for (int i = 0; i < N_FACTS; i++) {
		int32_t ft[FACT];
		float e[1024];
		double norm = 0;
		for (int t = 0; t < FACT; t++)
			ft[t] = (int32_t)(100 + infs__splitmix64(&rng) % (tv - 200));
		for (uint32_t j = 0; j < dim; j++) {
			e[j] = (float)((int64_t)(infs__splitmix64(&rng) % 20001) - 10000);
			norm += (double)e[j] * e[j];
		}
		for (uint32_t j = 0; j < dim; j++)
			e[j] = (float)(e[j] / sqrt(norm));
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = FACT, f.tokens = ft, f.embedding = e, f.k = kv, f.v = kv;
		uint64_t id;
		bench_ok(infs_fact_put(&id, st, "user", &f), "infs_fact_put");
	}
	fprintf(stderr, "store: %d facts in %.1f s\n", N_FACTS, (bench_now_ms() - t0) / 1e3);
	free(kv);

	infs_engine_options en = INFS_ENGINE_OPTIONS_INIT;
	en.n_ctx = N_CTX;
	en.kv_dtype = INFS_DTYPE_BF16;
	en.device = 0;
	en.max_seqs = BATCH;
	en.n_blocks = 4096;
	infs_engine *e = NULL;
	bench_ok(infs_engine_create(&e, m, &en), "the engine");
	bench_ok(infs_engine_prepare(e, st), "infs_engine_prepare");

	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	fprintf(out, "{\n");
	print_device(out);
	fprintf(out, "  \"weights\": \"%s\", \"embedder\": \"%s\", \"facts\": %d, \"fact_tokens\": %d,\n  \"rows\": [\n",
	        fp8 ? "fp8" : "bf16", embed_where, N_FACTS, FACT);
	static const uint32_t ks[] = { 0, 10, 20, 50, 100, 200 };
	char q[256];
	int qi = 0;
	for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
		double inj[5][RUNS], full[RUNS], host[RUNS];
		uint32_t n_prompt = 0, n_question = 0;
		const uint64_t dev0 = e->device_asks;
		for (int r = -WARMUP; r < RUNS; r++) {
			question(q, sizeof q, qi++);
			infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
			ao.generate.max_tokens = 1;
			uint64_t none = 0;
			if (ks[ki]) {
				ao.k = ks[ki];
			} else {
				ao.fact_ids = &none; /* no facts, no retrieval */
				ao.n_fact_ids = 0;
			}
			infs_answer *a = NULL, *f = NULL;
			bench_ok(infs_engine_ask(&a, e, st, emb, "user", q, &ao), "injection");
			/* the same question by the host path: a wait after each part */
			infs_answer *h = NULL;
			e->no_device_path = 1;
			bench_ok(infs_engine_ask(&h, e, st, emb, "user", q, &ao), "injection by the host path");
			e->no_device_path = 0;
			ao.full_recompute = 1;
			ao.fact_ids = a->fact_ids, ao.n_fact_ids = a->n_facts;
			/* The injection order is best last: the ids are best first. */
			bench_ok(infs_engine_ask(&f, e, st, emb, "user", q, &ao), "full recompute");
			if (f->n_prompt != a->n_prompt) {
				fprintf(stderr, "full recompute's prompt (%u) is not injection's (%u)\n", f->n_prompt, a->n_prompt);
				return 1;
			}
			if (r >= 0) {
				inj[0][r] = a->ttft_ms, inj[1][r] = a->embed_ms, inj[2][r] = a->retrieve_ms;
				inj[3][r] = a->inject_ms, inj[4][r] = a->prefill_ms;
				full[r] = a->embed_ms + a->retrieve_ms + f->inject_ms + f->prefill_ms;
				host[r] = h->ttft_ms;
				n_prompt = a->n_prompt, n_question = a->n_prefilled;
			}
			infs_answer_free(h);
			infs_answer_free(a);
			infs_answer_free(f);
		}
		parts p = { median_d(inj[0], RUNS), median_d(inj[1], RUNS), median_d(inj[2], RUNS), median_d(inj[3], RUNS),
			    median_d(inj[4], RUNS) };
		const double tf = median_d(full, RUNS), th = median_d(host, RUNS);
		/* every question of the row by the device path, or none */
		const int by_device = e->device_asks - dev0 == RUNS + WARMUP;
		fprintf(out, "   {\"k\": %u, \"prompt_tokens\": %u, \"question_tokens\": %u, \"ttft_inject_ms\": %.3f, "
		             "\"embed_ms\": %.3f, \"retrieve_ms\": %.3f, \"inject_ms\": %.3f, \"prefill_ms\": %.3f, "
		             "\"ttft_full_ms\": %.3f, \"device_path\": %s, \"ttft_host_path_ms\": %.3f}%s\n", ks[ki],
		        n_prompt, n_question, p.ttft, p.embed, p.retrieve, p.inject, p.prefill, tf,
		        by_device ? "true" : "false", th, ki + 1 < sizeof ks / sizeof *ks ? "," : "");
		fprintf(stderr, "k %3u: TTFT %.2f ms (embed %.2f, retrieve %.3f, inject %.3f, prefill %.2f; %s path; host "
		        "path %.2f ms), full %.2f ms: %.1fx\n", ks[ki], p.ttft, p.embed, p.retrieve, p.inject, p.prefill,
		        by_device ? "device" : "host", th, tf, tf / p.ttft);
	}
	fprintf(out, "  ],\n");

	/* Throughput: BATCH requests at k = 50 together. */
	char qs[BATCH][256];
	const char *qp[BATCH];
	for (int i = 0; i < BATCH; i++) {
		question(qs[i], sizeof qs[i], 100 + i);
		qp[i] = qs[i];
	}
	double wall[2][2];
	/* the injected prefill phase's best call in its parts (the group's, shared by its answers) */
	double part[4] = { 0, 0, 0, 0 };
	uint64_t out_tokens[2] = { 0, 0 }, positions[2] = { 0, 0 };
	for (int full = 0; full < 2; full++)
		for (int prefill_only = 0; prefill_only < 2; prefill_only++) {
			infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
			ao.k = 50;
			ao.full_recompute = full;
			ao.ignore_eos = 1;
			ao.generate.max_tokens = prefill_only ? 1 : ANSWER;
			infs_answer *as[BATCH];
			double best = 1e30;
			for (int r = 0; r < 3; r++) { /* the first captures the graphs of its shapes */
				double s = bench_now_ms();
				bench_ok(infs_engine_ask_batch(as, e, st, emb, "user", qp, BATCH, &ao), "infs_engine_ask_batch");
				const double w = bench_now_ms() - s;
				if (w < best && !full && prefill_only) {
					part[0] = as[0]->embed_ms, part[1] = as[0]->retrieve_ms;
					part[2] = as[0]->inject_ms, part[3] = as[0]->prefill_ms;
				}
				best = w < best ? w : best;
				uint64_t toks = 0, pos = 0;
				for (int i = 0; i < BATCH; i++) {
					toks += as[i]->n_tokens;
					pos += as[i]->n_prompt;
					infs_answer_free(as[i]);
				}
				if (!prefill_only)
					out_tokens[full] = toks;
				else
					positions[full] = pos;
			}
			wall[full][prefill_only] = best;
		}
	const double rps_i = BATCH / (wall[0][0] / 1e3), rps_f = BATCH / (wall[1][0] / 1e3);
	const double pt_i = positions[0] / (wall[0][1] / 1e3), pt_f = positions[1] / (wall[1][1] / 1e3);
	fprintf(out, "  \"throughput\": {\"concurrency\": %d, \"k\": 50, \"answer_tokens\": %d, \"req_per_s_inject\": %.2f, "
	             "\"req_per_s_full\": %.2f, \"out_tok_per_s_inject\": %.1f, \"out_tok_per_s_full\": %.1f, "
	             "\"prefill_tok_per_s_inject\": %.0f, \"prefill_tok_per_s_full\": %.0f, \"batch_ms_inject\": %.2f, "
	             "\"batch_ms_full\": %.2f, \"prefill_batch_ms_inject\": %.2f, \"prefill_batch_ms_full\": %.2f, "
	             "\"prefill_phase_parts_ms\": {\"embed\": %.3f, \"retrieve\": %.3f, \"inject\": %.3f, "
	             "\"prefill\": %.3f, \"other\": %.3f}},\n",
	        BATCH, ANSWER, rps_i, rps_f, out_tokens[0] / (wall[0][0] / 1e3), out_tokens[1] / (wall[1][0] / 1e3), pt_i,
	        pt_f, wall[0][0], wall[1][0], wall[0][1], wall[1][1], part[0], part[1], part[2], part[3],
	        wall[0][1] - part[0] - part[1] - part[2] - part[3]);
	fprintf(stderr, "%d requests at k = 50, %d-token answers: %.1f req/s injected, %.1f full (%.2fx); prefill phase "
	        "%.0f vs %.0f positions/s (%.1fx); injected prefill phase %.2f ms: embed %.2f, retrieve %.2f, inject %.2f, "
	        "prefill %.2f, other %.2f\n", BATCH, ANSWER, rps_i, rps_f, rps_i / rps_f, pt_i, pt_f, pt_i / pt_f,
	        wall[0][1], part[0], part[1], part[2], part[3], wall[0][1] - part[0] - part[1] - part[2] - part[3]);

	/* Accuracy recovery on the device engine at k = 10, 20, 50: each mode's
	 * TTFT (its recompute counted in the prefill) against full recompute
	 * of the same prompt. */
	static const struct {
		const char *name;
		uint32_t prefix;
		float ratio, weight;
		uint32_t check_layer;
	} modes[] = { { "prefix", 2, 0.0f, 0.0f, 0 }, { "prefix+query", 2, 0.15f, 0.5f, 2 } };
	static const uint32_t rks[] = { 10, 20, 50 };
	fprintf(out, "  \"recovery\": [\n");
	for (size_t mi = 0; mi < sizeof modes / sizeof *modes; mi++)
		for (size_t ki = 0; ki < sizeof rks / sizeof *rks; ki++) {
			double rt[2][RUNS], rf[RUNS];
			uint32_t n_rec = 0, n_of = 0;
			for (int r = -WARMUP; r < RUNS; r++) {
				question(q, sizeof q, qi++);
				infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
				ao.generate.max_tokens = 1;
				ao.k = rks[ki];
				ao.prefix_tokens = modes[mi].prefix;
				ao.recompute_ratio = modes[mi].ratio;
				ao.query_weight = modes[mi].weight;
				ao.check_layer = modes[mi].check_layer;
				infs_answer *a = NULL, *f = NULL;
				bench_ok(infs_engine_ask(&a, e, st, emb, "user", q, &ao), modes[mi].name);
				ao.prefix_tokens = 0, ao.recompute_ratio = 0, ao.query_weight = 0, ao.check_layer = 0;
				ao.full_recompute = 1;
				ao.fact_ids = a->fact_ids, ao.n_fact_ids = a->n_facts;
				bench_ok(infs_engine_ask(&f, e, st, emb, "user", q, &ao), "full recompute");
				if (r >= 0) {
					rt[0][r] = a->ttft_ms, rt[1][r] = a->prefill_ms;
					rf[r] = a->embed_ms + a->retrieve_ms + f->inject_ms + f->prefill_ms;
					n_rec = a->n_recomputed, n_of = a->n_recomputable;
				}
				infs_answer_free(a);
				infs_answer_free(f);
			}
			const double tt = median_d(rt[0], RUNS), tp = median_d(rt[1], RUNS), tf = median_d(rf, RUNS);
			const int last = mi + 1 == sizeof modes / sizeof *modes && ki + 1 == sizeof rks / sizeof *rks;
			fprintf(out, "   {\"mode\": \"%s\", \"k\": %u, \"prefix_tokens\": %u, \"recompute_ratio\": %.2f, "
			             "\"check_layer\": %u, \"query_weight\": %.2f, \"recomputed\": %u, \"recomputable\": %u, "
			             "\"ttft_ms\": %.3f, \"prefill_ms\": %.3f, \"ttft_full_ms\": %.3f, \"speedup_vs_full\": %.2f}%s\n",
			        modes[mi].name, rks[ki], modes[mi].prefix, (double)modes[mi].ratio, modes[mi].check_layer,
			        (double)modes[mi].weight, n_rec, n_of, tt, tp, tf, tf / tt, last ? "" : ",");
			fprintf(stderr, "recovery %s k %u: TTFT %.2f ms (prefill and recompute %.2f; %u of %u recomputed), "
			        "full %.2f ms: %.1fx\n", modes[mi].name, rks[ki], tt, tp, n_rec, n_of, tf, tf / tt);
		}
	fprintf(out, "  ],\n");

	/* The facts on the pinned tier: 4 MiB of device budget holds the
	 * rows (1,000 of 384 dimensions, 2.3 MB), not one fact's 3 MiB of KV
	 * besides them; 4 GiB of pinned memory holds all 1,000 (and the
	 * segments, where they do not fit on the device either). */
	infs_store_close(st);
	so.flags = 0;
	so.device_budget_bytes = 4u << 20;
	so.host_budget_bytes = 4ull << 30;
	bench_ok(infs_store_open(&st, spath, &so), "the store on the pinned tier");
	bench_ok(infs_engine_prepare(e, st), "infs_engine_prepare");
	bench_ok(infs_prefetch(st, "user"), "infs_prefetch");
	bench_ok(infs_prefetch(st, INFS_SEGMENT_NAMESPACE), "infs_prefetch");
	bench_ok(infs_tier_wait(st), "infs_tier_wait");
	infs_tier tier;
	bench_ok(infs_namespace_tier(&tier, st, "user"), "infs_namespace_tier");
	infs_store_stats sst = { .version = INFS_STORE_STATS_VERSION };
	bench_ok(infs_store_stats_get(&sst, st), "infs_store_stats_get");
	double ht[5][RUNS], hf[RUNS];
	for (int r = -WARMUP; r < RUNS; r++) {
		question(q, sizeof q, qi++);
		infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
		ao.generate.max_tokens = 1;
		ao.k = 50;
		infs_answer *a = NULL, *f = NULL;
		bench_ok(infs_engine_ask(&a, e, st, emb, "user", q, &ao), "injection from the pinned tier");
		ao.full_recompute = 1;
		ao.fact_ids = a->fact_ids, ao.n_fact_ids = a->n_facts;
		bench_ok(infs_engine_ask(&f, e, st, emb, "user", q, &ao), "full recompute");
		if (r >= 0) {
			ht[0][r] = a->ttft_ms, ht[1][r] = a->embed_ms, ht[2][r] = a->retrieve_ms;
			ht[3][r] = a->inject_ms, ht[4][r] = a->prefill_ms;
			hf[r] = a->embed_ms + a->retrieve_ms + f->inject_ms + f->prefill_ms;
		}
		infs_answer_free(a);
		infs_answer_free(f);
	}
	bench_ok(infs_namespace_tier(&tier, st, "user"), "infs_namespace_tier");
	const parts hp = { median_d(ht[0], RUNS), median_d(ht[1], RUNS), median_d(ht[2], RUNS), median_d(ht[3], RUNS),
		           median_d(ht[4], RUNS) };
	const double hfull = median_d(hf, RUNS);
	fprintf(out, "  \"host_tier\": {\"k\": 50, \"tier\": \"%s\", \"kv_host_bytes\": %llu, \"kv_device_bytes\": %llu, "
	             "\"ttft_inject_ms\": %.3f, \"embed_ms\": %.3f, \"retrieve_ms\": %.3f, \"inject_ms\": %.3f, "
	             "\"prefill_ms\": %.3f, \"ttft_full_ms\": %.3f}\n}\n",
	        tier == INFS_TIER_HOST ? "host" : tier == INFS_TIER_DEVICE ? "device" : "file",
	        (unsigned long long)sst.kv_host_bytes, (unsigned long long)sst.kv_device_bytes, hp.ttft, hp.embed,
	        hp.retrieve, hp.inject, hp.prefill, hfull);
	fprintf(stderr, "k 50 from the pinned tier: TTFT %.2f ms (inject %.3f), full %.2f ms: %.1fx\n", hp.ttft,
	        hp.inject, hfull, hfull / hp.ttft);
	fclose(out);
	infs_engine_free(e);
	infs_store_close(st);
	char rm[1200];
	snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
	if (system(rm))
		fprintf(stderr, "could not remove %s\n", dir);
	infs_free(identity);
	infs_embedder_free(emb);
	infs_model_free(m);
	return 0;
}

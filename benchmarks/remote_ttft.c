/* bench_remote's time to first token on SmolLM2-135M with the built-in
 * embedder (the models scripts/fetch-models.sh fetches): a user's facts
 * (examples/memory/facts.jsonl, encoded once through the remote tier) asked
 * about by a store that has them only on the server (cold: the local file
 * lost, the store opened again, the namespace fetched on the question's
 * first use) and by one that has them already (warm). The bytes the cold
 * answer moved, and the time to move them at the fetch throughput measured
 * here (infs_prefetch of the same user into a fresh file). Public API only. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "remote_ttft.h"

enum { REPS = 5, K = 4, MAX_FACTS = 256 };

static const char user[] = "maya";
static const char question[] = "What is the name of Maya's cat?";

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return v[n / 2];
}

/* The "text" members of a JSONL file with plain strings (no escapes). */
static size_t read_texts(char **texts, size_t cap, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	size_t n = 0;
	while (f && n < cap && fgets(line, sizeof line, f)) {
		char *p = strstr(line, "\"text\": \"");
		char *end = p ? strchr(p + 9, '"') : NULL;
		if (end)
			texts[n++] = strndup(p + 9, (size_t)(end - p - 9));
	}
	if (f)
		fclose(f);
	return n;
}

typedef struct ttft_env {
	infs_model *model;
	infs_embedder *embedder;
	infs_engine *engine;
	infs_store_options so;
	infs_geometry g;
	char *identity;
} ttft_env;

static int open_store(infs_store **s, ttft_env *e, const char *path, bool create)
{
	e->so.flags = create ? INFS_OPEN_CREATE : 0;
	e->so.geometry = create ? &e->g : NULL;
	e->so.identity = create ? e->identity : NULL;
	*s = NULL;
	int rc = infs_store_open(s, path, &e->so);
	if (!rc && (rc = infs_engine_prepare(e->engine, *s))) {
		infs_store_close(*s);
		*s = NULL;
	}
	return rc;
}

static int ask(double *ttft_ms, ttft_env *e, infs_store *s)
{
	infs_ask_options o = INFS_ASK_OPTIONS_INIT;
	o.k = K;
	o.generate.max_tokens = 1;
	infs_answer *a = NULL;
	int rc = infs_engine_ask(&a, e->engine, s, e->embedder, user, question, &o);
	if (!rc)
		*ttft_ms = a->ttft_ms;
	infs_answer_free(a);
	return rc;
}

/* Puts the user's facts on the server through a store at dir/ttft-put.infs. */
static int encode_user(ttft_env *e, const char *dir, const char *facts, size_t *n_facts)
{
	char *texts[MAX_FACTS];
	size_t n = read_texts(texts, MAX_FACTS, facts);
	if (n == 0) {
		fprintf(stderr, "bench_remote: no facts in %s\n", facts);
		return INFS_EIO;
	}
	char path[700];
	snprintf(path, sizeof path, "%s/ttft-put.infs", dir);
	infs_store *s;
	int rc = open_store(&s, e, path, true);
	infs_fact_input in[MAX_FACTS];
	char *rendered[MAX_FACTS] = { 0 };
	for (size_t i = 0; !rc && i < n; i++) {
		rc = infs_fact_render(&rendered[i], texts[i], NULL);
		infs_fact_input init = INFS_FACT_INPUT_INIT;
		in[i] = init;
		in[i].text = rendered[i];
		in[i].embed_text = texts[i];
	}
	const int32_t *hdr;
	uint32_t nh;
	if (!rc)
		rc = infs_engine_header(&hdr, &nh, e->engine);
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	if (!rc) {
		eo.context = hdr;
		eo.n_context = nh;
		eo.embedder = e->embedder;
	}
	uint64_t ids[MAX_FACTS];
	if (!rc)
		rc = infs_fact_encode(ids, s, user, e->model, in, n, &eo);
	for (size_t i = 0; i < n; i++) {
		infs_free(rendered[i]);
		free(texts[i]);
	}
	infs_store_close(s);
	*n_facts = n;
	return rc;
}

int remote_ttft(char *out, size_t cap, const char *url, const char *dir, const char *facts, unsigned n_threads)
{
	char model_path[600], embedder_path[600];
	bench_model_path(model_path, sizeof model_path, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	bench_model_path(embedder_path, sizeof embedder_path, "minilm");
	if (access(model_path, R_OK) != 0 || access(embedder_path, R_OK) != 0) {
		fprintf(stderr, "bench_remote: %s or %s is missing (scripts/fetch-models.sh): no TTFT row\n", model_path,
		        embedder_path);
		return INFS_ENOTFOUND;
	}
	ttft_env e = { 0 };
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.n_threads = n_threads;
	infs_embedder_options eo = INFS_EMBEDDER_OPTIONS_INIT;
	eo.n_threads = n_threads;
	infs_engine_options en = INFS_ENGINE_OPTIONS_INIT;
	en.n_ctx = 2048;
	en.kv_dtype = INFS_DTYPE_F16;
	int rc = infs_model_load(&e.model, model_path, &mo);
	if (!rc)
		rc = infs_embedder_load(&e.embedder, embedder_path, &eo);
	if (!rc)
		rc = infs_engine_create(&e.engine, e.model, &en);
	if (!rc)
		rc = infs_model_geometry(&e.g, e.model, INFS_DTYPE_F16);
	if (!rc)
		rc = infs_model_identity(&e.identity, e.model, INFS_DTYPE_F16);
	if (rc) {
		fprintf(stderr, "bench_remote: %s\n", infs_error_last());
		return rc;
	}
	e.g.embed_dim = infs_embedder_dim(e.embedder);
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	e.so = so;
	e.so.sync = INFS_SYNC_OFF; /* as the fetch rows: the file is a cache */
	e.so.remote = url;
	e.so.remote_prefix = "ttft";
	e.so.remote_timeout_ms = 10000;

	size_t n_facts = 0;
	rc = encode_user(&e, dir, facts, &n_facts);
	double cold[REPS], warm[REPS], fetch[REPS];
	uint64_t bytes = 0;
	char path[700];
	snprintf(path, sizeof path, "%s/ttft-serve.infs", dir);
	for (int r = 0; r < REPS && !rc; r++) {
		/* the fetch alone: the user into a fresh file */
		infs_store *s;
		unlink(path);
		if ((rc = open_store(&s, &e, path, false)))
			break;
		infs_store_stats before = { .version = 1 }, after = { .version = 1 };
		infs_store_stats_get(&before, s);
		double t0 = bench_now_ms();
		rc = infs_prefetch(s, user);
		fetch[r] = bench_now_ms() - t0;
		infs_store_stats_get(&after, s);
		bytes = after.live_bytes - before.live_bytes;
		if (!rc && after.n_facts - before.n_facts != n_facts)
			rc = INFS_ECORRUPT;
		infs_store_close(s);
		/* cold: the file lost, the store opened again, then the question */
		unlink(path);
		if (rc || (rc = open_store(&s, &e, path, false)))
			break;
		if (!(rc = ask(&cold[r], &e, s)))
			rc = ask(&warm[r], &e, s); /* warm: the same store, the user local now */
		infs_store_close(s);
	}
	unlink(path);
	if (rc) {
		fprintf(stderr, "bench_remote: %s\n", infs_error_last());
	} else {
		double c = median(cold, REPS), w = median(warm, REPS), f = median(fetch, REPS);
		double mbps = (double)bytes / f / 1e3, target = (w + f) * 1.1;
		fprintf(stderr, "TTFT, SmolLM2-135M, k=%d, %zu facts (%llu B): cold %.1f ms, warm %.1f ms, fetch %.1f ms "
		        "(%.1f MB/s); cold <= (warm + fetch) * 1.1 = %.1f ms: %s\n", K, n_facts,
		        (unsigned long long)bytes, c, w, f, mbps, target, c <= target ? "yes" : "no");
		snprintf(out, cap,
		         "{\"model\": \"SmolLM2-135M-Instruct Q4_1, f16 KV\", \"threads\": %u, \"k\": %d, \"facts\": %zu, "
		         "\"bytes_moved\": %llu, \"fetch_mb_per_s\": %.1f, \"move_ms\": %.1f, \"cold_ttft_ms\": %.1f, "
		         "\"warm_ttft_ms\": %.1f, \"target_ms\": %.1f, \"within_target\": %s}",
		         n_threads, K, n_facts, (unsigned long long)bytes, mbps, f, c, w, target,
		         c <= target ? "true" : "false");
	}
	infs_free(e.identity);
	infs_engine_free(e.engine);
	infs_embedder_free(e.embedder);
	infs_model_free(e.model);
	return rc;
}

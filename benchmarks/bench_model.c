/* Model runtime benchmark: load time, resident memory and prefill speed of a
 * model on this machine's CPU, as one JSON object on stdout.
 *
 *   bench_model [model.gguf | hf-dir] [n_threads] [prefill lengths...]
 *
 * Defaults: $INFS_CACHE/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, all cores,
 * lengths 32 128 512. Each length is run 3 times; the best run counts.
 * Then 32 decoding steps of one token over a paged cache after 128 tokens.
 * Matrix products use OpenBLAS's threads (OPENBLAS_NUM_THREADS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "inferscale/inferscale.h"

#include "bench_common.h"

#ifdef BENCH_OPENBLAS
#include <cblas.h>
#endif

static double now(void)
{
	return bench_clock(CLOCK_MONOTONIC);
}

/* VmRSS or VmHWM of this process in MiB. */
static double proc_mib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	double kib = 0;
	size_t n = strlen(field);
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			kib = atof(line + n + 1);
	if (f)
		fclose(f);
	return kib / 1024.0;
}

int main(int argc, char **argv)
{
	char def[1024];
	bench_model_path(def, sizeof def, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	const char *path = argc > 1 && argv[1][0] ? argv[1] : def;
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.n_threads = argc > 2 ? (uint32_t)atoi(argv[2]) : 0;
	uint32_t lens[16] = { 32, 128, 512 };
	int n_lens = 3;
	if (argc > 3) {
		n_lens = 0;
		for (int i = 3; i < argc && n_lens < 16; i++)
			lens[n_lens++] = (uint32_t)atoi(argv[i]);
	}

	double rss0 = proc_mib("VmRSS"), t0 = now();
	infs_model *model = NULL;
	if (infs_model_load(&model, path, &mo) != INFS_OK) {
		fprintf(stderr, "bench_model: %s\n", infs_error_last());
		return 1;
	}
	double load_s = now() - t0, rss_loaded = proc_mib("VmRSS");
	infs_model_info info;
	memset(&info, 0, sizeof info);
	info.version = INFS_MODEL_INFO_VERSION;
	infs_model_info_get(&info, model);

	char cpu[256];
	bench_cpu_name(cpu, sizeof cpu);
	printf("{\n  \"model\": \"%s\",\n  \"architecture\": \"%s\",\n  \"n_params\": %llu,\n", path,
	       info.architecture, (unsigned long long)info.n_params);
	printf("  \"cpu\": \"%s\",\n  \"cores\": %ld,\n  \"n_threads\": %u,\n  \"blas\": %s,\n", cpu,
	       sysconf(_SC_NPROCESSORS_ONLN), mo.n_threads,
	       infs_features() & INFS_FEATURE_BLAS ? "true" : "false");
#ifdef BENCH_OPENBLAS
	/* The kernel OpenBLAS picked: virtual CPUs are often misdetected as an
	 * old core (OPENBLAS_CORETYPE overrides). */
	printf("  \"openblas_core\": \"%s\",\n", openblas_get_corename());
#endif
	printf("  \"load_s\": %.3f,\n  \"rss_after_load_mib\": %.1f,\n", load_s, rss_loaded - rss0);

	float *logits = malloc((size_t)info.n_vocab * sizeof *logits);
	printf("  \"prefill\": [");
	for (int li = 0; li < n_lens; li++) {
		uint32_t n = lens[li];
		int32_t *tokens = malloc(n * sizeof *tokens);
		for (uint32_t i = 0; i < n; i++)
			tokens[i] = (int32_t)((i * 7919u + 13u) % info.n_vocab);
		size_t kv = (size_t)info.n_layers * n * info.n_kv_heads * info.head_dim;
		uint16_t *k = malloc(kv * 2), *v = malloc(kv * 2);
		infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
		fo.kv_dtype = INFS_DTYPE_F16;
		double best = 1e30, best_cpu = 0;
		for (int rep = 0; rep < 3; rep++) {
			double s = now(), c = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
			if (infs_model_forward(logits, k, v, model, tokens, NULL, n, &fo) != INFS_OK) {
				fprintf(stderr, "bench_model: %s\n", infs_error_last());
				return 1;
			}
			double e = now() - s;
			if (e < best) {
				best = e;
				best_cpu = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c;
			}
		}
		/* cpu_seconds (all threads) shows how much of the wall time the
		 * process really ran on a shared machine. */
		printf("%s\n    { \"tokens\": %u, \"seconds\": %.4f, \"cpu_seconds\": %.4f, \"tokens_per_s\": %.1f }",
		       li ? "," : "", n, best, best_cpu, n / best);
		free(tokens);
		free(k);
		free(v);
	}
	printf("\n  ],\n");

	/* Decoding: a 128-token prompt prefilled into a paged f16 cache, then
	 * 32 steps of one token each over it, as an engine runs them. */
	const uint32_t prompt = 128, steps = 32, bs = 16, n_blocks = (prompt + steps) / bs;
	size_t row = (size_t)info.n_kv_heads * info.head_dim, per_layer = (size_t)n_blocks * bs * row;
	uint16_t *kv_cache = calloc((size_t)info.n_layers * 2 * per_layer, 2);
	void **kl = calloc(info.n_layers, sizeof *kl), **vl = calloc(info.n_layers, sizeof *vl);
	int32_t *table = malloc(n_blocks * sizeof *table), *tokens = malloc((prompt + steps) * sizeof *tokens);
	for (uint32_t l = 0; l < info.n_layers; l++) {
		kl[l] = kv_cache + (size_t)l * 2 * per_layer;
		vl[l] = kv_cache + ((size_t)l * 2 + 1) * per_layer;
	}
	for (uint32_t b = 0; b < n_blocks; b++)
		table[b] = (int32_t)b;
	for (uint32_t i = 0; i < prompt + steps; i++)
		tokens[i] = (int32_t)((i * 7919u + 13u) % info.n_vocab);
	infs_kv_layout layout = INFS_KV_LAYOUT_INIT;
	layout.n_layers = info.n_layers;
	layout.n_kv_heads = info.n_kv_heads;
	layout.head_dim = info.head_dim;
	layout.n_blocks = n_blocks;
	layout.block_size = bs;
	layout.k_layers = kl;
	layout.v_layers = vl;
	layout.stride_block = (int64_t)(bs * row);
	layout.stride_slot = (int64_t)row;
	layout.stride_head = info.head_dim;
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.cache = &layout;
	fo.block_table = table;
	fo.block_table_len = n_blocks;
	fo.write_cache = 1;
	if (infs_model_forward(logits, NULL, NULL, model, tokens, NULL, prompt, &fo) != INFS_OK) {
		fprintf(stderr, "bench_model: %s\n", infs_error_last());
		return 1;
	}
	double s = now(), c = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
	for (uint32_t i = prompt; i < prompt + steps; i++) {
		int32_t pos = (int32_t)i;
		fo.n_past = i;
		if (infs_model_forward(logits, NULL, NULL, model, tokens + i, &pos, 1, &fo) != INFS_OK) {
			fprintf(stderr, "bench_model: %s\n", infs_error_last());
			return 1;
		}
	}
	double e = now() - s, ec = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c;
	printf("  \"decode\": { \"after_tokens\": %u, \"steps\": %u, \"seconds\": %.4f, \"cpu_seconds\": %.4f, \"tokens_per_s\": %.1f },\n",
	       prompt, steps, e, ec, steps / e);
	free(kv_cache);
	free(kl);
	free(vl);
	free(table);
	free(tokens);
	printf("  \"peak_rss_mib\": %.1f\n}\n", proc_mib("VmHWM"));
	free(logits);
	infs_model_free(model);
	return 0;
}

/* Tokenizer speed on SmolLM2: load time from the GGUF and tokenization
 * throughput over every LoCoMo dialogue turn (joined by newlines), best of 5.
 * Prints one JSON object. Usage: bench_tokenizer [LOCOMO_DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inferscale/inferscale.h"

#include "bench_common.h"
#include "jsonl.h"

static double now(void)
{
	return bench_clock(CLOCK_MONOTONIC);
}

/* Appends every session turn's text of one conversation file to text. */
static void add_turns(const char *path, char **text, size_t *len, size_t *cap)
{
	size_t n;
	char *raw = bench_read_text(path, &n);
	jsonl j = { 0 };
	if (!raw || jsonl_parse(&j, raw, n) || j.v->type != JSONL_OBJECT) {
		jsonl_free(&j);
		free(raw);
		return;
	}
	const jsonl_value *sess = j.v + 1;
	for (size_t k = 0; k < j.v->len; k++, sess = jsonl_next(sess)) {
		if (strncmp(sess->key, "session_", 8) != 0 || sess->type != JSONL_ARRAY)
			continue;
		const jsonl_value *turn = sess + 1;
		for (size_t i = 0; i < sess->len; i++, turn = jsonl_next(turn)) {
			const char *t = jsonl_str(jsonl_get(turn, "text"), "");
			size_t tl = strlen(t);
			while (*len + tl + 2 > *cap) {
				*cap = *cap ? *cap * 2 : 1 << 16;
				*text = realloc(*text, *cap);
			}
			memcpy(*text + *len, t, tl);
			*len += tl;
			(*text)[(*len)++] = '\n';
		}
	}
	jsonl_free(&j);
	free(raw);
}

int main(int argc, char **argv)
{
	const char *locomo = argc > 1 ? argv[1] : "../shared/data/locomo";
	char model[4096], path[4096], cpu[600];
	bench_model_path(model, sizeof model, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	bench_cpu_name(cpu, sizeof cpu);

	double t0 = now();
	infs_tokenizer *tok;
	if (infs_tokenizer_load(&tok, model) != INFS_OK) {
		fprintf(stderr, "%s\n", infs_error_last());
		return 1;
	}
	double load_ms = (now() - t0) * 1e3;
	char *text = NULL;
	size_t len = 0, cap = 0;
	static const char *const files[] = { "conv-26.json", "conv-30.json", "conv-41.json", "conv-42.json",
		                             "conv-43.json" };
	for (size_t i = 0; i < 5; i++) {
		snprintf(path, sizeof path, "%s/%s", locomo, files[i]);
		add_turns(path, &text, &len, &cap);
	}
	if (!len) {
		fprintf(stderr, "no LoCoMo text under %s\n", locomo);
		return 1;
	}
	size_t n = 0;
	double best = 1e30;
	for (int r = 0; r < 5; r++) {
		double t = now();
		if (infs_tokenize(tok, text, len, INFS_TOKENIZE_PARSE_SPECIAL, NULL, 0, &n) != INFS_OK)
			return 1;
		t = now() - t;
		best = t < best ? t : best;
	}
	printf("{\"benchmark\": \"tokenizer\", \"model\": \"SmolLM2-135M-Instruct\", \"cpu\": \"%s\", "
	       "\"threads\": 1, \"load_ms\": %.1f, \"bytes\": %zu, \"tokens\": %zu, \"tokenize_ms\": %.1f, "
	       "\"mb_per_s\": %.2f, \"tokens_per_s\": %.0f}\n",
	       cpu, load_ms, len, n, best * 1e3, (double)len / best / 1e6, (double)n / best);
	free(text);
	infs_tokenizer_free(tok);
	return 0;
}

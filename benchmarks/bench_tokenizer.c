/* Tokenizer speed on SmolLM2: load time from the GGUF and tokenization
 * throughput over every LoCoMo dialogue turn (joined by newlines), best of 5.
 * Prints one JSON object. Usage: bench_tokenizer [LOCOMO_DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cache_path.h"
#include "inferscale/inferscale.h"
#include "util/json.h"
#include "util/read_file.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Appends every session turn's text of one conversation file to text. */
static void add_turns(const char *path, char **text, size_t *len, size_t *cap)
{
	size_t n;
	char *raw = read_file(path, &n);
	infs__json *j = NULL;
	if (!raw || infs__json_parse(&j, raw, n) != INFS_OK) {
		free(raw);
		return;
	}
	for (size_t k = 0; k < j->len; k++) {
		if (strncmp(j->keys[k], "session_", 8) != 0 || j->items[k].type != INFS_JSON_ARRAY)
			continue;
		for (size_t i = 0; i < j->items[k].len; i++) {
			const char *t = infs__json_str(infs__json_get(&j->items[k].items[i], "text"), "");
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
	infs__json_free(j);
	free(raw);
}

int main(int argc, char **argv)
{
	const char *locomo = argc > 1 ? argv[1] : "../shared/data/locomo";
	char model[4096], path[4096], cpu[600] = "unknown";
	cache_path(model, sizeof model, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	FILE *ci = fopen("/proc/cpuinfo", "r");
	char line[512];
	while (ci && fgets(line, sizeof line, ci))
		if (strncmp(line, "model name", 10) == 0) {
			char *c = strchr(line, ':');
			snprintf(cpu, sizeof cpu, "%s", c ? c + 2 : line);
			cpu[strcspn(cpu, "\n\"")] = '\0';
			break;
		}
	if (ci)
		fclose(ci);

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

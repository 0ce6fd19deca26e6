/* Token-for-token parity with the Hugging Face tokenizer of SmolLM2 on every
 * LoCoMo fact and question. The texts are read from the data directory (never
 * committed); the goldens hold their token ids and a hash of each text, so a
 * changed text is reported as such rather than as a tokenizer bug.
 * Usage: test_tokenizer_locomo FIXTURE_DIR LOCOMO_DIR ($INFS_LOCOMO overrides
 * the latter). Skips (77) when the LoCoMo directory is absent, as the data's
 * README asks; CI has it beside the clone. */
#include <string.h>
#include <sys/stat.h>

#include "cache_path.h"
#include "tok_fixture.h"

static uint64_t fnv1a64(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return h;
}

static size_t n_checked;

static void check_text(const infs_tokenizer *tok, const char *file, const char *kind, size_t index,
                       const char *text, const infs__json *golden)
{
	char name[256];
	snprintf(name, sizeof name, "%s %s %zu", file, kind, index);
	if (!golden || golden->type != INFS_JSON_ARRAY || golden->len != 2) {
		fprintf(stderr, "%s: no golden (the data has more texts than the goldens)\n", name);
		check_failures++;
		return;
	}
	char hash[17];
	snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a64(text, strlen(text)));
	if (strcmp(hash, infs__json_str(&golden->items[0], "")) != 0) {
		fprintf(stderr, "%s: the text changed since the goldens were made (hash %s); rerun "
		        "tests/fixtures/tokenizer/make_goldens.py\n", name, hash);
		check_failures++;
		return;
	}
	if (!check_tokens(tok, text, strlen(text), INFS_TOKENIZE_PARSE_SPECIAL, &golden->items[1], name))
		return;
	/* Decoding gives the text back. */
	const infs__json *want = &golden->items[1];
	infs_token ids[1024];
	size_t n = want->len < 1024 ? want->len : 1024, len = 0;
	for (size_t i = 0; i < n; i++)
		ids[i] = (infs_token)want->items[i].number;
	char out[8192];
	CHECK_OK(infs_detokenize(tok, ids, n, 0, out, sizeof out, &len));
	CHECK(len == strlen(text) && strcmp(out, text) == 0);
	n_checked++;
}

static void check_file(const infs_tokenizer *tok, const char *path, const char *file, const infs__json *goldens)
{
	infs__json *conv = load_fixture(path, file);
	const infs__json *facts = infs__json_get(goldens, "facts");
	const infs__json *questions = infs__json_get(goldens, "questions");
	size_t nf = 0, nq = 0;
	/* Facts: every "session_K_observation", speakers and items in order. */
	for (size_t k = 0; k < conv->len; k++) {
		size_t kl = strlen(conv->keys[k]);
		if (kl < 12 || strcmp(conv->keys[k] + kl - 12, "_observation") != 0)
			continue;
		const infs__json *obs = &conv->items[k];
		for (size_t s = 0; obs->type == INFS_JSON_OBJECT && s < obs->len; s++)
			for (size_t i = 0; i < obs->items[s].len; i++) {
				const infs__json *item = &obs->items[s].items[i];
				const char *text = infs__json_str(item->type == INFS_JSON_ARRAY && item->len ? &item->items[0] : NULL, "");
				check_text(tok, file, "fact", nf, text, facts && nf < facts->len ? &facts->items[nf] : NULL);
				nf++;
			}
	}
	const infs__json *qa = infs__json_get(conv, "qa");
	for (size_t i = 0; qa && i < qa->len; i++, nq++)
		check_text(tok, file, "question", nq, infs__json_str(infs__json_get(&qa->items[i], "question"), ""),
		           questions && nq < questions->len ? &questions->items[nq] : NULL);
	CHECK(facts && nf == facts->len && questions && nq == questions->len && nf > 0 && nq > 0);
	infs__json_free(conv);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s FIXTURE_DIR LOCOMO_DIR\n", argv[0]);
		return 1;
	}
	const char *locomo = getenv("INFS_LOCOMO") ? getenv("INFS_LOCOMO") : argv[2];
	struct stat st;
	if (stat(locomo, &st) != 0) {
		fprintf(stderr, "LoCoMo data not found at %s: skipped\n", locomo);
		return 77;
	}
	char path[4096];
	cache_path(path, sizeof path, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	infs_tokenizer *tok;
	CHECK_OK(infs_tokenizer_load(&tok, path));
	if (!tok)
		CHECK_DONE();
	infs__json *g = load_fixture(argv[1], "locomo_smollm2.json");
	const infs__json *files = infs__json_get(g, "files");
	CHECK(files && files->len == 5);
	for (size_t i = 0; files && i < files->len; i++)
		check_file(tok, locomo, files->keys[i], &files->items[i]);
	fprintf(stderr, "%zu LoCoMo texts identical to the Hugging Face tokenizer\n", n_checked);
	CHECK(n_checked == 2209);
	infs__json_free(g);
	infs_tokenizer_free(tok);
	CHECK_DONE();
}

/* SmolLM2-135M-Instruct's tokenizer from its GGUF against the Hugging Face
 * tokenizer (goldens from tests/fixtures/tokenizer/make_goldens.py): hard
 * strings with and without special-token parsing, decoding, and the ChatML
 * prompt with SmolLM2's default system message.
 * Usage: test_tokenizer_model FIXTURE_DIR */
#include <string.h>

#include "cache_path.h"
#include "tok_fixture.h"

static void test_adversarial(const infs_tokenizer *tok, const char *dir)
{
	infs__json *j = load_fixture(dir, "adversarial_smollm2.json");
	const infs__json *cases = infs__json_get(j, "cases");
	CHECK(cases && cases->len >= 30);
	for (size_t i = 0; cases && i < cases->len; i++) {
		const infs__json *c = &cases->items[i];
		const char *name = infs__json_str(infs__json_get(c, "name"), "?");
		size_t len;
		char *text = unhex(infs__json_get(c, "hex"), &len);
		const infs__json *want = infs__json_get(c, "ids");
		check_tokens(tok, text, len, INFS_TOKENIZE_PARSE_SPECIAL, want, name);
		/* SmolLM2 asks for no BOS, so ADD_SPECIAL changes nothing. */
		check_tokens(tok, text, len, INFS_TOKENIZE_PARSE_SPECIAL | INFS_TOKENIZE_ADD_SPECIAL, want, name);
		check_tokens(tok, text, len, 0, infs__json_get(c, "ids_no_special_parsing"), name);

		infs_token *ids = malloc((want->len + 1) * sizeof *ids);
		for (size_t k = 0; k < want->len; k++)
			ids[k] = (infs_token)want->items[k].number;
		static const char *keys[2] = { "decoded_hex", "decoded_skip_special_hex" };
		for (unsigned skip = 0; skip < 2; skip++) {
			size_t dlen, n = 0;
			char *decoded = unhex(infs__json_get(c, keys[skip]), &dlen);
			CHECK_OK(infs_detokenize(tok, ids, want->len, skip ? INFS_DETOKENIZE_SKIP_SPECIAL : 0, NULL, 0, &n));
			char *out = malloc(n + 1);
			CHECK_OK(infs_detokenize(tok, ids, want->len, skip ? INFS_DETOKENIZE_SKIP_SPECIAL : 0, out, n + 1, &n));
			if (n != dlen || memcmp(out, decoded, n) != 0) {
				fprintf(stderr, "%s: detokenize (skip %u) differs from decode()\n", name, skip);
				check_failures++;
			}
			free(out);
			free(decoded);
		}
		free(ids);
		free(text);
	}
	infs__json_free(j);
}

static void test_chat(const infs_tokenizer *tok, const char *dir)
{
	infs_chat_format f = INFS_CHAT_AUTO;
	CHECK_OK(infs_chat_format_detect(tok, &f));
	CHECK(f == INFS_CHAT_CHATML);
	infs__json *j = load_fixture(dir, "chat_smollm2.json");
	const infs__json *cases = infs__json_get(j, "cases");
	CHECK(cases && cases->len >= 8);
	for (size_t i = 0; cases && i < cases->len; i++) {
		const infs__json *c = &cases->items[i];
		const infs__json *msgs = infs__json_get(c, "messages");
		infs_chat_message m[8];
		size_t n = msgs->len < 8 ? msgs->len : 8;
		for (size_t k = 0; k < n; k++) {
			m[k].role = infs__json_str(infs__json_get(&msgs->items[k], "role"), "");
			m[k].content = infs__json_str(infs__json_get(&msgs->items[k], "content"), "");
		}
		unsigned flags = infs__json_get(c, "add_generation_prompt")->boolean ? INFS_CHAT_ADD_GENERATION_PROMPT : 0;
		const char *want = infs__json_str(infs__json_get(c, "chatml"), "");
		char out[4096];
		size_t len = 0;
		CHECK_OK(infs_chat_render(tok, INFS_CHAT_AUTO, m, n, flags, out, sizeof out, &len));
		if (strcmp(out, want) != 0) {
			fprintf(stderr, "chat %s: got\n%s\nwant\n%s\n", infs__json_str(infs__json_get(c, "name"), "?"), out,
			        want);
			check_failures++;
		}
		const infs__json *want_ids = infs__json_get(c, "chatml_ids");
		check_tokens(tok, out, len, INFS_TOKENIZE_PARSE_SPECIAL, want_ids, "chat ids");
		infs_token ids[512];
		size_t n_ids = 0;
		CHECK_OK(infs_chat_tokenize(tok, INFS_CHAT_AUTO, m, n, flags, NULL, 0, &n_ids));
		CHECK(n_ids == want_ids->len);
		CHECK_ERR(infs_chat_tokenize(tok, INFS_CHAT_AUTO, m, n, flags, ids, n_ids - 1, &n_ids), INFS_ERANGE);
		CHECK_OK(infs_chat_tokenize(tok, INFS_CHAT_AUTO, m, n, flags, ids, 512, &n_ids));
		CHECK(ids_equal(ids, n_ids, want_ids));
	}
	infs__json_free(j);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
		return 1;
	}
	char path[4096];
	cache_path(path, sizeof path, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	infs_tokenizer *tok;
	CHECK_OK(infs_tokenizer_load(&tok, path));
	if (!tok)
		CHECK_DONE();
	CHECK(infs_tokenizer_vocab_size(tok) == 49152);
	CHECK(infs_tokenizer_bos(tok) == 1 && infs_tokenizer_eos(tok) == 2);
	CHECK(infs_tokenizer_is_special(tok, 2) && !infs_tokenizer_is_special(tok, 17));
	char piece[64];
	size_t n;
	CHECK_OK(infs_token_to_piece(tok, 2, piece, sizeof piece, &n));
	CHECK(strcmp(piece, "<|im_end|>") == 0 && n == 10);
	CHECK_OK(infs_token_to_piece(tok, 216, piece, sizeof piece, &n)); /* "Ġ" is a space */
	CHECK(strcmp(piece, " ") == 0);
	test_adversarial(tok, argv[1]);
	test_chat(tok, argv[1]);
	infs_tokenizer_free(tok);
	CHECK_DONE();
}

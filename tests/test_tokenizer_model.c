/* SmolLM2-135M-Instruct's tokenizer from its GGUF against the Hugging Face
 * tokenizer (goldens from tests/fixtures/tokenizer/make_goldens.py and
 * make_control_goldens.py): hard strings and control bytes with and without
 * special-token parsing, decoding, and the ChatML prompt with SmolLM2's
 * default system message. User text never yields a special token, through
 * infs_tokenize or through the engine's question path.
 * Usage: test_tokenizer_model FIXTURE_DIR */
#include <string.h>

#include "cache_path.h"
#include "engine/compose.h"
#include "inferscale/model.h"
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
		infs_chat_message m[8];
		unsigned flags;
		size_t n = chat_case(m, 8, &flags, c);
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

/* Every control byte alone and in text (SmolLM2's vocabulary lacks 0x04,
 * 0x06, 0x13, 0x14, 0x16 and 0x1d: they are dropped, never the unknown
 * token <|endoftext|>). */
static void test_control_bytes(const infs_tokenizer *tok, const char *dir)
{
	infs__json *j = load_fixture(dir, "control_bytes.json");
	const infs__json *cases = infs__json_get(infs__json_get(j, "smollm2"), "cases");
	CHECK(cases && cases->len == 33 * 7);
	size_t dropped = 0;
	for (size_t i = 0; cases && i < cases->len; i++) {
		const infs__json *c = &cases->items[i];
		size_t len;
		char *text = unhex(infs__json_get(c, "hex"), &len);
		char name[64];
		snprintf(name, sizeof name, "control case %zu (%s)", i, infs__json_str(infs__json_get(c, "hex"), ""));
		check_tokens(tok, text, len, INFS_TOKENIZE_PARSE_SPECIAL, infs__json_get(c, "ids"), name);
		check_tokens(tok, text, len, 0, infs__json_get(c, "ids_no_special_parsing"), name);
		dropped += infs__json_get(c, "gguf_loader_ids") != NULL;
		free(text);
	}
	CHECK(dropped == 6 * 7); /* the golden covers the missing bytes in every context */
	infs__json_free(j);
}

/* 1 when text tokenizes without special-token parsing to no special id. */
static int no_special(const infs_tokenizer *tok, const char *text, size_t len)
{
	infs_token ids[512];
	size_t n = 0;
	int rc = infs_tokenize(tok, text, len, 0, ids, 512, &n);
	for (size_t i = 0; rc == INFS_OK && i < n; i++)
		if (infs_tokenizer_is_special(tok, ids[i]))
			rc = INFS_EFORMAT;
	if (rc != INFS_OK)
		fprintf(stderr, "special id or error (%d) from %zu bytes of user text\n", rc, len);
	return rc == INFS_OK;
}

/* No special id from any single byte, any byte inside a word, or random byte
 * strings seeded with special-token text. */
static void test_no_special_from_text(const infs_tokenizer *tok)
{
	for (unsigned b = 0; b < 256; b++) {
		char one = (char)b, in[] = { 'h', 'i', (char)b, '!', '!', (char)b, (char)b, '1' };
		CHECK(no_special(tok, &one, 1));
		CHECK(no_special(tok, in, sizeof in));
	}
	static const char *bits[] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|", "|>", " ", "\n", "x" };
	uint64_t r = 12345;
	for (int k = 0; k < 3000; k++) {
		char text[256];
		size_t len = 0;
		while (len < 200) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			unsigned v = (unsigned)(r >> 33);
			if (v % 4 == 0) {
				const char *s = bits[(v >> 8) % (sizeof bits / sizeof *bits)];
				memcpy(text + len, s, strlen(s));
				len += strlen(s);
			} else {
				text[len++] = (char)(v >> 16);
			}
			if ((v >> 24) % 16 == 0)
				break;
		}
		CHECK(no_special(tok, text, len));
	}
}

/* The engine's question is user text: it goes through infs_tokenize without
 * special-token parsing, then the template's suffix follows. */
static void test_engine_question(void)
{
	char path[4096];
	cache_path(path, sizeof path, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	infs_model *m = NULL;
	CHECK_OK(infs_model_load(&m, path, NULL));
	if (!m)
		return;
	const infs_tokenizer *tok = infs_model_tokenizer(m);
	infs__compose c;
	CHECK_OK(infs__compose_init(&c, m, NULL, NULL));
	static const char q[] = "hi\x14there <|im_end|><|endoftext|>\x04?";
	int32_t *ids = NULL;
	uint32_t n = 0;
	CHECK_OK(infs__compose_question(&ids, &n, &c, m, q));
	infs_token want[64];
	size_t nw = 0;
	CHECK_OK(infs_tokenize(tok, q, strlen(q), 0, want, 64, &nw));
	CHECK(nw >= 2 && want[0] == 6004 && want[1] == 11527); /* "hi", "there": 0x14 dropped */
	/* The footer first, prefilled with the question. */
	const uint32_t nf = c.n_footer;
	CHECK(ids && n > nf + nw && memcmp(ids, c.footer, nf * sizeof *ids) == 0);
	CHECK(ids && n > nf + nw && memcmp(ids + nf, want, nw * sizeof *want) == 0);
	for (size_t i = 0; ids && i < nw; i++)
		CHECK(!infs_tokenizer_is_special(tok, ids[nf + i]));
	CHECK(ids && n > nf + nw && infs_tokenizer_is_special(tok, ids[nf + nw])); /* the suffix's <|im_end|> */
	free(ids);
	infs__compose_free(&c);
	infs_model_free(m);
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
	test_control_bytes(tok, argv[1]);
	test_no_special_from_text(tok);
	infs_tokenizer_free(tok);
	test_engine_question();
	CHECK_DONE();
}

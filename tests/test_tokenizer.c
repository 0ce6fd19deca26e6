/* The tokenizer without the real model: pre-tokenizer splits against
 * tokenizers' regex engine, BPE merging, a small Llama-3-style tokenizer.json
 * against its goldens, chat formats, and errors.
 * Usage: test_tokenizer FIXTURE_DIR (tests/fixtures/tokenizer). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "text/bpe.h"
#include "gguf_builder.h"
#include "text/pretokenize.h"
#include "text/unicode.h"
#include "tok_fixture.h"
#include "text/tokenizer_impl.h"

typedef struct ranges {
	size_t v[8192][2];
	size_t n;
} ranges;

static int collect(void *ctx, size_t start, size_t end)
{
	ranges *r = ctx;
	if (r->n < 8192) {
		r->v[r->n][0] = start;
		r->v[r->n][1] = end;
	}
	r->n++;
	return 0;
}

static void test_splits(const char *dir)
{
	static const struct {
		const char *key;
		infs__pretok kind;
	} kinds[] = { { "gpt2", INFS_PRETOK_GPT2 }, { "digits_gpt2", INFS_PRETOK_DIGITS_GPT2 },
		      { "llama3", INFS_PRETOK_LLAMA3 }, { "qwen2", INFS_PRETOK_QWEN2 } };
	infs__json *j = load_fixture(dir, "splits.json");
	const infs__json *cases = infs__json_get(j, "cases");
	CHECK(cases && cases->len > 20);
	static ranges r;
	size_t compared = 0;
	for (size_t i = 0; cases && i < cases->len; i++) {
		const infs__json *c = &cases->items[i];
		size_t len;
		char *text = unhex(infs__json_get(c, "hex"), &len);
		for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
			const infs__json *want = infs__json_get(c, kinds[k].key);
			r.n = 0;
			CHECK_OK(infs__pretokenize(kinds[k].kind, text, len, collect, &r));
			int ok = want && want->len == r.n;
			for (size_t p = 0; ok && p < r.n; p++)
				ok = r.v[p][0] == (size_t)want->items[p].items[0].number &&
				     r.v[p][1] == (size_t)want->items[p].items[1].number;
			if (!ok) {
				fprintf(stderr, "split %s of '%s': %zu pieces, want %zu\n", kinds[k].key,
				        infs__json_str(infs__json_get(c, "name"), "?"), r.n, want ? want->len : 0);
				check_failures++;
			}
			compared++;
		}
		free(text);
	}
	CHECK(compared >= 4 * 20);
	infs__json_free(j);

	CHECK(infs__pretok_from_gguf("smollm") == INFS_PRETOK_DIGITS_GPT2);
	CHECK(infs__pretok_from_gguf("llama-bpe") == INFS_PRETOK_LLAMA3);
	CHECK(infs__pretok_from_gguf("qwen2") == INFS_PRETOK_QWEN2);
	CHECK(infs__pretok_from_gguf("nonsense") == -1);
	CHECK(infs__pretok_from_regex("\\s+") == -1);
}

/* Invalid bytes inside the scanner: kept, covered, no crash. */
static void test_split_invalid(void)
{
	static ranges r;
	const char bad[] = "a\xff\xfe b\xe4\xb8 \xf0\x9f\x98";
	for (int kind = 0; kind < 4; kind++) {
		r.n = 0;
		CHECK_OK(infs__pretokenize((infs__pretok)kind, bad, sizeof bad - 1, collect, &r));
		CHECK(r.n > 0 && r.v[0][0] == 0 && r.v[r.n - 1][1] == sizeof bad - 1);
		for (size_t p = 1; p < r.n; p++)
			CHECK(r.v[p][0] == r.v[p - 1][1]);
	}
}

static void test_bpe(void)
{
	infs__bpe *b;
	CHECK_OK(infs__bpe_new(&b, 8));
	const char *toks[] = { "a", "b", "c", "ab", "bc", "abc", "x", "b" };
	for (uint32_t i = 0; i < 8; i++)
		CHECK_OK(infs__bpe_set_token(b, i, toks[i], strlen(toks[i])));
	CHECK(infs__bpe_lookup(b, "b", 1) == 1); /* the lowest id of equal bytes */
	CHECK(infs__bpe_lookup(b, "abc", 3) == 5 && infs__bpe_lookup(b, "zz", 2) == -1);
	CHECK_OK(infs__bpe_add_merge(b, 1, 2, 0)); /* b c -> bc */
	CHECK_OK(infs__bpe_add_merge(b, 0, 1, 1)); /* a b -> ab */
	CHECK_OK(infs__bpe_add_merge(b, 0, 4, 2)); /* a bc -> abc */
	CHECK(infs__bpe_add_merge(b, 6, 6, 3) == INFS_EFORMAT); /* xx is no token */
	infs__ids out = { 0 };
	infs__bpe_scratch scratch = { 0 };
	/* "abc": b c (rank 0) beats a b (rank 1), then a bc. */
	CHECK_OK(infs__bpe_encode(b, (const uint8_t *)"abc", 3, 0, &scratch, &out));
	CHECK(out.n == 1 && out.v[0] == 5);
	out.n = 0;
	/* "abab": both a b merge (leftmost first), no ab ab merge. */
	CHECK_OK(infs__bpe_encode(b, (const uint8_t *)"abab", 4, 0, &scratch, &out));
	CHECK(out.n == 2 && out.v[0] == 3 && out.v[1] == 3);
	out.n = 0;
	/* "abcbc": b c twice first, then a bc: abc bc. */
	CHECK_OK(infs__bpe_encode(b, (const uint8_t *)"abcbc", 5, 0, &scratch, &out));
	CHECK(out.n == 2 && out.v[0] == 5 && out.v[1] == 4);
	out.n = 0;
	/* A byte without a token is dropped before merging, so a b still merge
	 * (Hugging Face's BPE without an unknown token). */
	CHECK_OK(infs__bpe_encode(b, (const uint8_t *)"azb", 3, 0, &scratch, &out));
	CHECK(out.n == 1 && out.v[0] == 3);
	out.n = 0;
	CHECK_OK(infs__bpe_encode(b, (const uint8_t *)"zz", 2, 0, &scratch, &out));
	CHECK(out.n == 0);
	free(out.v);
	infs__bpe_scratch_free(&scratch);
	infs__bpe_free(b);
	infs__bpe_free(NULL);
}

/* kind: llama3 (Split regex, ignore_merges, BOS post-processor), qwen2 (NFC,
 * Split regex), digits (Digits + ByteLevel), gpt2 (ByteLevel). */
static void test_tiny(const char *dir, const char *kind)
{
	char path[4096], name[64];
	snprintf(path, sizeof path, "%s/tiny_%s.json", dir, kind);
	infs_tokenizer *tok;
	CHECK_OK(infs_tokenizer_load(&tok, path));
	if (!tok)
		return;
	snprintf(name, sizeof name, "tiny_%s_goldens.json", kind);
	infs__json *j = load_fixture(dir, name);
	CHECK(infs_tokenizer_bos(tok) == (infs_token)infs__json_number(infs__json_get(j, "bos"), -2));
	CHECK(infs_tokenizer_vocab_size(tok) == (size_t)infs__json_number(infs__json_get(j, "vocab_size"), 0));
	CHECK(infs_tokenizer_is_special(tok, 0) && infs_tokenizer_is_special(tok, 1));
	const infs__json *cases = infs__json_get(j, "cases");
	CHECK(cases && cases->len > 20);
	for (size_t i = 0; cases && i < cases->len; i++) {
		const infs__json *c = &cases->items[i];
		snprintf(name, sizeof name, "%s %s", kind, infs__json_str(infs__json_get(c, "name"), "?"));
		size_t len;
		char *text = unhex(infs__json_get(c, "hex"), &len);
		check_tokens(tok, text, len, INFS_TOKENIZE_ADD_SPECIAL | INFS_TOKENIZE_PARSE_SPECIAL,
		             infs__json_get(c, "ids"), name);
		check_tokens(tok, text, len, INFS_TOKENIZE_PARSE_SPECIAL, infs__json_get(c, "ids_no_bos"), name);
		free(text);
	}
	infs__json_free(j);

	/* No tokenizer_config.json and no template: ChatML is the fallback. */
	infs_chat_format f = INFS_CHAT_AUTO;
	CHECK_OK(infs_chat_format_detect(tok, &f));
	CHECK(f == INFS_CHAT_CHATML);
	infs_tokenizer_free(tok);
}

/* The size query, a too-small buffer and bad arguments. */
static void test_api(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/tiny_llama3.json", dir);
	infs_tokenizer *tok;
	CHECK_OK(infs_tokenizer_load(&tok, path));
	if (!tok)
		return;
	const char *text = "the quick brown fox";
	size_t n = 0, m = 0;
	CHECK_OK(infs_tokenize(tok, text, strlen(text), 0, NULL, 0, &n));
	CHECK(n > 1);
	infs_token ids[64];
	for (size_t i = 0; i < 64; i++)
		ids[i] = -7;
	CHECK_ERR(infs_tokenize(tok, text, strlen(text), 0, ids, n - 1, &m), INFS_ERANGE);
	CHECK(m == n && ids[0] == -7);
	CHECK_OK(infs_tokenize(tok, text, strlen(text), 0, ids, 64, &m));
	CHECK(m == n);
	char buf[128];
	size_t bytes = 0;
	CHECK_OK(infs_detokenize(tok, ids, n, 0, NULL, 0, &bytes));
	CHECK(bytes == strlen(text));
	CHECK_ERR(infs_detokenize(tok, ids, n, 0, buf, bytes, &bytes), INFS_ERANGE);
	CHECK_OK(infs_detokenize(tok, ids, n, 0, buf, sizeof buf, &bytes));
	CHECK(strcmp(buf, text) == 0);
	CHECK_OK(infs_token_to_piece(tok, ids[0], buf, sizeof buf, &bytes));
	CHECK(bytes > 0 && strncmp(buf, text, bytes) == 0 && buf[bytes] == '\0');

	infs_token bos = infs_tokenizer_bos(tok);
	infs_token with_bos[3] = { bos, ids[0], bos };
	CHECK_OK(infs_detokenize(tok, with_bos, 3, INFS_DETOKENIZE_SKIP_SPECIAL, buf, sizeof buf, &bytes));
	CHECK(bytes == strlen(buf) && strncmp(buf, text, bytes) == 0);
	CHECK_OK(infs_detokenize(tok, with_bos, 3, 0, buf, sizeof buf, &bytes));
	CHECK(strncmp(buf, "<|begin_of_text|>", 17) == 0);

	CHECK_OK(infs_tokenize(tok, "", 0, INFS_TOKENIZE_ADD_SPECIAL, ids, 64, &m));
	CHECK(m == 1 && ids[0] == bos);
	CHECK_OK(infs_tokenize(tok, NULL, 0, 0, NULL, 0, &m));
	CHECK(m == 0);
	CHECK_ERR(infs_tokenize(NULL, text, 3, 0, ids, 64, &m), INFS_EINVAL);
	CHECK_ERR(infs_tokenize(tok, NULL, 3, 0, ids, 64, &m), INFS_EINVAL);
	CHECK_ERR(infs_tokenize(tok, text, 3, 0, NULL, 64, &m), INFS_EINVAL);
	CHECK_ERR(infs_tokenize(tok, text, 3, 0, ids, 64, NULL), INFS_EINVAL);
	CHECK_ERR(infs_tokenize(tok, text, 3, 1u << 7, ids, 64, &m), INFS_EINVAL);
	infs_token out_of_range = (infs_token)infs_tokenizer_vocab_size(tok);
	CHECK_ERR(infs_detokenize(tok, &out_of_range, 1, 0, buf, sizeof buf, &bytes), INFS_EINVAL);
	infs_token negative = -1;
	CHECK_ERR(infs_token_to_piece(tok, negative, buf, sizeof buf, &bytes), INFS_EINVAL);
	CHECK_ERR(infs_detokenize(tok, ids, 1, 1u << 5, buf, sizeof buf, &bytes), INFS_EINVAL);
	CHECK(infs_tokenizer_bos(NULL) == -1 && infs_tokenizer_eos(NULL) == -1);
	CHECK(infs_tokenizer_vocab_size(NULL) == 0 && !infs_tokenizer_is_special(NULL, 0));
	CHECK(!infs_tokenizer_is_special(tok, -1) && !infs_tokenizer_is_special(tok, out_of_range));
	infs_tokenizer_free(tok);
	infs_tokenizer_free(NULL);
}

static void test_chat(const char *dir)
{
	infs__json *j = load_fixture(dir, "chat_smollm2.json");
	const infs__json *cases = infs__json_get(j, "cases");
	CHECK(cases && cases->len >= 8);
	for (size_t i = 0; cases && i < cases->len; i++) {
		const infs__json *c = &cases->items[i];
		infs_chat_message m[8];
		unsigned flags;
		size_t n = chat_case(m, 8, &flags, c);
		static const struct {
			const char *key;
			infs_chat_format f;
		} fmts[] = { { "llama3", INFS_CHAT_LLAMA3 }, { "llama31", INFS_CHAT_LLAMA31 },
			     { "mistral", INFS_CHAT_MISTRAL } };
		for (size_t k = 0; k < 3; k++) {
			const char *want = infs__json_str(infs__json_get(c, fmts[k].key), NULL);
			if (!want)
				continue;
			char out[4096];
			size_t len = 0;
			CHECK_OK(infs_chat_render(NULL, fmts[k].f, m, n, flags, out, sizeof out, &len));
			if (strcmp(out, want) != 0 || len != strlen(want)) {
				fprintf(stderr, "chat %s %s: got\n%s\nwant\n%s\n", fmts[k].key,
				        infs__json_str(infs__json_get(c, "name"), "?"), out, want);
				check_failures++;
			}
		}
	}
	infs__json_free(j);

	infs_chat_message bad[2] = { { "user", "a" }, { "user", "b" } };
	char out[256];
	size_t len;
	CHECK_ERR(infs_chat_render(NULL, INFS_CHAT_MISTRAL, bad, 2, 0, out, sizeof out, &len), INFS_EINVAL);
	CHECK_ERR(infs_chat_render(NULL, INFS_CHAT_AUTO, bad, 1, 0, out, sizeof out, &len), INFS_EINVAL);
	CHECK_ERR(infs_chat_render(NULL, (infs_chat_format)9, bad, 1, 0, out, sizeof out, &len), INFS_EINVAL);
	/* Llama 3.2/3.3 templates date the prompt with today's date. */
	infs_tokenizer fake = { 0 };
	fake.chat_template = "<|start_header_id|><|eot_id|> Cutting Knowledge Date strftime_now(\"%d %b %Y\")";
	CHECK_OK(infs_chat_render(&fake, INFS_CHAT_AUTO, bad, 1, 0, out, sizeof out, &len));
	const char *head = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
	                   "December 2023\nToday Date: ";
	CHECK(strncmp(out, head, strlen(head)) == 0 && strcmp(out + strlen(head) + 11, "\n\n<|eot_id|><|start_header_id|>"
	      "user<|end_header_id|>\n\na<|eot_id|>") == 0);
	CHECK_ERR(infs_chat_render(NULL, INFS_CHAT_CHATML, bad, 1, 1u << 4, out, sizeof out, &len), INFS_EINVAL);
	infs_chat_message null_content = { "user", NULL };
	CHECK_ERR(infs_chat_render(NULL, INFS_CHAT_CHATML, &null_content, 1, 0, out, sizeof out, &len), INFS_EINVAL);
	CHECK_OK(infs_chat_render(NULL, INFS_CHAT_CHATML, bad, 1, INFS_CHAT_ADD_GENERATION_PROMPT, NULL, 0, &len));
	CHECK(len == strlen("<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n"));
	CHECK_ERR(infs_chat_render(NULL, INFS_CHAT_CHATML, bad, 1, 0, out, 10, &len), INFS_ERANGE);
	CHECK_OK(infs_chat_render(NULL, INFS_CHAT_CHATML, NULL, 0, 0, out, sizeof out, &len));
	CHECK(len == 0 && out[0] == '\0');
	CHECK_ERR(infs_chat_format_detect(NULL, NULL), INFS_EINVAL);
	infs_token ids[4];
	CHECK_ERR(infs_chat_tokenize(NULL, INFS_CHAT_CHATML, bad, 1, 0, ids, 4, &len), INFS_EINVAL);
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(data, 1, len, f) == len);
	if (f)
		fclose(f);
}

/* A GGUF with a tokenizer vocabulary of the given model name. */
static gbuf tokenizer_gguf(const char *model, const char *merge)
{
	gbuf b = { 0 };
	gb_put(&b, "GGUF", 4);
	gb_u32(&b, 3); gb_u64(&b, 0); gb_u64(&b, 4);
	gb_str(&b, "tokenizer.ggml.model"); gb_u32(&b, 8); gb_str(&b, model);
	gb_str(&b, "tokenizer.ggml.pre"); gb_u32(&b, 8); gb_str(&b, "gpt2");
	gb_str(&b, "tokenizer.ggml.tokens"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 3);
	gb_str(&b, "a"); gb_str(&b, "b"); gb_str(&b, "ab");
	gb_str(&b, "tokenizer.ggml.merges"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 1);
	gb_str(&b, merge);
	return b;
}

/* Every byte of a small tokenizer GGUF overwritten with a few values: the
 * tokenizer either loads and encodes, or fails with a message; never more. */
static void test_gguf_mutations(void)
{
	gbuf b = { 0 };
	gb_put(&b, "GGUF", 4);
	gb_u32(&b, 3); gb_u64(&b, 0); gb_u64(&b, 6);
	gb_str(&b, "tokenizer.ggml.model"); gb_u32(&b, 8); gb_str(&b, "gpt2");
	gb_str(&b, "tokenizer.ggml.pre"); gb_u32(&b, 8); gb_str(&b, "smollm");
	gb_str(&b, "tokenizer.ggml.tokens"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 6);
	gb_str(&b, "a"); gb_str(&b, "b"); gb_str(&b, "ab"); gb_str(&b, "\xc4\xa0"); gb_str(&b, "<|x|>"); gb_str(&b, "1");
	gb_str(&b, "tokenizer.ggml.token_type"); gb_u32(&b, 9); gb_u32(&b, 5); gb_u64(&b, 6);
	for (int i = 0; i < 6; i++)
		gb_u32(&b, i == 4 ? 3 : 1);
	gb_str(&b, "tokenizer.ggml.merges"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 1); gb_str(&b, "a b");
	gb_str(&b, "tokenizer.ggml.bos_token_id"); gb_u32(&b, 4); gb_u32(&b, 4);

	infs__gguf *g;
	infs_tokenizer *tok;
	CHECK_OK(infs__gguf_open_memory(&g, b.p, b.n, "tok.gguf"));
	CHECK_OK(infs__tokenizer_from_gguf(&tok, g, "tok.gguf"));
	infs_token ids[64];
	size_t n = 0;
	CHECK_OK(infs_tokenize(tok, "ab 1<|x|>ba", 11, INFS_TOKENIZE_PARSE_SPECIAL, ids, 64, &n));
	CHECK(n == 6 && ids[0] == 2 && ids[1] == 3 && ids[2] == 5 && ids[3] == 4 && ids[4] == 1 && ids[5] == 0);
	infs_tokenizer_free(tok);
	infs__gguf_close(g);

	static const uint8_t vals[] = { 0x00, 0x01, 0x03, 0x08, 0x20, 0x7f, 0xff };
	int loaded = 0, refused = 0;
	for (size_t i = 0; i < b.n; i++)
		for (size_t k = 0; k < sizeof vals; k++) {
			uint8_t *d = malloc(b.n);
			memcpy(d, b.p, b.n);
			d[i] = vals[k];
			if (infs__gguf_open_memory(&g, d, b.n, "tok.gguf") == INFS_OK) {
				int rc = infs__tokenizer_from_gguf(&tok, g, "tok.gguf");
				if (rc == INFS_OK) {
					loaded++;
					rc = infs_tokenize(tok, "ab 1<|x|>ba\xff", 12, INFS_TOKENIZE_PARSE_SPECIAL, ids, 64, &n);
					CHECK(rc == INFS_OK);
					char out[256];
					size_t m;
					if (rc == INFS_OK)
						CHECK_OK(infs_detokenize(tok, ids, n, 0, out, sizeof out, &m));
					infs_tokenizer_free(tok);
				} else {
					refused++;
					CHECK(tok == NULL && infs_error_last()[0] != '\0' &&
					      (rc == INFS_EFORMAT || rc == INFS_EUNSUPPORTED));
				}
				infs__gguf_close(g);
			}
			free(d);
		}
	CHECK(loaded > 0 && refused > 0);
	free(b.p);
}

/* Bad tokenizer files: each a clear error. */
static void test_bad_files(void)
{
	char dir[] = "/tmp/infs_tok_XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[256];
	infs_tokenizer *tok = (infs_tokenizer *)1;

	snprintf(path, sizeof path, "%s/none.json", dir);
	CHECK_ERR(infs_tokenizer_load(&tok, path), INFS_ENOTFOUND);
	CHECK(tok == NULL);
	CHECK_ERR(infs_tokenizer_load(NULL, path), INFS_EINVAL);
	CHECK_ERR(infs_tokenizer_load(&tok, NULL), INFS_EINVAL);

	static const struct {
		const char *json;
		int code;
		const char *msg;
	} cases[] = {
		{ "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", INFS_EUNSUPPORTED, "WordPiece" },
		{ "{\"model\": {\"type\": \"BPE\"}}", INFS_EFORMAT, "vocab" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
		  " \"pre_tokenizer\": {\"type\": \"Whitespace\"}}", INFS_EUNSUPPORTED, "Whitespace" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
		  " \"normalizer\": {\"type\": \"Lowercase\"}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", INFS_EUNSUPPORTED, "Lowercase" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]},"
		  " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", INFS_EFORMAT, "not in the vocabulary" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"ab\"]},"
		  " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", INFS_EFORMAT, "malformed" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []},"
		  " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", INFS_EFORMAT, "vocabulary" },
		{ "{\"model\": ", INFS_EFORMAT, "line 1" },
	};
	snprintf(path, sizeof path, "%s/tokenizer.json", dir);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		write_file(path, cases[i].json, strlen(cases[i].json));
		tok = (infs_tokenizer *)1;
		CHECK_ERR(infs_tokenizer_load(&tok, path), cases[i].code);
		if (!strstr(infs_error_last(), cases[i].msg)) {
			fprintf(stderr, "bad tokenizer.json %zu: message '%s' lacks '%s'\n", i, infs_error_last(),
			        cases[i].msg);
			check_failures++;
		}
		CHECK(tok == NULL);
	}
	/* A minimal valid one, loaded through its directory. */
	const char *ok = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
	                 " \"merges\": [[\"a\", \"b\"]]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}";
	write_file(path, ok, strlen(ok));
	CHECK_OK(infs_tokenizer_load(&tok, dir));
	infs_token ids[8];
	size_t n;
	CHECK_OK(infs_tokenize(tok, "abba", 4, 0, ids, 8, &n));
	CHECK(n == 3 && ids[0] == 2 && ids[1] == 1 && ids[2] == 0);
	CHECK(infs_tokenizer_bos(tok) == -1 && infs_tokenizer_eos(tok) == -1);
	infs_tokenizer_free(tok);
	unlink(path);

	snprintf(path, sizeof path, "%s/model.gguf", dir);
	gbuf g = tokenizer_gguf("llama", "a b");
	write_file(path, g.p, g.n);
	free(g.p);
	CHECK_ERR(infs_tokenizer_load(&tok, path), INFS_EUNSUPPORTED);
	CHECK(strstr(infs_error_last(), "'llama'") != NULL);
	g = tokenizer_gguf("gpt2", "a c");
	write_file(path, g.p, g.n);
	free(g.p);
	CHECK_ERR(infs_tokenizer_load(&tok, path), INFS_EFORMAT);
	CHECK(strstr(infs_error_last(), "merge 0") != NULL);
	g = tokenizer_gguf("gpt2", "a b");
	write_file(path, g.p, g.n);
	free(g.p);
	CHECK_OK(infs_tokenizer_load(&tok, path));
	CHECK_OK(infs_tokenize(tok, "aab", 3, 0, ids, 8, &n));
	CHECK(n == 2 && ids[0] == 0 && ids[1] == 2);
	infs_tokenizer_free(tok);
	/* Truncated: the container's error comes through. */
	g = tokenizer_gguf("gpt2", "a b");
	write_file(path, g.p, g.n - 2);
	free(g.p);
	CHECK_ERR(infs_tokenizer_load(&tok, path), INFS_EFORMAT);
	CHECK(strstr(infs_error_last(), "truncated") != NULL);
	unlink(path);
	rmdir(dir);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 32) % n;
}

static int valid_utf8(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int k = infs__utf8_decode((const uint8_t *)s + i, n - i, &cp);
		if (k < 0)
			return 0;
		i += (size_t)k;
	}
	return 1;
}

/* Random strings built from pieces that stress the splits (letters, digits,
 * whitespace of every kind, contractions, multi-byte characters, special
 * tokens, stray bytes): tokenizing never fails, decoding gives the text back
 * when it was valid UTF-8, and valid UTF-8 with U+FFFD where it was not. */
static void test_random(const char *dir)
{
	static const char *const parts[] = {
		"a", "Z", "hello", " ", "  ", "\t", "\n", "\r\n", " \n ", "7", "42", "2024", "'s", "'LL", "'",
		"\xc3\xa9", "e\xcc\x81", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xe2\x80\x8d", "\xc2\xa0", "\xe3\x80\x80",
		"<|begin_of_text|>", "<think>", "<|eot", "!?", "...", "\xff", "\xc3", "\xe4\xb8", "\x80", "\xed\xa0\x80",
	};
	char path[4096];
	snprintf(path, sizeof path, "%s/tiny_llama3.json", dir);
	infs_tokenizer *tok;
	CHECK_OK(infs_tokenizer_load(&tok, path));
	if (!tok)
		return;
	char text[512], out[4096];
	infs_token ids[1024];
	int valid_seen = 0, invalid_seen = 0;
	for (int iter = 0; iter < 3000; iter++) {
		size_t len = 0, np = rnd(24);
		for (size_t p = 0; p < np; p++) {
			const char *part = parts[rnd(sizeof parts / sizeof *parts)];
			size_t pl = strlen(part);
			memcpy(text + len, part, pl);
			len += pl;
		}
		unsigned flags = rnd(2) ? INFS_TOKENIZE_PARSE_SPECIAL : 0;
		size_t n = 0, m = 0;
		int rc = infs_tokenize(tok, text, len, flags, ids, 1024, &n);
		CHECK(rc == INFS_OK);
		if (rc != INFS_OK)
			continue;
		rc = infs_detokenize(tok, ids, n, 0, out, sizeof out, &m);
		CHECK(rc == INFS_OK && valid_utf8(out, m));
		if (valid_utf8(text, len)) {
			valid_seen++;
			if (m != len || memcmp(out, text, len) != 0) {
				fprintf(stderr, "random %d: round trip differs\n", iter);
				check_failures++;
			}
		} else {
			invalid_seen++;
			CHECK(m >= len / 2 && strstr(out, "\xef\xbf\xbd") != NULL);
		}
	}
	CHECK(valid_seen > 100 && invalid_seen > 100);
	infs_tokenizer_free(tok);
}

typedef struct thread_job {
	const infs_tokenizer *tok;
	const char *text;
	size_t len;
	const infs_token *want;
	size_t n_want;
	int mismatches;
} thread_job;

static void *tokenize_loop(void *arg)
{
	thread_job *j = arg;
	infs_token ids[4096];
	for (int r = 0; r < 200; r++) {
		size_t n = 0;
		if (infs_tokenize(j->tok, j->text, j->len, INFS_TOKENIZE_PARSE_SPECIAL, ids, 4096, &n) != INFS_OK ||
		    n != j->n_want || memcmp(ids, j->want, n * sizeof *ids) != 0)
			j->mismatches++;
	}
	return NULL;
}

/* One tokenizer shared by four threads gives each the same tokens as a
 * single-threaded call. */
static void test_threads(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/tiny_qwen2.json", dir);
	infs_tokenizer *tok;
	CHECK_OK(infs_tokenizer_load(&tok, path));
	if (!tok)
		return;
	static const char *const texts[4] = {
		"the quick brown fox jumps over 12345 lazy dogs, it's raining",
		"Cafe\xcc\x81 <|begin_of_text|> \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xff tail",
		"   whitespace\n\n\t runs   and <think> tokens <mask>  ",
		"we've been reading; they'll say I'm sure you're right",
	};
	thread_job jobs[4];
	infs_token want[4][4096];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		size_t n = 0;
		CHECK_OK(infs_tokenize(tok, texts[i], strlen(texts[i]), INFS_TOKENIZE_PARSE_SPECIAL, want[i], 4096, &n));
		jobs[i] = (thread_job){ tok, texts[i], strlen(texts[i]), want[i], n, 0 };
		CHECK(pthread_create(&th[i], NULL, tokenize_loop, &jobs[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK(jobs[i].mismatches == 0);
	}
	infs_tokenizer_free(tok);
}

/* Templates from tokenizer_config.json: detection, the default system
 * message of Qwen2.5-style ChatML, and clear refusals. */
static void test_chat_templates(void)
{
	char dir[] = "/tmp/infs_chat_XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char tj[256], tc[256];
	snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
	snprintf(tc, sizeof tc, "%s/tokenizer_config.json", dir);
	const char *json = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": []},"
	                   " \"added_tokens\": [{\"id\": 2, \"content\": \"<|im_end|>\", \"special\": true}],"
	                   " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}";
	write_file(tj, json, strlen(json));
	static const struct {
		const char *config;
		int rc;
		infs_chat_format format;
		const char *render; /* of one user message "b", with the generation prompt */
	} cases[] = {
		{ "{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"{%- if messages[0]['role'] == 'system' %}"
		  "{{- '<|im_start|>system\\\\n' + messages[0]['content'] + '<|im_end|>\\\\n' }}{%- else %}"
		  "{{- '<|im_start|>system\\\\nYou are Qwen.<|im_end|>\\\\n' }}{%- endif %}"
		  "{%- for message in messages %}{{'<|im_start|>' + message['role'] + '\\\\n' + message['content'] + "
		  "'<|im_end|>' + '\\\\n'}}{%- endfor %}\"}",
		  INFS_OK, INFS_CHAT_CHATML,
		  "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n" },
		{ "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"}, {\"name\": \"default\", "
		  "\"template\": \"{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|eot_id|>{% endfor %}\"}]}",
		  INFS_OK, INFS_CHAT_LLAMA3,
		  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nb<|eot_id|>"
		  "<|start_header_id|>assistant<|end_header_id|>\n\n" },
		{ "{\"chat_template\": \"<|start_header_id|><|eot_id|> Cutting Knowledge Date: December 2023\"}",
		  INFS_OK, INFS_CHAT_LLAMA31,
		  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
		  "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nb<|eot_id|>"
		  "<|start_header_id|>assistant<|end_header_id|>\n\n" },
		{ "{\"chat_template\": \"{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}\"}",
		  INFS_OK, INFS_CHAT_MISTRAL, "<s>[INST] b [/INST]" },
		{ "{\"chat_template\": \"{% for m in messages %}<start_of_turn>{{ m['role'] }}{% endfor %}\"}",
		  INFS_EUNSUPPORTED, INFS_CHAT_AUTO, NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		write_file(tc, cases[i].config, strlen(cases[i].config));
		infs_tokenizer *tok;
		CHECK_OK(infs_tokenizer_load(&tok, dir));
		if (!tok)
			continue;
		infs_chat_format f = INFS_CHAT_AUTO;
		infs_chat_message m = { "user", "b" };
		char out[512];
		size_t n;
		if (cases[i].rc == INFS_OK) {
			CHECK_OK(infs_chat_format_detect(tok, &f));
			CHECK(f == cases[i].format);
			CHECK_OK(infs_chat_render(tok, INFS_CHAT_AUTO, &m, 1, INFS_CHAT_ADD_GENERATION_PROMPT, out,
			                          sizeof out, &n));
			if (strcmp(out, cases[i].render) != 0) {
				fprintf(stderr, "template %zu rendered\n%s\nwant\n%s\n", i, out, cases[i].render);
				check_failures++;
			}
		} else {
			CHECK_ERR(infs_chat_format_detect(tok, &f), cases[i].rc);
			CHECK_ERR(infs_chat_render(tok, INFS_CHAT_AUTO, &m, 1, 0, out, sizeof out, &n), cases[i].rc);
			/* An explicit format still works. */
			CHECK_OK(infs_chat_render(tok, INFS_CHAT_CHATML, &m, 1, 0, out, sizeof out, &n));
		}
		if (i == 0)
			CHECK(infs_tokenizer_eos(tok) == 2);
		infs_tokenizer_free(tok);
	}
	unlink(tj);
	unlink(tc);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
		return 1;
	}
	test_splits(argv[1]);
	test_split_invalid();
	test_bpe();
	test_tiny(argv[1], "llama3");
	test_tiny(argv[1], "qwen2");
	test_tiny(argv[1], "digits");
	test_tiny(argv[1], "gpt2");
	test_api(argv[1]);
	test_chat(argv[1]);
	test_bad_files();
	test_gguf_mutations();
	test_chat_templates();
	test_random(argv[1]);
	test_threads(argv[1]);
	CHECK_DONE();
}

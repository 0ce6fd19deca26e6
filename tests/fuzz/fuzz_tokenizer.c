/* libFuzzer target for the BPE tokenizer, with SmolLM2's vocabulary (the
 * GGUF from scripts/fetch-models.sh, under $INFS_CACHE or
 * ~/.cache/inferscale): any bytes tokenize without a special token (user
 * text never becomes a control token), every id is in range, and well-formed
 * UTF-8 decodes back to exactly the input, less the bytes that the
 * vocabulary has no token for (the tokenizer drops those, as Hugging Face's
 * BPE does). scripts/fuzz.sh builds and runs it. */
#include "fuzz_util.h"
#include "inferscale/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static infs_tokenizer *tok;
static unsigned char dropped[256]; /* bytes without a token of their own */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char path[1024];
	const char *cache = getenv("INFS_CACHE"), *home = getenv("HOME");
	if (cache && *cache)
		snprintf(path, sizeof path, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
	else
		snprintf(path, sizeof path, "%s/.cache/inferscale/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
		         home ? home : ".");
	if (infs_tokenizer_load(&tok, path) != INFS_OK) {
		fprintf(stderr, "fuzz_tokenizer: %s (run scripts/fetch-models.sh)\n", infs_error_last());
		exit(1);
	}
	memset(dropped, 1, sizeof dropped);
	for (size_t id = 0; id < infs_tokenizer_vocab_size(tok); id++) {
		char piece[64];
		size_t n = 0;
		if (!infs_tokenizer_is_special(tok, (infs_token)id) &&
		    infs_token_to_piece(tok, (infs_token)id, piece, sizeof piece, &n) == INFS_OK && n == 1)
			dropped[(uint8_t)piece[0]] = 0;
	}
	return 0;
}

/* 1 when s[0..n) is well-formed UTF-8. */
static int utf8_ok(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint32_t c = s[i];
		size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		if (!len || i + len > n)
			return 0;
		if (len > 1)
			c &= 0x7f >> len;
		for (size_t j = 1; j < len; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			c = c << 6 | (s[i + j] & 0x3f);
		}
		static const uint32_t least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
		if (c < least[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return 0;
		i += len;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cap = size * 3 + 8, n = 0; /* an ill-formed byte reads as U+FFFD: 3 bytes */
	infs_token *ids = malloc(cap * sizeof *ids);
	require(ids != NULL);
	int rc = infs_tokenize(tok, (const char *)data, size, 0, ids, cap, &n);
	require(rc == INFS_OK && n <= cap);
	size_t vocab = infs_tokenizer_vocab_size(tok);
	for (size_t i = 0; i < n; i++)
		require(ids[i] >= 0 && (size_t)ids[i] < vocab && !infs_tokenizer_is_special(tok, ids[i]));
	size_t m = 0;
	require(infs_detokenize(tok, ids, n, 0, NULL, 0, &m) == INFS_OK);
	char *text = malloc(m + 1);
	require(text != NULL);
	require(infs_detokenize(tok, ids, n, 0, text, m + 1, &m) == INFS_OK);
	if (utf8_ok(data, size)) {
		size_t kept = 0;
		for (size_t i = 0; i < size; i++)
			if (!dropped[data[i]])
				require(kept < m && (uint8_t)text[kept++] == data[i]);
		require(kept == m);
	}
	free(text);
	free(ids);
	return 0;
}

#include "text/pretokenize.h"

#include <stdlib.h>
#include <string.h>

#include "inferscale/common.h"
#include "text/unicode.h"

/* Character classes as the regexes see them; a character with none of
 * L, N, S is "other" ([^\s\p{L}\p{N}]). */
enum { C_L = 1, C_N = 2, C_S = 4, C_NL = 8 };

typedef struct chars {
	uint32_t *cp;
	uint8_t *cls;
	size_t *off; /* byte offset of each character; off[n] is the length */
	size_t n;
} chars;

static int decode(chars *c, const char *text, size_t len)
{
	c->cp = malloc((len + 1) * sizeof *c->cp);
	c->cls = malloc(len + 1);
	c->off = malloc((len + 1) * sizeof *c->off);
	if (!c->cp || !c->cls || !c->off)
		return INFS_ENOMEM;
	const uint8_t *s = (const uint8_t *)text;
	size_t n = 0, i = 0;
	while (i < len) {
		uint32_t cp;
		int k = infs__utf8_decode(s + i, len - i, &cp);
		uint8_t cls = 0;
		if (k > 0) {
			infs__uc_cat cat = infs__uc_category(cp);
			if (infs__uc_is_space(cp))
				cls = C_S | (cp == '\r' || cp == '\n' ? C_NL : 0);
			else if (cat >= INFS_UC_LU && cat <= INFS_UC_LO)
				cls = C_L;
			else if (cat >= INFS_UC_ND && cat <= INFS_UC_NO)
				cls = C_N;
		} else {
			k = -k;
			cp = 0xfffd;
		}
		c->cp[n] = cp;
		c->cls[n] = cls;
		c->off[n] = i;
		n++;
		i += (size_t)k;
	}
	c->off[n] = len;
	c->n = n;
	return INFS_OK;
}

static int is_other(uint8_t cls)
{
	return (cls & (C_L | C_N | C_S)) == 0;
}

static size_t run(const chars *c, size_t i, size_t n, uint8_t mask)
{
	while (i < n && (c->cls[i] & mask))
		i++;
	return i;
}

static size_t run_other(const chars *c, size_t i, size_t n)
{
	while (i < n && is_other(c->cls[i]))
		i++;
	return i;
}

/* Lowercase for the (?i) contractions: ASCII, plus U+017F LONG S, which
 * Unicode case folding equates with 's'. */
static uint32_t fold(uint32_t cp, int ci)
{
	if (!ci)
		return cp;
	if (cp >= 'A' && cp <= 'Z')
		return cp + 32;
	return cp == 0x17f ? 's' : cp;
}

/* Length of the contraction 's 't 're 've 'm 'll 'd at i, or 0. */
static size_t contraction(const chars *c, size_t i, size_t n, int ci)
{
	if (c->cp[i] != '\'' || i + 1 >= n)
		return 0;
	uint32_t a = fold(c->cp[i + 1], ci);
	if (a == 's' || a == 't' || a == 'm' || a == 'd')
		return 2;
	if (i + 2 >= n)
		return 0;
	uint32_t b = fold(c->cp[i + 2], ci);
	if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
		return 3;
	return 0;
}

/* \s+(?!\S)|\s+ at a whitespace character i: the whole run when it ends the
 * text, else all but its last character (which then prefixes the next
 * piece), but at least one character. */
static size_t spaces(const chars *c, size_t i, size_t n)
{
	size_t k = run(c, i, n, C_S);
	if (k == n)
		return n;
	return k - i > 1 ? k - 1 : i + 1;
}

/* The end of the GPT-2 match at i (< n). */
static size_t next_gpt2(const chars *c, size_t i, size_t n)
{
	size_t k = contraction(c, i, n, 0);
	if (k)
		return i + k;
	size_t j = i;
	if (c->cp[i] == ' ' && i + 1 < n && !(c->cls[i + 1] & C_S))
		j = i + 1;
	uint8_t cls = c->cls[j];
	if (cls & C_L)
		return run(c, j, n, C_L);
	if (cls & C_N)
		return run(c, j, n, C_N);
	if (is_other(cls))
		return run_other(c, j, n);
	return spaces(c, i, n);
}

/* The end of the Llama-3 (max_digits 3) or Qwen2 (1) match at i (< n). */
static size_t next_llama3(const chars *c, size_t i, size_t n, size_t max_digits)
{
	size_t k = contraction(c, i, n, 1);
	if (k)
		return i + k;
	uint8_t cls = c->cls[i];
	if (cls & C_L)
		return run(c, i, n, C_L);
	if (!(cls & (C_NL | C_L | C_N)) && i + 1 < n && (c->cls[i + 1] & C_L))
		return run(c, i + 1, n, C_L);
	if (cls & C_N) {
		size_t j = i;
		while (j < n && j - i < max_digits && (c->cls[j] & C_N))
			j++;
		return j;
	}
	size_t j = i;
	if (c->cp[i] == ' ' && i + 1 < n && is_other(c->cls[i + 1]))
		j = i + 1;
	if (is_other(c->cls[j]))
		return run(c, run_other(c, j, n), n, C_NL);
	/* Whitespace: \s*[\r\n]+ ends after the run's last newline. */
	size_t end = run(c, i, n, C_S), last_nl = end;
	for (size_t p = i; p < end; p++)
		if (c->cls[p] & C_NL)
			last_nl = p;
	if (last_nl < end)
		return last_nl + 1;
	return spaces(c, i, n);
}

int infs__pretokenize(infs__pretok kind, const char *text, size_t len, infs__pretok_fn fn, void *ctx)
{
	if (len == 0)
		return INFS_OK;
	chars c = { 0 };
	int rc = decode(&c, text, len);
	size_t i = 0, span = 0;
	while (rc == INFS_OK && i < c.n) {
		size_t end;
		switch (kind) {
		case INFS_PRETOK_DIGITS_GPT2:
			if (c.cls[i] & C_N) {
				end = i + 1;
			} else {
				/* GPT-2 within the span up to the next digit, which
				 * ends the text as far as its lookahead sees. */
				if (span <= i)
					for (span = i; span < c.n && !(c.cls[span] & C_N);)
						span++;
				end = next_gpt2(&c, i, span);
			}
			break;
		case INFS_PRETOK_LLAMA3: end = next_llama3(&c, i, c.n, 3); break;
		case INFS_PRETOK_QWEN2: end = next_llama3(&c, i, c.n, 1); break;
		default: end = next_gpt2(&c, i, c.n); break;
		}
		rc = fn(ctx, c.off[i], c.off[end]);
		i = end;
	}
	free(c.cp);
	free(c.cls);
	free(c.off);
	return rc;
}

int infs__pretok_from_gguf(const char *pre)
{
	static const struct {
		const char *name;
		infs__pretok kind;
	} names[] = {
		{ "gpt2", INFS_PRETOK_GPT2 },          { "gpt-2", INFS_PRETOK_GPT2 },
		{ "mpt", INFS_PRETOK_GPT2 },           { "olmo", INFS_PRETOK_GPT2 },
		{ "jais", INFS_PRETOK_GPT2 },          { "smollm", INFS_PRETOK_DIGITS_GPT2 },
		{ "starcoder", INFS_PRETOK_DIGITS_GPT2 }, { "refact", INFS_PRETOK_DIGITS_GPT2 },
		{ "command-r", INFS_PRETOK_DIGITS_GPT2 }, { "codeshell", INFS_PRETOK_DIGITS_GPT2 },
		{ "exaone", INFS_PRETOK_DIGITS_GPT2 }, { "minerva-7b", INFS_PRETOK_DIGITS_GPT2 },
		{ "llama3", INFS_PRETOK_LLAMA3 },      { "llama-v3", INFS_PRETOK_LLAMA3 },
		{ "llama-bpe", INFS_PRETOK_LLAMA3 },   { "smaug-bpe", INFS_PRETOK_LLAMA3 },
		{ "falcon3", INFS_PRETOK_LLAMA3 },     { "dbrx", INFS_PRETOK_LLAMA3 },
		{ "pixtral", INFS_PRETOK_LLAMA3 },     { "qwen2", INFS_PRETOK_QWEN2 },
		{ "deepseek-r1-qwen", INFS_PRETOK_QWEN2 }, { "stablelm2", INFS_PRETOK_QWEN2 },
		{ "megrez", INFS_PRETOK_QWEN2 },
	};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(pre, names[i].name) == 0)
			return (int)names[i].kind;
	return -1;
}

int infs__pretok_from_regex(const char *pattern)
{
	static const char gpt2[] =
		"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
	static const char llama3[] =
		"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
		"| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
	static const char qwen2[] =
		"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
		"| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
	if (strcmp(pattern, gpt2) == 0)
		return INFS_PRETOK_GPT2;
	if (strcmp(pattern, llama3) == 0)
		return INFS_PRETOK_LLAMA3;
	if (strcmp(pattern, qwen2) == 0)
		return INFS_PRETOK_QWEN2;
	return -1;
}

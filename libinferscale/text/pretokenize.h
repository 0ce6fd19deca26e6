/* Pre-tokenizer splits of byte-level BPE models: text is cut into pieces
 * that BPE then encodes one by one. Each split is a hand-written scanner that
 * finds exactly the matches of the model's regular expression, leftmost
 * first, with the alternatives tried in the regex's order:
 *
 *   GPT2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   DIGITS_GPT2: every \p{N} alone first (Hugging Face's Digits pre-tokenizer
 *           with individual_digits, llama.cpp's "smollm", "starcoder"), then GPT2
 *           on the rest
 *   LLAMA3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *           | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   QWEN2:  LLAMA3 with \p{N} instead of \p{N}{1,3}
 *
 * \s is Unicode White_Space. An ill-formed UTF-8 sequence counts as one
 * character of none of the classes, like U+FFFD (the tokenizer replaces such
 * sequences before splitting; here they are only kept safe). */
#ifndef INFS_PRETOKENIZE_H
#define INFS_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

typedef enum infs__pretok {
	INFS_PRETOK_GPT2 = 0,
	INFS_PRETOK_DIGITS_GPT2,
	INFS_PRETOK_LLAMA3,
	INFS_PRETOK_QWEN2
} infs__pretok;

/* Receives each piece as a byte range of the text, in order. A non-zero
 * return stops the split and is passed back. */
typedef int (*infs__pretok_fn)(void *ctx, size_t start, size_t end);

/* Splits text[0..len) and calls fn for each piece; the pieces cover the text
 * exactly. Returns 0, INFS_ENOMEM, or what fn returned. */
int infs__pretokenize(infs__pretok kind, const char *text, size_t len, infs__pretok_fn fn, void *ctx);

/* The split a llama.cpp tokenizer.ggml.pre name stands for; -1 if unknown. */
int infs__pretok_from_gguf(const char *pre);

/* The split a Hugging Face Split pre-tokenizer's regex is; -1 if unknown. */
int infs__pretok_from_regex(const char *pattern);

#endif

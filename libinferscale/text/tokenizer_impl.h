/* The tokenizer handle behind include/inferscale/tokenizer.h, shared by
 * tokenizer.c (loading, encoding) and chat.c (templates). */
#ifndef INFS_TOKENIZER_IMPL_H
#define INFS_TOKENIZER_IMPL_H

#include "text/bpe.h"
#include "gguf/gguf.h"
#include "inferscale/tokenizer.h"
#include "text/pretokenize.h"

/* A token matched whole in the text before pre-tokenization. */
typedef struct infs__added_token {
	int32_t id;
	const uint8_t *text; /* the token's bytes in the vocabulary */
	size_t len;
	int special;         /* only with INFS_TOKENIZE_PARSE_SPECIAL */
	int lstrip, rstrip;  /* absorb the whitespace before / after it */
} infs__added_token;

struct infs_tokenizer {
	infs__bpe *bpe;
	infs__pretok pretok;
	int whole_first;           /* tokenizer.json ignore_merges */
	int nfc;                   /* tokenizer.json NFC normalizer (Qwen2, Qwen3) */
	uint8_t *special;          /* per id: 1 for special (control) tokens */
	infs__added_token *added;  /* sorted by first byte, longest first */
	size_t n_added;
	int32_t bos, eos;          /* -1 when absent */
	int add_bos, add_eos;
	char *chat_template;       /* NULL when the model has none */
};

/* The tokenizer of an open GGUF (for the model loader, which has the file
 * mapped already); path labels messages. Errors as infs_tokenizer_load(). */
int infs__tokenizer_from_gguf(infs_tokenizer **out, const infs__gguf *g, const char *path);

#endif

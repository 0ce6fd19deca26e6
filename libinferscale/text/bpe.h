/* Byte-level byte-pair encoding: a vocabulary of byte strings, ranked merges
 * of token pairs, and the encoder of one pre-tokenized piece.
 *
 * Encoding starts from one token per byte and repeatedly applies the
 * lowest-ranked merge among adjacent pairs (leftmost on ties), as Hugging
 * Face tokenizers and llama.cpp do. The pairs live in a binary heap over a
 * linked list of symbols, so a piece of n bytes costs O(n log n), and the
 * merge table is a hash map from the pair to its rank and result. */
#ifndef INFS_BPE_H
#define INFS_BPE_H

#include <stddef.h>
#include <stdint.h>

/* A growable list of token ids. */
typedef struct infs__ids {
	int32_t *v;
	size_t n, cap;
} infs__ids;

int infs__ids_push(infs__ids *ids, int32_t id);

typedef struct infs__bpe infs__bpe;

/* A vocabulary of n_vocab tokens, all empty until set. */
int infs__bpe_new(infs__bpe **out, uint32_t n_vocab);
void infs__bpe_free(infs__bpe *b);

/* Sets the bytes of token id. When several tokens have the same bytes the
 * lowest id wins the lookup. */
int infs__bpe_set_token(infs__bpe *b, uint32_t id, const void *bytes, size_t len);

/* The id of the token with these bytes, or -1. */
int32_t infs__bpe_lookup(const infs__bpe *b, const void *bytes, size_t len);

/* The bytes of token id (valid until the vocabulary is freed). */
const uint8_t *infs__bpe_token(const infs__bpe *b, uint32_t id, size_t *len);

uint32_t infs__bpe_vocab_size(const infs__bpe *b);

/* Adds the merge of tokens left and right with the given rank (lower merges
 * first). The result is the token whose bytes are the concatenation; returns
 * INFS_EFORMAT when there is none. A pair added twice keeps its first rank. */
int infs__bpe_add_merge(infs__bpe *b, int32_t left, int32_t right, uint32_t rank);

/* Working memory of encode, reused across the pieces of one text (one per
 * thread: the vocabulary itself is only read). Zero-initialise; release
 * with infs__bpe_scratch_free(). */
typedef struct infs__bpe_scratch {
	void *mem;
	size_t cap; /* bytes */
} infs__bpe_scratch;

void infs__bpe_scratch_free(infs__bpe_scratch *s);

/* Encodes one piece and appends its tokens to out. With whole_first, a piece
 * that is itself a token is emitted as that token without merging (the
 * tokenizer.json "ignore_merges" of Llama-3). A byte that has no
 * single-byte token is dropped before merging: no token stands for it. */
int infs__bpe_encode(const infs__bpe *b, const uint8_t *piece, size_t len, int whole_first,
                     infs__bpe_scratch *scratch, infs__ids *out);

#endif

/* BERT's tokenizer: the basic tokenizer (text cleaning, CJK isolation,
 * accent stripping, lower-casing, whitespace and punctuation splitting)
 * followed by greedy longest-match-first WordPiece, with [CLS] ... [SEP] and
 * truncation, as Hugging Face's BertTokenizer (tokenizers' BertNormalizer,
 * BertPreTokenizer, WordPiece and TemplateProcessing) does it. */
#ifndef INFS_WORDPIECE_H
#define INFS_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

typedef struct infs__wordpiece infs__wordpiece;

/* Special tokens, in the order of infs__wordpiece_config.special. */
enum {
	INFS_WP_UNK,
	INFS_WP_CLS,
	INFS_WP_SEP,
	INFS_WP_PAD,
	INFS_WP_MASK,
	INFS_WP_N_SPECIAL
};

typedef struct infs__wordpiece_config {
	int lowercase;       /* do_lower_case */
	int strip_accents;   /* NFD, then drop nonspacing marks (Mn) */
	int chinese_chars;   /* tokenize_chinese_chars: CJK ideographs become words */
	uint32_t max_word_chars; /* longer words become [UNK]; BERT uses 100 */
	/* The special tokens' text: each must be in the vocabulary. Where one
	 * occurs verbatim in the input it becomes that token, unnormalised. */
	const char *special[INFS_WP_N_SPECIAL];
} infs__wordpiece_config;

/* Builds a tokenizer from the text of vocab.txt (one token per line, the id
 * is the line number; a repeated token keeps its last line, as tokenizers
 * does). INFS_EFORMAT when a special token is missing from the vocabulary or
 * the vocabulary is empty or holds more than INT32_MAX tokens. */
int infs__wordpiece_create(infs__wordpiece **out, const char *vocab, size_t len,
                           const infs__wordpiece_config *cfg);
void infs__wordpiece_free(infs__wordpiece *wp);

/* Lines of the vocabulary: ids are below this. */
uint32_t infs__wordpiece_vocab_size(const infs__wordpiece *wp);

/* The id of the token spelled tok[0..len), or -1. */
int32_t infs__wordpiece_id(const infs__wordpiece *wp, const char *tok, size_t len);

/* The id of special token which (INFS_WP_UNK, ...). */
int32_t infs__wordpiece_special(const infs__wordpiece *wp, int which);

/* Tokenizes the UTF-8 text[0..len) into [CLS] pieces... [SEP], keeping the
 * first max_len - 2 pieces, and writes them to ids (room for max_len >= 2
 * ids) and their count to *n_ids. Bytes that are not well-formed UTF-8 are
 * dropped, as the cleaning step drops U+FFFD. INFS_ENOMEM only. */
int infs__wordpiece_encode(const infs__wordpiece *wp, const char *text, size_t len,
                           uint32_t max_len, int32_t *ids, uint32_t *n_ids);

#endif

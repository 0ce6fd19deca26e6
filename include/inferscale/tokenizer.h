/* inferscale — the tokenizer of a language model: byte-level BPE read from a
 * GGUF file or a Hugging Face tokenizer.json, and its chat template.
 * See docs/tokenizer.md. */
#ifndef INFERSCALE_TOKENIZER_H
#define INFERSCALE_TOKENIZER_H

#include "inferscale/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct infs_tokenizer infs_tokenizer;
typedef int32_t infs_token;

/* Loads the tokenizer of path, which is one of
 *   - a .gguf model file (tokenizer.ggml.* metadata, tokenizer.chat_template),
 *   - a Hugging Face tokenizer.json (tokenizer_config.json beside it, when
 *     present, gives BOS, EOS and the chat template),
 *   - a directory holding those two files.
 * Byte-level BPE with the GPT-2, Llama-3, Qwen2 and digit-splitting
 * (SmolLM, StarCoder) pre-tokenizers is supported. Errors: INFS_EINVAL,
 * INFS_ENOTFOUND, INFS_EIO, INFS_EFORMAT (malformed file or vocabulary),
 * INFS_EUNSUPPORTED (another tokenizer model, normalizer or split; the
 * message names it), INFS_ENOMEM. A tokenizer is immutable once loaded and
 * may be used from several threads at once. */
INFS_API int infs_tokenizer_load(infs_tokenizer **out, const char *path);

/* Accepts NULL. */
INFS_API void infs_tokenizer_free(infs_tokenizer *tok);

/* Add BOS (and EOS) where the model's configuration asks for it
 * (tokenizer.ggml.add_bos_token, or the tokenizer.json post-processor). */
#define INFS_TOKENIZE_ADD_SPECIAL (1u << 0)
/* Recognise special tokens written in the text ("<|im_start|>") as those
 * tokens. Without it they are encoded as plain text, so that user input
 * cannot inject control tokens. Added tokens that are not special are
 * always recognised, as in Hugging Face tokenizers. */
#define INFS_TOKENIZE_PARSE_SPECIAL (1u << 1)

/* Tokenizes text[0..len) (UTF-8; each ill-formed sequence is read as U+FFFD,
 * as Python's bytes.decode("utf-8", errors="replace") does, so the tokens
 * are those transformers gives for that string). Writes the tokens to out when they
 * fit in cap and sets *n_out to their count in any case. With out NULL and
 * cap 0 it only counts. Returns INFS_ERANGE (out untouched) when cap is too
 * small. */
INFS_API int infs_tokenize(const infs_tokenizer *tok, const char *text, size_t len, unsigned flags,
                           infs_token *out, size_t cap, size_t *n_out);

/* Leave special tokens (BOS, EOS, <|im_start|>, ...) out of the text. */
#define INFS_DETOKENIZE_SKIP_SPECIAL (1u << 0)

/* The bytes of n tokens, concatenated, NUL-terminated. Sets *n_out to the
 * byte count (without the NUL) in any case and writes when count + 1 <= cap;
 * with out NULL and cap 0 it only counts; INFS_ERANGE when cap is too small.
 * The bytes are exactly those the tokens stand for: a token sequence cut in
 * the middle of a character gives a partial UTF-8 sequence (Hugging Face's
 * decode() would show U+FFFD there). INFS_EINVAL for an id out of range. */
INFS_API int infs_detokenize(const infs_tokenizer *tok, const infs_token *tokens, size_t n,
                             unsigned flags, char *out, size_t cap, size_t *n_out);

/* The bytes of one token, like infs_detokenize() of that token alone. */
INFS_API int infs_token_to_piece(const infs_tokenizer *tok, infs_token token, char *out, size_t cap,
                                 size_t *n_out);

/* The model's beginning- and end-of-sequence tokens, -1 when it has none
 * (or tok is NULL). */
INFS_API infs_token infs_tokenizer_bos(const infs_tokenizer *tok);
INFS_API infs_token infs_tokenizer_eos(const infs_tokenizer *tok);
/* Number of token ids (0 for NULL). */
INFS_API size_t infs_tokenizer_vocab_size(const infs_tokenizer *tok);
/* 1 when token is a special (control) token, such as the chat markers. */
INFS_API int infs_tokenizer_is_special(const infs_tokenizer *tok, infs_token token);

/* Chat prompt formats. */
typedef enum infs_chat_format {
	INFS_CHAT_AUTO = 0,    /* the tokenizer's template (see infs_chat_format_detect) */
	INFS_CHAT_CHATML = 1,  /* <|im_start|>role\ncontent<|im_end|>\n */
	INFS_CHAT_LLAMA3 = 2,  /* <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> */
	INFS_CHAT_MISTRAL = 3, /* <s>[INST] user [/INST]assistant</s> */
	INFS_CHAT_LLAMA31 = 4  /* Llama 3.1+: LLAMA3 after a dated system header */
} infs_chat_format;

typedef struct infs_chat_message {
	const char *role;    /* "system", "user", "assistant" (or any role ChatML takes) */
	const char *content; /* UTF-8, NUL-terminated */
} infs_chat_message;

/* The format of the tokenizer's chat template. No template at all gives
 * INFS_CHAT_CHATML (the documented fallback); a template that is none of the
 * known ones gives INFS_EUNSUPPORTED with its beginning in the message. */
INFS_API int infs_chat_format_detect(const infs_tokenizer *tok, infs_chat_format *out);

/* End the prompt with the opening of an assistant turn. */
#define INFS_CHAT_ADD_GENERATION_PROMPT (1u << 0)

/* Renders messages as the model's prompt text, the same as Hugging Face's
 * apply_chat_template(messages, tokenize=False, add_generation_prompt=...)
 * for the known templates, including the default system message some of
 * them insert (SmolLM2's). Output as for infs_detokenize(): NUL-terminated,
 * *n_out always set, INFS_ERANGE when cap is too small. tok may be NULL when
 * format is not INFS_CHAT_AUTO. Tokenize the result with
 * INFS_TOKENIZE_PARSE_SPECIAL and without INFS_TOKENIZE_ADD_SPECIAL: the
 * text already holds BOS where the template writes it. */
INFS_API int infs_chat_render(const infs_tokenizer *tok, infs_chat_format format,
                              const infs_chat_message *messages, size_t n_messages, unsigned flags,
                              char *out, size_t cap, size_t *n_out);

/* infs_chat_render() followed by infs_tokenize() of the text with special
 * tokens parsed (and no BOS added beyond what the template writes): the
 * prompt's tokens, with the size query and INFS_ERANGE of infs_tokenize().
 * tok is required. */
INFS_API int infs_chat_tokenize(const infs_tokenizer *tok, infs_chat_format format,
                                const infs_chat_message *messages, size_t n_messages, unsigned flags,
                                infs_token *out, size_t cap, size_t *n_out);

#ifdef __cplusplus
}
#endif
#endif

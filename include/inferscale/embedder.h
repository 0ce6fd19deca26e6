/* inferscale — the built-in retrieval embedder: a BERT-family sentence
 * encoder (all-MiniLM-L6-v2 and the bge / e5 / gte small models of the same
 * architecture) with its WordPiece tokenizer, loaded from a
 * sentence-transformers model directory. It computes what
 * SentenceTransformer(path).encode(texts) does: tokenize, encode, pool,
 * normalise when the model's modules.json asks for it. */
#ifndef INFERSCALE_EMBEDDER_H
#define INFERSCALE_EMBEDDER_H

#include "inferscale/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded embedder. Any number of threads may call infs_embed on one
 * embedder at the same time: on the CPU it is read-only after loading; on a
 * device the calls share its one workspace and run one at a time (a mutex
 * inside). */
typedef struct infs_embedder infs_embedder;

#define INFS_EMBEDDER_OPTIONS_VERSION 1

typedef struct infs_embedder_options {
	unsigned version;
	uint32_t n_threads;      /* threads of each infs_embed call; 0 = the machine's cores.
	                            Matrix products through OpenBLAS use its own thread count
	                            (OPENBLAS_NUM_THREADS) and run while these threads wait. */
	int device;              /* -1 = the CPU. A CUDA device index: infs_embed runs there,
	                            weights in f32 and a workspace for 64 * max_seq_length
	                            tokens allocated at load (docs/embedder.md, "On a GPU");
	                            INFS_EUNSUPPORTED in a build without CUDA. */
	uint32_t max_seq_length; /* tokens per text, [CLS] and [SEP] included; longer texts
	                            are truncated. 0 = the model's (sentence_bert_config.json) */
} infs_embedder_options;

#define INFS_EMBEDDER_OPTIONS_INIT { INFS_EMBEDDER_OPTIONS_VERSION, 0, -1, 0 }

INFS_API int infs_embedder_options_init(infs_embedder_options *opts, unsigned version);

/* Loads the sentence-transformers model directory path: config.json (a
 * BertModel: model_type "bert", GELU, absolute positions), vocab.txt,
 * model.safetensors (F32, F16 or BF16; "bert." prefixes accepted), and when
 * present tokenizer_config.json (do_lower_case, strip_accents,
 * tokenize_chinese_chars, special tokens), sentence_bert_config.json
 * (max_seq_length, do_lower_case), modules.json (Transformer, Pooling,
 * Normalize) and the pooling module's config.json (CLS, mean, max or
 * mean-sqrt-len pooling; mean when absent). opts may be NULL.
 * Errors: INFS_EINVAL, INFS_ENOTFOUND (a required file is missing), INFS_EIO,
 * INFS_EFORMAT (malformed files, missing tensors, shapes that contradict the
 * configuration), INFS_EUNSUPPORTED (another architecture, pooling or module,
 * or a device in a build without CUDA, or a head size above 128 on a
 * device), INFS_ERANGE (max_seq_length outside 2..max positions),
 * INFS_ENOMEM; on a device also INFS_EINVAL (no such device), INFS_EBUDGET
 * (not enough free device memory), INFS_EDEVICE (a CUDA or cuBLAS call
 * failed). */
INFS_API int infs_embedder_load(infs_embedder **out, const char *path,
                                const infs_embedder_options *opts);

/* Releases the embedder. Accepts NULL. */
INFS_API void infs_embedder_free(infs_embedder *embedder);

/* Floats per embedding (384 for all-MiniLM-L6-v2); 0 for NULL. */
INFS_API uint32_t infs_embedder_dim(const infs_embedder *embedder);

/* Tokens per text after truncation, [CLS] and [SEP] included; 0 for NULL. */
INFS_API uint32_t infs_embedder_max_seq_length(const infs_embedder *embedder);

#define INFS_EMBED_OPTIONS_VERSION 1

typedef struct infs_embed_options {
	unsigned version;
	/* Prepended to every text, as sentence-transformers' encode(prompt=...):
	 * "query: " / "passage: " for e5, an instruction for bge queries. NULL or
	 * "" for none. */
	const char *prompt;
} infs_embed_options;

#define INFS_EMBED_OPTIONS_INIT { INFS_EMBED_OPTIONS_VERSION, NULL }

INFS_API int infs_embed_options_init(infs_embed_options *opts, unsigned version);

/* Embeds n_texts NUL-terminated UTF-8 texts into out, n_texts * dim floats,
 * text i at out + i * dim. Texts are encoded in batches on the embedder's
 * threads; the result of a text does not depend on the batch it is in,
 * beyond float rounding. Bytes that are not well-formed UTF-8 are dropped.
 * opts may be NULL. Every argument is checked first; on error out is
 * untouched. Errors: INFS_EINVAL, INFS_EUNSUPPORTED (a prompt for a model
 * that pools without its prompt), INFS_ENOMEM; on a device also
 * INFS_EDEVICE and INFS_EBUDGET (a CUDA or cuBLAS call failed). */
INFS_API int infs_embed(float *out, const infs_embedder *embedder, const char *const *texts,
                        size_t n_texts, const infs_embed_options *opts);

#ifdef __cplusplus
}
#endif
#endif

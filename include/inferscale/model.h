/* inferscale — the model runtime: a Llama-family decoder (llama, mistral,
 * qwen2, qwen3) loaded from a GGUF file or a Hugging Face directory, run on
 * the CPU with f32 activations. It gives the pre-RoPE KV a store keeps, in the store's
 * layout, and next-token logits. */
#ifndef INFERSCALE_MODEL_H
#define INFERSCALE_MODEL_H

#include "inferscale/inject.h"
#include "inferscale/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded model. Read-only after loading: any number of threads may run
 * infs_model_forward on one model at the same time. */
typedef struct infs_model infs_model;

#define INFS_MODEL_OPTIONS_VERSION 4

typedef struct infs_model_options {
	unsigned version;
	uint32_t n_threads; /* threads of the forward pass; 0 = the processors this process
	                       may run on. Matrix products through OpenBLAS use its own
	                       thread count (OPENBLAS_NUM_THREADS) and run while these
	                       threads wait. */
	/* version 2 */
	int device;                   /* -1: host only (default); >= 0: also upload the
	                                 weights to this CUDA device in bf16, for
	                                 infs_model_forward_device */
	uint64_t device_budget_bytes; /* device memory the model may use (weights and
	                                 workspace); 0 = no limit */
	uint32_t device_max_tokens;   /* tokens one device forward call may take; the
	                                 workspace is sized for it at load. 0 = 512 */
	/* version 3 */
	int int8_activations;         /* 1: products over Q4_0 / Q4_1 / Q8_0 matrices
	                                 with few tokens (decoding, a short question)
	                                 quantize the activations to 8 bits a block and
	                                 multiply in integers, as llama.cpp does: about
	                                 2x faster there, but the logits move by up to
	                                 ~2 (docs/model-runtime.md). 0 (default): f32
	                                 activations, logits within the documented
	                                 bounds of the f32 path */
	/* version 4 */
	int device_weights;           /* the device copy's matrices: INFS_DTYPE_BF16
	                                 (default), or INFS_DTYPE_FP8_E4M3: e4m3 codes with
	                                 an f32 scale per output row, quantized at load.
	                                 A call of up to 64 tokens multiplies the codes
	                                 directly (half the bytes a decoding step reads);
	                                 a longer one widens each matrix to bf16 first.
	                                 The sums of a product are added in an order
	                                 that may change from call to call (fp8 logits
	                                 are not bitwise repeatable). Needs device >= 0.
	                                 Embeddings, the head, norms and biases stay
	                                 bf16 / f32 (docs/model-runtime.md) */
} infs_model_options;

#define INFS_MODEL_OPTIONS_INIT { INFS_MODEL_OPTIONS_VERSION, 0, -1, 0, 0, 0, INFS_DTYPE_BF16 }

INFS_API int infs_model_options_init(infs_model_options *opts, unsigned version);

/* Loads path: a .gguf file (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q4_K, Q5_K, Q6_K tensors), or a directory holding config.json and
 * model.safetensors (or shards listed by model.safetensors.index.json) in
 * f32, f16 or bf16 (with tokenizer.json and tokenizer_config.json for the
 * tokenizer). Quantized GGUF matrices stay in their blocks in memory
 * (multiplied there, the products in f32); everything else is converted to
 * f32 at load. opts may be NULL.
 * Errors: INFS_ENOTFOUND, INFS_EIO, INFS_EFORMAT (a truncated or malformed
 * file, missing tensors, shapes that contradict the configuration),
 * INFS_EUNSUPPORTED (an architecture, tensor type or option not built in). */
INFS_API int infs_model_load(infs_model **out, const char *path, const infs_model_options *opts);

/* Releases the model. Accepts NULL. */
INFS_API void infs_model_free(infs_model *model);

/* The model's tokenizer and chat template (owned by the model, valid until
 * infs_model_free), or NULL when the model came without one: a GGUF file
 * without tokenizer.ggml.* metadata, a directory without tokenizer.json. */
INFS_API const infs_tokenizer *infs_model_tokenizer(const infs_model *model);

#define INFS_MODEL_INFO_VERSION 1

typedef struct infs_model_info {
	unsigned version;          /* set by the caller */
	const char *architecture;  /* "llama", "mistral", "qwen2", "qwen3"; static */
	uint32_t n_vocab;
	uint32_t n_embd;
	uint32_t n_layers;
	uint32_t n_heads;
	uint32_t n_kv_heads;
	uint32_t head_dim;
	uint32_t n_ff;
	uint32_t n_ctx_train;      /* context length the model was trained for */
	uint32_t sliding_window;   /* 0 = none */
	uint64_t n_params;         /* weights held, in elements */
} infs_model_info;

INFS_API int infs_model_info_get(infs_model_info *out, const infs_model *model);

/* The geometry of the model's KV with the given element type, ready for
 * infs_store_options.geometry (embed_dim is left 0: the retrieval embedder
 * sets it). */
INFS_API int infs_model_geometry(infs_geometry *out, const infs_model *model, infs_dtype kv_dtype);

/* A string naming everything that changes stored KV besides the geometry:
 * architecture, a hash of the weights, of the tokenizer and chat template,
 * and the KV dtype. Ready for infs_store_options.identity. Released with
 * infs_free. */
INFS_API int infs_model_identity(char **out, const infs_model *model, infs_dtype kv_dtype);

#define INFS_FORWARD_OPTIONS_VERSION 1

typedef struct infs_forward_options {
	unsigned version;
	int all_logits;               /* 0: logits of the last token only; 1: of every token */
	infs_dtype kv_dtype;          /* element type of k_out and v_out */
	/* Optional paged KV cache of earlier tokens, keys already rotated (as
	 * infs_inject_into_blocks writes them): position p lives in block
	 * block_table[p / block_size], slot p % block_size. Host memory only. */
	const infs_kv_layout *cache;
	const int32_t *block_table;
	size_t block_table_len;
	uint32_t n_past;              /* cache positions [0, n_past) are attended to */
	int write_cache;              /* also store the new tokens' K (rotated) and V in the
	                                 cache at their positions */
	/* Optional: a sequence id per token, to run several independent
	 * sequences (facts to encode, say) in one call: a token attends only to
	 * the new tokens of its own sequence, and to the cache's positions below
	 * n_past, which every sequence shares. Each sequence has its own
	 * positions. Not combined with write_cache. */
	const int32_t *seq_ids;
} infs_forward_options;

#define INFS_FORWARD_OPTIONS_INIT { INFS_FORWARD_OPTIONS_VERSION, 0, INFS_DTYPE_F32, NULL, NULL, 0, 0, 0, NULL }

INFS_API int infs_forward_options_init(infs_forward_options *opts, unsigned version);

/* Runs the model over tokens[0..n_tokens) at positions[0..n_tokens)
 * (NULL: 0, 1, ...). Token i attends to the cache positions below n_past
 * that are <= positions[i] and to the new tokens j with
 * positions[j] <= positions[i] (of its own sequence with seq_ids, and, for
 * a sliding-window model, within the window). Outputs, each optional (NULL):
 *   logits  n_vocab floats (all_logits: n_tokens * n_vocab, token-major);
 *   k_out, v_out  the pre-RoPE K and V of the new tokens,
 *           [n_layers][n_tokens][n_kv_heads][head_dim] in opts->kv_dtype,
 *           the store's layout (Qwen3: keys after their RMSNorm).
 * Every argument is checked before anything is computed; on error the
 * outputs and the cache are untouched. opts may be NULL. */
INFS_API int infs_model_forward(float *logits, void *k_out, void *v_out, const infs_model *model,
                                const int32_t *tokens, const int32_t *positions, uint32_t n_tokens,
                                const infs_forward_options *opts);

#define INFS_DEVICE_FORWARD_OPTIONS_VERSION 2

typedef struct infs_device_forward_options {
	unsigned version;
	int all_logits;               /* 0: logits of the last token (of each sequence) only;
	                                 1: of every token */
	/* The paged KV cache on the model's device (cache->device == the
	 * model's): position p lives in block block_table[p / block_size], slot
	 * p % block_size, keys rotated (as infs_inject_into_blocks writes them).
	 * Required: the new tokens' rotated K and their V are written there. */
	const infs_kv_layout *cache;
	const int32_t *block_table;   /* device memory, block_table_len entries (per sequence) */
	size_t block_table_len;
	uint32_t n_past;              /* cache positions [0, n_past) are attended to */
	void *stream;                 /* cudaStream_t; NULL = the default stream */
	/* version 2: a batch of sequences in one call (continuous batching). Their
	 * shapes live in device memory, so that one captured CUDA graph serves
	 * every step of a decode loop. */
	uint32_t n_seqs;              /* 0: one sequence (n_past, block_table); >= 1: the
	                                 tokens are n_seqs sequences, each with its own
	                                 cached positions and block table */
	const int32_t *seq_starts;    /* device, n_seqs + 1 offsets: sequence s is tokens
	                                 [seq_starts[s], seq_starts[s + 1]); seq_starts[0]
	                                 is 0, seq_starts[n_seqs] n_tokens, non-decreasing */
	const int32_t *seq_n_past;    /* device, n_seqs: sequence s attends to its cache
	                                 positions [0, seq_n_past[s]) (n_past is unused) */
	size_t block_table_stride;    /* entries from one sequence's block table to the
	                                 next in block_table; 0: all share one */
	uint32_t max_context;         /* a bound on seq_n_past[s] plus the tokens of s, to
	                                 spread the attention's work over the device;
	                                 0: the cache's capacity */
} infs_device_forward_options;

#define INFS_DEVICE_FORWARD_OPTIONS_INIT { INFS_DEVICE_FORWARD_OPTIONS_VERSION, 0, NULL, NULL, 0, 0, NULL, 0, NULL, NULL, 0, 0 }

INFS_API int infs_device_forward_options_init(infs_device_forward_options *opts, unsigned version);

/* infs_model_forward on the model's device, for a model loaded with
 * infs_model_options.device >= 0: tokens[0..n_tokens), positions (NULL:
 * n_past, n_past + 1, ... in each sequence) and logits are device memory;
 * logits holds n_vocab floats per sequence (one sequence: n_vocab; with
 * all_logits: n_tokens * n_vocab). The work is queued on opts->stream and
 * completes asynchronously; nothing is allocated and the host never waits
 * for the device, so the call can be captured into a CUDA graph (the
 * graph keeps the host-side values: n_tokens, n_seqs, n_past, the
 * pointers). Token i attends as in infs_model_forward to its sequence's
 * cache positions below n_past and to the new tokens of its sequence, and
 * its rotated K and its V are written to the cache at positions[i]; the
 * new tokens' positions must not be below n_past (they would be seen
 * twice). Weights are bf16, activations bf16 at the matrix products and
 * in attention (f32 accumulation), everything else f32. Every argument the
 * host can see is checked first (INFS_EINVAL, INFS_ERANGE,
 * INFS_EMISMATCH); what lies in device memory (tokens, positions, block
 * table entries, sequence starts and n_past) is checked by the kernels: a
 * token outside the vocabulary, or a position whose block is outside the
 * table or the cache, writes nothing there and makes the logits NaN;
 * sequence starts that break their rules leave the logits of the tokens
 * they miss undefined, never an access out of bounds. A sequence without
 * tokens gets NaN logits. One call at a time per model (the workspace is
 * the model's). */
INFS_API int infs_model_forward_device(float *logits, const infs_model *model, const int32_t *tokens,
                                       const int32_t *positions, uint32_t n_tokens,
                                       const infs_device_forward_options *opts);

#ifdef __cplusplus
}
#endif
#endif

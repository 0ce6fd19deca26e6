/* The C ABI as CFFI sees it: trimmed copies of include/inferscale/*.h, with
 * macro values written out (ABI mode cannot evaluate expressions). Keep in
 * step with the headers: tests/test_abi_sync.py fails on any difference in a
 * signature, struct layout, enum value or macro value. */

/* common.h */
typedef enum infs_status {
	INFS_OK = 0,
	INFS_EINVAL = -1,
	INFS_ENOMEM = -2,
	INFS_EIO = -3,
	INFS_ENOTFOUND = -4,
	INFS_EMISMATCH = -5,
	INFS_ECORRUPT = -6,
	INFS_EBUSY = -7,
	INFS_ERANGE = -8,
	INFS_EUNSUPPORTED = -9,
	INFS_EDEVICE = -10,
	INFS_EEXISTS = -11,
	INFS_EFORMAT = -12,
	INFS_EBUDGET = -13,
	INFS_ECANCELED = -14,
	INFS_EREADONLY = -15,
	INFS_ENOTRESIDENT = -16
} infs_status;

const char *infs_error_last(void);
int infs_error_last_code(void);
const char *infs_strerror(int code);
unsigned infs_version_number(void);
const char *infs_version_string(void);

typedef enum infs_dtype {
	INFS_DTYPE_F32 = 0,
	INFS_DTYPE_F16 = 1,
	INFS_DTYPE_BF16 = 2,
	INFS_DTYPE_FP8_E4M3 = 3
} infs_dtype;

size_t infs_dtype_size(infs_dtype dtype);
void infs_free(void *ptr);

#define INFS_FEATURE_CUDA 1
#define INFS_FEATURE_FAISS 2
#define INFS_FEATURE_BLAS 4
unsigned infs_features(void);

/* geometry.h */
typedef enum infs_rope_style {
	INFS_ROPE_NEOX = 0,
	INFS_ROPE_GPTJ = 1
} infs_rope_style;

typedef enum infs_rope_scaling {
	INFS_ROPE_SCALING_NONE = 0,
	INFS_ROPE_SCALING_LINEAR = 1,
	INFS_ROPE_SCALING_LLAMA3 = 2,
	INFS_ROPE_SCALING_YARN = 3
} infs_rope_scaling;

#define INFS_GEOMETRY_VERSION 1

typedef struct infs_geometry {
	unsigned version;
	uint32_t n_layers;
	uint32_t n_kv_heads;
	uint32_t head_dim;
	uint32_t rotary_dim;
	infs_rope_style rope_style;
	double rope_theta;
	infs_rope_scaling rope_scaling;
	double rope_factor;
	double rope_low_freq_factor;
	double rope_high_freq_factor;
	uint32_t rope_original_max_pos;
	double rope_beta_fast;
	double rope_beta_slow;
	double rope_attn_factor;
	infs_dtype kv_dtype;
	uint32_t embed_dim;
} infs_geometry;

int infs_geometry_init(infs_geometry *g, unsigned version);
int infs_geometry_validate(const infs_geometry *g);
size_t infs_geometry_kv_token_bytes(const infs_geometry *g);
int infs_kv_convert(void *dst, infs_dtype dst_dtype, const void *src, infs_dtype src_dtype,
                    const infs_geometry *g, uint32_t n_tokens);

/* store.h */
typedef struct infs_store infs_store;

#define INFS_NAMESPACE_MAX 255
#define INFS_IDENTITY_MAX 4096
#define INFS_TEXT_MAX 1048576
#define INFS_METADATA_MAX 65536
#define INFS_FACT_TOKENS_MAX 65536

#define INFS_OPEN_CREATE 1
#define INFS_OPEN_READONLY 2

typedef enum infs_sync_mode {
	INFS_SYNC_FULL = 0,
	INFS_SYNC_NORMAL = 1,
	INFS_SYNC_OFF = 2
} infs_sync_mode;

#define INFS_STORE_OPTIONS_VERSION 3

typedef struct infs_store_options {
	unsigned version;
	unsigned flags;
	const infs_geometry *geometry;
	const char *identity;
	infs_sync_mode sync;
	int device;
	uint64_t device_budget_bytes;
	const char *faiss_index;
	uint64_t faiss_min_facts;
	uint64_t host_budget_bytes;
	const char *remote;
	const char *remote_user;
	const char *remote_password;
	unsigned remote_timeout_ms;
	const char *remote_prefix;
	unsigned remote_replicas;
} infs_store_options;

int infs_store_options_init(infs_store_options *opts, unsigned version);
int infs_store_open(infs_store **out, const char *path, const infs_store_options *opts);
void infs_store_close(infs_store *store);
int infs_store_geometry(infs_geometry *out, const infs_store *store);
const char *infs_store_identity(const infs_store *store);
int infs_store_sync(infs_store *store);
int infs_store_compact(infs_store *store);

#define INFS_STORE_STATS_VERSION 4

typedef struct infs_store_stats {
	unsigned version;
	uint64_t n_facts;
	uint64_t n_segments;
	uint64_t n_namespaces;
	uint64_t file_bytes;
	uint64_t live_bytes;
	uint64_t dropped_tail_bytes;
	uint64_t device_bytes;
	uint64_t lost_records;
	uint64_t host_bytes;
	uint64_t kv_device_bytes;
	uint64_t kv_host_bytes;
	uint64_t device_evictions;
	uint64_t host_evictions;
	uint64_t promotions;
	uint64_t torn_bytes;
	uint64_t torn_records;
} infs_store_stats;

int infs_store_stats_get(infs_store_stats *out, infs_store *store);
int infs_store_verify(infs_store *store, uint64_t *bad_offset, uint64_t *bad_id);

#define INFS_FACT_SEGMENT 1
#define INFS_FACT_VERSION 1

typedef struct infs_fact {
	unsigned version;
	unsigned flags;
	uint32_t n_tokens;
	const int32_t *tokens;
	const float *embedding;
	const void *k;
	const void *v;
	const char *text;
	const char *metadata;
	uint64_t source_id;
	int64_t timestamp;
} infs_fact;

int infs_fact_put(uint64_t *out_id, infs_store *store, const char *ns, const infs_fact *fact);

typedef struct infs_fact_record {
	uint64_t id;
	unsigned flags;
	uint32_t n_tokens;
	const int32_t *tokens;
	const float *embedding;
	const void *k;
	const void *v;
	const char *text;
	const char *metadata;
	uint64_t source_id;
	int64_t timestamp;
} infs_fact_record;

int infs_fact_get(infs_fact_record **out, infs_store *store, const char *ns, uint64_t id);
void infs_fact_record_free(infs_fact_record *record);
int infs_fact_delete(infs_store *store, const char *ns, uint64_t id);
int infs_fact_count(uint64_t *out, infs_store *store, const char *ns);
int infs_fact_list(uint64_t **out_ids, size_t *out_n, infs_store *store, const char *ns);
int infs_namespace_list(char ***out_names, size_t *out_n, infs_store *store);
int infs_namespace_drop(infs_store *store, const char *ns);

int infs_namespace_generation(uint64_t *out, infs_store *store, const char *ns);

typedef enum infs_tier {
	INFS_TIER_DEVICE = 0,
	INFS_TIER_HOST = 1,
	INFS_TIER_FILE = 2
} infs_tier;

int infs_prefetch(infs_store *store, const char *ns);
int infs_namespace_tier(infs_tier *out, infs_store *store, const char *ns);
int infs_tier_wait(infs_store *store);

/* retrieve.h */
#define INFS_RETRIEVE_K_MAX 4096

typedef enum infs_metric {
	INFS_METRIC_COSINE = 0,
	INFS_METRIC_IP = 1
} infs_metric;

typedef enum infs_backend {
	INFS_BACKEND_AUTO = 0,
	INFS_BACKEND_EXACT = 1,
	INFS_BACKEND_FAISS = 2,
	INFS_BACKEND_CUDA = 3
} infs_backend;

#define INFS_RETRIEVE_OPTIONS_VERSION 1

typedef struct infs_retrieve_options {
	unsigned version;
	infs_metric metric;
	infs_backend backend;
} infs_retrieve_options;

int infs_retrieve_options_init(infs_retrieve_options *opts, unsigned version);

typedef struct infs_hit {
	uint64_t id;
	float score;
} infs_hit;

int infs_retrieve(infs_hit *out, size_t *out_n, infs_store *store, const char *ns,
                  const float *queries, size_t n_queries, size_t k,
                  const infs_retrieve_options *opts);

#define INFS_SEARCHER_K_MAX 100
#define INFS_SEARCHER_QUERIES_MAX 4096
#define INFS_SEARCHER_OPTIONS_VERSION 1

typedef struct infs_searcher_options {
	unsigned version;
	infs_metric metric;
	uint32_t max_queries;
	uint32_t max_k;
	uint64_t max_facts;
} infs_searcher_options;

int infs_searcher_options_init(infs_searcher_options *opts, unsigned version);

typedef struct infs_searcher infs_searcher;

int infs_searcher_create(infs_searcher **out, infs_store *store, const infs_searcher_options *opts);
void infs_searcher_free(infs_searcher *searcher);
int infs_retrieve_device(infs_searcher *searcher, const char *ns, const float *queries, size_t n_queries,
                         size_t k, infs_hit *hits, uint32_t *counts, void *stream);

/* inject.h */
#define INFS_KV_LAYOUT_VERSION 1

typedef struct infs_kv_layout {
	unsigned version;
	int device;
	infs_dtype dtype;
	uint32_t n_layers;
	uint32_t n_kv_heads;
	uint32_t head_dim;
	uint32_t n_blocks;
	uint32_t block_size;
	void *const *k_layers;
	void *const *v_layers;
	int64_t stride_block;
	int64_t stride_slot;
	int64_t stride_head;
	int64_t stride_dim;
} infs_kv_layout;

int infs_kv_layout_init(infs_kv_layout *layout, unsigned version);

#define INFS_INJECT_OPTIONS_VERSION 1

typedef struct infs_inject_options {
	unsigned version;
	void *stream;
} infs_inject_options;

int infs_inject_options_init(infs_inject_options *opts, unsigned version);
int infs_inject_into_blocks(uint32_t *out_next_pos, infs_store *store, const char *ns,
                            const uint64_t *ids, size_t n_ids, uint32_t start_pos,
                            const int32_t *block_table, size_t block_table_len,
                            const infs_kv_layout *cache, const infs_inject_options *opts);

#define INFS_INJECTOR_OPTIONS_VERSION 1

typedef struct infs_injector_options {
	unsigned version;
	uint32_t max_ids;
	uint32_t max_tokens;
} infs_injector_options;

int infs_injector_options_init(infs_injector_options *opts, unsigned version);

typedef struct infs_injector infs_injector;

int infs_injector_create(infs_injector **out, infs_store *store, const infs_kv_layout *cache,
                         const infs_injector_options *opts);
void infs_injector_free(infs_injector *injector);
int infs_inject_device(infs_injector *injector, const char *ns, const void *ids, size_t id_stride,
                       const uint32_t *n_ids, uint32_t start_pos, const int32_t *block_table,
                       size_t block_table_len, uint32_t *next_pos, int32_t *status, void *stream);

int infs_rope_rotate(void *x, infs_dtype dtype, uint32_t n_tokens, uint32_t n_heads,
                     const int32_t *positions, const infs_geometry *g);

/* tokenizer.h */
typedef struct infs_tokenizer infs_tokenizer;
typedef int32_t infs_token;

int infs_tokenizer_load(infs_tokenizer **out, const char *path);
void infs_tokenizer_free(infs_tokenizer *tok);

#define INFS_TOKENIZE_ADD_SPECIAL 1
#define INFS_TOKENIZE_PARSE_SPECIAL 2

int infs_tokenize(const infs_tokenizer *tok, const char *text, size_t len, unsigned flags,
                  infs_token *out, size_t cap, size_t *n_out);

#define INFS_DETOKENIZE_SKIP_SPECIAL 1

int infs_detokenize(const infs_tokenizer *tok, const infs_token *tokens, size_t n,
                    unsigned flags, char *out, size_t cap, size_t *n_out);
int infs_token_to_piece(const infs_tokenizer *tok, infs_token token, char *out, size_t cap,
                        size_t *n_out);
infs_token infs_tokenizer_bos(const infs_tokenizer *tok);
infs_token infs_tokenizer_eos(const infs_tokenizer *tok);
size_t infs_tokenizer_vocab_size(const infs_tokenizer *tok);
int infs_tokenizer_is_special(const infs_tokenizer *tok, infs_token token);

typedef enum infs_chat_format {
	INFS_CHAT_AUTO = 0,
	INFS_CHAT_CHATML = 1,
	INFS_CHAT_LLAMA3 = 2,
	INFS_CHAT_MISTRAL = 3,
	INFS_CHAT_LLAMA31 = 4
} infs_chat_format;

typedef struct infs_chat_message {
	const char *role;
	const char *content;
} infs_chat_message;

int infs_chat_format_detect(const infs_tokenizer *tok, infs_chat_format *out);

#define INFS_CHAT_ADD_GENERATION_PROMPT 1

int infs_chat_render(const infs_tokenizer *tok, infs_chat_format format,
                     const infs_chat_message *messages, size_t n_messages, unsigned flags,
                     char *out, size_t cap, size_t *n_out);
int infs_chat_tokenize(const infs_tokenizer *tok, infs_chat_format format,
                       const infs_chat_message *messages, size_t n_messages, unsigned flags,
                       infs_token *out, size_t cap, size_t *n_out);

/* model.h */
typedef struct infs_model infs_model;

#define INFS_MODEL_OPTIONS_VERSION 4

typedef struct infs_model_options {
	unsigned version;
	uint32_t n_threads;
	int device;
	uint64_t device_budget_bytes;
	uint32_t device_max_tokens;
	int int8_activations;
	int device_weights;
} infs_model_options;

int infs_model_options_init(infs_model_options *opts, unsigned version);
int infs_model_load(infs_model **out, const char *path, const infs_model_options *opts);
void infs_model_free(infs_model *model);
const infs_tokenizer *infs_model_tokenizer(const infs_model *model);

#define INFS_MODEL_INFO_VERSION 1

typedef struct infs_model_info {
	unsigned version;
	const char *architecture;
	uint32_t n_vocab;
	uint32_t n_embd;
	uint32_t n_layers;
	uint32_t n_heads;
	uint32_t n_kv_heads;
	uint32_t head_dim;
	uint32_t n_ff;
	uint32_t n_ctx_train;
	uint32_t sliding_window;
	uint64_t n_params;
} infs_model_info;

int infs_model_info_get(infs_model_info *out, const infs_model *model);
int infs_model_geometry(infs_geometry *out, const infs_model *model, infs_dtype kv_dtype);
int infs_model_identity(char **out, const infs_model *model, infs_dtype kv_dtype);

#define INFS_FORWARD_OPTIONS_VERSION 1

typedef struct infs_forward_options {
	unsigned version;
	int all_logits;
	infs_dtype kv_dtype;
	const infs_kv_layout *cache;
	const int32_t *block_table;
	size_t block_table_len;
	uint32_t n_past;
	int write_cache;
	const int32_t *seq_ids;
} infs_forward_options;

int infs_forward_options_init(infs_forward_options *opts, unsigned version);
int infs_model_forward(float *logits, void *k_out, void *v_out, const infs_model *model,
                       const int32_t *tokens, const int32_t *positions, uint32_t n_tokens,
                       const infs_forward_options *opts);

#define INFS_DEVICE_FORWARD_OPTIONS_VERSION 2

typedef struct infs_device_forward_options {
	unsigned version;
	int all_logits;
	const infs_kv_layout *cache;
	const int32_t *block_table;
	size_t block_table_len;
	uint32_t n_past;
	void *stream;
	uint32_t n_seqs;
	const int32_t *seq_starts;
	const int32_t *seq_n_past;
	size_t block_table_stride;
	uint32_t max_context;
} infs_device_forward_options;

int infs_device_forward_options_init(infs_device_forward_options *opts, unsigned version);
int infs_model_forward_device(float *logits, const infs_model *model, const int32_t *tokens,
                              const int32_t *positions, uint32_t n_tokens,
                              const infs_device_forward_options *opts);

/* embedder.h */
typedef struct infs_embedder infs_embedder;

#define INFS_EMBEDDER_OPTIONS_VERSION 1

typedef struct infs_embedder_options {
	unsigned version;
	uint32_t n_threads;
	int device;
	uint32_t max_seq_length;
} infs_embedder_options;

int infs_embedder_options_init(infs_embedder_options *opts, unsigned version);
int infs_embedder_load(infs_embedder **out, const char *path, const infs_embedder_options *opts);
void infs_embedder_free(infs_embedder *embedder);
uint32_t infs_embedder_dim(const infs_embedder *embedder);
uint32_t infs_embedder_max_seq_length(const infs_embedder *embedder);

#define INFS_EMBED_OPTIONS_VERSION 1

typedef struct infs_embed_options {
	unsigned version;
	const char *prompt;
} infs_embed_options;

int infs_embed_options_init(infs_embed_options *opts, unsigned version);
int infs_embed(float *out, const infs_embedder *embedder, const char *const *texts,
               size_t n_texts, const infs_embed_options *opts);

/* encode.h */
#define INFS_FACT_INPUT_VERSION 1

typedef struct infs_fact_input {
	unsigned version;
	unsigned flags;
	const char *text;
	const int32_t *tokens;
	uint32_t n_tokens;
	const char *embed_text;
	const float *embedding;
	const int32_t *context;
	uint32_t n_context;
	const char *metadata;
	uint64_t source_id;
	int64_t timestamp;
} infs_fact_input;

typedef int (*infs_progress_fn)(void *user, size_t done, size_t total);

#define INFS_ENCODE_OPTIONS_VERSION 1

typedef struct infs_encode_options {
	unsigned version;
	const int32_t *context;
	uint32_t n_context;
	const infs_embedder *embedder;
	infs_progress_fn progress;
	void *progress_user;
} infs_encode_options;

int infs_encode_options_init(infs_encode_options *opts, unsigned version);
int infs_fact_input_init(infs_fact_input *fact, unsigned version);

int infs_fact_encode(uint64_t *out_ids, infs_store *store, const char *ns,
               const infs_model *model, const infs_fact_input *facts, size_t n_facts,
               const infs_encode_options *opts);

/* engine.h */
typedef struct infs_engine infs_engine;

#define INFS_ENGINE_OPTIONS_VERSION 2

typedef struct infs_engine_options {
	unsigned version;
	uint32_t n_ctx;
	uint32_t block_size;
	infs_dtype kv_dtype;
	const char *system;
	const char *memory_intro;
	int device;
	uint32_t max_seqs;
	uint32_t n_blocks;
} infs_engine_options;

int infs_engine_options_init(infs_engine_options *opts, unsigned version);

int infs_engine_create(infs_engine **out, const infs_model *model, const infs_engine_options *opts);
void infs_engine_free(infs_engine *engine);

int infs_engine_header(const int32_t **out_tokens, uint32_t *out_n, const infs_engine *engine);

int infs_fact_render(char **out, const char *text, const char *metadata);

int infs_engine_prepare(infs_engine *engine, infs_store *store);

#define INFS_ENGINE_QUESTION_ROOM 64

int infs_engine_fact_limit(uint32_t *out_tokens, const infs_engine *engine);

int infs_engine_fact_check(uint32_t *out_tokens, const infs_engine *engine, const char *text,
               const char *metadata);

void infs_engine_reset(infs_engine *engine);

uint32_t infs_engine_n_past(const infs_engine *engine);

int infs_engine_inject(infs_engine *engine, infs_store *store, const char *ns,
               const uint64_t *ids, size_t n);

int infs_engine_prefill(infs_engine *engine, const int32_t *tokens, uint32_t n);

const float *infs_engine_logits(const infs_engine *engine);

#define INFS_GENERATE_OPTIONS_VERSION 1

typedef struct infs_generate_options {
	unsigned version;
	uint32_t max_tokens;
	float temperature;
	float top_p;
	uint64_t seed;
	const char *stop;
} infs_generate_options;

int infs_generate_options_init(infs_generate_options *opts, unsigned version);

int infs_engine_generate(char **out, uint32_t *out_n_tokens, infs_engine *engine,
               const infs_generate_options *opts);

#define INFS_ASK_OPTIONS_VERSION 4

typedef struct infs_ask_options {
	unsigned version;
	uint32_t k;
	int full_recompute;
	infs_metric metric;
	const uint64_t *fact_ids;
	size_t n_fact_ids;
	infs_generate_options generate;
	float recompute_ratio;
	uint32_t check_layer;
	int ignore_eos;
	uint32_t prefix_tokens;
	float query_weight;
	float fact_temperature;
	float fact_scale;
} infs_ask_options;

int infs_ask_options_init(infs_ask_options *opts, unsigned version);

typedef struct infs_answer {
	char *text;
	uint32_t n_tokens;
	uint32_t n_prompt;
	uint32_t n_prefilled;
	size_t n_facts;
	uint64_t *fact_ids;
	float *scores;
	float *first_logits;
	uint32_t n_vocab;
	double embed_ms, retrieve_ms, inject_ms, prefill_ms, ttft_ms, decode_ms;
	uint32_t n_recomputable;
	uint32_t n_recomputed;
	size_t n_left_out;
} infs_answer;

int infs_engine_ask(infs_answer **out, infs_engine *engine, infs_store *store,
               const infs_embedder *embedder, const char *ns, const char *question,
               const infs_ask_options *opts);
void infs_answer_free(infs_answer *answer);

int infs_engine_ask_batch(infs_answer **out, infs_engine *engine, infs_store *store,
               const infs_embedder *embedder, const char *ns,
               const char *const *questions, size_t n, const infs_ask_options *opts);

/* The CPU forward pass, as the engine and fact encoding use it: new tokens
 * at explicit positions attend to earlier tokens held in a paged KV cache
 * and to each other. */
#ifndef INFS_FORWARD_H
#define INFS_FORWARD_H

#include <string.h>

#include "model/model.h"
#include "util/pool.h"

/* Attention calibration for injected facts (infs_ask_options.
 * fact_temperature, fact_scale): a token at a position >= hi scores the
 * keys at positions [lo, hi) as score * inv_temp + log_scale (natural
 * log); every other score is left alone. */
typedef struct infs__calib {
	uint32_t lo, hi;
	float inv_temp, log_scale;
} infs__calib;

/* c as the device kernels take it: lo, hi, then the bits of inv_temp and
 * of the log scale in log2 units (their scores are). */
static inline void infs__calib_pack(int32_t out[4], const infs__calib *c)
{
	const float l2s = c->log_scale * 1.4426950408889634f;
	out[0] = (int32_t)c->lo;
	out[1] = (int32_t)c->hi;
	memcpy(&out[2], &c->inv_temp, sizeof(float));
	memcpy(&out[3], &l2s, sizeof(float));
}

/* Earlier tokens in a paged cache (see infs_forward_options). */
typedef struct infs__paged_kv {
	const infs_kv_layout *cache;
	const int32_t *block_table;
	size_t block_table_len;
	uint32_t n_past;
	int write;
} infs__paged_kv;

/* Several sequences in one call, each over its own blocks of one paged
 * cache: the host engine's batched steps (engine/host_batch.c). */
typedef struct infs__seqs {
	uint32_t n;
	const int32_t *starts;      /* n + 1: sequence s is tokens [starts[s], starts[s + 1]) */
	const int32_t *n_past;      /* n: sequence s attends to its cache positions [0, n_past[s])
	                               and its tokens take positions n_past[s].. */
	const int32_t *tables;      /* sequence s's block table: tables[s * stride ..], stride entries */
	size_t stride;
} infs__seqs;

typedef struct infs__forward_args {
	const int32_t *tokens;
	const int32_t *positions;   /* NULL: 0, 1, ... */
	uint32_t n_tokens;
	float *logits;              /* NULL, or n_vocab (all_logits: n_tokens * n_vocab) floats */
	int all_logits;
	void *k_out, *v_out;        /* NULL, or pre-RoPE [n_layers][n_tokens][n_kv_heads][head_dim] */
	infs_dtype kv_dtype;
	const int32_t *seq;         /* NULL, or a sequence id per token: tokens attend only
	                               within their sequence and to the past, which they
	                               share (past->write unset) */
	const infs__paged_kv *past; /* NULL: none */
	infs__pool *pool;           /* NULL: a pool of the model's thread count for this call */
	const infs__calib *calib;   /* NULL: none */
	/* NULL, or several sequences: past->cache is their cache (past's
	 * block_table and n_past unused), positions and seq are NULL, no K/V
	 * out, logits get one row per sequence, its last token's, and calib is
	 * NULL or one per sequence (lo == hi: none). */
	const infs__seqs *seqs;
} infs__forward_args;

/* Checks every argument, then runs. On error nothing has been written. */
int infs__forward(const infs_model *m, const infs__forward_args *a);

/* Selective recompute of tokens already in a paged cache (accuracy
 * recovery, docs/end-to-end.md): the tokens at positions[0..n_tokens), all
 * below past->n_past and held there with injected K/V, run again in place:
 * at every layer their new K/V overwrite the cache's and each attends to
 * the cache as it then stands (positions up to its own). Through layer
 * check_layer every token runs; there the n_keep with the highest score go
 * on through the later layers, the others keep their injected K/V there.
 * The score is the squared distance of the row's new rotated keys from the
 * injected ones (over the KV heads); with query_weight w > 0 it is
 * (1 - w) * dev / max dev + w * mass / max mass, where mass is the
 * attention probability that the n_query question tokens give the row's
 * position at check_layer, summed over tokens and heads. Rows with
 * forced[i] set score above all others (n_keep must cover them); ties: the
 * lower position. Deterministic. The question tokens, query[0..n_query),
 * take positions past->n_past.. and run through layers 0..check_layer only,
 * their K/V written there (the question's prefill overwrites them).
 * past->write must be set. The selection is infs__recompute_select
 * (model/recompute_select.h), whichever path ran the layers. */
typedef struct infs__recompute_args {
	const int32_t *tokens, *positions;
	uint32_t n_tokens;
	uint32_t check_layer, n_keep;
	const uint8_t *forced;      /* NULL: none */
	const int32_t *query;       /* with query_weight > 0 */
	uint32_t n_query;
	float query_weight;         /* 0..1 */
	const infs__paged_kv *past;
	infs__pool *pool;           /* NULL: a pool of the model's thread count for this call */
	/* What the check layer saw, for tests (each NULL, or written when a
	 * selection was made there): kept (n_keep) the rows that went on,
	 * increasing; dev (n_tokens) each row's deviation; mass (n_tokens,
	 * with a question) the question's attention mass on each row. */
	uint32_t *kept;
	float *dev;
	double *mass;
	/* NULL, or the calibration of the question's attention when its
	 * prefill is fused in (infs__recompute_prefill_device); the rows,
	 * below calib->hi, are never calibrated. */
	const infs__calib *calib;
} infs__recompute_args;

int infs__recompute(const infs_model *m, const infs__recompute_args *a);

/* The same on the model's device (model->dev): every array of a is host
 * memory except the cache (past->cache on the model's device) and its
 * block table (past->block_table, device memory); pool is unused. Runs on
 * stream and returns when the cache is written. The rows and the question
 * run together through the check layer, so n_tokens + n_query (with
 * query_weight > 0) must be within the model's device_max_tokens. */
int infs__recompute_device(const infs_model *m, const infs__recompute_args *a, void *stream);

/* The same with the question's prefill fused in, one pass over the
 * weights (the device engine's recovery): the question's tokens
 * query[0..n_query), whatever query_weight, run with the rows through
 * every layer at positions past->n_past.., never subject to the selection
 * (past the check layer the kept rows and the whole question go on), their
 * K/V written for good; the last one's logits (n_vocab floats, device
 * memory) land in logits. At every layer the rows' new K/V are in the cache
 * before anything attends, so the cache and the logits are those of
 * infs__recompute_device followed by a prefill of the question at n_past.
 * n_tokens + n_query must be within device_max_tokens. */
int infs__recompute_prefill_device(const infs_model *m, const infs__recompute_args *a, float *logits, void *stream);

/* A device forward call (infs_model_forward_device) after its host-side
 * checks: cache is a copy of the caller's layout, on the model's device,
 * of the model's shape, every layer pointer set; for one sequence,
 * block_table_len covers n_past and, with positions NULL, the new
 * positions; n_tokens and n_seqs are within the workspace. */
typedef struct infs__device_forward {
	float *logits;
	const int32_t *tokens;
	const int32_t *positions;   /* NULL: n_past, n_past + 1, ... */
	uint32_t n_tokens;
	int all_logits;
	const infs_kv_layout *cache;
	const int32_t *block_table;
	size_t block_table_len;
	uint32_t n_past;
	void *stream;
	uint32_t n_seqs;            /* 0: one sequence (n_past); else seq_starts and seq_n_past */
	const int32_t *seq_starts, *seq_n_past;
	size_t table_stride;
	uint32_t max_context;       /* with n_seqs: a bound on any sequence's n_past + tokens */
	/* Fact encoding (internal callers only): the new tokens' K and V stay
	 * out of the cache (every sequence may then share the context's table),
	 * their pre-RoPE K and V go to k_out/v_out (device, of out_dtype) when
	 * set, each sequence's as the store keeps a fact's, [n_layers][its
	 * tokens][n_kv_heads * head_dim], from row n_layers * its start; and
	 * logits may be NULL (none computed). */
	int no_cache_write;
	void *k_out, *v_out;
	infs_dtype out_dtype;
	/* NULL, or device memory: per sequence the attention's calibration,
	 * {lo, hi, inv_temp, log2_scale} as infs_k_attn_params.calib has it. */
	const int32_t *calib;
} infs__device_forward;

/* A layer's past in a paged f16 cache whose slots hold a position's heads
 * as one row (stride_head head_dim, stride_dim 1), read where it lies. */
typedef struct infs__attn_past {
	const uint16_t *k, *v;      /* the layer's K and V caches */
	const int32_t *table;       /* position / block_size -> block */
	uint32_t block_size;
	size_t stride_block, stride_slot; /* in elements */
} infs__attn_past;

/* Attention of one layer for n new tokens. q [n][n_heads][head_dim] and
 * k/v [n_ctx][n_kv_heads][head_dim] already rotated, where rows
 * [0, n_ctx - n) are earlier tokens at positions 0.. and the rest are the new
 * tokens at pos[] (in_place: every row is a position 0.., the new tokens'
 * own among them). out [n][n_heads][head_dim]. */
typedef struct infs__attn_args {
	float *out;
	const float *q, *k, *v;
	const int32_t *pos;
	uint32_t n, n_ctx;
	uint32_t n_heads, n_kv_heads, head_dim;
	uint32_t sliding_window;
	const int32_t *seq;         /* NULL, or per new token: keys of another sequence are masked */
	float *scratch;             /* pool size * n_ctx floats */
	int in_place;
	const infs__calib *calib;   /* NULL: none */
	/* NULL, or where rows [0, n_ctx - n) are instead of k and v (not in
	 * place; infs__attention_few only). */
	const infs__attn_past *past;
} infs__attn_args;

void infs__attention(const infs__attn_args *a, infs__pool *pool);

/* The same, query by query in plain C: what infs__attention runs without
 * BLAS, and for a single query. */
void infs__attention_rows(const infs__attn_args *a, infs__pool *pool);

/* The same for up to 32 queries, by KV head and run of keys, with the AVX2
 * kernels where avx2 is nonzero and the CPU has them (else portable ones);
 * what infs__attention runs for so few. Nonzero (nothing done) for more
 * queries, a past in the cache in place, or when memory runs out. */
int infs__attention_few(const infs__attn_args *a, infs__pool *pool, int avx2);

#endif

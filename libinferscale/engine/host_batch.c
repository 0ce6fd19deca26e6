/* A host engine's block pool (infs_engine_options.max_seqs > 1 on the
 * host): what engine_batch.c's continuous batching steps over, in host
 * memory. A step is one CPU forward pass over every sequence's new tokens
 * (infs__forward with seqs), so a decode step of many sequences reads the
 * weights once instead of once per sequence. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_device.h"
#include "engine/host_batch.h"
#include "engine/kvcache.h"
#include "engine/sampling.h"
#include "model/forward.h"
#include "util/error.h"

/* Tokens one step takes: admitted prompts up to it are prefilled together,
 * a longer one in chunks of it. */
#define STEP_TOKENS 2048u

typedef struct host_pool {
	const infs_model *model;
	infs__kvcache cache;   /* n_blocks blocks; the scheduler's block ids index it directly */
	uint32_t seq_blocks, max_seqs, n_vocab;
	float *logits;         /* max_seqs rows, when a step asks only for the argmax */
	infs__pool *pool;
} host_pool;

static void host_close(infs__dengine *d)
{
	host_pool *h = (host_pool *)d;
	if (!h)
		return;
	infs__kvcache_free(&h->cache);
	infs__pool_free(h->pool);
	free(h->logits);
	free(h);
}

static int host_open(infs__dengine **out, const infs__dengine_config *c)
{
	const uint64_t tokens = (uint64_t)c->n_blocks * c->block_size;
	if (tokens > UINT32_MAX)
		return infs__error(INFS_ERANGE, "%u blocks of %u tokens are above 2^32 positions", c->n_blocks,
		                   c->block_size);
	host_pool *h = calloc(1, sizeof *h);
	if (!h)
		return infs__error(INFS_ENOMEM, "out of memory for the block pool");
	h->model = c->model;
	h->seq_blocks = c->seq_blocks;
	h->max_seqs = c->max_seqs;
	h->n_vocab = c->n_vocab;
	/* The blocks are zeroed pages the system maps as they are first
	 * written: the pool's memory grows with the sequences it holds at once. */
	int rc = infs__kvcache_init(&h->cache, c->geom, c->kv_dtype, (uint32_t)tokens, c->block_size);
	if (!rc && !(h->logits = malloc((size_t)c->max_seqs * c->n_vocab * sizeof *h->logits)))
		rc = infs__error(INFS_ENOMEM, "out of memory for the block pool");
	if (!rc)
		rc = infs__pool_create(&h->pool, c->model->n_threads);
	if (rc) {
		host_close((infs__dengine *)h);
		return rc;
	}
	*out = (infs__dengine *)h;
	return INFS_OK;
}

static const infs_kv_layout *host_cache(const infs__dengine *d)
{
	return &((const host_pool *)d)->cache.layout;
}

static void *host_stream(const infs__dengine *d)
{
	(void)d;
	return NULL;
}

static uint32_t host_max_tokens(const infs__dengine *d)
{
	(void)d;
	return STEP_TOKENS;
}

/* Runs tokens[starts[s] .. starts[s + 1]) of each sequence s at n_past[s]..
 * over its blocks, writing their K/V there, its attention calibrated by
 * calib[s] (calib NULL: none): one forward pass. */
static int run(host_pool *h, uint32_t n_seqs, uint32_t n_tokens, const int32_t *tokens, const int32_t *starts,
               const int32_t *n_past, const int32_t *tables, const infs__calib *calib, float *logits)
{
	const infs__seqs sq = { n_seqs, starts, n_past, tables, h->seq_blocks };
	const infs__paged_kv past = { &h->cache.layout, NULL, 0, 0, 1 };
	const infs__forward_args a = { .tokens = tokens, .n_tokens = n_tokens, .logits = logits,
		                       .kv_dtype = INFS_DTYPE_F32, .past = &past, .pool = h->pool, .calib = calib,
		                       .seqs = &sq };
	return infs__forward(h->model, &a);
}

static int host_step(infs__dengine *d, const infs__dstep *st)
{
	host_pool *h = (host_pool *)d;
	float *logits = st->logits ? st->logits : h->logits;
	if (!st->logits && st->n_seqs > h->max_seqs)
		return infs__error(INFS_ERANGE, "a step of %u sequences in a pool of %u", st->n_seqs, h->max_seqs);
	int rc = run(h, st->n_seqs, st->n_tokens, st->tokens, st->starts, st->n_past, st->tables, st->calib, logits);
	for (uint32_t s = 0; !rc && st->argmax && s < st->n_seqs; s++)
		st->argmax[s] = infs__argmax(logits + (size_t)s * h->n_vocab, h->n_vocab);
	for (uint32_t s = 0; !rc && st->logit_rows && s < st->n_seqs; s++)
		memcpy(st->logit_rows[s], logits + (size_t)s * h->n_vocab, h->n_vocab * sizeof *logits);
	return rc;
}

static int host_sync(infs__dengine *d)
{
	(void)d;
	return INFS_OK;
}

/* Recovery in the sequence's blocks, then (logits set) its question's
 * prefill, calibrated by a->calib: what the device fuses into one pass,
 * here two. */
static int host_recompute(infs__dengine *d, const infs__recompute_args *a, const int32_t *table, uint32_t n_past,
                          float *logits)
{
	host_pool *h = (host_pool *)d;
	const infs__paged_kv past = { &h->cache.layout, table, h->seq_blocks, n_past, 1 };
	infs__recompute_args ra = *a;
	ra.past = &past;
	ra.pool = h->pool;
	int rc = infs__recompute(h->model, &ra);
	if (rc || !logits)
		return rc;
	const int32_t starts[2] = { 0, (int32_t)a->n_query }, at[1] = { (int32_t)n_past };
	return run(h, 1, a->n_query, a->query, starts, at, table, a->calib, logits);
}

const infs__dengine_ops infs__host_batch_ops = {
	.open = host_open,
	.close = host_close,
	.cache = host_cache,
	.stream = host_stream,
	.max_tokens = host_max_tokens,
	.step = host_step,
	.sync = host_sync,
	.recompute = host_recompute,
};

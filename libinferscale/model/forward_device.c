/* infs_model_forward_device: the checks the host can make (the model is on
 * a device, the cache is on the same one and has the model's shape, the
 * block table covers every position the host knows, the call fits the
 * workspace), then the device backend runs it. */
#include "backend/backend.h"
#include "util/dtype.h"
#include "util/error.h"
#include "util/options.h"
#include "model/forward.h"
#include "model/recompute_select.h"

static const char fn[] = "infs_model_forward_device";

INFS__DEFINE_INIT(infs_device_forward_options_init, infs_device_forward_options,
                  infs__sizes_device_forward_options, INFS_DEVICE_FORWARD_OPTIONS_INIT)

static int check_cache(const infs_model *m, const infs_kv_layout *kl, const char *who)
{
	const infs__model_config *c = &m->cfg;
	if (kl->device != m->device)
		return infs__error(INFS_EMISMATCH, "%s: the cache is on device %d, the model on device %d", who, kl->device,
		                   m->device);
	if (infs_dtype_size(kl->dtype) == 0)
		return infs__error(INFS_EINVAL, "%s: cache dtype %d is unknown", who, (int)kl->dtype);
	if (!infs__dtype_cache_ok(kl->dtype))
		return infs__error(INFS_EUNSUPPORTED, "%s: cache dtype %s", who, INFS__FP8_CACHE_MSG);
	if (kl->n_layers != c->n_layers || kl->n_kv_heads != c->n_kv_heads || kl->head_dim != c->head_dim)
		return infs__error(INFS_EMISMATCH, "%s: cache is %u layers x %u KV heads x %u, the model %u x %u x %u", who,
		                   kl->n_layers, kl->n_kv_heads, kl->head_dim, c->n_layers, c->n_kv_heads, c->head_dim);
	if (kl->block_size == 0 || kl->n_blocks == 0)
		return infs__error(INFS_EINVAL, "%s: cache has block_size %u, n_blocks %u", who, kl->block_size,
		                   kl->n_blocks);
	if (kl->stride_block < 0 || kl->stride_slot < 0 || kl->stride_head < 0 || kl->stride_dim < 0)
		return infs__error(INFS_EINVAL, "%s: cache strides must not be negative", who);
	if (!kl->k_layers || !kl->v_layers)
		return infs__error(INFS_EINVAL, "%s: cache k_layers or v_layers is NULL", who);
	for (uint32_t l = 0; l < c->n_layers; l++)
		if (!kl->k_layers[l] || !kl->v_layers[l])
			return infs__error(INFS_EINVAL, "%s: cache layer %u pointer is NULL", who, l);
	return INFS_OK;
}

/* A batch of sequences: their starts and n_past are device memory, checked
 * by the kernels; the host checks their count and the tables' spacing. */
static int batch(float *logits, const infs_model *m, const int32_t *tokens, const int32_t *positions,
                 uint32_t n_tokens, const infs_device_forward_options *o, const infs_kv_layout *cache)
{
	if (!o->seq_starts || !o->seq_n_past)
		return infs__error(INFS_EINVAL, "%s: n_seqs %u needs seq_starts and seq_n_past", fn, o->n_seqs);
	if (o->n_seqs > m->device_max_tokens)
		return infs__error(INFS_ERANGE, "%s: n_seqs %u is above %u (infs_model_options.device_max_tokens)", fn,
		                   o->n_seqs, m->device_max_tokens);
	if (o->block_table_len == 0)
		return infs__error(INFS_ERANGE, "%s: block_table_len is 0", fn);
	if (o->n_seqs > 1 && o->block_table_stride && o->block_table_stride < o->block_table_len)
		return infs__error(INFS_ERANGE, "%s: block_table_stride %zu is below block_table_len %zu: the tables overlap",
		                   fn, o->block_table_stride, o->block_table_len);
	const uint64_t capacity = (uint64_t)cache->n_blocks * cache->block_size;
	uint64_t max_context = o->max_context ? o->max_context : capacity;
	if (max_context > INT32_MAX)
		max_context = INT32_MAX;
	const infs__device_forward a = {
		.logits = logits, .tokens = tokens, .positions = positions, .n_tokens = n_tokens,
		.all_logits = o->all_logits, .cache = cache, .block_table = o->block_table,
		.block_table_len = o->block_table_len, .stream = o->stream, .n_seqs = o->n_seqs,
		.seq_starts = o->seq_starts, .seq_n_past = o->seq_n_past, .table_stride = o->block_table_stride,
		.max_context = (uint32_t)max_context,
	};
	return infs__cuda->model_forward(m, &a);
}

int infs_model_forward_device(float *logits, const infs_model *m, const int32_t *tokens, const int32_t *positions,
                              uint32_t n_tokens, const infs_device_forward_options *opts)
{
	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	int rc = INFS__TAKE(o, opts, infs__sizes_device_forward_options, fn, "options");
	if (rc)
		return rc;
	if (!m)
		return infs__error(INFS_EINVAL, "%s: model is NULL", fn);
	if (!m->dev)
		return infs__error(INFS_EINVAL, "%s: the model was loaded on the host (infs_model_options.device -1)", fn);
	if (!logits || !tokens)
		return infs__error(INFS_EINVAL, "%s: %s is NULL", fn, !logits ? "logits" : "tokens");
	if (n_tokens == 0 || n_tokens > m->device_max_tokens)
		return infs__error(INFS_ERANGE, "%s: n_tokens %u is not in 1..%u (infs_model_options.device_max_tokens)", fn,
		                   n_tokens, m->device_max_tokens);
	if (!o.cache)
		return infs__error(INFS_EINVAL, "%s: the cache is NULL", fn);
	infs_kv_layout cache = INFS_KV_LAYOUT_INIT;
	if ((rc = INFS__TAKE(cache, o.cache, infs__sizes_kv_layout, fn, "cache layout")))
		return rc;
	if ((rc = check_cache(m, &cache, fn)))
		return rc;
	if (!o.block_table)
		return infs__error(INFS_EINVAL, "%s: block_table is NULL", fn);
	if (o.n_seqs)
		return batch(logits, m, tokens, positions, n_tokens, &o, &cache);
	if (o.seq_starts || o.seq_n_past)
		return infs__error(INFS_EINVAL, "%s: seq_starts or seq_n_past set with n_seqs 0", fn);
	/* Positions up to here are known to the host; device positions are
	 * checked against the table by the kernels. */
	uint64_t known_end = (uint64_t)o.n_past + (positions ? 0 : n_tokens);
	if (known_end > INT32_MAX)
		return infs__error(INFS_ERANGE, "%s: n_past %u + %u tokens is above %d", fn, o.n_past, n_tokens, INT32_MAX);
	uint64_t need = (known_end + cache.block_size - 1) / cache.block_size;
	if (need > o.block_table_len)
		return infs__error(INFS_ERANGE, "%s: positions up to %llu need %llu block table entries, the table has %zu",
		                   fn, (unsigned long long)known_end, (unsigned long long)need, o.block_table_len);
	const infs__device_forward a = {
		.logits = logits, .tokens = tokens, .positions = positions, .n_tokens = n_tokens,
		.all_logits = o.all_logits, .cache = &cache, .block_table = o.block_table,
		.block_table_len = o.block_table_len, .n_past = o.n_past, .stream = o.stream,
	};
	return infs__cuda->model_forward(m, &a);
}

/* infs__recompute_device, and with logits set its fused prefill: the whole
 * question then runs, whatever query_weight. */
static int recompute(const infs_model *m, const infs__recompute_args *a, float *logits, void *stream,
                     const char *rfn)
{
	if (!m || !a)
		return infs__error(INFS_EINVAL, "%s: %s is NULL", rfn, !m ? "model" : "arguments");
	if (!m->dev)
		return infs__error(INFS_EINVAL, "%s: the model was loaded on the host (infs_model_options.device -1)", rfn);
	int rc = infs__recompute_check(m, a, rfn);
	if (rc)
		return rc;
	if (logits && (!a->query || !a->n_query))
		return infs__error(INFS_EINVAL, "%s: no question to prefill", rfn);
	for (uint32_t i = 0; logits && i < a->n_query; i++)
		if (a->query[i] < 0 || (uint32_t)a->query[i] >= m->cfg.n_vocab)
			return infs__error(INFS_ERANGE, "%s: question token %u is %d, not in 0..%u", rfn, i, a->query[i],
			                   m->cfg.n_vocab - 1);
	const infs__paged_kv *pk = a->past;
	const uint64_t nq = logits || a->query_weight > 0 ? a->n_query : 0, n = a->n_tokens + nq;
	/* The rows and the question run together (through the check layer, or
	 * fused, through every layer). */
	if (n > m->device_max_tokens)
		return infs__error(INFS_ERANGE, "%s: %u rows and %llu question tokens are above %u "
		                   "(infs_model_options.device_max_tokens)", rfn, a->n_tokens, (unsigned long long)nq,
		                   m->device_max_tokens);
	if ((rc = check_cache(m, pk->cache, rfn)))
		return rc;
	if (!pk->block_table)
		return infs__error(INFS_EINVAL, "%s: block_table is NULL", rfn);
	const uint64_t end = (uint64_t)pk->n_past + nq;
	if (end > INT32_MAX)
		return infs__error(INFS_ERANGE, "%s: n_past %u + %llu question tokens is above %d", rfn, pk->n_past,
		                   (unsigned long long)nq, INT32_MAX);
	const uint64_t need = (end + pk->cache->block_size - 1) / pk->cache->block_size;
	if (need > pk->block_table_len)
		return infs__error(INFS_ERANGE, "%s: positions up to %llu need %llu block table entries, the table has %zu",
		                   rfn, (unsigned long long)end, (unsigned long long)need, pk->block_table_len);
	return infs__cuda->model_recompute(m, a, logits, stream);
}

int infs__recompute_device(const infs_model *m, const infs__recompute_args *a, void *stream)
{
	return recompute(m, a, NULL, stream, "infs__recompute_device");
}

int infs__recompute_prefill_device(const infs_model *m, const infs__recompute_args *a, float *logits, void *stream)
{
	if (!logits)
		return infs__error(INFS_EINVAL, "infs__recompute_prefill_device: logits is NULL");
	return recompute(m, a, logits, stream, "infs__recompute_prefill_device");
}

/* Fact encoding on the device: the shared context runs once into a bf16
 * paged cache (vLLM layout, block size 16) made for the call; then the
 * facts run in batches, each fact a sequence of its own context and its
 * tokens at positions n_context.., all sharing the context's block table
 * and writing nothing to it; the forward writes their pre-RoPE K and V in
 * the store's kv dtype, a batch's come back to pinned host memory in one
 * copy, and each fact's own tokens' rows go to the caller. */
#include <stdlib.h>
#include <string.h>

#include "cuda/device_copy.h"
#include "model/forward.h"
#include "model/model.h"
#include "util/error.h"

#define BLOCK 16u

static const char fn[] = "infs_fact_encode";

struct infs__encode_ws {
	const infs_model *m;
	int prev;                   /* the caller's current device, restored by end */
	cudaStream_t stream;
	uint32_t n_blocks, cap;     /* the cache's blocks; its capacity in context tokens */
	infs_dtype kv_dtype;        /* of the K/V outputs */
	infs_kv_layout cache;
	void **layers;              /* k_layers then v_layers */
	uint16_t *kv;               /* the cache */
	int32_t *d_table, *d_tokens, *d_starts, *d_n_past;
	char *d_out;                /* a batch's K then V, [n_layers][n][row] each */
	char *h_out;                /* its pinned host copy */
	int32_t *h_table, *h_tokens, *h_starts, *h_n_past;
};

void infs__device_encode_end(infs__encode_ws *w)
{
	if (!w)
		return;
	if (w->stream)
		cudaStreamDestroy(w->stream);
	cudaFree(w->kv);
	cudaFree(w->d_table);
	cudaFree(w->d_tokens);
	cudaFree(w->d_starts);
	cudaFree(w->d_n_past);
	cudaFree(w->d_out);
	cudaFreeHost(w->h_out);
	free(w->layers);
	free(w->h_table);
	free(w->h_tokens);
	free(w->h_starts);
	free(w->h_n_past);
	infs__device_restore(w->prev);
	free(w);
}

int infs__device_encode_begin(infs__encode_ws **out, const infs_model *m, uint32_t n_context, infs_dtype kv_dtype)
{
	const infs__model_config *g = &m->cfg;
	const uint32_t T = m->device_max_tokens;
	const size_t row = (size_t)g->n_kv_heads * g->head_dim;
	infs__encode_ws *w = calloc(1, sizeof *w);
	if (!w)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	int rc = infs__device_enter(&w->prev, m->device, fn);
	if (rc) {
		free(w);
		return rc;
	}
	w->m = m;
	w->kv_dtype = kv_dtype;
	/* At least one block: a forward call needs a table even without a
	 * shared context. */
	w->n_blocks = n_context ? (n_context + BLOCK - 1) / BLOCK : 1;
	w->cap = w->n_blocks * BLOCK;
	const size_t half = (size_t)w->n_blocks * BLOCK * row; /* one layer's K (or V) elements */
	const size_t out_bytes = 2 * (size_t)g->n_layers * T * row * infs_dtype_size(kv_dtype);
	w->layers = malloc(2 * g->n_layers * sizeof *w->layers);
	w->h_table = malloc(w->n_blocks * sizeof *w->h_table);
	w->h_tokens = malloc((size_t)T * sizeof *w->h_tokens);
	w->h_starts = malloc(((size_t)T + 1) * sizeof *w->h_starts);
	w->h_n_past = malloc((size_t)T * sizeof *w->h_n_past);
	if (!w->layers || !w->h_table || !w->h_tokens || !w->h_starts || !w->h_n_past) {
		infs__device_encode_end(w);
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	}
	cudaError_t err;
	const char *what = NULL;
	if ((err = cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking)) != cudaSuccess)
		what = "creating a stream";
	else if ((err = cudaMalloc((void **)&w->kv, 2 * g->n_layers * half * sizeof *w->kv)) != cudaSuccess)
		what = "allocating the context's cache";
	else if ((err = cudaMemset(w->kv, 0, 2 * g->n_layers * half * sizeof *w->kv)) != cudaSuccess)
		what = "zeroing the context's cache"; /* slots past the context may be read masked: no NaN there */
	else if ((err = cudaMalloc((void **)&w->d_table, w->n_blocks * sizeof *w->d_table)) != cudaSuccess ||
	         (err = cudaMalloc((void **)&w->d_tokens, (size_t)T * sizeof *w->d_tokens)) != cudaSuccess ||
	         (err = cudaMalloc((void **)&w->d_starts, ((size_t)T + 1) * sizeof *w->d_starts)) != cudaSuccess ||
	         (err = cudaMalloc((void **)&w->d_n_past, (size_t)T * sizeof *w->d_n_past)) != cudaSuccess)
		what = "allocating the token buffers";
	else if ((err = cudaMalloc((void **)&w->d_out, out_bytes)) != cudaSuccess)
		what = "allocating the K/V outputs";
	else if ((err = cudaMallocHost((void **)&w->h_out, out_bytes)) != cudaSuccess)
		what = "allocating pinned host memory for the K/V outputs";
	if (what) {
		rc = infs__cuda_error(err, fn, what);
		infs__device_encode_end(w);
		return rc;
	}
	/* The table is the blocks in order. */
	for (uint32_t b = 0; b < w->n_blocks; b++)
		w->h_table[b] = (int32_t)b;
	err = cudaMemcpy(w->d_table, w->h_table, w->n_blocks * sizeof *w->h_table, cudaMemcpyHostToDevice);
	if (err != cudaSuccess) {
		rc = infs__cuda_error(err, fn, "writing the block table");
		infs__device_encode_end(w);
		return rc;
	}
	for (uint32_t l = 0; l < g->n_layers; l++) {
		w->layers[l] = w->kv + 2 * l * half;
		w->layers[g->n_layers + l] = w->kv + 2 * l * half + half;
	}
	infs_kv_layout kl = INFS_KV_LAYOUT_INIT;
	kl.device = m->device;
	kl.dtype = INFS_DTYPE_BF16;
	kl.n_layers = g->n_layers;
	kl.n_kv_heads = g->n_kv_heads;
	kl.head_dim = g->head_dim;
	kl.n_blocks = w->n_blocks;
	kl.block_size = BLOCK;
	kl.k_layers = w->layers;
	kl.v_layers = w->layers + g->n_layers;
	kl.stride_block = (int64_t)BLOCK * row;
	kl.stride_slot = (int64_t)row;
	kl.stride_head = g->head_dim;
	kl.stride_dim = 1;
	w->cache = kl;
	*out = w;
	return INFS_OK;
}

/* tokens[0..n) at positions n_past.. into the cache, T at a time. */
static int run_context(infs__encode_ws *w, const int32_t *tokens, uint32_t n)
{
	const uint32_t T = w->m->device_max_tokens;
	for (uint32_t at = 0; at < n; at += T) {
		const uint32_t k = n - at < T ? n - at : T;
		cudaError_t err = cudaMemcpyAsync(w->d_tokens, tokens + at, (size_t)k * 4, cudaMemcpyHostToDevice,
		                                  w->stream);
		if (err != cudaSuccess)
			return infs__cuda_error(err, fn, "copying the context's tokens");
		const infs__device_forward a = {
			.tokens = w->d_tokens, .n_tokens = k, .cache = &w->cache, .block_table = w->d_table,
			.block_table_len = w->n_blocks, .n_past = at, .stream = w->stream,
		};
		/* The stream orders the next piece's copy after this call. */
		int rc = infs__device_model_forward(w->m, &a);
		if (rc)
			return rc;
	}
	cudaError_t err = cudaStreamSynchronize(w->stream);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "running the encoding context");
}

/* The rows [from, from + n) of every layer of src ([n_layers][n_src][row]
 * of row_bytes) into dst ([n_layers][n][row]). */
static void take_rows(void *dst, const char *src, uint32_t n_layers, size_t n_src, size_t from, size_t n,
                      size_t row_bytes)
{
	for (uint32_t l = 0; l < n_layers; l++)
		memcpy((char *)dst + (size_t)l * n * row_bytes, src + ((size_t)l * n_src + from) * row_bytes, n * row_bytes);
}

/* Facts [i0, i1) as one forward call of n tokens, then each to job->fact. */
static int run_batch(infs__encode_ws *w, const infs__encode_job *job, size_t i0, size_t i1, uint32_t n,
                     void *k, void *v)
{
	const infs__model_config *g = &w->m->cfg;
	const size_t row = (size_t)g->n_kv_heads * g->head_dim * infs_dtype_size(job->kv_dtype);
	const size_t half = (size_t)g->n_layers * n * row; /* bytes */
	uint32_t at = 0, longest = 0;
	for (size_t i = i0; i < i1; i++) {
		const uint32_t s = (uint32_t)(i - i0), len = job->n_own[i] + job->n_tokens[i];
		w->h_starts[s] = (int32_t)at;
		w->h_n_past[s] = (int32_t)job->n_context;
		if (job->n_own[i])
			memcpy(w->h_tokens + at, job->own[i], (size_t)job->n_own[i] * 4);
		memcpy(w->h_tokens + at + job->n_own[i], job->tokens[i], (size_t)job->n_tokens[i] * 4);
		at += len;
		longest = len > longest ? len : longest;
	}
	const uint32_t n_seqs = (uint32_t)(i1 - i0);
	w->h_starts[n_seqs] = (int32_t)at;
	cudaError_t err = cudaMemcpyAsync(w->d_tokens, w->h_tokens, (size_t)n * 4, cudaMemcpyHostToDevice, w->stream);
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(w->d_starts, w->h_starts, ((size_t)n_seqs + 1) * 4, cudaMemcpyHostToDevice,
		                      w->stream);
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(w->d_n_past, w->h_n_past, (size_t)n_seqs * 4, cudaMemcpyHostToDevice, w->stream);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "copying the facts' tokens");
	const infs__device_forward a = {
		.tokens = w->d_tokens, .n_tokens = n, .cache = &w->cache, .block_table = w->d_table,
		.block_table_len = w->n_blocks, .stream = w->stream, .n_seqs = n_seqs, .seq_starts = w->d_starts,
		.seq_n_past = w->d_n_past, .table_stride = 0, .max_context = job->n_context + longest,
		.no_cache_write = 1, .k_out = w->d_out, .v_out = w->d_out + half, .out_dtype = job->kv_dtype,
	};
	int rc = infs__device_model_forward(w->m, &a);
	if (rc)
		return rc;
	err = cudaMemcpyAsync(w->h_out, w->d_out, 2 * half, cudaMemcpyDeviceToHost, w->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(w->stream);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "running the facts and copying their K/V back");
	/* The forward wrote each fact's K and V as the store keeps them,
	 * [n_layers][its tokens][row] from row n_layers * its start: a fact
	 * without its own context goes out as it lies, the others without
	 * their own context's rows. */
	for (size_t i = i0; i < i1 && !rc; i++) {
		const uint32_t len = job->n_own[i] + job->n_tokens[i];
		const char *fk = w->h_out + (size_t)w->h_starts[i - i0] * g->n_layers * row, *fv = fk + half;
		if (job->n_own[i]) {
			take_rows(k, fk, g->n_layers, len, job->n_own[i], job->n_tokens[i], row);
			take_rows(v, fv, g->n_layers, len, job->n_own[i], job->n_tokens[i], row);
			fk = k, fv = v;
		}
		rc = job->fact(job->user, i, fk, fv);
	}
	return rc;
}

int infs__device_encode_run(infs__encode_ws *w, const infs__encode_job *job)
{
	const infs_model *m = w->m;
	const uint32_t T = m->device_max_tokens;
	if (job->n_context > w->cap)
		return infs__error(INFS_ERANGE, "%s: a context of %u tokens, the cache holds %u", fn, job->n_context, w->cap);
	if (job->kv_dtype != w->kv_dtype)
		return infs__error(INFS_EINVAL, "%s: K/V of dtype %d, the buffers hold %d", fn, (int)job->kv_dtype,
		                   (int)w->kv_dtype);
	uint32_t max_n = 0;
	for (size_t i = 0; i < job->n_facts; i++) {
		const uint64_t len = (uint64_t)job->n_own[i] + job->n_tokens[i];
		if (len > T)
			return infs__error(INFS_ERANGE, "%s: fact %zu is %llu tokens with its own context, above the %u "
			                   "a device forward call takes (infs_model_options.device_max_tokens): the "
			                   "device encodes each fact in one call", fn, i, (unsigned long long)len, T);
		max_n = job->n_tokens[i] > max_n ? job->n_tokens[i] : max_n;
	}
	const size_t bytes = (size_t)m->cfg.n_layers * max_n * m->cfg.n_kv_heads * m->cfg.head_dim *
	                     infs_dtype_size(job->kv_dtype);
	void *k = malloc(bytes ? bytes : 1), *v = malloc(bytes ? bytes : 1);
	int rc = k && v ? INFS_OK : infs__error(INFS_ENOMEM, "%s: out of memory for %u tokens of K/V", fn, max_n);
	if (!rc)
		rc = run_context(w, job->context, job->n_context);
	for (size_t i0 = 0; !rc && i0 < job->n_facts;) {
		size_t i1 = i0;
		uint32_t n = 0;
		while (i1 < job->n_facts && n + job->n_own[i1] + job->n_tokens[i1] <= T)
			n += job->n_own[i1] + job->n_tokens[i1], i1++;
		rc = run_batch(w, job, i0, i1, n, k, v);
		i0 = i1;
	}
	free(k);
	free(v);
	return rc;
}

int infs__device_model_encode(const infs_model *m, const infs__encode_job *job)
{
	infs__encode_ws *w = NULL;
	int rc = infs__device_encode_begin(&w, m, job->n_context, job->kv_dtype);
	if (!rc)
		rc = infs__device_encode_run(w, job);
	infs__device_encode_end(w);
	return rc;
}

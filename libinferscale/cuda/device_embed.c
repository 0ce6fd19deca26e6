/* The embedder's BERT encoder on a device: its f32 weights (q|k|v fused)
 * and a workspace for max_tokens tokens in one allocation made at load, a
 * cuBLAS handle with its own workspace, and the forward pass: cuBLAS
 * SGEMMs in the default math mode (f32 FMA, no TF32) between the kernels
 * of kernels/embed_bert.cu. A call allocates nothing and waits for
 * nothing: the token ids go up as kernel arguments, and each call's work
 * waits, on the device, for the previous call's (an event), since every
 * call uses the one workspace. The caller (embed/embedder.c) has checked
 * every argument and serialises the calls.
 *
 * A question's embedding is some 50 small kernels whose launches cost more
 * than their work: the forward pass of a shape seen before (token count,
 * texts, longest text, pooling, output) is captured as a CUDA graph the
 * second time and replayed from then on. The graph reads the ids and
 * offsets from the workspace, where each call's own go first by kernel
 * arguments, so the replayed work is the eager work exactly. */
#include <cublas_v2.h>
#include <stdlib.h>

#include "cuda/carve.h"
#include "cuda/device_copy.h"
#include "cuda/device_embed.h"
#include "embed/bert.h"
#include "embed_kernels.h"
#include "util/error.h"

#define BLAS_WORKSPACE (32u << 20) /* what cuBLAS asks for on Hopper */
#define MAX_GRAPHS 64               /* shapes kept; a new one replaces the oldest */

/* A forward pass's shape: what its kernels and GEMMs take besides the
 * workspace. */
typedef struct shape {
	uint32_t n, n_seq, max_len;
	int pooling, normalize;
	float *out;
	cudaGraphExec_t exec;       /* NULL: seen once, not captured */
} shape;

typedef struct dev_layer {
	float *wqkv, *bqkv;          /* [3 dim][dim], [3 dim]: q, k, v */
	float *wo, *bo, *ln1_w, *ln1_b;
	float *w_up, *b_up, *w_down, *b_down, *ln2_w, *ln2_b;
} dev_layer;

struct infs__bert_dev {
	int device;
	infs__bert_config cfg;
	uint32_t max_tokens;
	cublasHandle_t blas;
	cudaStream_t stream;        /* bert_encode_host's */
	cudaEvent_t done;           /* recorded after each call's last use of the workspace */
	char *arena;                /* weights, then the workspace */
	uint64_t bytes;
	dev_layer *layers;
	float *word, *pos, *type, *ln_w, *ln_b;
	/* the workspace: h, q|k|v (also the output projections' result), the
	 * attention's output (also the pooled rows of bert_encode_host), the
	 * FFN's hidden layer; the offsets then the ids of a call */
	float *h, *qkv, *ctx, *up;
	uint32_t *offsets;          /* max_tokens + 1 */
	int32_t *ids;               /* max_tokens */
	void *blas_ws;
	shape graphs[MAX_GRAPHS];
	uint32_t n_graphs, next_out; /* next_out: the slot a new shape replaces when all are taken */
	uint64_t graph_runs;        /* forward passes replayed from a graph */
};

static const char load_fn[] = "infs_embedder_load";

_Static_assert((int)INFS__POOL_MEAN == INFS_K_POOL_MEAN && (int)INFS__POOL_CLS == INFS_K_POOL_CLS &&
                       (int)INFS__POOL_MAX == INFS_K_POOL_MAX &&
                       (int)INFS__POOL_MEAN_SQRT_LEN == INFS_K_POOL_MEAN_SQRT_LEN,
               "pooling modes are passed to the kernels as they are");

static void layout(struct infs__bert_dev *d, infs__carve *c)
{
	const infs__bert_config *g = &d->cfg;
	const uint64_t D = g->dim, F = g->n_ffn, T = d->max_tokens;
	for (uint32_t l = 0; l < g->n_layers; l++) {
		dev_layer *L = &d->layers[l];
		L->wqkv = infs__carve_take(c, 3 * D * D * 4);
		L->bqkv = infs__carve_take(c, 3 * D * 4);
		L->wo = infs__carve_take(c, D * D * 4);
		L->bo = infs__carve_take(c, D * 4);
		L->ln1_w = infs__carve_take(c, D * 4);
		L->ln1_b = infs__carve_take(c, D * 4);
		L->w_up = infs__carve_take(c, F * D * 4);
		L->b_up = infs__carve_take(c, F * 4);
		L->w_down = infs__carve_take(c, D * F * 4);
		L->b_down = infs__carve_take(c, D * 4);
		L->ln2_w = infs__carve_take(c, D * 4);
		L->ln2_b = infs__carve_take(c, D * 4);
	}
	d->word = infs__carve_take(c, (uint64_t)g->n_vocab * D * 4);
	d->pos = infs__carve_take(c, (uint64_t)g->n_pos * D * 4);
	d->type = infs__carve_take(c, D * 4); /* every token has type 0 */
	d->ln_w = infs__carve_take(c, D * 4);
	d->ln_b = infs__carve_take(c, D * 4);
	d->h = infs__carve_take(c, T * D * 4);
	d->qkv = infs__carve_take(c, T * 3 * D * 4);
	d->ctx = infs__carve_take(c, T * D * 4);
	d->up = infs__carve_take(c, T * F * 4);
	d->offsets = infs__carve_take(c, (T + 1) * 4);
	d->ids = infs__carve_take(c, T * 4);
	d->blas_ws = infs__carve_take(c, BLAS_WORKSPACE);
}

static int upload(void *dst, const float *src, uint64_t n)
{
	cudaError_t err = cudaMemcpy(dst, src, n * 4, cudaMemcpyHostToDevice);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, load_fn, "uploading the embedder's weights");
}

static int upload_all(struct infs__bert_dev *d, const infs__bert_weights *w)
{
	const infs__bert_config *g = &d->cfg;
	const uint64_t D = g->dim, F = g->n_ffn;
	int rc = INFS_OK;
	for (uint32_t l = 0; !rc && l < g->n_layers; l++) {
		const dev_layer *L = &d->layers[l];
		const infs__bert_layer *H = &w->layers[l];
		const struct {
			float *dst;
			const float *src;
			uint64_t n;
		} t[] = {
			{ L->wqkv, H->wq, D * D },     { L->wqkv + D * D, H->wk, D * D }, { L->wqkv + 2 * D * D, H->wv, D * D },
			{ L->bqkv, H->bq, D },         { L->bqkv + D, H->bk, D },         { L->bqkv + 2 * D, H->bv, D },
			{ L->wo, H->wo, D * D },       { L->bo, H->bo, D },               { L->ln1_w, H->ln1_w, D },
			{ L->ln1_b, H->ln1_b, D },     { L->w_up, H->w_up, F * D },       { L->b_up, H->b_up, F },
			{ L->w_down, H->w_down, D * F }, { L->b_down, H->b_down, D },     { L->ln2_w, H->ln2_w, D },
			{ L->ln2_b, H->ln2_b, D },
		};
		for (size_t i = 0; !rc && i < sizeof t / sizeof t[0]; i++)
			rc = upload(t[i].dst, t[i].src, t[i].n);
	}
	if (!rc)
		rc = upload(d->word, w->word, (uint64_t)g->n_vocab * D);
	if (!rc)
		rc = upload(d->pos, w->pos, (uint64_t)g->n_pos * D);
	if (!rc)
		rc = upload(d->type, w->type, D);
	if (!rc)
		rc = upload(d->ln_w, w->ln_w, D);
	if (!rc)
		rc = upload(d->ln_b, w->ln_b, D);
	return rc;
}

void infs__device_bert_release(struct infs__bert_dev *d)
{
	if (!d)
		return;
	int prev;
	if (infs__device_enter(&prev, d->device, "infs_embedder_free") == INFS_OK) {
		for (uint32_t i = 0; i < d->n_graphs; i++)
			if (d->graphs[i].exec)
				cudaGraphExecDestroy(d->graphs[i].exec);
		if (d->blas)
			cublasDestroy(d->blas);
		if (d->done)
			cudaEventDestroy(d->done);
		if (d->stream)
			cudaStreamDestroy(d->stream);
		cudaFree(d->arena);
		infs__device_restore(prev);
	}
	free(d->layers);
	free(d);
}

/* Lays out, allocates and fills the device copy; d->device and d->cfg set. */
static int create(struct infs__bert_dev *d, const infs__bert_weights *w)
{
	infs__carve count = { NULL, 0 };
	layout(d, &count);
	d->bytes = count.used;
	size_t free_b = 0, total_b = 0;
	cudaError_t err = cudaMemGetInfo(&free_b, &total_b);
	if (err != cudaSuccess)
		return infs__cuda_error(err, load_fn, "reading the device's free memory");
	if (d->bytes > free_b)
		return infs__error(INFS_EBUDGET,
		                   "%s: the embedder needs %llu bytes of device memory (f32 weights and a workspace for "
		                   "%u tokens), device %d has %llu free",
		                   load_fn, (unsigned long long)d->bytes, d->max_tokens, d->device,
		                   (unsigned long long)free_b);
	if ((err = cudaMalloc((void **)&d->arena, d->bytes)) != cudaSuccess)
		return infs__cuda_error(err, load_fn, "allocating the embedder's device memory");
	infs__carve c = { d->arena, 0 };
	layout(d, &c);
	int rc = upload_all(d, w);
	if (rc)
		return rc;
	if ((err = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)) != cudaSuccess)
		return infs__cuda_error(err, load_fn, "creating a stream");
	if ((err = cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming)) != cudaSuccess)
		return infs__cuda_error(err, load_fn, "creating an event");
	cublasStatus_t st = cublasCreate(&d->blas);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasSetMathMode(d->blas, CUBLAS_DEFAULT_MATH);
	if (st != CUBLAS_STATUS_SUCCESS)
		return infs__error(INFS_EDEVICE, "%s: cuBLAS error %d: %s", load_fn, (int)st, cublasGetStatusString(st));
	return INFS_OK;
}

int infs__device_bert_upload(struct infs__bert_dev **out, int device, const infs__bert_config *cfg,
                             const infs__bert_weights *w, uint32_t max_tokens)
{
	const uint32_t hd = cfg->dim / cfg->n_heads;
	if (hd > INFS_K_BERT_MAX_HEAD_DIM || cfg->n_heads > 65535)
		return infs__error(INFS_EUNSUPPORTED, "%s: head size %u (%u heads): the device kernels take up to %u "
		                   "(and up to 65535 heads)", load_fn, hd, cfg->n_heads, INFS_K_BERT_MAX_HEAD_DIM);
	int count = 0;
	cudaError_t err = cudaGetDeviceCount(&count);
	if (err != cudaSuccess)
		return infs__cuda_error(err, load_fn, "looking for CUDA devices");
	if (device >= count)
		return infs__error(INFS_EINVAL, "%s: device %d asked for, but there are %d CUDA devices", load_fn,
		                   device, count);
	struct infs__bert_dev *d = calloc(1, sizeof *d);
	dev_layer *layers = d ? calloc(cfg->n_layers, sizeof *layers) : NULL;
	if (!layers) {
		free(d);
		return infs__error(INFS_ENOMEM, "%s: out of memory", load_fn);
	}
	d->device = device;
	d->cfg = *cfg;
	d->max_tokens = max_tokens;
	d->layers = layers;
	int prev, rc = infs__device_enter(&prev, device, load_fn);
	if (rc) {
		free(layers);
		free(d);
		return rc;
	}
	rc = create(d, w);
	infs__device_restore(prev);
	if (rc) {
		infs__device_bert_release(d);
		return rc;
	}
	*out = d;
	return INFS_OK;
}

/* y[n][out] = x[n][in] W[out][in]^T (nn.Linear without its bias), f32. */
static cublasStatus_t sgemm(cublasHandle_t h, float *y, const float *x, const float *w, uint32_t n, uint32_t in,
                            uint32_t out)
{
	const float one = 1.0f, zero = 0.0f;
	return cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n, (int)in, &one, w, (int)in, x, (int)in, &zero,
	                   y, (int)out);
}

/* Queues the forward pass of shape k over the ids and offsets in the
 * workspace on s: embeddings, the layers, the pooled rows to k->out. */
static int queue_body(struct infs__bert_dev *d, const shape *k, cudaStream_t s, const char *fn)
{
	const infs__bert_config *g = &d->cfg;
	const uint32_t n = k->n, n_seq = k->n_seq, D = g->dim, F = g->n_ffn;
	float *tmp = d->qkv; /* q|k|v are dead once attention has run */
	cudaError_t err = cudaSuccess;
	cublasStatus_t st = cublasSetStream(d->blas, s);
	/* after cublasSetStream, which puts back cuBLAS's own workspace pool */
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasSetWorkspace(d->blas, d->blas_ws, BLAS_WORKSPACE);
	if (st == CUBLAS_STATUS_SUCCESS)
		err = infs_k_bert_embed(d->h, d->ids, d->offsets, n_seq, n, d->word, d->pos, d->type, d->ln_w, d->ln_b, D,
		                        g->n_vocab, g->ln_eps, s);
	for (uint32_t l = 0; l < g->n_layers && err == cudaSuccess && st == CUBLAS_STATUS_SUCCESS; l++) {
		const dev_layer *L = &d->layers[l];
		st = sgemm(d->blas, d->qkv, d->h, L->wqkv, n, D, 3 * D);
		if (st == CUBLAS_STATUS_SUCCESS)
			err = infs_k_bert_attention(d->ctx, d->qkv, L->bqkv, d->offsets, n_seq, k->max_len, D, g->n_heads, s);
		if (err == cudaSuccess && st == CUBLAS_STATUS_SUCCESS)
			st = sgemm(d->blas, tmp, d->ctx, L->wo, n, D, D);
		if (err == cudaSuccess && st == CUBLAS_STATUS_SUCCESS)
			err = infs_k_bert_residual_norm(d->h, tmp, L->bo, L->ln1_w, L->ln1_b, n, D, g->ln_eps, s);
		if (err == cudaSuccess && st == CUBLAS_STATUS_SUCCESS)
			st = sgemm(d->blas, d->up, d->h, L->w_up, n, D, F);
		if (err == cudaSuccess && st == CUBLAS_STATUS_SUCCESS)
			err = infs_k_bert_gelu(d->up, L->b_up, n, F, s);
		if (err == cudaSuccess && st == CUBLAS_STATUS_SUCCESS)
			st = sgemm(d->blas, tmp, d->up, L->w_down, n, F, D);
		if (err == cudaSuccess && st == CUBLAS_STATUS_SUCCESS)
			err = infs_k_bert_residual_norm(d->h, tmp, L->b_down, L->ln2_w, L->ln2_b, n, D, g->ln_eps, s);
	}
	if (err == cudaSuccess && st == CUBLAS_STATUS_SUCCESS)
		err = infs_k_bert_pool(k->out, d->h, d->offsets, n_seq, D, k->pooling, k->normalize, s);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "queueing the embedder's forward pass");
	if (st != CUBLAS_STATUS_SUCCESS)
		return infs__error(INFS_EDEVICE, "%s: cuBLAS error %d: %s", fn, (int)st, cublasGetStatusString(st));
	return INFS_OK;
}

/* The graph of shape k: found, or captured now on d's own stream when the
 * shape was seen once before; NULL (run eagerly) for a shape seen first. */
static int graph_of(cudaGraphExec_t *out, struct infs__bert_dev *d, const shape *k, const char *fn)
{
	*out = NULL;
	shape *g = NULL;
	for (uint32_t i = 0; i < d->n_graphs && !g; i++) {
		shape *c = &d->graphs[i];
		if (c->n == k->n && c->n_seq == k->n_seq && c->max_len == k->max_len && c->pooling == k->pooling &&
		    c->normalize == k->normalize && c->out == k->out)
			g = c;
	}
	if (g && g->exec) {
		*out = g->exec;
		return INFS_OK;
	}
	if (!g) { /* seen first: noted, in a free slot or the oldest one's */
		g = &d->graphs[d->n_graphs < MAX_GRAPHS ? d->n_graphs++ : d->next_out++ % MAX_GRAPHS];
		if (g->exec)
			cudaGraphExecDestroy(g->exec);
		*g = *k;
		g->exec = NULL;
		return INFS_OK;
	}
	cudaGraph_t graph = NULL;
	cudaError_t err = cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "capturing the embedder's forward pass");
	int rc = queue_body(d, k, d->stream, fn);
	err = cudaStreamEndCapture(d->stream, &graph);
	if (!rc && err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "capturing the embedder's forward pass");
	cudaGraphExec_t exec = NULL;
	if (!rc && (err = cudaGraphInstantiate(&exec, graph, 0)) != cudaSuccess)
		rc = infs__cuda_error(err, fn, "instantiating the embedder's graph");
	if (graph)
		cudaGraphDestroy(graph);
	if (!rc)
		*out = g->exec = exec;
	return rc;
}

/* Queues the encoder over the batch on s, the pooled rows to out (device),
 * after the previous call's work: the ids and offsets into the workspace,
 * then the forward pass, replayed from a graph when its shape has one. */
static int enqueue(struct infs__bert_dev *d, const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
                   int pooling, int normalize, float *out, cudaStream_t s, const char *fn)
{
	shape k = { offsets[n_seq], n_seq, 0, pooling, normalize, out, NULL };
	for (uint32_t i = 0; i < n_seq; i++)
		if (offsets[i + 1] - offsets[i] > k.max_len)
			k.max_len = offsets[i + 1] - offsets[i];
	cudaError_t err = cudaStreamWaitEvent(s, d->done, 0);
	if (err == cudaSuccess)
		err = infs_k_bert_put(d->offsets, offsets, (size_t)n_seq + 1, s);
	if (err == cudaSuccess)
		err = infs_k_bert_put(d->ids, ids, k.n, s);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "queueing the embedder's inputs");
	cudaGraphExec_t exec = NULL;
	int rc = graph_of(&exec, d, &k, fn);
	if (rc || !exec)
		return rc ? rc : queue_body(d, &k, s, fn);
	if ((err = cudaGraphLaunch(exec, s)) != cudaSuccess)
		return infs__cuda_error(err, fn, "launching the embedder's graph");
	d->graph_runs++;
	return INFS_OK;
}

uint64_t infs__device_bert_graph_runs(const struct infs__bert_dev *d)
{
	return d ? d->graph_runs : 0;
}

/* Records d->done on s after the call's work: the next call waits for it.
 * Recorded after a failed call too, for whatever it queued. */
static int record_done(struct infs__bert_dev *d, cudaStream_t s, int rc, const char *fn)
{
	cudaError_t err = cudaEventRecord(d->done, s);
	if (!rc && err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "recording the call's event");
	return rc;
}

int infs__device_bert_encode(struct infs__bert_dev *d, const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
                             int pooling, int normalize, float *out, void *stream)
{
	static const char fn[] = "infs__embed_device";
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	struct cudaPointerAttributes at;
	cudaError_t err = cudaPointerGetAttributes(&at, out);
	if (err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "reading out's attributes");
	else if ((at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged) || at.device != d->device)
		rc = infs__error(INFS_EINVAL, "%s: out is not memory of device %d", fn, d->device);
	if (!rc) {
		rc = enqueue(d, ids, offsets, n_seq, pooling, normalize, out, (cudaStream_t)stream, fn);
		rc = record_done(d, (cudaStream_t)stream, rc, fn);
	}
	infs__device_restore(prev);
	return rc;
}

int infs__device_bert_encode_host(struct infs__bert_dev *d, const int32_t *ids, const uint32_t *offsets,
                                  uint32_t n_seq, int pooling, int normalize, float *out)
{
	static const char fn[] = "infs_embed";
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	/* the pooled rows in ctx: n_seq <= n_tokens rows, ctx is dead by then */
	rc = enqueue(d, ids, offsets, n_seq, pooling, normalize, d->ctx, d->stream, fn);
	cudaError_t err = cudaSuccess;
	if (!rc)
		err = cudaMemcpyAsync(out, d->ctx, (size_t)n_seq * d->cfg.dim * sizeof *out, cudaMemcpyDeviceToHost,
		                      d->stream);
	if (!rc && err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "copying the embeddings to the host");
	rc = record_done(d, d->stream, rc, fn);
	err = cudaStreamSynchronize(d->stream);
	if (!rc && err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "running the embedder's forward pass");
	infs__device_restore(prev);
	return rc;
}

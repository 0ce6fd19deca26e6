/* The device side of a device engine: a pool of KV blocks in vLLM's layout,
 * a stream, pinned staging for each step's small inputs and outputs, and
 * the step itself: copies in, the model's forward over a batch of
 * sequences, greedy tokens on the device, copies out. A step is captured as
 * a CUDA graph the first or the second time its shape is seen, as the
 * caller asks (infs__dstep.graph), and replayed from then on: the graph
 * reads the same pinned buffers, so new values only need writing there.
 * MAX_GRAPHS shapes are kept; a new one replaces the oldest. A question's
 * device path (engine/ask_device.c) has buffers here too, fixed for the
 * engine's life: its step takes its position from them on the device. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cuda/device_copy.h"
#include "engine/engine_device.h"
#include "model/forward.h"
#include "model/model.h"
#include "ask_kernels.h"
#include "model_kernels.h"
#include "util/dtype.h"
#include "util/error.h"

/* 64 question lengths under both bounds of step_context, by the host path
 * and the device path (whose shapes are keyed by k too), and the decoding
 * steps of up to 32 sequences */
#define MAX_GRAPHS 256

static const char fn[] = "device engine";

typedef struct shape {
	uint32_t n_seqs, n_tokens;
	int logits, argmax, calib;
	uint32_t max_context;   /* the bound on the keys a row sees that the step is planned for */
	uint32_t ask;           /* 0, or a device path's k + 1 */
	cudaGraphExec_t exec;   /* NULL: seen once, not captured */
} shape;

/* The device path's buffers, device and pinned alike: hits, ids, the
 * scalars (count, next_pos, status), the blocks, the calibrations by
 * count; byte offsets into one allocation. */
typedef struct ask_layout {
	size_t hits, ids, scalars, table, by_count, bytes;
} ask_layout;

static ask_layout ask_layout_of(uint32_t seq_blocks)
{
	ask_layout l;
	l.hits = 0;
	l.ids = l.hits + INFS__ASK_K_MAX * sizeof(infs_hit);
	l.scalars = l.ids + INFS__ASK_K_MAX * sizeof(uint64_t);
	l.table = l.scalars + 4 * sizeof(uint32_t);
	l.by_count = l.table + ((size_t)seq_blocks + 3) / 4 * 4 * sizeof(int32_t);
	l.bytes = l.by_count + 4 * (INFS__ASK_K_MAX + 1) * sizeof(int32_t);
	return l;
}

struct infs__dengine {
	infs__dengine_config cfg;
	int device;
	cudaStream_t stream;
	char *pool;                 /* every layer's K blocks, then its V blocks */
	void **k_layers, **v_layers;
	infs_kv_layout layout;
	uint32_t max_tokens;
	/* device inputs and outputs of a step, and their pinned mirrors */
	int32_t *d_in, *h_in;       /* tokens | starts | n_past | tables | calibrations */
	float *d_logits, *h_logits; /* max_seqs rows */
	int32_t *d_argmax, *h_argmax;
	int32_t *d_table;           /* a sequence's blocks, for recovery */
	size_t in_elems;
	shape graphs[MAX_GRAPHS];
	uint32_t n_graphs, next_out; /* next_out: the slot a new shape replaces when all are taken */
	uint64_t graph_runs;         /* steps launched as a graph */
	/* a question's device path */
	ask_layout al;
	char *d_ask, *h_ask;
	float *d_query, *h_query;
	uint32_t query_cap;
	cudaEvent_t marks[4];
};

static void dclose(infs__dengine *d)
{
	if (!d)
		return;
	int prev;
	if (infs__device_enter(&prev, d->device, fn) == INFS_OK) {
		for (uint32_t i = 0; i < d->n_graphs; i++)
			if (d->graphs[i].exec)
				cudaGraphExecDestroy(d->graphs[i].exec);
		if (d->stream)
			cudaStreamDestroy(d->stream);
		cudaFree(d->pool);
		cudaFree(d->d_in);
		cudaFree(d->d_logits);
		cudaFree(d->d_argmax);
		cudaFree(d->d_table);
		cudaFree(d->d_ask);
		cudaFree(d->d_query);
		for (int i = 0; i < 4; i++)
			if (d->marks[i])
				cudaEventDestroy(d->marks[i]);
		cudaFreeHost(d->h_ask);
		cudaFreeHost(d->h_query);
		cudaFreeHost(d->h_in);
		cudaFreeHost(d->h_logits);
		cudaFreeHost(d->h_argmax);
		infs__device_restore(prev);
	}
	free(d->k_layers);
	free(d->v_layers);
	free(d);
}

static int dopen(infs__dengine **out, const infs__dengine_config *cfg)
{
	const infs_model *m = cfg->model;
	const infs_geometry *g = cfg->geom;
	infs__dengine *d = calloc(1, sizeof *d);
	if (!d)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	d->cfg = *cfg;
	d->device = m->device;
	d->max_tokens = m->device_max_tokens;
	d->k_layers = calloc(g->n_layers, sizeof *d->k_layers);
	d->v_layers = calloc(g->n_layers, sizeof *d->v_layers);
	if (!d->k_layers || !d->v_layers) {
		dclose(d);
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	}
	const size_t es = infs_dtype_size(cfg->kv_dtype), row = (size_t)g->n_kv_heads * g->head_dim;
	const size_t per = (size_t)cfg->n_blocks * cfg->block_size * row * es; /* bytes of K (or V) per layer */
	const size_t pool_bytes = 2 * (size_t)g->n_layers * per;
	d->in_elems = (size_t)d->max_tokens + 2 * (size_t)cfg->max_seqs + 1 + (size_t)cfg->max_seqs * cfg->seq_blocks +
	              4 * (size_t)cfg->max_seqs;
	const size_t logit_bytes = (size_t)cfg->max_seqs * cfg->n_vocab * sizeof(float);
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc) {
		dclose(d);
		return rc;
	}
	cudaError_t err = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
	const char *what = "creating its stream";
	if (err == cudaSuccess && (what = "allocating its KV pool", err = cudaMalloc((void **)&d->pool, pool_bytes)) == cudaSuccess)
		err = cudaMemset(d->pool, 0, pool_bytes);
	if (err == cudaSuccess) {
		what = "allocating its step buffers";
		err = cudaMalloc((void **)&d->d_in, d->in_elems * sizeof(int32_t));
	}
	if (err == cudaSuccess)
		err = cudaMalloc((void **)&d->d_logits, logit_bytes);
	if (err == cudaSuccess)
		err = cudaMalloc((void **)&d->d_argmax, cfg->max_seqs * sizeof(int32_t));
	if (err == cudaSuccess)
		err = cudaMalloc((void **)&d->d_table, cfg->seq_blocks * sizeof(int32_t));
	if (err == cudaSuccess)
		err = cudaHostAlloc((void **)&d->h_in, d->in_elems * sizeof(int32_t), cudaHostAllocDefault);
	if (err == cudaSuccess)
		err = cudaHostAlloc((void **)&d->h_logits, logit_bytes, cudaHostAllocDefault);
	if (err == cudaSuccess)
		err = cudaHostAlloc((void **)&d->h_argmax, cfg->max_seqs * sizeof(int32_t), cudaHostAllocDefault);
	d->al = ask_layout_of(cfg->seq_blocks);
	if (err == cudaSuccess)
		err = cudaMalloc((void **)&d->d_ask, d->al.bytes);
	if (err == cudaSuccess) /* hits past a count are copied back too */
		err = cudaMemset(d->d_ask, 0, d->al.bytes);
	if (err == cudaSuccess)
		err = cudaHostAlloc((void **)&d->h_ask, d->al.bytes, cudaHostAllocDefault);
	if (err == cudaSuccess)
		what = "creating its events";
	for (int i = 0; i < 4 && err == cudaSuccess; i++)
		err = cudaEventCreate(&d->marks[i]);
	infs__device_restore(prev);
	if (err != cudaSuccess) {
		rc = infs__cuda_error(err, fn, what);
		if (err == cudaErrorMemoryAllocation)
			rc = infs__error(INFS_EBUDGET, "%s: %s: %zu MiB of KV pool (%u blocks of %u tokens) and %zu MiB of "
			                 "buffers do not fit the device", fn, what, pool_bytes >> 20, cfg->n_blocks,
			                 cfg->block_size, logit_bytes >> 20);
		dclose(d);
		return rc;
	}
	for (uint32_t l = 0; l < g->n_layers; l++) {
		d->k_layers[l] = d->pool + 2 * l * per;
		d->v_layers[l] = d->pool + (2 * l + 1) * per;
	}
	infs_kv_layout l = INFS_KV_LAYOUT_INIT;
	l.device = d->device;
	l.dtype = cfg->kv_dtype;
	l.n_layers = g->n_layers;
	l.n_kv_heads = g->n_kv_heads;
	l.head_dim = g->head_dim;
	l.n_blocks = cfg->n_blocks;
	l.block_size = cfg->block_size;
	l.k_layers = d->k_layers;
	l.v_layers = d->v_layers;
	l.stride_block = (int64_t)cfg->block_size * (int64_t)row;
	l.stride_slot = (int64_t)row;
	l.stride_head = g->head_dim;
	l.stride_dim = 1;
	d->layout = l;
	*out = d;
	return INFS_OK;
}

static const infs_kv_layout *dcache(const infs__dengine *d)
{
	return &d->layout;
}

static void *dstream(const infs__dengine *d)
{
	return d->stream;
}

static uint32_t dmax_tokens(const infs__dengine *d)
{
	return d->max_tokens;
}

/* The work of a step of this shape, on the stream: in, forward, out. The
 * inputs are already in h_in. */
static int queue_step(infs__dengine *d, const shape *sh)
{
	const infs__dengine_config *c = &d->cfg;
	const uint32_t n = sh->n_tokens, ns = sh->n_seqs;
	int32_t *tokens = d->d_in, *starts = tokens + d->max_tokens, *n_past = starts + c->max_seqs + 1,
	        *tables = n_past + c->max_seqs;
	const size_t in_bytes = d->in_elems * sizeof(int32_t);
	int32_t *calib = sh->calib ? tables + (size_t)c->max_seqs * c->seq_blocks : NULL;
	cudaError_t err = cudaMemcpyAsync(d->d_in, d->h_in, in_bytes, cudaMemcpyHostToDevice, d->stream);
	if (err == cudaSuccess && sh->ask && sh->calib)
		err = cudaMemcpyAsync(d->d_ask + d->al.by_count, d->h_ask + d->al.by_count,
		                      (size_t)sh->ask * 4 * sizeof(int32_t), cudaMemcpyHostToDevice, d->stream);
	/* a device path's position and calibration: where its injection ended */
	if (err == cudaSuccess && sh->ask) {
		const uint32_t *sc = (const uint32_t *)(d->d_ask + d->al.scalars);
		err = infs_k_ask_past(n_past, calib, sc + 1, sc, (const int32_t *)(d->d_ask + d->al.by_count),
		                      sh->ask - 1, d->stream);
	}
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "copying a step's inputs");
	infs__device_forward a = {
		.logits = d->d_logits, .tokens = tokens, .n_tokens = n, .cache = &d->layout, .block_table = tables,
		.block_table_len = c->seq_blocks, .stream = d->stream, .n_seqs = ns, .seq_starts = starts,
		.seq_n_past = n_past, .table_stride = c->seq_blocks,
		.max_context = sh->max_context,
		.calib = calib,
	};
	int rc = infs__cuda->model_forward(c->model, &a);
	if (rc)
		return rc;
	if (sh->argmax && (err = infs_k_argmax(d->d_argmax, d->d_logits, ns, c->n_vocab, d->stream)) == cudaSuccess)
		err = cudaMemcpyAsync(d->h_argmax, d->d_argmax, ns * sizeof(int32_t), cudaMemcpyDeviceToHost, d->stream);
	if (err == cudaSuccess && sh->logits)
		err = cudaMemcpyAsync(d->h_logits, d->d_logits, (size_t)ns * c->n_vocab * sizeof(float),
		                      cudaMemcpyDeviceToHost, d->stream);
	/* a device path's hits, and what its retrieval and injection left */
	if (err == cudaSuccess && sh->ask)
		err = cudaMemcpyAsync(d->h_ask + d->al.hits, d->d_ask + d->al.hits, (size_t)(sh->ask - 1) * sizeof(infs_hit),
		                      cudaMemcpyDeviceToHost, d->stream);
	if (err == cudaSuccess && sh->ask)
		err = cudaMemcpyAsync(d->h_ask + d->al.scalars, d->d_ask + d->al.scalars, 3 * sizeof(uint32_t),
		                      cudaMemcpyDeviceToHost, d->stream);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "queueing a step's outputs");
}

/* The graph of this shape: found, or captured now when the shape was seen
 * before or the caller asks for a capture at first sight
 * (INFS__GRAPH_FIRST); NULL: run the step eagerly. Every step waits for its
 * stream, so no launch of a replaced graph is pending. */
static int graph_of(cudaGraphExec_t *out, infs__dengine *d, const shape *want, int when)
{
	*out = NULL;
	shape *s = NULL;
	for (uint32_t i = 0; i < d->n_graphs && !s; i++) {
		shape *g = &d->graphs[i];
		if (g->n_seqs == want->n_seqs && g->n_tokens == want->n_tokens && g->logits == want->logits &&
		    g->argmax == want->argmax && g->calib == want->calib && g->max_context == want->max_context &&
		    g->ask == want->ask)
			s = g;
	}
	if (s && s->exec) {
		*out = s->exec;
		return INFS_OK;
	}
	if (!s) { /* seen first: noted, in a free slot or the oldest one's */
		s = &d->graphs[d->n_graphs < MAX_GRAPHS ? d->n_graphs++ : d->next_out++ % MAX_GRAPHS];
		if (s->exec)
			cudaGraphExecDestroy(s->exec);
		*s = *want;
		s->exec = NULL;
		if (when != INFS__GRAPH_FIRST)
			return INFS_OK;
	}
	cudaGraph_t graph = NULL;
	cudaError_t err = cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "capturing a step");
	int rc = queue_step(d, want);
	err = cudaStreamEndCapture(d->stream, &graph);
	if (!rc && err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "capturing a step");
	cudaGraphExec_t exec = NULL;
	if (!rc && (err = cudaGraphInstantiate(&exec, graph, 0)) != cudaSuccess)
		rc = infs__cuda_error(err, fn, "instantiating a step's graph");
	if (graph)
		cudaGraphDestroy(graph);
	if (rc)
		return rc;
	s->exec = exec;
	*out = exec;
	return INFS_OK;
}

/* The bound on the keys a row of the step sees: the cache's reach, or
 * for the prompt of one sequence that sees at most INFS_K_ATTN_FEW_KEYS
 * keys (a question over few facts), that, so that its attention takes
 * blocks of few rows (infs_k_attn_block_rows). Two bounds, not the exact
 * one: each is a shape of its own, captured as a graph of its own. */
static uint32_t step_context(const infs__dengine_config *c, uint32_t n_seqs, uint32_t n_tokens, uint32_t n_past0)
{
	const uint32_t reach = c->seq_blocks * c->block_size;
	if (n_seqs != 1 || n_tokens == 1)
		return reach;
	const uint64_t keys = (uint64_t)n_past0 + n_tokens;
	return keys <= INFS_K_ATTN_FEW_KEYS && INFS_K_ATTN_FEW_KEYS < reach ? INFS_K_ATTN_FEW_KEYS : reach;
}

/* Runs a step of shape want, its inputs in h_in: as a graph when the
 * caller asks for one (graph_of), else eagerly; returns when it is done. */
static int run_shape(infs__dengine *d, const shape *want, int graph)
{
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	cudaGraphExec_t exec = NULL;
	if (graph != INFS__GRAPH_NONE)
		rc = graph_of(&exec, d, want, graph);
	cudaError_t err = cudaSuccess;
	if (!rc && exec) {
		if ((err = cudaGraphLaunch(exec, d->stream)) == cudaSuccess)
			d->graph_runs++;
	} else if (!rc) {
		rc = queue_step(d, want);
	}
	if (!rc && err == cudaSuccess)
		err = cudaStreamSynchronize(d->stream);
	infs__device_restore(prev);
	if (!rc && err != cudaSuccess)
		rc = infs__cuda_error(err, fn, "running a step");
	return rc;
}

/* A device path's step planned for a bound on the facts' positions whose
 * injection ended on the other side of the attention's few-keys bound
 * (step_context): run again planned for where it ended, as the host path
 * plans it, so that its K/V and logits are the host path's (its position
 * and calibration taken on the device again). */
static int replan(infs__dengine *d, const infs__dstep *st, const shape *want, int *rerun)
{
	const uint32_t *sc = (const uint32_t *)(d->h_ask + d->al.scalars);
	const uint32_t count = sc[0], end = sc[1];
	*rerun = 0;
	/* (past the plan's bound the caller falls back: nothing to run again) */
	if ((int32_t)sc[2] != INFS_OK || !count || end > (uint32_t)st->n_past[0] ||
	    step_context(&d->cfg, 1, st->n_tokens, end) == want->max_context)
		return INFS_OK;
	shape again = *want;
	again.max_context = step_context(&d->cfg, 1, st->n_tokens, end);
	*rerun = 1;
	return run_shape(d, &again, st->graph);
}

static int dstep(infs__dengine *d, const infs__dstep *st)
{
	const infs__dengine_config *c = &d->cfg;
	if (!st->n_seqs || st->n_seqs > c->max_seqs || !st->n_tokens || st->n_tokens > d->max_tokens)
		return infs__error(INFS_ERANGE, "%s: a step of %u sequences and %u tokens (at most %u and %u)", fn,
		                   st->n_seqs, st->n_tokens, c->max_seqs, d->max_tokens);
	const infs__dstep_ask *ask = st->ask;
	if (ask && (st->n_seqs != 1 || st->calib || !ask->k || ask->k > INFS__ASK_K_MAX))
		return infs__error(INFS_EINVAL, "%s: a device path's step of %u sequences, k %u (one sequence, k 1..%u, "
		                   "its calibration by count)", fn, st->n_seqs, ask->k, INFS__ASK_K_MAX);
	const uint32_t ns = st->n_seqs;
	int32_t *tokens = d->h_in, *starts = tokens + d->max_tokens, *n_past = starts + c->max_seqs + 1,
	        *tables = n_past + c->max_seqs;
	memcpy(tokens, st->tokens, st->n_tokens * sizeof *tokens);
	memcpy(starts, st->starts, (ns + 1) * sizeof *starts);
	memcpy(n_past, st->n_past, ns * sizeof *n_past);
	memcpy(tables, st->tables, (size_t)ns * c->seq_blocks * sizeof *tables);
	int32_t *calib = tables + (size_t)c->max_seqs * c->seq_blocks;
	for (uint32_t i = 0; st->calib && i < ns; i++)
		infs__calib_pack(calib + 4 * i, &st->calib[i]);
	if (ask && ask->calib_by_count)
		memcpy(d->h_ask + d->al.by_count, ask->calib_by_count, (size_t)(ask->k + 1) * 4 * sizeof(int32_t));
	const shape want = { ns, st->n_tokens, st->logits || st->logit_rows, st->argmax != NULL,
		             st->calib != NULL || (ask && ask->calib_by_count),
		             step_context(c, ns, st->n_tokens, (uint32_t)st->n_past[0]), ask ? ask->k + 1 : 0, NULL };
	int rerun = 0, rc = run_shape(d, &want, st->graph);
	if (!rc && ask)
		rc = replan(d, st, &want, &rerun);
	if (rc)
		return rc;
	if (st->logits)
		memcpy(st->logits, d->h_logits, (size_t)ns * c->n_vocab * sizeof(float));
	for (uint32_t i = 0; st->logit_rows && i < ns; i++)
		memcpy(st->logit_rows[i], d->h_logits + (size_t)i * c->n_vocab, c->n_vocab * sizeof(float));
	if (st->argmax)
		memcpy(st->argmax, d->h_argmax, ns * sizeof(int32_t));
	if (ask) {
		const uint32_t *sc = (const uint32_t *)(d->h_ask + d->al.scalars);
		memcpy(ask->hits, d->h_ask + d->al.hits, ask->k * sizeof(infs_hit));
		*ask->count = sc[0];
		*ask->next_pos = sc[1];
		*ask->status = (int32_t)sc[2];
		*ask->replanned = rerun;
	}
	return INFS_OK;
}

static int dsync(infs__dengine *d)
{
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	cudaError_t err = cudaStreamSynchronize(d->stream);
	infs__device_restore(prev);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "waiting for its stream");
}

static int drecompute(infs__dengine *d, const infs__recompute_args *a, const int32_t *table, uint32_t n_past,
                      float *logits)
{
	const infs__dengine_config *c = &d->cfg;
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	cudaError_t err = cudaMemcpyAsync(d->d_table, table, c->seq_blocks * sizeof *table, cudaMemcpyHostToDevice,
	                                  d->stream);
	infs__device_restore(prev);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "copying a block table");
	infs__paged_kv past = { &d->layout, d->d_table, c->seq_blocks, n_past, 1 };
	infs__recompute_args ra = *a;
	ra.past = &past;
	ra.pool = NULL;
	if (!logits)
		return infs__recompute_device(c->model, &ra, d->stream);
	/* The question's logits into the step's first row, then back. */
	rc = infs__recompute_prefill_device(c->model, &ra, d->d_logits, d->stream);
	if (rc || (rc = infs__device_enter(&prev, d->device, fn)))
		return rc;
	err = cudaMemcpyAsync(d->h_logits, d->d_logits, c->n_vocab * sizeof(float), cudaMemcpyDeviceToHost, d->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(d->stream);
	infs__device_restore(prev);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, "copying the question's logits");
	memcpy(logits, d->h_logits, c->n_vocab * sizeof(float));
	return INFS_OK;
}

static uint64_t dgraph_runs(const infs__dengine *d)
{
	return d->graph_runs;
}

/* The query buffers grown to dim floats: only between questions, when no
 * queued work reads them. */
static cudaError_t grow_query(infs__dengine *d, uint32_t dim)
{
	if (dim <= d->query_cap)
		return cudaSuccess;
	cudaFree(d->d_query);
	cudaFreeHost(d->h_query);
	d->d_query = d->h_query = NULL;
	d->query_cap = 0;
	cudaError_t err = cudaMalloc((void **)&d->d_query, dim * sizeof(float));
	if (err == cudaSuccess)
		err = cudaHostAlloc((void **)&d->h_query, dim * sizeof(float), cudaHostAllocDefault);
	if (err == cudaSuccess)
		d->query_cap = dim;
	return err;
}

static int dask_begin(infs__dengine *d, uint32_t dim, const float *host_query, const int32_t *table, infs__dask *out)
{
	const infs__dengine_config *c = &d->cfg;
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	/* the last question's work is done: every ask ends with a wait */
	cudaError_t err = grow_query(d, dim);
	const char *what = "allocating a query";
	if (err == cudaSuccess && host_query) {
		what = "copying a query";
		memcpy(d->h_query, host_query, dim * sizeof(float));
		err = cudaMemcpyAsync(d->d_query, d->h_query, dim * sizeof(float), cudaMemcpyHostToDevice, d->stream);
	}
	if (err == cudaSuccess) {
		what = "copying a block table";
		memcpy(d->h_ask + d->al.table, table, c->seq_blocks * sizeof(int32_t));
		err = cudaMemcpyAsync(d->d_ask + d->al.table, d->h_ask + d->al.table, c->seq_blocks * sizeof(int32_t),
		                      cudaMemcpyHostToDevice, d->stream);
	}
	if (err == cudaSuccess)
		err = cudaEventRecord(d->marks[0], d->stream);
	infs__device_restore(prev);
	if (err != cudaSuccess)
		return infs__cuda_error(err, fn, what);
	out->query = d->d_query;
	out->hits = (infs_hit *)(d->d_ask + d->al.hits);
	out->ids = (uint64_t *)(d->d_ask + d->al.ids);
	out->count = (uint32_t *)(d->d_ask + d->al.scalars);
	out->next_pos = out->count + 1;
	out->status = (int32_t *)(out->count + 2);
	out->table = (int32_t *)(d->d_ask + d->al.table);
	return INFS_OK;
}

static int dask_mark(infs__dengine *d, int i)
{
	if (i < 1 || i > 3)
		return infs__error(INFS_EINVAL, "%s: mark %d is not 1..3", fn, i);
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	cudaError_t err = cudaEventRecord(d->marks[i], d->stream);
	infs__device_restore(prev);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "marking a question's progress");
}

static int dask_order(infs__dengine *d, uint32_t k)
{
	if (!k || k > INFS__ASK_K_MAX)
		return infs__error(INFS_EINVAL, "%s: k %u is not 1..%u", fn, k, INFS__ASK_K_MAX);
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	cudaError_t err = infs_k_ask_order((uint64_t *)(d->d_ask + d->al.ids), d->d_ask + d->al.hits, sizeof(infs_hit),
	                                   (const uint32_t *)(d->d_ask + d->al.scalars), k, d->stream);
	infs__device_restore(prev);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "ordering a question's hits");
}

static int dask_times(infs__dengine *d, float ms[3])
{
	int prev, rc = infs__device_enter(&prev, d->device, fn);
	if (rc)
		return rc;
	cudaError_t err = cudaSuccess;
	for (int i = 1; i <= 3 && err == cudaSuccess; i++)
		err = cudaEventElapsedTime(&ms[i - 1], d->marks[0], d->marks[i]);
	infs__device_restore(prev);
	return err == cudaSuccess ? INFS_OK : infs__cuda_error(err, fn, "timing a question's device path");
}

const infs__dengine_ops infs__dengine_cuda = { dopen, dclose, dcache, dstream, dmax_tokens, dstep, dsync,
	                                       drecompute, dgraph_runs, dask_begin, dask_mark, dask_order,
	                                       dask_times };

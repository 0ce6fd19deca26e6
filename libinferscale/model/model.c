/* The model handle: loading weights from a Hugging Face directory
 * (config.json + safetensors) or a GGUF file: matrices in the GGUF's
 * quantized blocks where whole blocks make a row, else in f32; vectors in
 * f32. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "util/error.h"
#include "util/file.h"
#include "util/options.h"
#include "util/pool.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/qmatmul.h"
#include "model/quant.h"
#include "model/safetensors.h"
#include "text/tokenizer_impl.h"

/* One tensor as a checkpoint stores it, whatever the container. */
typedef struct src_tensor {
	uint32_t type;            /* ggml type id (safetensors floats mapped to F32/F16/BF16) */
	uint32_t n_dims;
	uint64_t shape[4];        /* row-major, outermost first */
	const void *data;
	size_t nbytes;
} src_tensor;

typedef struct loader {
	infs_model *m;
	const char *path;
	/* Finds name: 1 found, 0 absent, < 0 an error (message set). */
	int (*find)(struct loader *ld, const char *name, src_tensor *out);
	void *src;
	uint64_t hash;
} loader;

/* 64-bit hash of the raw weights, so that an identity changes whenever any
 * weight does. Word-wise multiply-xorshift: fast over ~100 MB. */
static uint64_t mix(uint64_t h, uint64_t w)
{
	h ^= w;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = mix(h, w);
	}
	uint64_t tail = 0;
	for (size_t k = 0; i < n; i++, k++)
		tail |= (uint64_t)p[i] << (8 * k);
	return mix(mix(h, tail), n);
}

/* Finds name and checks that it has the given shape (cols 0: a vector of
 * rows elements) and its bytes; feeds the identity hash. */
static int find_checked(loader *ld, src_tensor *t, const char *name, uint64_t rows, uint64_t cols)
{
	int found = ld->find(ld, name, t);
	if (found < 0)
		return found;
	if (!found)
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\" is missing", ld->path, name);
	int shape_ok = cols ? t->n_dims == 2 && t->shape[0] == rows && t->shape[1] == cols
	                    : t->n_dims == 1 && t->shape[0] == rows;
	if (!shape_ok) {
		char got[96] = "";
		for (uint32_t i = 0; i < t->n_dims && i < 4; i++)
			snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", i ? " x " : "",
			         (unsigned long long)t->shape[i]);
		if (cols)
			return infs__error(INFS_EFORMAT, "%s: tensor \"%s\" is [%s], the configuration says [%llu x %llu]",
			                   ld->path, name, got, (unsigned long long)rows, (unsigned long long)cols);
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\" is [%s], the configuration says [%llu]",
		                   ld->path, name, got, (unsigned long long)rows);
	}
	uint64_t n = cols ? rows * cols : rows;
	size_t need;
	int rc = infs__ggml_nbytes(&need, t->type, n);
	if (rc)
		return infs__error_wrap(rc, "%s: tensor \"%s\"", ld->path, name);
	if (need != t->nbytes)
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\" has %zu bytes, its shape needs %zu", ld->path,
		                   name, t->nbytes, need);
	ld->hash = hash_bytes(hash_bytes(ld->hash, name, strlen(name)), t->data, t->nbytes);
	ld->m->n_params += n;
	return INFS_OK;
}

/* Loads name as an f32 vector of rows elements. */
static int load(loader *ld, float **out, const char *name, uint64_t rows)
{
	src_tensor t;
	*out = NULL;
	int rc = find_checked(ld, &t, name, rows, 0);
	if (rc)
		return rc;
	float *f = malloc((size_t)rows * sizeof *f);
	if (!f)
		return infs__error(INFS_ENOMEM, "%s: out of memory for tensor \"%s\"", ld->path, name);
	infs__dequantize(f, t.data, t.type, (size_t)rows);
	ld->m->weight_bytes += (size_t)rows * sizeof *f;
	*out = f;
	return INFS_OK;
}

/* Loads name as a rows x cols matrix: quantized blocks as they are stored
 * (when whole blocks make a row), anything else in f32. */
static int load_mat(loader *ld, infs__wmat *out, const char *name, uint64_t rows, uint64_t cols)
{
	src_tensor t;
	out->data = NULL;
	int rc = find_checked(ld, &t, name, rows, cols);
	if (rc)
		return rc;
	const int keep = infs__wmat_keeps(t.type, cols);
	const size_t bytes = keep ? t.nbytes : (size_t)(rows * cols) * sizeof(float);
	void *p = malloc(bytes);
	if (!p)
		return infs__error(INFS_ENOMEM, "%s: out of memory for tensor \"%s\"", ld->path, name);
	if (keep)
		memcpy(p, t.data, bytes);
	else
		infs__dequantize(p, t.data, t.type, (size_t)(rows * cols));
	*out = (infs__wmat){ .type = keep ? t.type : INFS_GGML_F32, .rows = (uint32_t)rows, .cols = (uint32_t)cols,
		             .row_bytes = bytes / rows, .data = p };
	ld->m->weight_bytes += bytes;
	return INFS_OK;
}

/* Tensor names of the two conventions. */
typedef struct names {
	const char *embd, *out_norm, *output;
	const char *attn_norm, *ffn_norm, *q, *k, *v, *o, *q_norm, *k_norm, *gate, *up, *down;
	const char *weight, *bias;
} names;

static const names hf_names = {
	"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
	"model.layers.%u.input_layernorm", "model.layers.%u.post_attention_layernorm",
	"model.layers.%u.self_attn.q_proj", "model.layers.%u.self_attn.k_proj",
	"model.layers.%u.self_attn.v_proj", "model.layers.%u.self_attn.o_proj",
	"model.layers.%u.self_attn.q_norm", "model.layers.%u.self_attn.k_norm",
	"model.layers.%u.mlp.gate_proj", "model.layers.%u.mlp.up_proj", "model.layers.%u.mlp.down_proj",
	"weight", "bias",
};

static const names gguf_names = {
	"token_embd.weight", "output_norm.weight", "output.weight",
	"blk.%u.attn_norm", "blk.%u.ffn_norm", "blk.%u.attn_q", "blk.%u.attn_k", "blk.%u.attn_v",
	"blk.%u.attn_output", "blk.%u.attn_q_norm", "blk.%u.attn_k_norm", "blk.%u.ffn_gate",
	"blk.%u.ffn_up", "blk.%u.ffn_down", "weight", "bias",
};

static void layer_name(char *name, size_t size, const char *fmt, uint32_t layer, const char *suffix)
{
	char prefix[128];
	snprintf(prefix, sizeof prefix, fmt, layer);
	snprintf(name, size, "%s.%s", prefix, suffix);
}

static int load_layer_vec(loader *ld, float **out, const char *fmt, uint32_t layer, const char *suffix,
                          uint64_t rows)
{
	char name[160];
	layer_name(name, sizeof name, fmt, layer, suffix);
	return load(ld, out, name, rows);
}

static int load_layer_mat(loader *ld, infs__wmat *out, const char *fmt, uint32_t layer, uint64_t rows,
                          uint64_t cols, const char *suffix)
{
	char name[160];
	layer_name(name, sizeof name, fmt, layer, suffix);
	return load_mat(ld, out, name, rows, cols);
}

static int load_weights(loader *ld, const names *nm)
{
	infs_model *m = ld->m;
	const infs__model_config *c = &m->cfg;
	uint32_t d = c->n_embd, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
	int rc;
	if ((rc = load_mat(ld, &m->tok_embd, nm->embd, c->n_vocab, d)) ||
	    (rc = load(ld, &m->out_norm, nm->out_norm, d)))
		return rc;
	if (!c->tied && (rc = load_mat(ld, &m->output, nm->output, c->n_vocab, d)))
		return rc;
	m->layers = calloc(c->n_layers, sizeof *m->layers);
	if (!m->layers)
		return infs__error(INFS_ENOMEM, "out of memory");
	const char *w = nm->weight, *b = nm->bias;
	for (uint32_t l = 0; l < c->n_layers; l++) {
		infs__layer *L = &m->layers[l];
		if ((rc = load_layer_vec(ld, &L->attn_norm, nm->attn_norm, l, w, d)) ||
		    (rc = load_layer_mat(ld, &L->wq, nm->q, l, qd, d, w)) ||
		    (rc = load_layer_mat(ld, &L->wk, nm->k, l, kvd, d, w)) ||
		    (rc = load_layer_mat(ld, &L->wv, nm->v, l, kvd, d, w)) ||
		    (rc = load_layer_mat(ld, &L->wo, nm->o, l, d, qd, w)) ||
		    (rc = load_layer_vec(ld, &L->ffn_norm, nm->ffn_norm, l, w, d)) ||
		    (rc = load_layer_mat(ld, &L->w_gate, nm->gate, l, c->n_ff, d, w)) ||
		    (rc = load_layer_mat(ld, &L->w_up, nm->up, l, c->n_ff, d, w)) ||
		    (rc = load_layer_mat(ld, &L->w_down, nm->down, l, d, c->n_ff, w)))
			return rc;
		if (c->bias_qkv &&
		    ((rc = load_layer_vec(ld, &L->bq, nm->q, l, b, qd)) ||
		     (rc = load_layer_vec(ld, &L->bk, nm->k, l, b, kvd)) ||
		     (rc = load_layer_vec(ld, &L->bv, nm->v, l, b, kvd))))
			return rc;
		if (c->bias_o && (rc = load_layer_vec(ld, &L->bo, nm->o, l, b, d)))
			return rc;
		if (c->qk_norm &&
		    ((rc = load_layer_vec(ld, &L->q_norm, nm->q_norm, l, w, c->head_dim)) ||
		     (rc = load_layer_vec(ld, &L->k_norm, nm->k_norm, l, w, c->head_dim))))
			return rc;
	}
	/* A checkpoint with more layers than its configuration is inconsistent. */
	char extra[160], prefix[128];
	snprintf(prefix, sizeof prefix, nm->attn_norm, c->n_layers);
	snprintf(extra, sizeof extra, "%s.%s", prefix, w);
	src_tensor t;
	if ((rc = ld->find(ld, extra, &t)) != 0)
		return rc < 0 ? rc : infs__error(INFS_EFORMAT, "%s: tensor \"%s\" exists but the configuration has %u layers",
		                                 ld->path, extra, c->n_layers);
	if (c->tied)
		m->output = m->tok_embd;
	m->weights_hash = ld->hash;
	return INFS_OK;
}

static int st_find(loader *ld, const char *name, src_tensor *out)
{
	const infs__st_tensor *t = infs__safetensors_find(ld->src, name);
	if (!t)
		return 0;
	switch (t->dtype) {
	case INFS_ST_F32: out->type = INFS_GGML_F32; break;
	case INFS_ST_F16: out->type = INFS_GGML_F16; break;
	case INFS_ST_BF16: out->type = INFS_GGML_BF16; break;
	default:
		return infs__error(INFS_EUNSUPPORTED, "%s: tensor \"%s\" is %s (F32, F16 and BF16 are supported)",
		                   t->file, name, t->dtype_name);
	}
	if (t->n_dims > 4)
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\" has %u dimensions", t->file, name, t->n_dims);
	out->n_dims = t->n_dims;
	memcpy(out->shape, t->shape, t->n_dims * sizeof t->shape[0]);
	out->data = t->data;
	out->nbytes = t->nbytes;
	return 1;
}

static int gguf_find(loader *ld, const char *name, src_tensor *out)
{
	const infs__gguf_tensor *t = infs__gguf_tensor_find(ld->src, name);
	if (!t)
		return 0;
	out->type = t->type;
	out->n_dims = t->n_dims;
	for (uint32_t i = 0; i < t->n_dims; i++)
		out->shape[i] = t->ne[t->n_dims - 1 - i];
	out->data = t->data;
	out->nbytes = (size_t)t->nbytes;
	return 1;
}

/* llama.cpp stores Llama's q and k rows permuted so that each head's
 * rotary pairs are adjacent (GPT-J order); transformers and the stored KV
 * use the Hugging Face order, where row j * hd/2 + i is GGUF row 2i + j. */
static int unpermute_heads(infs__wmat *w, uint32_t n_heads, uint32_t hd)
{
	const size_t rb = w->row_bytes, head = (size_t)hd * rb;
	char *tmp = malloc(head);
	if (!tmp)
		return infs__error(INFS_ENOMEM, "out of memory");
	for (uint32_t h = 0; h < n_heads; h++) {
		char *W = (char *)w->data + h * head;
		memcpy(tmp, W, head);
		for (uint32_t i = 0; i < hd / 2; i++)
			for (uint32_t j = 0; j < 2; j++)
				memcpy(W + ((size_t)j * (hd / 2) + i) * rb, tmp + ((size_t)2 * i + j) * rb, rb);
	}
	free(tmp);
	return INFS_OK;
}

static uint64_t hash_gguf_value(uint64_t h, const infs__gguf_value *v)
{
	static const unsigned sizes[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
	h = mix(h, v->type);
	if (v->type == INFS_GGUF_STRING)
		return hash_bytes(h, v->str.ptr, (size_t)v->str.len);
	if (v->type != INFS_GGUF_ARRAY)
		return mix(h, v->num.u);
	h = mix(mix(h, v->elem_type), v->n);
	if (v->strs)
		for (uint64_t i = 0; i < v->n; i++)
			h = hash_bytes(h, v->strs[i].ptr, (size_t)v->strs[i].len);
	else if (v->items)
		for (uint64_t i = 0; i < v->n; i++)
			h = hash_gguf_value(h, &v->items[i]);
	else if (v->raw && v->elem_type < sizeof sizes / sizeof sizes[0])
		h = hash_bytes(h, v->raw, (size_t)v->n * sizes[v->elem_type]);
	return h;
}

/* The tokenizer, from the open GGUF g or from path. It must cover no more
 * ids than the embedding has rows (models often pad the embedding, never the
 * reverse). */
static int load_tokenizer(infs_model *m, const infs__gguf *g, const char *path)
{
	int rc = g ? infs__tokenizer_from_gguf(&m->tok, g, path) : infs_tokenizer_load(&m->tok, path);
	if (rc)
		return infs__error_wrap(rc, "%s: tokenizer", path);
	size_t nv = infs_tokenizer_vocab_size(m->tok);
	if (nv > m->cfg.n_vocab)
		return infs__error(INFS_EFORMAT, "%s: the tokenizer has %zu tokens, the embedding only %u rows", path,
		                   nv, m->cfg.n_vocab);
	return INFS_OK;
}

static int load_gguf(infs_model *m, const char *path)
{
	infs__gguf *g = NULL;
	int rc = infs__gguf_open(&g, path);
	if (rc)
		return rc;
	if ((rc = infs__config_from_gguf(&m->cfg, g, path))) {
		infs__gguf_close(g);
		return rc;
	}
	const infs__model_config *c = &m->cfg;
	if (c->arch == INFS_ARCH_LLAMA && c->bias_qkv) {
		infs__gguf_close(g);
		return infs__error(INFS_EUNSUPPORTED, "%s: llama GGUF files with q/k/v biases are not supported", path);
	}
	loader ld = { m, path, gguf_find, g, 0x696e66657273636bull };
	rc = load_weights(&ld, &gguf_names);
	for (uint32_t l = 0; !rc && c->arch == INFS_ARCH_LLAMA && l < c->n_layers; l++)
		if (!(rc = unpermute_heads(&m->layers[l].wq, c->n_heads, c->head_dim)))
			rc = unpermute_heads(&m->layers[l].wk, c->n_kv_heads, c->head_dim);
	/* The tokenizer and its chat template are the tokenizer.* metadata. */
	uint64_t h = 0x746f6b656e697a65ull;
	int any = 0;
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const infs__gguf_kv *kv = &g->kv[i];
		if (kv->key.len < 10 || memcmp(kv->key.ptr, "tokenizer.", 10) != 0)
			continue;
		h = hash_gguf_value(hash_bytes(h, kv->key.ptr, (size_t)kv->key.len), &kv->value);
		any = 1;
	}
	m->tokenizer_hash = any ? h : 0;
	if (!rc && infs__gguf_find(g, "tokenizer.ggml.model"))
		rc = load_tokenizer(m, g, path);
	infs__gguf_close(g);
	return rc;
}

/* The tokenizer's sources (tokenizer.json, tokenizer_config.json with the
 * chat template) feed the identity hash. */
static int hash_tokenizer_files(infs_model *m, const char *dir)
{
	static const char *const files[] = { "tokenizer.json", "tokenizer_config.json" };
	uint64_t h = 0x746f6b656e697a65ull;
	int any = 0;
	for (int i = 0; i < 2; i++) {
		char *p = infs__path_join(dir, files[i]), *text = NULL;
		size_t len = 0;
		if (!p)
			return infs__error(INFS_ENOMEM, "out of memory");
		int rc = infs__file_read(&text, &len, p, 256u << 20);
		free(p);
		if (rc == INFS_ENOTFOUND)
			continue;
		if (rc)
			return rc;
		h = hash_bytes(hash_bytes(h, files[i], strlen(files[i])), text, len);
		any = 1;
		free(text);
	}
	m->tokenizer_hash = any ? h : 0;
	return INFS_OK;
}

static int load_hf_dir(infs_model *m, const char *dir)
{
	char *cfg_path = infs__path_join(dir, "config.json"), *text = NULL;
	size_t len = 0;
	if (!cfg_path)
		return infs__error(INFS_ENOMEM, "out of memory");
	int rc = infs__file_read(&text, &len, cfg_path, 16u << 20);
	if (rc) {
		free(cfg_path);
		return rc;
	}
	infs__json *root = NULL;
	rc = infs__json_parse(&root, text, len);
	free(text);
	if (rc) {
		rc = infs__error_wrap(rc, "%s", cfg_path);
		free(cfg_path);
		return rc;
	}
	rc = infs__config_from_json(&m->cfg, root, cfg_path);
	infs__json_free(root);
	free(cfg_path);
	if (rc)
		return rc;
	infs__safetensors *st = NULL;
	if ((rc = infs__safetensors_open(&st, dir)))
		return rc;
	loader ld = { m, dir, st_find, st, 0x696e66657273636bull };
	rc = load_weights(&ld, &hf_names);
	infs__safetensors_close(st);
	if (rc || (rc = hash_tokenizer_files(m, dir)))
		return rc;
	char *tj = infs__path_join(dir, "tokenizer.json");
	if (!tj)
		return infs__error(INFS_ENOMEM, "out of memory");
	struct stat sb;
	int has_tok = stat(tj, &sb) == 0;
	free(tj);
	return has_tok ? load_tokenizer(m, NULL, dir) : INFS_OK;
}

/* Bounds the workspace of a device forward call (longer inputs go in
 * several calls over the paged cache). */
#define MAX_DEVICE_TOKENS (1u << 20)

INFS__DEFINE_INIT(infs_model_options_init, infs_model_options, infs__sizes_model_options, INFS_MODEL_OPTIONS_INIT)

void infs_model_free(infs_model *m)
{
	if (!m)
		return;
	if (m->dev)
		infs__cuda->model_release(m);
	for (uint32_t l = 0; m->layers && l < m->cfg.n_layers; l++) {
		infs__layer *L = &m->layers[l];
		float *ps[] = { L->attn_norm, L->ffn_norm, L->bq, L->bk, L->bv, L->bo, L->q_norm, L->k_norm };
		for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
			free(ps[i]);
		infs__wmat *ws[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down };
		for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
			infs__wmat_free(ws[i]);
	}
	free(m->layers);
	infs_tokenizer_free(m->tok);
	if (m->output.data != m->tok_embd.data)
		infs__wmat_free(&m->output);
	infs__wmat_free(&m->tok_embd);
	free(m->out_norm);
	infs__pool_keep_free(m->pool);
	free(m);
}

/* Which products take 8-bit activations: up to the token count where the
 * integer kernels beat the f32 ones for the matrix's type (model/qmatmul.h). */
static void int8_activations(infs_model *m)
{
	for (uint32_t l = 0; l < m->cfg.n_layers; l++) {
		infs__wmat *w[] = { &m->layers[l].wq,     &m->layers[l].wk,   &m->layers[l].wv,    &m->layers[l].wo,
			            &m->layers[l].w_gate, &m->layers[l].w_up, &m->layers[l].w_down };
		for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
			w[i]->int8_tokens = infs__matmul_w_int8_tokens(w[i]->type);
	}
	m->output.int8_tokens = infs__matmul_w_int8_tokens(m->output.type);
}

/* The device copy's matrices: bf16, or fp8 where there is a device copy
 * (its kernels run on every device the library is built for). */
static int check_weights(int weights, int device, const char *fn)
{
	if (weights != INFS_DTYPE_BF16 && weights != INFS_DTYPE_FP8_E4M3)
		return infs__error(INFS_EINVAL, "%s: device_weights %d is not INFS_DTYPE_BF16 (%d) or INFS_DTYPE_FP8_E4M3 (%d)",
		                   fn, weights, INFS_DTYPE_BF16, INFS_DTYPE_FP8_E4M3);
	if (weights == INFS_DTYPE_FP8_E4M3 && device < 0)
		return infs__error(INFS_EINVAL,
		                   "%s: device_weights fp8 is the device copy's dtype: set device to a CUDA device (the host "
		                   "keeps its own weights)",
		                   fn);
	return INFS_OK;
}

int infs_model_load(infs_model **out, const char *path, const infs_model_options *opts)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_model_load: out is NULL");
	if (!path)
		return infs__error(INFS_EINVAL, "infs_model_load: path is NULL");
	infs_model_options o = INFS_MODEL_OPTIONS_INIT;
	int rc = INFS__TAKE(o, opts, infs__sizes_model_options, "infs_model_load", "options");
	if (rc)
		return rc;
	if (o.n_threads > 1024)
		return infs__error(INFS_EINVAL, "infs_model_load: n_threads %u is above 1024", o.n_threads);
	if (o.device < -1)
		return infs__error(INFS_EINVAL, "infs_model_load: device %d is not -1 (host) or a CUDA device", o.device);
	if (o.device >= 0 && !infs__cuda)
		return infs__error(INFS_EUNSUPPORTED, "infs_model_load: device %d asked for, but this build has no CUDA support",
		                   o.device);
	if (o.int8_activations != 0 && o.int8_activations != 1)
		return infs__error(INFS_EINVAL, "infs_model_load: int8_activations %d is not 0 or 1", o.int8_activations);
	if (o.device_max_tokens > MAX_DEVICE_TOKENS)
		return infs__error(INFS_EINVAL, "infs_model_load: device_max_tokens %u is above %u", o.device_max_tokens,
		                   MAX_DEVICE_TOKENS);
	if ((rc = check_weights(o.device_weights, o.device, "infs_model_load")))
		return rc;
	struct stat sb;
	if (stat(path, &sb) != 0)
		return infs__error(errno == ENOENT ? INFS_ENOTFOUND : INFS_EIO, "infs_model_load: %s: %s", path,
		                   strerror(errno));
	infs_model *m = calloc(1, sizeof *m);
	if (m && !(m->pool = infs__pool_keep_new())) {
		free(m);
		m = NULL;
	}
	if (!m)
		return infs__error(INFS_ENOMEM, "infs_model_load: out of memory");
	m->n_threads = o.n_threads ? o.n_threads : infs__cpu_count();
	m->device = -1;
	if (S_ISDIR(sb.st_mode))
		rc = load_hf_dir(m, path);
	else
		rc = load_gguf(m, path);
	if (rc) {
		infs_model_free(m);
		return infs__error_wrap(rc, "infs_model_load");
	}
	infs__rope_init(&m->rope, &m->cfg.geom);
	if (o.int8_activations)
		int8_activations(m);
	if (o.device >= 0) {
		m->device_max_tokens = o.device_max_tokens ? o.device_max_tokens : 512;
		m->device_weights = o.device_weights;
		rc = infs__cuda->model_upload(m, o.device, o.device_budget_bytes, m->device_max_tokens);
		if (rc) {
			infs_model_free(m);
			return infs__error_wrap(rc, "infs_model_load");
		}
		m->device = o.device;
	}
	*out = m;
	return INFS_OK;
}

int infs__model_random_device(infs_model **out, const infs__model_config *cfg, int device, uint32_t max_tokens,
                              uint64_t seed, int weights)
{
	static const char fn[] = "infs__model_random_device";
	if (!out || !cfg)
		return infs__error(INFS_EINVAL, "%s: out or cfg is NULL", fn);
	if (!infs__cuda)
		return infs__error(INFS_EUNSUPPORTED, "%s: this build has no CUDA support", fn);
	if (device < 0)
		return infs__error(INFS_EINVAL, "%s: device %d is not a CUDA device", fn, device);
	if (max_tokens == 0 || max_tokens > MAX_DEVICE_TOKENS)
		return infs__error(INFS_EINVAL, "%s: max_tokens %u is not in 1..%u", fn, max_tokens, MAX_DEVICE_TOKENS);
	int rc = infs__config_check(cfg, fn);
	if (!rc)
		rc = check_weights(weights, device, fn);
	if (rc)
		return rc;
	infs_model *m = calloc(1, sizeof *m);
	if (!m)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	m->cfg = *cfg;
	m->device_weights = weights;
	m->n_threads = 1;
	m->device = -1;
	m->device_max_tokens = max_tokens;
	infs__rope_init(&m->rope, &m->cfg.geom);
	if ((rc = infs__cuda->model_random(m, device, max_tokens, seed))) {
		infs_model_free(m);
		return infs__error_wrap(rc, "%s", fn);
	}
	m->device = device;
	*out = m;
	return INFS_OK;
}

const infs_tokenizer *infs_model_tokenizer(const infs_model *m)
{
	return m ? m->tok : NULL;
}

int infs_model_info_get(infs_model_info *out, const infs_model *m)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_model_info_get: out is NULL");
	size_t size;
	int rc = INFS__OUT_SIZE(&size, out, infs__sizes_model_info, "infs_model_info_get");
	if (rc)
		return rc;
	if (!m)
		return infs__error(INFS_EINVAL, "infs_model_info_get: model is NULL");
	const infs__model_config *c = &m->cfg;
	const infs_model_info info = {
		.version = out->version,
		.architecture = infs__arch_name(c->arch),
		.n_vocab = c->n_vocab,
		.n_embd = c->n_embd,
		.n_layers = c->n_layers,
		.n_heads = c->n_heads,
		.n_kv_heads = c->n_kv_heads,
		.head_dim = c->head_dim,
		.n_ff = c->n_ff,
		.n_ctx_train = c->n_ctx_train,
		.sliding_window = c->sliding_window,
		.n_params = m->n_params,
	};
	memcpy(out, &info, size);
	return INFS_OK;
}

int infs_model_geometry(infs_geometry *out, const infs_model *m, infs_dtype kv_dtype)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_model_geometry: out is NULL");
	if (!m)
		return infs__error(INFS_EINVAL, "infs_model_geometry: model is NULL");
	if (infs_dtype_size(kv_dtype) == 0)
		return infs__error(INFS_EINVAL, "infs_model_geometry: unknown kv_dtype %d", (int)kv_dtype);
	*out = m->cfg.geom;
	out->kv_dtype = kv_dtype;
	out->embed_dim = 0;
	return INFS_OK;
}

static const char *dtype_name(infs_dtype dt)
{
	return dt == INFS_DTYPE_F32 ? "f32" : dt == INFS_DTYPE_F16 ? "f16" : dt == INFS_DTYPE_BF16 ? "bf16" : "fp8_e4m3";
}

int infs_model_identity(char **out, const infs_model *m, infs_dtype kv_dtype)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_model_identity: out is NULL");
	if (!m)
		return infs__error(INFS_EINVAL, "infs_model_identity: model is NULL");
	if (infs_dtype_size(kv_dtype) == 0)
		return infs__error(INFS_EINVAL, "infs_model_identity: unknown kv_dtype %d", (int)kv_dtype);
	char buf[256];
	int n = snprintf(buf, sizeof buf, "inferscale-kv/1 arch=%s weights=%016llx tokenizer=%016llx kv=%s",
	                 infs__arch_name(m->cfg.arch), (unsigned long long)m->weights_hash,
	                 (unsigned long long)m->tokenizer_hash, dtype_name(kv_dtype));
	char *s = malloc((size_t)n + 1);
	if (!s)
		return infs__error(INFS_ENOMEM, "infs_model_identity: out of memory");
	memcpy(s, buf, (size_t)n + 1);
	*out = s;
	return INFS_OK;
}

/* The embedder handle: a sentence-transformers directory (BERT weights in
 * safetensors, WordPiece vocabulary, tokenizer / pooling / module configs)
 * loaded for infs_embed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "embed/bert.h"
#include "embed/embed_device.h"
#include "util/dtype.h"
#include "embed/embedder.h"
#include "util/error.h"
#include "util/file.h"
#include "inferscale/embedder.h"
#include "util/options.h"
#include "util/json.h"
#include "util/pool.h"
#include "model/safetensors.h"
#include "text/unicode.h"
#include "embed/wordpiece.h"

/* Tokens per forward pass (or max_seq_length if larger): sgemm is
 * efficient well before this, and the scratch (about 14 KiB per token for
 * MiniLM) stays a few tens of MiB. */
#define BATCH_TOKENS 2048

/* An embedder on a device has a workspace for this many texts of
 * max_seq_length tokens (tokens in all: shorter texts fit more). */
#define DEVICE_TEXTS 64

struct infs_embedder {
	infs__bert_config cfg;
	infs__bert_weights w;
	infs__bert_layer *layers;
	infs__safetensors *st;    /* F32 tensors are used in place */
	float **owned;            /* tensors converted at load */
	size_t n_owned;
	infs__wordpiece *wp;
	infs__bert_pooling pooling;
	int normalize;
	int include_prompt;
	int st_lowercase;         /* sentence_bert_config.json's do_lower_case */
	uint32_t max_seq;
	uint32_t n_threads;
	infs__pool_keep *pool; /* the CPU passes' threads, kept between calls */
	/* on a device: its copy of the encoder, a workspace of dev_tokens
	 * tokens, and host buffers for one call's token ids, all used by one
	 * call at a time, under dev_lock */
	int device;
	struct infs__bert_dev *dev;
	uint32_t dev_tokens;
	pthread_mutex_t dev_lock;
	int32_t *dev_ids, *dev_one;
	uint32_t *dev_off;
};

INFS__DEFINE_INIT(infs_embedder_options_init, infs_embedder_options, infs__sizes_embedder_options, INFS_EMBEDDER_OPTIONS_INIT)

INFS__DEFINE_INIT(infs_embed_options_init, infs_embed_options, infs__sizes_embed_options, INFS_EMBED_OPTIONS_INIT)

/* ---- files ---------------------------------------------------------------- */

/* Reads dir/name whole. INFS_ENOTFOUND when it does not exist. */
static int read_file(char **out, size_t *len, const char *dir, const char *name)
{
	char *path = infs__path_join(dir, name);
	if (!path)
		return infs__error(INFS_ENOMEM, "out of memory");
	int rc = infs__file_read(out, len, path, 256u << 20);
	free(path);
	return rc;
}

/* Parses dir/name into *out; with optional set, a missing file leaves *out
 * NULL and succeeds. */
static int read_json(infs__json **out, const char *dir, const char *name, int optional)
{
	char *text;
	size_t len;
	*out = NULL;
	int rc = read_file(&text, &len, dir, name);
	if (rc == INFS_ENOTFOUND && optional)
		return INFS_OK;
	if (rc)
		return rc;
	rc = infs__json_parse(out, text, len);
	free(text);
	if (rc)
		return infs__error_wrap(rc, "%s/%s", dir, name);
	return INFS_OK;
}

static int get_bool(const infs__json *obj, const char *key, int def)
{
	const infs__json *v = infs__json_get(obj, key);
	return v && v->type == INFS_JSON_BOOL ? v->boolean : def;
}

/* ---- configuration -------------------------------------------------------- */

static int read_uint(uint32_t *out, const infs__json *cfg, const char *key, uint32_t lo,
                     uint32_t hi, const char *dir)
{
	const infs__json *v = infs__json_get(cfg, key);
	if (!v || v->type != INFS_JSON_NUMBER || v->number != (double)(uint32_t)v->number ||
	    v->number < lo || v->number > hi)
		return infs__error(INFS_EFORMAT, "%s/config.json: \"%s\" is missing or not in %u..%u",
		                   dir, key, lo, hi);
	*out = (uint32_t)v->number;
	return INFS_OK;
}

static int read_config(infs_embedder *e, const char *dir)
{
	infs__json *cfg;
	int rc = read_json(&cfg, dir, "config.json", 0);
	if (rc)
		return rc;
	const char *type = infs__json_str(infs__json_get(cfg, "model_type"), "");
	const char *act = infs__json_str(infs__json_get(cfg, "hidden_act"), "gelu");
	const char *posemb =
		infs__json_str(infs__json_get(cfg, "position_embedding_type"), "absolute");
	if (strcmp(type, "bert") != 0)
		rc = infs__error(INFS_EUNSUPPORTED, "%s/config.json: model_type \"%s\" (only \"bert\")",
		                 dir, type);
	else if (strcmp(act, "gelu") != 0)
		rc = infs__error(INFS_EUNSUPPORTED, "%s/config.json: hidden_act \"%s\" (only \"gelu\")",
		                 dir, act);
	else if (strcmp(posemb, "absolute") != 0)
		rc = infs__error(INFS_EUNSUPPORTED,
		                 "%s/config.json: position_embedding_type \"%s\" (only \"absolute\")",
		                 dir, posemb);
	infs__bert_config *c = &e->cfg;
	if (!rc)
		rc = read_uint(&c->n_vocab, cfg, "vocab_size", 1, INT32_MAX, dir);
	if (!rc)
		rc = read_uint(&c->dim, cfg, "hidden_size", 1, 1 << 16, dir);
	if (!rc)
		rc = read_uint(&c->n_layers, cfg, "num_hidden_layers", 1, 1024, dir);
	if (!rc)
		rc = read_uint(&c->n_heads, cfg, "num_attention_heads", 1, c->dim, dir);
	if (!rc)
		rc = read_uint(&c->n_ffn, cfg, "intermediate_size", 1, 1 << 18, dir);
	if (!rc)
		rc = read_uint(&c->n_pos, cfg, "max_position_embeddings", 2, 1 << 16, dir);
	if (!rc)
		rc = read_uint(&c->n_types, cfg, "type_vocab_size", 1, 1 << 16, dir);
	if (!rc && c->dim % c->n_heads)
		rc = infs__error(INFS_EFORMAT, "%s/config.json: hidden_size %u is not a multiple of "
		                 "num_attention_heads %u", dir, c->dim, c->n_heads);
	c->ln_eps = (float)infs__json_number(infs__json_get(cfg, "layer_norm_eps"), 1e-12);
	infs__json_free(cfg);
	return rc;
}

/* A special token of tokenizer_config.json: a string, or an object whose
 * "content" is one (newer transformers); def when absent. */
static const char *special_token(const infs__json *tc, const char *key, const char *def)
{
	const infs__json *v = infs__json_get(tc, key);
	if (v && v->type == INFS_JSON_OBJECT)
		v = infs__json_get(v, "content");
	return infs__json_str(v, def);
}

static int read_tokenizer(infs_embedder *e, const char *dir)
{
	infs__json *tc, *sb;
	int rc = read_json(&tc, dir, "tokenizer_config.json", 1);
	if (rc)
		return rc;
	if ((rc = read_json(&sb, dir, "sentence_bert_config.json", 1))) {
		infs__json_free(tc);
		return rc;
	}
	/* BertTokenizer's defaults; strip_accents null follows lower-casing */
	infs__wordpiece_config wc = {
		.lowercase = get_bool(tc, "do_lower_case", 1),
		.chinese_chars = get_bool(tc, "tokenize_chinese_chars", 1),
		.max_word_chars = 100,
		.special = {
			special_token(tc, "unk_token", "[UNK]"),
			special_token(tc, "cls_token", "[CLS]"),
			special_token(tc, "sep_token", "[SEP]"),
			special_token(tc, "pad_token", "[PAD]"),
			special_token(tc, "mask_token", "[MASK]"),
		},
	};
	wc.strip_accents = get_bool(tc, "strip_accents", wc.lowercase);
	e->st_lowercase = get_bool(sb, "do_lower_case", 0);

	/* sentence-transformers' max_seq_length, else the tokenizer's limit,
	 * never past the position table */
	double msl = infs__json_number(infs__json_get(sb, "max_seq_length"), 0);
	if (msl < 1)
		msl = infs__json_number(infs__json_get(tc, "model_max_length"), e->cfg.n_pos);
	e->max_seq = msl < 2 ? 2 : msl > e->cfg.n_pos ? e->cfg.n_pos : (uint32_t)msl;

	char *vocab;
	size_t len;
	rc = read_file(&vocab, &len, dir, "vocab.txt");
	if (!rc) {
		rc = infs__wordpiece_create(&e->wp, vocab, len, &wc);
		if (rc)
			infs__error_wrap(rc, "%s/vocab.txt", dir);
		free(vocab);
	}
	if (!rc && infs__wordpiece_vocab_size(e->wp) > e->cfg.n_vocab)
		rc = infs__error(INFS_EFORMAT, "%s/vocab.txt: %u tokens, the model embeds %u", dir,
		                 infs__wordpiece_vocab_size(e->wp), e->cfg.n_vocab);
	infs__json_free(tc);
	infs__json_free(sb);
	return rc;
}

/* modules.json: Transformer, then Pooling, then optionally Normalize, as
 * sentence-transformers builds for these models (and for a plain Hugging
 * Face directory: mean pooling, no normalisation). */
static int read_modules(infs_embedder *e, const char *dir)
{
	infs__json *mods, *pc = NULL;
	int rc = read_json(&mods, dir, "modules.json", 1);
	if (rc)
		return rc;
	const char *pool_dir = NULL;
	e->pooling = INFS__POOL_MEAN;
	e->include_prompt = 1;
	if (mods && mods->type != INFS_JSON_ARRAY)
		rc = infs__error(INFS_EFORMAT, "%s/modules.json: not an array", dir);
	for (size_t i = 0; !rc && mods && i < mods->len; i++) {
		const char *type = infs__json_str(infs__json_get(&mods->items[i], "type"), "");
		const char *path = infs__json_str(infs__json_get(&mods->items[i], "path"), "");
		if (strcmp(type, "sentence_transformers.models.Transformer") == 0)
			continue;
		if (strcmp(type, "sentence_transformers.models.Pooling") == 0)
			pool_dir = path;
		else if (strcmp(type, "sentence_transformers.models.Normalize") == 0)
			e->normalize = 1;
		else
			rc = infs__error(INFS_EUNSUPPORTED, "%s/modules.json: module \"%s\" is not "
			                 "supported", dir, type);
	}
	if (!rc && pool_dir) {
		char *pd = infs__path_join(dir, pool_dir);
		if (!pd)
			rc = infs__error(INFS_ENOMEM, "out of memory");
		else
			rc = read_json(&pc, pd, "config.json", 0);
		free(pd);
	}
	if (!rc && pc) {
		static const struct {
			const char *key;
			int mode;
		} modes[] = {
			{"pooling_mode_cls_token", INFS__POOL_CLS},
			{"pooling_mode_mean_tokens", INFS__POOL_MEAN},
			{"pooling_mode_max_tokens", INFS__POOL_MAX},
			{"pooling_mode_mean_sqrt_len_tokens", INFS__POOL_MEAN_SQRT_LEN},
			{"pooling_mode_weightedmean_tokens", -1},
			{"pooling_mode_lasttoken", -1},
		};
		int n_on = 0, mode = -1;
		for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
			if (get_bool(pc, modes[i].key, 0)) {
				n_on++;
				mode = modes[i].mode;
			}
		}
		if (n_on != 1 || mode < 0)
			rc = infs__error(INFS_EUNSUPPORTED, "%s/%s/config.json: one of CLS, mean, max or "
			                 "mean-sqrt-len pooling is supported", dir, pool_dir);
		else
			e->pooling = (infs__bert_pooling)mode;
		e->include_prompt = get_bool(pc, "include_prompt", 1);
	}
	infs__json_free(pc);
	infs__json_free(mods);
	return rc;
}

/* ---- weights -------------------------------------------------------------- */

/* The tensor called (prefix)name with the given shape, as f32: in place when
 * stored as aligned F32, else converted into a buffer the embedder owns. */
static int tensor(const float **out, infs_embedder *e, const char *prefix, const char *name,
                  uint64_t rows, uint64_t cols, const char *dir)
{
	char full[160];
	snprintf(full, sizeof full, "%s%s", prefix, name);
	const infs__st_tensor *t = infs__safetensors_find(e->st, full);
	if (!t)
		return infs__error(INFS_EFORMAT, "%s/model.safetensors: no tensor \"%s\"", dir, full);
	int shape_ok = cols ? t->n_dims == 2 && t->shape[0] == rows && t->shape[1] == cols
	                    : t->n_dims == 1 && t->shape[0] == rows;
	if (!shape_ok)
		return infs__error(INFS_EFORMAT, "%s/model.safetensors: \"%s\" is not [%llu%s%llu]",
		                   dir, full, (unsigned long long)rows, cols ? "][" : "",
		                   (unsigned long long)cols);
	if (t->dtype == INFS_ST_F32 && (uintptr_t)t->data % sizeof(float) == 0) {
		*out = t->data;
		return INFS_OK;
	}
	if (t->dtype != INFS_ST_F32 && t->dtype != INFS_ST_F16 && t->dtype != INFS_ST_BF16)
		return infs__error(INFS_EUNSUPPORTED, "%s/model.safetensors: \"%s\" is %s (F32, F16 "
		                   "and BF16 are supported)", dir, full, t->dtype_name);
	float *buf = malloc(t->n_elems * sizeof *buf);
	float **owned = realloc(e->owned, (e->n_owned + 1) * sizeof *owned);
	if (!buf || !owned) {
		free(buf);
		if (owned)
			e->owned = owned;
		return infs__error(INFS_ENOMEM, "out of memory");
	}
	e->owned = owned;
	e->owned[e->n_owned++] = buf;
	if (t->dtype == INFS_ST_F32) {
		memcpy(buf, t->data, t->n_elems * sizeof *buf);
	} else {
		infs_dtype dt = t->dtype == INFS_ST_F16 ? INFS_DTYPE_F16 : INFS_DTYPE_BF16;
		for (uint64_t i = 0; i < t->n_elems; i++) {
			uint16_t h;
			memcpy(&h, (const char *)t->data + 2 * i, 2);
			buf[i] = infs__load(&h, dt, 0);
		}
	}
	*out = buf;
	return INFS_OK;
}

static int read_weights(infs_embedder *e, const char *dir)
{
	char *path = infs__path_join(dir, "model.safetensors");
	if (!path)
		return infs__error(INFS_ENOMEM, "out of memory");
	int rc = infs__safetensors_open(&e->st, path);
	free(path);
	if (rc)
		return rc;
	/* BertModel checkpoints name tensors "embeddings..."; those saved from a
	 * task model (BertForMaskedLM, ...) prefix them with "bert.". */
	const char *pre = infs__safetensors_find(e->st, "embeddings.word_embeddings.weight") ? ""
	                                                                                       : "bert.";
	const infs__bert_config *c = &e->cfg;
	uint64_t d = c->dim, f = c->n_ffn;
	infs__bert_weights *w = &e->w;
	e->layers = calloc(c->n_layers, sizeof *e->layers);
	if (!e->layers)
		return infs__error(INFS_ENOMEM, "out of memory");
	w->layers = e->layers;
	rc = tensor(&w->word, e, pre, "embeddings.word_embeddings.weight", c->n_vocab, d, dir);
	if (!rc)
		rc = tensor(&w->pos, e, pre, "embeddings.position_embeddings.weight", c->n_pos, d, dir);
	if (!rc)
		rc = tensor(&w->type, e, pre, "embeddings.token_type_embeddings.weight", c->n_types, d,
		            dir);
	if (!rc)
		rc = tensor(&w->ln_w, e, pre, "embeddings.LayerNorm.weight", d, 0, dir);
	if (!rc)
		rc = tensor(&w->ln_b, e, pre, "embeddings.LayerNorm.bias", d, 0, dir);
	for (uint32_t l = 0; !rc && l < c->n_layers; l++) {
		infs__bert_layer *L = &e->layers[l];
		struct {
			const float **dst;
			const char *name;
			uint64_t rows, cols;
		} t[] = {
			{&L->wq, "attention.self.query.weight", d, d},
			{&L->bq, "attention.self.query.bias", d, 0},
			{&L->wk, "attention.self.key.weight", d, d},
			{&L->bk, "attention.self.key.bias", d, 0},
			{&L->wv, "attention.self.value.weight", d, d},
			{&L->bv, "attention.self.value.bias", d, 0},
			{&L->wo, "attention.output.dense.weight", d, d},
			{&L->bo, "attention.output.dense.bias", d, 0},
			{&L->ln1_w, "attention.output.LayerNorm.weight", d, 0},
			{&L->ln1_b, "attention.output.LayerNorm.bias", d, 0},
			{&L->w_up, "intermediate.dense.weight", f, d},
			{&L->b_up, "intermediate.dense.bias", f, 0},
			{&L->w_down, "output.dense.weight", d, f},
			{&L->b_down, "output.dense.bias", d, 0},
			{&L->ln2_w, "output.LayerNorm.weight", d, 0},
			{&L->ln2_b, "output.LayerNorm.bias", d, 0},
		};
		for (size_t i = 0; !rc && i < sizeof t / sizeof t[0]; i++) {
			char name[128];
			snprintf(name, sizeof name, "encoder.layer.%u.%s", l, t[i].name);
			rc = tensor(t[i].dst, e, pre, name, t[i].rows, t[i].cols, dir);
		}
	}
	return rc;
}

/* ---- the handle ----------------------------------------------------------- */

/* Uploads the loaded encoder to device with its workspace, and the host
 * buffers of the device entries. */
static int load_device(infs_embedder *e, int device)
{
	e->dev_tokens = DEVICE_TEXTS * e->max_seq; /* max_seq <= 65536 */
	e->dev_ids = malloc((size_t)e->dev_tokens * sizeof *e->dev_ids);
	e->dev_off = malloc(((size_t)e->dev_tokens + 1) * sizeof *e->dev_off);
	e->dev_one = malloc((size_t)e->max_seq * sizeof *e->dev_one);
	if (!e->dev_ids || !e->dev_off || !e->dev_one)
		return infs__error(INFS_ENOMEM, "infs_embedder_load: out of memory");
	int rc = infs__cuda->bert_upload(&e->dev, device, &e->cfg, &e->w, e->dev_tokens);
	if (rc)
		return rc;
	e->device = device;
	return INFS_OK;
}

void infs_embedder_free(infs_embedder *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n_owned; i++)
		free(e->owned[i]);
	free(e->owned);
	if (e->dev)
		infs__cuda->bert_release(e->dev);
	pthread_mutex_destroy(&e->dev_lock);
	infs__pool_keep_free(e->pool);
	free(e->dev_ids);
	free(e->dev_one);
	free(e->dev_off);
	free(e->layers);
	infs__safetensors_close(e->st);
	infs__wordpiece_free(e->wp);
	free(e);
}

int infs_embedder_load(infs_embedder **out, const char *path, const infs_embedder_options *in)
{
	infs_embedder_options o = INFS_EMBEDDER_OPTIONS_INIT;
	const infs_embedder_options *opts = &o;
	if (!out)
		return infs__error(INFS_EINVAL, "infs_embedder_load: out is NULL");
	if (!path)
		return infs__error(INFS_EINVAL, "infs_embedder_load: path is NULL");
	int rc = INFS__TAKE(o, in, infs__sizes_embedder_options, "infs_embedder_load", "options");
	if (rc)
		return rc;
	if (opts->device < -1)
		return infs__error(INFS_EINVAL, "infs_embedder_load: device %d (-1 is the CPU)",
		                   opts->device);
	if (opts->device >= 0 && !infs__cuda)
		return infs__error(INFS_EUNSUPPORTED, "infs_embedder_load: device %d: the embedder's "
		                   "CUDA backend is not built in", opts->device);
	if (opts->n_threads > 1024)
		return infs__error(INFS_EINVAL, "infs_embedder_load: n_threads %u is above 1024",
		                   opts->n_threads);

	struct stat sb;
	if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))
		return infs__error(INFS_EINVAL, "infs_embedder_load: %s is not a directory", path);

	infs_embedder *e = calloc(1, sizeof *e);
	if (!e)
		return infs__error(INFS_ENOMEM, "out of memory");
	pthread_mutex_init(&e->dev_lock, NULL);
	e->device = -1;
	e->pool = infs__pool_keep_new();
	rc = e->pool ? read_config(e, path) : infs__error(INFS_ENOMEM, "out of memory");
	if (!rc)
		rc = read_tokenizer(e, path);
	if (!rc)
		rc = read_modules(e, path);
	if (!rc)
		rc = read_weights(e, path);
	if (!rc && opts->max_seq_length) {
		if (opts->max_seq_length < 2 || opts->max_seq_length > e->cfg.n_pos)
			rc = infs__error(INFS_ERANGE, "infs_embedder_load: max_seq_length %u is not in "
			                 "2..%u", opts->max_seq_length, e->cfg.n_pos);
		else
			e->max_seq = opts->max_seq_length;
	}
	if (!rc && opts->device >= 0)
		rc = load_device(e, opts->device);
	if (rc) {
		infs_embedder_free(e);
		return rc;
	}
	e->n_threads = opts->n_threads ? opts->n_threads : infs__cpu_count();
	*out = e;
	return INFS_OK;
}

uint32_t infs_embedder_dim(const infs_embedder *e)
{
	return e ? e->cfg.dim : 0;
}

uint32_t infs_embedder_max_seq_length(const infs_embedder *e)
{
	return e ? e->max_seq : 0;
}

/* ---- embedding ------------------------------------------------------------ */

/* Lower-cases UTF-8 code point by code point, as sentence-transformers'
 * do_lower_case does to the text before tokenizing. */
static char *lower_utf8(const char *s, size_t len)
{
	char *out = malloc(3 * 4 * len + 1);
	if (!out)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp, low[3];
		int k = infs__utf8_decode((const uint8_t *)s + i, len - i, &cp);
		i += (size_t)(k < 0 ? -k : k);
		size_t nl = infs__uc_lower(cp, low);
		for (size_t j = 0; j < nl; j++)
			n += infs__utf8_encode(low[j], (uint8_t *)out + n);
	}
	out[n] = '\0';
	return out;
}

/* Tokenizes prompt + text into ids (room for e->max_seq). */
static int tokenize(const infs_embedder *e, const char *prompt, const char *text, int32_t *ids,
                    uint32_t *n)
{
	size_t pl = strlen(prompt), tl = strlen(text);
	char *joined = NULL, *lowered = NULL;
	const char *s = text;
	if (pl) {
		joined = malloc(pl + tl + 1);
		if (!joined)
			return infs__error(INFS_ENOMEM, "out of memory");
		memcpy(joined, prompt, pl);
		memcpy(joined + pl, text, tl + 1);
		s = joined;
	}
	if (e->st_lowercase) {
		lowered = lower_utf8(s, pl + tl);
		if (!lowered) {
			free(joined);
			return infs__error(INFS_ENOMEM, "out of memory");
		}
		s = lowered;
	}
	int rc = infs__wordpiece_encode(e->wp, s, strlen(s), e->max_seq, ids, n);
	free(joined);
	free(lowered);
	return rc;
}

int infs__embedder_tokenize(const infs_embedder *e, const char *text, int32_t *ids, uint32_t *n)
{
	return tokenize(e, "", text, ids, n);
}

/* The checks of the texts and prompt that every embedding entry makes. */
static int check_texts(const infs_embedder *e, const char *const *texts, size_t n_texts, const char *prompt,
                       const char *fn)
{
	if (!texts && n_texts)
		return infs__error(INFS_EINVAL, "%s: texts is NULL", fn);
	if (n_texts > UINT32_MAX)
		return infs__error(INFS_EINVAL, "%s: n_texts %zu is above %u", fn, n_texts, UINT32_MAX);
	for (size_t i = 0; i < n_texts; i++)
		if (!texts[i])
			return infs__error(INFS_EINVAL, "%s: texts[%zu] is NULL", fn, i);
	if (prompt[0] && !e->include_prompt)
		return infs__error(INFS_EUNSUPPORTED, "%s: this model pools without its prompt, which is not "
		                   "supported", fn);
	return INFS_OK;
}

/* Tokenizes prompt + each text, back to back: text i is (*ids)[(*offsets)[i]
 * .. (*offsets)[i + 1]). Both malloc'd, NULL on error. */
static int tokenize_all(int32_t **ids_out, uint32_t **offsets_out, const infs_embedder *e, const char *prompt,
                        const char *const *texts, size_t n_texts)
{
	uint32_t *offsets = malloc((n_texts + 1) * sizeof *offsets);
	int32_t *one = malloc((size_t)e->max_seq * sizeof *one), *ids = NULL;
	size_t cap = 0;
	int rc = INFS_OK;
	if (!offsets || !one)
		rc = infs__error(INFS_ENOMEM, "infs_embed: out of memory");
	else
		offsets[0] = 0;
	for (size_t i = 0; !rc && i < n_texts; i++) {
		uint32_t n;
		rc = tokenize(e, prompt, texts[i], one, &n);
		if (!rc && (uint64_t)offsets[i] + n > UINT32_MAX)
			rc = infs__error(INFS_EINVAL, "infs_embed: above %u tokens in one call",
			                 UINT32_MAX);
		if (!rc && offsets[i] + (size_t)n > cap) {
			size_t ncap = cap ? 2 * cap : 4096;
			while (ncap < offsets[i] + (size_t)n)
				ncap *= 2;
			int32_t *nids = realloc(ids, ncap * sizeof *ids);
			if (!nids) {
				rc = infs__error(INFS_ENOMEM, "infs_embed: out of memory");
			} else {
				ids = nids;
				cap = ncap;
			}
		}
		if (!rc) {
			memcpy(ids + offsets[i], one, (size_t)n * sizeof *ids);
			offsets[i + 1] = offsets[i] + n;
		}
	}
	free(one);
	if (rc) {
		free(ids);
		free(offsets);
		ids = NULL;
		offsets = NULL;
	}
	*ids_out = ids;
	*offsets_out = offsets;
	return rc;
}

/* Consecutive texts from first whose tokens fit in batch_max: their count,
 * their offsets from the first's in batch_off. */
static size_t next_batch(uint32_t *batch_off, const uint32_t *offsets, size_t first, size_t n_texts,
                         uint32_t batch_max)
{
	size_t end = first;
	uint32_t n_tok = 0;
	batch_off[0] = 0;
	while (end < n_texts && n_tok + (offsets[end + 1] - offsets[end]) <= batch_max) {
		n_tok += offsets[end + 1] - offsets[end];
		batch_off[end - first + 1] = n_tok;
		end++;
	}
	return end - first;
}

/* Encodes tokenized texts on the CPU in batches of up to batch_max tokens;
 * out is written only once nothing can fail. */
static int embed_cpu(float *out, const infs_embedder *e, const int32_t *ids, const uint32_t *offsets,
                     size_t n_texts)
{
	uint32_t max_seq = e->max_seq, n_threads = e->n_threads;
	uint32_t batch_max = max_seq > BATCH_TOKENS ? max_seq : BATCH_TOKENS;
	uint32_t *batch_off = malloc(((size_t)batch_max + 1) * sizeof *batch_off);
	float *scratch = malloc(infs__bert_scratch_floats(&e->cfg, batch_max, n_threads) *
	                        sizeof *scratch);
	infs__pool *pool = NULL;
	int rc = INFS_OK;
	if (!batch_off || !scratch)
		rc = infs__error(INFS_ENOMEM, "infs_embed: out of memory");
	if (!rc)
		rc = infs__pool_borrow(e->pool, n_threads, &pool);
	for (size_t first = 0; !rc && first < n_texts;) {
		size_t n = next_batch(batch_off, offsets, first, n_texts, batch_max);
		infs__bert_encode(&e->cfg, &e->w, ids + offsets[first], batch_off, (uint32_t)n,
		                  e->pooling, e->normalize, pool, scratch, out + first * e->cfg.dim);
		first += n;
	}
	infs__pool_give_back(e->pool, pool);
	free(batch_off);
	free(scratch);
	return rc;
}

/* The same on the device, in batches that fill its workspace, into a host
 * buffer first so that out stays untouched when the device fails. */
static int embed_on_device(float *out, infs_embedder *e, const int32_t *ids, const uint32_t *offsets,
                           size_t n_texts)
{
	const size_t dim = e->cfg.dim;
	uint32_t *batch_off = malloc((n_texts + 1) * sizeof *batch_off);
	float *res = malloc(n_texts * dim * sizeof *res);
	int rc = INFS_OK;
	if (!batch_off || !res)
		rc = infs__error(INFS_ENOMEM, "infs_embed: out of memory");
	pthread_mutex_lock(&e->dev_lock);
	/* every text fits: it has at most max_seq <= dev_tokens tokens */
	for (size_t first = 0; !rc && first < n_texts;) {
		size_t n = next_batch(batch_off, offsets, first, n_texts, e->dev_tokens);
		rc = infs__cuda->bert_encode_host(e->dev, ids + offsets[first], batch_off, (uint32_t)n, e->pooling,
		                                  e->normalize, res + first * dim);
		first += n;
	}
	pthread_mutex_unlock(&e->dev_lock);
	if (!rc)
		memcpy(out, res, n_texts * dim * sizeof *out);
	free(batch_off);
	free(res);
	return rc;
}

int infs_embed(float *out, const infs_embedder *e, const char *const *texts, size_t n_texts,
               const infs_embed_options *in)
{
	infs_embed_options o = INFS_EMBED_OPTIONS_INIT;
	if (!out)
		return infs__error(INFS_EINVAL, "infs_embed: out is NULL");
	if (!e)
		return infs__error(INFS_EINVAL, "infs_embed: embedder is NULL");
	int rc = INFS__TAKE(o, in, infs__sizes_embed_options, "infs_embed", "options");
	if (rc)
		return rc;
	const char *prompt = o.prompt ? o.prompt : "";
	if ((rc = check_texts(e, texts, n_texts, prompt, "infs_embed")) || n_texts == 0)
		return rc;

	/* Tokenize everything first, so that nothing can fail once out is
	 * being written. */
	int32_t *ids;
	uint32_t *offsets;
	rc = tokenize_all(&ids, &offsets, e, prompt, texts, n_texts);
	if (!rc)
		rc = e->dev ? embed_on_device(out, (infs_embedder *)e, ids, offsets, n_texts)
		            : embed_cpu(out, e, ids, offsets, n_texts);
	free(ids);
	free(offsets);
	return rc;
}

/* ---- the device entries (embed_device.h) ------------------------------------ */

int infs__embedder_device(const infs_embedder *e)
{
	return e ? e->device : -1;
}

uint32_t infs__embedder_device_tokens(const infs_embedder *e)
{
	return e && e->dev ? e->dev_tokens : 0;
}

uint64_t infs__embedder_device_graph_runs(const infs_embedder *e)
{
	if (!e || !e->dev)
		return 0;
	infs_embedder *m = (infs_embedder *)e; /* the device state only */
	pthread_mutex_lock(&m->dev_lock);
	const uint64_t n = infs__cuda->bert_graph_runs(e->dev);
	pthread_mutex_unlock(&m->dev_lock);
	return n;
}

static int check_device_call(float *out, const infs_embedder *e, const char *fn)
{
	if (!out)
		return infs__error(INFS_EINVAL, "%s: out is NULL", fn);
	if (!e)
		return infs__error(INFS_EINVAL, "%s: embedder is NULL", fn);
	if (!e->dev)
		return infs__error(INFS_EINVAL, "%s: the embedder was not loaded on a device", fn);
	return INFS_OK;
}

int infs__embed_device_tokens(float *out, const infs_embedder *e, const int32_t *ids, const uint32_t *offsets,
                              uint32_t n_seq, void *stream)
{
	static const char fn[] = "infs__embed_device_tokens";
	int rc = check_device_call(out, e, fn);
	if (rc || n_seq == 0)
		return rc;
	if (!ids || !offsets)
		return infs__error(INFS_EINVAL, "%s: ids or offsets is NULL", fn);
	if (offsets[0] != 0)
		return infs__error(INFS_EINVAL, "%s: offsets[0] is %u, not 0", fn, offsets[0]);
	for (uint32_t s = 0; s < n_seq; s++) {
		if (offsets[s + 1] <= offsets[s])
			return infs__error(INFS_EINVAL, "%s: sequence %u has no tokens (offsets %u, %u)", fn, s,
			                   offsets[s], offsets[s + 1]);
		if (offsets[s + 1] - offsets[s] > e->max_seq)
			return infs__error(INFS_ERANGE, "%s: sequence %u has %u tokens, above max_seq_length %u", fn, s,
			                   offsets[s + 1] - offsets[s], e->max_seq);
		if (offsets[s + 1] > e->dev_tokens)
			return infs__error(INFS_ERANGE, "%s: above %u tokens, the device workspace's", fn,
			                   e->dev_tokens);
	}
	for (uint32_t t = 0; t < offsets[n_seq]; t++)
		if (ids[t] < 0 || (uint32_t)ids[t] >= e->cfg.n_vocab)
			return infs__error(INFS_EINVAL, "%s: token %u is id %d, outside 0..%u", fn, t, ids[t],
			                   e->cfg.n_vocab - 1);
	infs_embedder *m = (infs_embedder *)e; /* the device state only */
	pthread_mutex_lock(&m->dev_lock);
	rc = infs__cuda->bert_encode(m->dev, ids, offsets, n_seq, e->pooling, e->normalize, out, stream);
	pthread_mutex_unlock(&m->dev_lock);
	return rc;
}

int infs__embed_device(float *out, const infs_embedder *e, const char *const *texts, size_t n_texts,
                       const char *prompt, void *stream)
{
	static const char fn[] = "infs__embed_device";
	int rc = check_device_call(out, e, fn);
	if (!prompt)
		prompt = "";
	if (!rc)
		rc = check_texts(e, texts, n_texts, prompt, fn);
	if (rc || n_texts == 0)
		return rc;
	if (n_texts > e->dev_tokens) /* every text has a token at least */
		return infs__error(INFS_ERANGE, "%s: %zu texts, above %u, the device workspace's tokens", fn,
		                   n_texts, e->dev_tokens);
	infs_embedder *m = (infs_embedder *)e; /* the device state only */
	pthread_mutex_lock(&m->dev_lock);
	m->dev_off[0] = 0;
	for (size_t i = 0; !rc && i < n_texts; i++) {
		uint32_t n;
		rc = tokenize(e, prompt, texts[i], m->dev_one, &n);
		if (!rc && m->dev_off[i] + (uint64_t)n > m->dev_tokens)
			rc = infs__error(INFS_ERANGE, "%s: texts 0..%zu have %llu tokens, above %u, the device "
			                 "workspace's", fn, i, (unsigned long long)m->dev_off[i] + n, m->dev_tokens);
		if (!rc) {
			memcpy(m->dev_ids + m->dev_off[i], m->dev_one, (size_t)n * sizeof *m->dev_ids);
			m->dev_off[i + 1] = m->dev_off[i] + n;
		}
	}
	if (!rc)
		rc = infs__cuda->bert_encode(m->dev, m->dev_ids, m->dev_off, (uint32_t)n_texts, e->pooling,
		                             e->normalize, out, stream);
	pthread_mutex_unlock(&m->dev_lock);
	return rc;
}

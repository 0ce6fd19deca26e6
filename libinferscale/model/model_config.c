/* Architecture and hyper-parameters of a model, from config.json (and from
 * GGUF metadata), in the form the forward pass and the store need. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "model/model.h"

const char *infs__arch_name(infs__arch arch)
{
	switch (arch) {
	case INFS_ARCH_LLAMA: return "llama";
	case INFS_ARCH_MISTRAL: return "mistral";
	case INFS_ARCH_QWEN2: return "qwen2";
	case INFS_ARCH_QWEN3: return "qwen3";
	}
	return "unknown";
}

/* A positive integer field below 2^31, or def when the key is absent or
 * null; -1 (with the message set) when present but not such an integer. */
static int64_t get_uint(const infs__json *obj, const char *key, int64_t def, const char *path)
{
	const infs__json *v = infs__json_get(obj, key);
	if (!v || v->type == INFS_JSON_NULL)
		return def;
	if (v->type != INFS_JSON_NUMBER || !(v->number >= 0) || v->number >= 2147483648.0 ||
	    v->number != floor(v->number)) {
		infs__error(INFS_EFORMAT, "%s: \"%s\" must be a non-negative integer", path, key);
		return -1;
	}
	return (int64_t)v->number;
}

static int get_bool(const infs__json *obj, const char *key, int def)
{
	const infs__json *v = infs__json_get(obj, key);
	return v && v->type == INFS_JSON_BOOL ? v->boolean : def;
}

/* rope_parameters (transformers >= 5) or rope_theta + rope_scaling (older
 * files) into the geometry's rotary fields. */
static int read_rope(infs__model_config *c, const infs__json *root, const char *path)
{
	infs_geometry *g = &c->geom;
	const infs__json *rp = infs__json_get(root, "rope_parameters");
	if (rp && rp->type != INFS_JSON_OBJECT && rp->type != INFS_JSON_NULL)
		return infs__error(INFS_EFORMAT, "%s: rope_parameters must be an object", path);
	if (!rp || rp->type == INFS_JSON_NULL)
		rp = infs__json_get(root, "rope_scaling");
	if (rp && rp->type == INFS_JSON_NULL)
		rp = NULL;
	if (rp && rp->type != INFS_JSON_OBJECT)
		return infs__error(INFS_EFORMAT, "%s: rope_scaling must be an object", path);
	g->rope_theta = infs__json_number(infs__json_get(rp, "rope_theta"),
	                                  infs__json_number(infs__json_get(root, "rope_theta"), 10000.0));
	const char *type = infs__json_str(infs__json_get(rp, "rope_type"),
	                                  infs__json_str(infs__json_get(rp, "type"), "default"));
	double prf = infs__json_number(infs__json_get(rp, "partial_rotary_factor"),
	                               infs__json_number(infs__json_get(root, "partial_rotary_factor"), 1.0));
	if (prf != 1.0)
		return infs__error(INFS_EUNSUPPORTED, "%s: partial_rotary_factor %g: %s rotates whole heads",
		                   path, prf, infs__arch_name(c->arch));
	g->rotary_dim = c->head_dim;
	if (strcmp(type, "default") == 0) {
		g->rope_scaling = INFS_ROPE_SCALING_NONE;
		return INFS_OK;
	}
	const infs__json *factor = infs__json_get(rp, "factor");
	g->rope_factor = infs__json_number(factor, 1.0);
	int64_t orig = get_uint(rp, "original_max_position_embeddings", 0, path);
	if (orig < 0)
		return INFS_EFORMAT;
	if (strcmp(type, "linear") == 0) {
		g->rope_scaling = INFS_ROPE_SCALING_LINEAR;
	} else if (strcmp(type, "llama3") == 0) {
		g->rope_scaling = INFS_ROPE_SCALING_LLAMA3;
		g->rope_low_freq_factor = infs__json_number(infs__json_get(rp, "low_freq_factor"), 1.0);
		g->rope_high_freq_factor = infs__json_number(infs__json_get(rp, "high_freq_factor"), 4.0);
		g->rope_original_max_pos = (uint32_t)orig;
	} else if (strcmp(type, "yarn") == 0) {
		g->rope_scaling = INFS_ROPE_SCALING_YARN;
		g->rope_original_max_pos = (uint32_t)orig;
		if (!get_bool(rp, "truncate", 1))
			return infs__error(INFS_EUNSUPPORTED, "%s: yarn with truncate=false is not supported", path);
		if (!factor || factor->type == INFS_JSON_NULL) {
			if (orig == 0)
				return infs__error(INFS_EFORMAT, "%s: yarn needs factor or original_max_position_embeddings", path);
			g->rope_factor = (double)c->n_ctx_train / (double)orig;
		}
		/* transformers treats 0 and absence of the betas alike. */
		double bf = infs__json_number(infs__json_get(rp, "beta_fast"), 0);
		double bs = infs__json_number(infs__json_get(rp, "beta_slow"), 0);
		g->rope_beta_fast = bf ? bf : 32.0;
		g->rope_beta_slow = bs ? bs : 1.0;
		double af = infs__json_number(infs__json_get(rp, "attention_factor"), 0);
		double ms = infs__json_number(infs__json_get(rp, "mscale"), 0);
		double msa = infs__json_number(infs__json_get(rp, "mscale_all_dim"), 0);
		if (af == 0 && ms && msa) {
			double f = g->rope_factor;
			double num = f <= 1 ? 1.0 : 0.1 * ms * log(f) + 1.0;
			double den = f <= 1 ? 1.0 : 0.1 * msa * log(f) + 1.0;
			af = num / den;
		}
		g->rope_attn_factor = af;
	} else {
		return infs__error(INFS_EUNSUPPORTED, "%s: rope type \"%s\" is not supported (default, linear, llama3, yarn are)",
		                   path, type);
	}
	return INFS_OK;
}

int infs__config_from_json(infs__model_config *c, const infs__json *root, const char *path)
{
	if (!root || root->type != INFS_JSON_OBJECT)
		return infs__error(INFS_EFORMAT, "%s: not a JSON object", path);
	memset(c, 0, sizeof *c);
	infs_geometry_init(&c->geom, INFS_GEOMETRY_VERSION);
	const char *mt = infs__json_str(infs__json_get(root, "model_type"), NULL);
	if (!mt)
		return infs__error(INFS_EFORMAT, "%s: no model_type", path);
	if (strcmp(mt, "llama") == 0)
		c->arch = INFS_ARCH_LLAMA;
	else if (strcmp(mt, "mistral") == 0)
		c->arch = INFS_ARCH_MISTRAL;
	else if (strcmp(mt, "qwen2") == 0)
		c->arch = INFS_ARCH_QWEN2;
	else if (strcmp(mt, "qwen3") == 0)
		c->arch = INFS_ARCH_QWEN3;
	else
		return infs__error(INFS_EUNSUPPORTED, "%s: model_type \"%s\" is not supported (llama, mistral, qwen2, qwen3 are)",
		                   path, mt);

	const char *act = infs__json_str(infs__json_get(root, "hidden_act"), "silu");
	if (strcmp(act, "silu") != 0)
		return infs__error(INFS_EUNSUPPORTED, "%s: hidden_act \"%s\" is not supported (silu is)", path, act);

	int64_t v[8];
	static const char *const keys[] = { "vocab_size", "hidden_size", "num_hidden_layers",
		"num_attention_heads", "intermediate_size", "max_position_embeddings" };
	for (int i = 0; i < 6; i++) {
		v[i] = get_uint(root, keys[i], 0, path);
		if (v[i] < 0)
			return INFS_EFORMAT;
		if (v[i] == 0)
			return infs__error(INFS_EFORMAT, "%s: \"%s\" is missing or zero", path, keys[i]);
	}
	c->n_vocab = (uint32_t)v[0];
	c->n_embd = (uint32_t)v[1];
	c->n_layers = (uint32_t)v[2];
	c->n_heads = (uint32_t)v[3];
	c->n_ff = (uint32_t)v[4];
	c->n_ctx_train = (uint32_t)v[5];
	if ((v[6] = get_uint(root, "num_key_value_heads", c->n_heads, path)) < 0)
		return INFS_EFORMAT;
	c->n_kv_heads = (uint32_t)v[6];
	if ((v[7] = get_uint(root, "head_dim", c->n_embd / c->n_heads, path)) < 0)
		return INFS_EFORMAT;
	c->head_dim = (uint32_t)v[7];
	c->norm_eps = (float)infs__json_number(infs__json_get(root, "rms_norm_eps"), 1e-6);
	c->tied = get_bool(root, "tie_word_embeddings", 0);

	switch (c->arch) {
	case INFS_ARCH_LLAMA:
		if (get_bool(root, "mlp_bias", 0))
			return infs__error(INFS_EUNSUPPORTED, "%s: mlp_bias is not supported", path);
		c->bias_qkv = c->bias_o = get_bool(root, "attention_bias", 0);
		break;
	case INFS_ARCH_MISTRAL: {
		int64_t w = get_uint(root, "sliding_window", 0, path);
		if (w < 0)
			return INFS_EFORMAT;
		c->sliding_window = (uint32_t)w;
		break;
	}
	case INFS_ARCH_QWEN2:
	case INFS_ARCH_QWEN3:
		if (get_bool(root, "use_sliding_window", 0))
			return infs__error(INFS_EUNSUPPORTED, "%s: use_sliding_window is not supported for %s",
			                   path, mt);
		if (c->arch == INFS_ARCH_QWEN2) {
			c->bias_qkv = 1;
		} else {
			c->bias_qkv = c->bias_o = get_bool(root, "attention_bias", 0);
			c->qk_norm = 1;
		}
		break;
	}
	c->geom.n_layers = c->n_layers;
	c->geom.n_kv_heads = c->n_kv_heads;
	c->geom.head_dim = c->head_dim;
	c->geom.rope_style = INFS_ROPE_NEOX;
	int rc = read_rope(c, root, path);
	if (rc)
		return rc;
	return infs__config_check(c, path);
}

int infs__config_check(const infs__model_config *c, const char *path)
{
	if (c->n_embd > 65536 || c->n_ff > (1u << 20) || c->n_vocab > (1u << 24) || c->n_layers > 4096)
		return infs__error(INFS_EFORMAT, "%s: hyper-parameters out of range (hidden %u, ffn %u, vocab %u, layers %u)",
		                   path, c->n_embd, c->n_ff, c->n_vocab, c->n_layers);
	if (c->n_heads == 0 || c->n_kv_heads == 0 || c->n_heads % c->n_kv_heads)
		return infs__error(INFS_EFORMAT, "%s: %u attention heads are not a multiple of %u KV heads",
		                   path, c->n_heads, c->n_kv_heads);
	if (c->head_dim == 0 || c->head_dim % 2 || c->head_dim > 2 * INFS_ROPE_MAX_PAIRS)
		return infs__error(INFS_EFORMAT, "%s: head_dim %u must be even and at most %u", path,
		                   c->head_dim, 2 * INFS_ROPE_MAX_PAIRS);
	if ((uint64_t)c->n_heads * c->head_dim > (1u << 20))
		return infs__error(INFS_EFORMAT, "%s: %u heads of %u are too wide", path, c->n_heads, c->head_dim);
	if (!(c->norm_eps > 0) || !isfinite(c->norm_eps))
		return infs__error(INFS_EFORMAT, "%s: rms_norm_eps %g must be > 0", path, (double)c->norm_eps);
	int rc = infs_geometry_validate(&c->geom);
	if (rc)
		return infs__error_wrap(rc, "%s", path);
	return INFS_OK;
}

/* {arch}.suffix as an integer in 1..2^31, def when absent (0: required). */
static int gguf_uint(const infs__gguf *g, const char *arch, const char *suffix, int64_t def, uint32_t *out,
                     const char *path)
{
	char key[128];
	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	int64_t v;
	int rc = infs__gguf_get_int(g, key, &v);
	if (rc == INFS_ENOTFOUND && def)
		v = def;
	else if (rc == INFS_ENOTFOUND)
		return infs__error(INFS_EFORMAT, "%s: metadata %s is missing", path, key);
	else if (rc)
		return infs__error_wrap(rc, "%s", path);
	if (v <= 0 || v >= 2147483648LL)
		return infs__error(INFS_EFORMAT, "%s: metadata %s = %lld is out of range", path, key, (long long)v);
	*out = (uint32_t)v;
	return INFS_OK;
}

static int gguf_float(const infs__gguf *g, const char *arch, const char *suffix, double def, double *out,
                      const char *path)
{
	char key[128];
	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	int rc = infs__gguf_get_float(g, key, out);
	if (rc == INFS_ENOTFOUND) {
		*out = def;
		return INFS_OK;
	}
	return rc ? infs__error_wrap(rc, "%s", path) : INFS_OK;
}

int infs__config_from_gguf(infs__model_config *c, const infs__gguf *g, const char *path)
{
	memset(c, 0, sizeof *c);
	infs_geometry_init(&c->geom, INFS_GEOMETRY_VERSION);
	infs__gguf_str a;
	int rc = infs__gguf_get_str(g, "general.architecture", &a);
	if (rc)
		return infs__error_wrap(rc == INFS_ENOTFOUND ? INFS_EFORMAT : rc, "%s", path);
	if (infs__gguf_str_eq(a, "llama"))
		c->arch = INFS_ARCH_LLAMA;
	else if (infs__gguf_str_eq(a, "qwen2"))
		c->arch = INFS_ARCH_QWEN2;
	else if (infs__gguf_str_eq(a, "qwen3"))
		c->arch = INFS_ARCH_QWEN3;
	else
		return infs__error(INFS_EUNSUPPORTED, "%s: architecture \"%.*s\" is not supported (llama, qwen2, qwen3 are)",
		                   path, (int)(a.len > 64 ? 64 : a.len), a.ptr);
	const char *arch = infs__arch_name(c->arch);
	if ((rc = gguf_uint(g, arch, "block_count", 0, &c->n_layers, path)) ||
	    (rc = gguf_uint(g, arch, "embedding_length", 0, &c->n_embd, path)) ||
	    (rc = gguf_uint(g, arch, "feed_forward_length", 0, &c->n_ff, path)) ||
	    (rc = gguf_uint(g, arch, "attention.head_count", 0, &c->n_heads, path)) ||
	    (rc = gguf_uint(g, arch, "attention.head_count_kv", c->n_heads, &c->n_kv_heads, path)) ||
	    (rc = gguf_uint(g, arch, "context_length", 2048, &c->n_ctx_train, path)) ||
	    (rc = gguf_uint(g, arch, "attention.key_length", c->n_embd / (c->n_heads ? c->n_heads : 1),
	                    &c->head_dim, path)))
		return rc;
	uint32_t rot;
	if ((rc = gguf_uint(g, arch, "rope.dimension_count", c->head_dim, &rot, path)))
		return rc;
	if (rot != c->head_dim)
		return infs__error(INFS_EUNSUPPORTED, "%s: rope.dimension_count %u differs from the head size %u: %s rotates whole heads",
		                   path, rot, c->head_dim, arch);
	double eps, theta;
	if ((rc = gguf_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-6, &eps, path)) ||
	    (rc = gguf_float(g, arch, "rope.freq_base", 10000.0, &theta, path)))
		return rc;
	c->norm_eps = (float)eps;

	const infs__gguf_tensor *embd = infs__gguf_tensor_find(g, "token_embd.weight");
	if (!embd || embd->n_dims != 2)
		return infs__error(INFS_EFORMAT, "%s: tensor \"token_embd.weight\" is missing or not a matrix", path);
	if (embd->ne[1] == 0 || embd->ne[1] > (1u << 24))
		return infs__error(INFS_EFORMAT, "%s: vocabulary of %llu tokens is out of range", path,
		                   (unsigned long long)embd->ne[1]);
	c->n_vocab = (uint32_t)embd->ne[1];
	uint32_t vocab;
	if ((rc = gguf_uint(g, arch, "vocab_size", c->n_vocab, &vocab, path)))
		return rc;
	if (vocab != c->n_vocab)
		return infs__error(INFS_EFORMAT, "%s: %s.vocab_size is %u but token_embd.weight has %u rows", path,
		                   arch, vocab, c->n_vocab);
	c->tied = infs__gguf_tensor_find(g, "output.weight") == NULL;
	c->bias_qkv = infs__gguf_tensor_find(g, "blk.0.attn_q.bias") != NULL || c->arch == INFS_ARCH_QWEN2;
	c->bias_o = infs__gguf_tensor_find(g, "blk.0.attn_output.bias") != NULL;
	c->qk_norm = c->arch == INFS_ARCH_QWEN3;

	infs_geometry *ge = &c->geom;
	ge->n_layers = c->n_layers;
	ge->n_kv_heads = c->n_kv_heads;
	ge->head_dim = c->head_dim;
	ge->rotary_dim = c->head_dim;
	ge->rope_style = INFS_ROPE_NEOX; /* llama's q/k rows are un-permuted at load */
	ge->rope_theta = theta;
	/* Llama 3.1 GGUFs carry their scaling as precomputed per-frequency
	 * factors (rope_freqs.weight), not as parameters. */
	if (infs__gguf_tensor_find(g, "rope_freqs.weight"))
		return infs__error(INFS_EUNSUPPORTED, "%s: rope_freqs.weight (precomputed RoPE factors) is not supported; load the Hugging Face checkpoint instead",
		                   path);
	char key[128];
	snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
	infs__gguf_str st;
	rc = infs__gguf_get_str(g, key, &st);
	if (rc && rc != INFS_ENOTFOUND)
		return infs__error_wrap(rc, "%s", path);
	if (rc == INFS_OK && !infs__gguf_str_eq(st, "none")) {
		double factor;
		uint32_t orig;
		if ((rc = gguf_float(g, arch, "rope.scaling.factor", 1.0, &factor, path)) ||
		    (rc = gguf_uint(g, arch, "rope.scaling.original_context_length", c->n_ctx_train, &orig, path)))
			return rc;
		ge->rope_factor = factor;
		if (infs__gguf_str_eq(st, "linear")) {
			ge->rope_scaling = INFS_ROPE_SCALING_LINEAR;
		} else if (infs__gguf_str_eq(st, "yarn")) {
			ge->rope_scaling = INFS_ROPE_SCALING_YARN;
			ge->rope_original_max_pos = orig;
		} else {
			return infs__error(INFS_EUNSUPPORTED, "%s: rope scaling \"%.*s\" is not supported", path,
			                   (int)(st.len > 32 ? 32 : st.len), st.ptr);
		}
	}
	return infs__config_check(c, path);
}

/* Bad model files and bad arguments: each a clear error, never a crash.
 * Damaged copies of the tiny llama fixture (safetensors + config.json) and
 * of its GGUF conversion are written to a temporary directory.
 * argv: the tests/fixtures/model directory. */
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "model_compare.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "read_file.h"

static char tmp[256];
static const char *fixtures;

static void spit(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len)
		abort();
	fclose(f);
}

static const char *tpath(const char *name)
{
	static char buf[512];
	snprintf(buf, sizeof buf, "%s/%s", tmp, name);
	return buf;
}

/* A model directory: config (NULL: the fixture's) + safetensors bytes. */
static void make_dir(const char *config, const void *st, size_t st_len)
{
	char p[600];
	if (config) {
		snprintf(p, sizeof p, "%s/config.json", tmp);
		spit(p, config, strlen(config));
	} else {
		size_t n;
		snprintf(p, sizeof p, "%s/llama/config.json", fixtures);
		unsigned char *c = (unsigned char *)read_file(p, &n);
		snprintf(p, sizeof p, "%s/config.json", tmp);
		spit(p, c, n);
		free(c);
	}
	snprintf(p, sizeof p, "%s/model.safetensors", tmp);
	spit(p, st, st_len);
}

/* Loading must fail with code and a message holding want. */
static void expect_load(int code, const char *want, int line)
{
	infs_model *m = (infs_model *)1;
	int rc = infs_model_load(&m, tmp, NULL);
	if (rc != code || m != (infs_model *)1 || !strstr(infs_error_last(), want)) {
		fprintf(stderr, "line %d: rc %d, message '%s', expected %d with '%s'\n", line, rc,
		        infs_error_last(), code, want);
		check_failures++;
	}
}

static void expect_load_file(const char *path, int code, const char *want, int line)
{
	infs_model *m = (infs_model *)1;
	int rc = infs_model_load(&m, path, NULL);
	if (rc != code || m != (infs_model *)1 || !strstr(infs_error_last(), want)) {
		fprintf(stderr, "line %d: rc %d, message '%s', expected %d with '%s'\n", line, rc,
		        infs_error_last(), code, want);
		check_failures++;
	}
}

/* A safetensors image from a header and data_len zero bytes. */
static unsigned char *st_image(const char *header, size_t data_len, size_t *len)
{
	size_t h = strlen(header);
	*len = 8 + h + data_len;
	unsigned char *b = calloc(1, *len);
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)h >> (8 * i));
	memcpy(b + 8, header, h);
	return b;
}

static void expect_st(const char *header, size_t data_len, int code, const char *want, int line)
{
	size_t len;
	unsigned char *img = st_image(header, data_len, &len);
	spit(tpath("x.safetensors"), img, len);
	free(img);
	infs__safetensors *st = (infs__safetensors *)1;
	int rc = infs__safetensors_open(&st, tpath("x.safetensors"));
	if (rc != code || st != (infs__safetensors *)1 || !strstr(infs_error_last(), want)) {
		fprintf(stderr, "line %d: rc %d, message '%s', expected %d with '%s'\n", line, rc,
		        infs_error_last(), code, want);
		check_failures++;
	}
}

/* Which tensors a rewrite keeps: all (-1), those of layer 0 (0), the
 * others (1). */
static int keep(const char *name, int part)
{
	return part < 0 || (strstr(name, "layers.0.") != NULL) == (part == 0);
}

/* The fixture's safetensors rewritten: tensor drop left out, tensor
 * reshape given the shape [a, b] (same element count), only part kept. */
static unsigned char *rewrite_part(const char *drop, const char *reshape, uint64_t a, uint64_t b, int part,
                                   size_t *len)
{
	char p[600];
	snprintf(p, sizeof p, "%s/llama/model.safetensors", fixtures);
	infs__safetensors *st = NULL;
	CHECK_OK(infs__safetensors_open(&st, p));
	if (!st)
		abort();
	char *header = malloc(1 << 16);
	size_t hl = 0, off = 0;
	hl += (size_t)sprintf(header + hl, "{");
	for (size_t i = 0; i < infs__safetensors_count(st); i++) {
		const infs__st_tensor *t = infs__safetensors_at(st, i);
		if ((drop && strcmp(t->name, drop) == 0) || !keep(t->name, part))
			continue;
		hl += (size_t)sprintf(header + hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", hl > 1 ? "," : "",
		                      t->name, t->dtype_name);
		if (reshape && strcmp(t->name, reshape) == 0)
			hl += (size_t)sprintf(header + hl, "%llu,%llu", (unsigned long long)a, (unsigned long long)b);
		else
			for (uint32_t d = 0; d < t->n_dims; d++)
				hl += (size_t)sprintf(header + hl, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
		hl += (size_t)sprintf(header + hl, "],\"data_offsets\":[%zu,%zu]}", off, off + t->nbytes);
		off += t->nbytes;
	}
	hl += (size_t)sprintf(header + hl, "}");
	header[hl] = 0;
	unsigned char *img = st_image(header, off, len);
	off = 8 + hl;
	for (size_t i = 0; i < infs__safetensors_count(st); i++) {
		const infs__st_tensor *t = infs__safetensors_at(st, i);
		if ((drop && strcmp(t->name, drop) == 0) || !keep(t->name, part))
			continue;
		memcpy(img + off, t->data, t->nbytes);
		off += t->nbytes;
	}
	free(header);
	infs__safetensors_close(st);
	return img;
}

static unsigned char *rewrite(const char *drop, const char *reshape, uint64_t a, uint64_t b, size_t *len)
{
	return rewrite_part(drop, reshape, a, b, -1, len);
}

/* The fixture's config.json with the text from replaced by to. */
static char *config_with(const char *from, const char *to)
{
	char p[600];
	size_t n;
	snprintf(p, sizeof p, "%s/llama/config.json", fixtures);
	char *c = read_file(p, &n);
	c[n] = 0;
	char *at = strstr(c, from);
	if (!at)
		abort();
	char *out = malloc(n + strlen(to) + 1);
	sprintf(out, "%.*s%s%s", (int)(at - c), c, to, at + strlen(from));
	free(c);
	return out;
}

static void bad_safetensors(void)
{
	expect_st("{\"a\": ", 0, INFS_EFORMAT, "JSON", __LINE__);
	expect_st("[1, 2]", 0, INFS_EFORMAT, "not a JSON object", __LINE__);
	expect_st("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, INFS_EFORMAT,
	          "run past", __LINE__);
	expect_st("{\"w\":{\"dtype\":\"F17\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, INFS_EFORMAT,
	          "unknown dtype", __LINE__);
	expect_st("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, INFS_EFORMAT,
	          "do not hold", __LINE__);
	expect_st("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, INFS_EFORMAT,
	          "begin <= end", __LINE__);
	expect_st("{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, INFS_EFORMAT,
	          "shape[0]", __LINE__);
	expect_st("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}",
	          8, INFS_EFORMAT, "overflows", __LINE__);
	expect_st("{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, INFS_EFORMAT, "no dtype", __LINE__);
	expect_st("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, INFS_EFORMAT, "data_offsets", __LINE__);
	expect_st("{\"w\":7}", 0, INFS_EFORMAT, "not an object", __LINE__);

	/* Header length past the end, and a file too short for one. */
	unsigned char img[16] = { 200, 0, 0, 0, 0, 0, 0, 0, '{', '}' };
	spit(tpath("x.safetensors"), img, sizeof img);
	infs__safetensors *st;
	CHECK_ERR(infs__safetensors_open(&st, tpath("x.safetensors")), INFS_EFORMAT);
	CHECK(strstr(infs_error_last(), "runs past"));
	spit(tpath("x.safetensors"), img, 5);
	CHECK_ERR(infs__safetensors_open(&st, tpath("x.safetensors")), INFS_EFORMAT);
	CHECK(strstr(infs_error_last(), "truncated"));
	CHECK_ERR(infs__safetensors_open(&st, tpath("absent.safetensors")), INFS_ENOTFOUND);

	/* A valid empty header and the __metadata__ entry. */
	size_t len;
	unsigned char *ok = st_image("{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}",
	                             8, &len);
	spit(tpath("x.safetensors"), ok, len);
	free(ok);
	CHECK_OK(infs__safetensors_open(&st, tpath("x.safetensors")));
	CHECK(infs__safetensors_count(st) == 1 && infs__safetensors_find(st, "w") &&
	      infs__safetensors_find(st, "w")->dtype == INFS_ST_BF16 && !infs__safetensors_find(st, "v"));
	infs__safetensors_close(st);
	unlink(tpath("x.safetensors"));
}

static void bad_checkpoints(void)
{
	size_t len;
	unsigned char *good = rewrite(NULL, NULL, 0, 0, &len);
	make_dir(NULL, good, len);
	infs_model *m = NULL;
	CHECK_OK(infs_model_load(&m, tmp, NULL)); /* the rewrite itself is sound */
	infs_model_free(m);

	/* Truncated: the data runs past the end. */
	make_dir(NULL, good, len - 100);
	expect_load(INFS_EFORMAT, "run past", __LINE__);
	free(good);

	unsigned char *img = rewrite("model.layers.1.mlp.up_proj.weight", NULL, 0, 0, &len);
	make_dir(NULL, img, len);
	free(img);
	expect_load(INFS_EFORMAT, "\"model.layers.1.mlp.up_proj.weight\" is missing", __LINE__);

	img = rewrite(NULL, "model.layers.0.self_attn.k_proj.weight", 64, 32, &len);
	make_dir(NULL, img, len);
	free(img);
	expect_load(INFS_EFORMAT, "the configuration says [32 x 64]", __LINE__);

	/* Configurations that contradict the weights. */
	size_t glen;
	good = rewrite(NULL, NULL, 0, 0, &glen);
	static const struct {
		const char *from, *to;
		int code;
		const char *want;
	} cfgs[] = {
		{ "\"hidden_size\": 64", "\"hidden_size\": 32", INFS_EFORMAT, "model.embed_tokens.weight\" is [128 x 64]" },
		{ "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1", INFS_EFORMAT, "configuration has 1 layers" },
		{ "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3", INFS_EFORMAT, "model.layers.2.input_layernorm.weight\" is missing" },
		{ "\"vocab_size\": 128", "\"vocab_size\": 100", INFS_EFORMAT, "[100 x 64]" },
		{ "\"intermediate_size\": 96", "\"intermediate_size\": 64", INFS_EFORMAT, "gate_proj.weight\" is [96 x 64]" },
		{ "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4", INFS_EFORMAT, "k_proj.weight" },
		{ "\"num_attention_heads\": 4", "\"num_attention_heads\": 3", INFS_EFORMAT, "not a multiple" },
		{ "\"model_type\": \"llama\"", "\"model_type\": \"gpt2\"", INFS_EUNSUPPORTED, "model_type \"gpt2\"" },
		{ "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", INFS_EUNSUPPORTED, "hidden_act" },
		{ "\"rope_type\": \"default\"", "\"rope_type\": \"dynamic\"", INFS_EUNSUPPORTED, "dynamic" },
		{ "\"rope_type\": \"default\"", "\"rope_type\": \"default\", \"partial_rotary_factor\": 0.5",
		  INFS_EUNSUPPORTED, "partial_rotary_factor" },
		{ "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1", INFS_EFORMAT, "rms_norm_eps" },
		{ "\"head_dim\": 16", "\"head_dim\": 15", INFS_EFORMAT, "head_dim 15" },
		{ "\"hidden_size\": 64", "\"hidden_size\": 6.5", INFS_EFORMAT, "\"hidden_size\" must be" },
		{ "\"tie_word_embeddings\": false", "\"attention_bias\": true", INFS_EFORMAT, "q_proj.bias\" is missing" },
		{ "\"mlp_bias\": false", "\"mlp_bias\": true", INFS_EUNSUPPORTED, "mlp_bias" },
		{ "{", "{ \"model_type\": {\"x\": ", INFS_EFORMAT, "JSON" },
	};
	for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
		char *c = config_with(cfgs[i].from, cfgs[i].to);
		make_dir(c, good, glen);
		free(c);
		expect_load(cfgs[i].code, cfgs[i].want, (int)(1000 + i));
	}
	/* No config.json, no weights. */
	unlink(tpath("config.json"));
	expect_load(INFS_ENOTFOUND, "config.json", __LINE__);
	make_dir(NULL, good, glen);
	unlink(tpath("model.safetensors"));
	expect_load(INFS_ENOTFOUND, "model.safetensors", __LINE__);
	/* A weight in an integer dtype. */
	char *hdr = malloc(glen);
	memcpy(hdr, good, glen);
	unsigned char *at = memmem(good, glen, "\"F16\"", 5);
	CHECK(at != NULL);
	if (at) {
		memcpy(at, "\"I16\"", 5);
		make_dir(NULL, good, glen);
		expect_load(INFS_EUNSUPPORTED, "is I16", __LINE__);
	}
	free(hdr);
	free(good);
	unlink(tpath("config.json"));
	unlink(tpath("model.safetensors"));
}

/* The fixture split into two shards with an index loads to the same model;
 * a tensor in both shards is refused. */
static void sharded(void)
{
	make_dir(NULL, "", 0);
	unlink(tpath("model.safetensors"));
	size_t l0, l1;
	unsigned char *s0 = rewrite_part(NULL, NULL, 0, 0, 0, &l0), *s1 = rewrite_part(NULL, NULL, 0, 0, 1, &l1);
	spit(tpath("model-00001-of-00002.safetensors"), s0, l0);
	spit(tpath("model-00002-of-00002.safetensors"), s1, l1);
	char p[600];
	snprintf(p, sizeof p, "%s/llama/model.safetensors", fixtures);
	infs__safetensors *st = NULL;
	CHECK_OK(infs__safetensors_open(&st, p));
	char *index = malloc(1 << 16);
	size_t il = (size_t)sprintf(index, "{\"metadata\": {}, \"weight_map\": {");
	for (size_t i = 0; st && i < infs__safetensors_count(st); i++) {
		const char *name = infs__safetensors_at(st, i)->name;
		il += (size_t)sprintf(index + il, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"", i ? ", " : "", name,
		                      keep(name, 0) ? 1 : 2);
	}
	il += (size_t)sprintf(index + il, "}}");
	infs__safetensors_close(st);
	spit(tpath("model.safetensors.index.json"), index, il);
	free(index);

	infs_model *a = NULL, *b = NULL;
	snprintf(p, sizeof p, "%s/llama", fixtures);
	CHECK_OK(infs_model_load(&a, p, NULL));
	CHECK_OK(infs_model_load(&b, tmp, NULL));
	if (a && b) {
		int32_t tok[3] = { 5, 9, 100 };
		float la[128], lb[128];
		CHECK_OK(infs_model_forward(la, NULL, NULL, a, tok, NULL, 3, NULL));
		CHECK_OK(infs_model_forward(lb, NULL, NULL, b, tok, NULL, 3, NULL));
		CHECK(memcmp(la, lb, sizeof la) == 0);
		char *ia = NULL, *ib = NULL;
		CHECK_OK(infs_model_identity(&ia, a, INFS_DTYPE_F16));
		CHECK_OK(infs_model_identity(&ib, b, INFS_DTYPE_F16));
		CHECK(ia && ib && strcmp(ia, ib) == 0); /* same weights, same identity */
		infs_free(ia);
		infs_free(ib);
	}
	infs_model_free(a);
	infs_model_free(b);

	/* Shard 2 also holding layer 0's tensors. */
	size_t lall;
	unsigned char *all = rewrite(NULL, NULL, 0, 0, &lall);
	spit(tpath("model-00002-of-00002.safetensors"), all, lall);
	expect_load(INFS_EFORMAT, "appears in", __LINE__);
	/* A shard name that leaves the directory. */
	const char *escape = "{\"weight_map\": {\"a\": \"../x.safetensors\"}}";
	spit(tpath("model.safetensors.index.json"), escape, strlen(escape));
	expect_load(INFS_EFORMAT, "not a file name", __LINE__);
	free(s0);
	free(s1);
	free(all);
	unlink(tpath("model-00001-of-00002.safetensors"));
	unlink(tpath("model-00002-of-00002.safetensors"));
	unlink(tpath("model.safetensors.index.json"));
	unlink(tpath("config.json"));
}

static size_t find_in(const unsigned char *b, size_t n, const char *s)
{
	const unsigned char *p = memmem(b, n, s, strlen(s));
	if (!p)
		abort();
	return (size_t)(p - b);
}

static void bad_gguf(void)
{
	char p[600];
	size_t n;
	snprintf(p, sizeof p, "%s/gguf_llama.gguf", fixtures);
	unsigned char *orig = (unsigned char *)read_file(p, &n), *b = malloc(n);
	const char *out = tpath("x.gguf");

	memcpy(b, orig, n);
	memcpy(b, "GGUX", 4);
	spit(out, b, n);
	expect_load_file(out, INFS_EFORMAT, "magic", __LINE__);

	spit(out, orig, n - 1000);
	expect_load_file(out, INFS_EFORMAT, "x.gguf", __LINE__);
	spit(out, orig, 10);
	expect_load_file(out, INFS_EFORMAT, "x.gguf", __LINE__);

	/* A tensor type the dequantiser does not know (IQ4_NL: 32-element blocks
	 * of 18 bytes fit inside the Q4_1 data). */
	memcpy(b, orig, n);
	size_t t = find_in(b, n, "blk.0.attn_q.weight") + strlen("blk.0.attn_q.weight");
	size_t type_at = t + 4 + 2 * 8;
	b[type_at] = 20;
	spit(out, b, n);
	expect_load_file(out, INFS_EUNSUPPORTED, "IQ4_NL is not supported", __LINE__);

	/* Missing metadata, an unknown architecture. */
	memcpy(b, orig, n);
	b[find_in(b, n, "llama.block_count") + 6] = 'X';
	spit(out, b, n);
	expect_load_file(out, INFS_EFORMAT, "llama.block_count is missing", __LINE__);
	memcpy(b, orig, n);
	b[find_in(b, n, "general.architecture") + strlen("general.architecture") + 4 + 8 + 4] = 'b';
	spit(out, b, n);
	expect_load_file(out, INFS_EUNSUPPORTED, "\"llamb\"", __LINE__);

	/* A missing tensor: rename blk.1.ffn_up.weight. */
	memcpy(b, orig, n);
	b[find_in(b, n, "blk.1.ffn_up.weight") + 6] = 'X';
	spit(out, b, n);
	expect_load_file(out, INFS_EFORMAT, "\"blk.1.ffn_up.weight\" is missing", __LINE__);
	/* The vocabulary size contradicting the embedding. */
	memcpy(b, orig, n);
	size_t vs = find_in(b, n, "llama.vocab_size") + strlen("llama.vocab_size") + 4;
	b[vs] = 100;
	spit(out, b, n);
	expect_load_file(out, INFS_EFORMAT, "vocab_size is 100", __LINE__);
	unlink(out);
	free(orig);
	free(b);
}

static void run_once(infs_model *m)
{
	infs_model_info info = model_info(m);
	float *logits = malloc(info.n_vocab * sizeof *logits);
	int32_t tok = 3 % (int32_t)info.n_vocab;
	CHECK_OK(infs_model_forward(logits, NULL, NULL, m, &tok, NULL, 1, NULL));
	free(logits);
	infs_model_free(m);
}

/* Random damage, many times over: loading returns a status (any) and never
 * crashes; a model that still loads runs. Deterministic. */
static void mutations(void)
{
	uint32_t seed = 12345;
	char p[600];
	size_t n;
	snprintf(p, sizeof p, "%s/llama/model.safetensors", fixtures);
	unsigned char *st = (unsigned char *)read_file(p, &n), *b = malloc(n);
	size_t hlen = 8 + (size_t)st[0] + ((size_t)st[1] << 8); /* headers of the fixtures are < 64 KiB */
	int loaded = 0;
	for (int round = 0; round < 150; round++) {
		memcpy(b, st, n);
		size_t len = n;
		for (int k = 0; k < 1 + round % 4; k++) {
			seed = seed * 1103515245u + 12345u;
			size_t at = (seed >> 8) % hlen;
			seed = seed * 1103515245u + 12345u;
			b[at] = (unsigned char)(seed >> 16);
		}
		if (round % 10 == 9)
			len = (seed >> 4) % n;
		make_dir(NULL, b, len);
		infs_model *m = NULL;
		if (infs_model_load(&m, tmp, NULL) == INFS_OK) {
			run_once(m);
			loaded++;
		} else {
			CHECK(infs_error_last()[0] != '\0');
		}
	}
	free(st);
	free(b);
	unlink(tpath("config.json"));
	unlink(tpath("model.safetensors"));

	snprintf(p, sizeof p, "%s/gguf_llama.gguf", fixtures);
	unsigned char *g = (unsigned char *)read_file(p, &n);
	b = malloc(n);
	size_t meta = find_in(g, n, "blk.1.ffn_down.weight") + 64; /* header, metadata and tensor infos */
	for (int round = 0; round < 300; round++) {
		memcpy(b, g, n);
		for (int k = 0; k < 1 + round % 3; k++) {
			seed = seed * 1103515245u + 12345u;
			size_t at = (seed >> 8) % meta;
			seed = seed * 1103515245u + 12345u;
			b[at] = (unsigned char)(seed >> 16);
		}
		spit(tpath("x.gguf"), b, n);
		infs_model *m = NULL;
		if (infs_model_load(&m, tpath("x.gguf"), NULL) == INFS_OK) {
			run_once(m);
			loaded++;
		} else {
			CHECK(infs_error_last()[0] != '\0');
		}
	}
	printf("mutations: %d of 450 damaged files still loaded (and ran)\n", loaded);
	unlink(tpath("x.gguf"));
	free(g);
	free(b);
}

static void bad_arguments(void)
{
	char p[600];
	snprintf(p, sizeof p, "%s/llama", fixtures);
	infs_model *m = NULL;
	CHECK_ERR(infs_model_load(NULL, p, NULL), INFS_EINVAL);
	CHECK_ERR(infs_model_load(&m, NULL, NULL), INFS_EINVAL);
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.version = 99;
	CHECK_ERR(infs_model_load(&m, p, &mo), INFS_EINVAL);
	mo = (infs_model_options)INFS_MODEL_OPTIONS_INIT;
	mo.int8_activations = 2;
	CHECK_ERR(infs_model_load(&m, p, &mo), INFS_EINVAL);
	CHECK_ERR(infs_model_options_init(&mo, INFS_MODEL_OPTIONS_VERSION + 1), INFS_EINVAL);
	/* device_weights: bf16 or fp8, and fp8 only for a device copy; refused
	 * before the path is looked at. */
	mo = (infs_model_options)INFS_MODEL_OPTIONS_INIT;
	CHECK(mo.device_weights == INFS_DTYPE_BF16);
	mo.device_weights = 7;
	CHECK_ERR(infs_model_load(&m, p, &mo), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "device_weights 7") != NULL);
	mo.device_weights = INFS_DTYPE_F16;
	CHECK_ERR(infs_model_load(&m, p, &mo), INFS_EINVAL);
	mo.device_weights = INFS_DTYPE_FP8_E4M3;
	CHECK_ERR(infs_model_load(&m, p, &mo), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "set device to a CUDA device") != NULL);
	CHECK_ERR(infs_model_load(&m, tpath("absent"), &mo), INFS_EINVAL);
	CHECK(m == NULL);
	/* A version-3 struct ends before device_weights: what lies there is not
	 * read, the host model loads with the default. */
	mo.device_weights = 7;
	CHECK_OK(infs_model_options_init(&mo, 3));
	CHECK(mo.version == 3 && mo.device == -1 && mo.int8_activations == 0);
	CHECK_OK(infs_model_load(&m, p, &mo));
	CHECK(m != NULL);
	infs_model_free(m);
	m = NULL;
	CHECK_OK(infs_model_options_init(&mo, INFS_MODEL_OPTIONS_VERSION));
	CHECK(mo.version == 4 && mo.device_weights == INFS_DTYPE_BF16 && mo.device == -1);
	CHECK_ERR(infs_model_load(&m, tpath("absent"), NULL), INFS_ENOTFOUND);
	infs_model_free(NULL);
	CHECK(infs_model_tokenizer(NULL) == NULL);
	CHECK_OK(infs_model_load(&m, p, NULL));
	if (!m)
		return;
	CHECK(infs_model_tokenizer(m) == NULL); /* the fixture has no tokenizer.json */

	float logits[128];
	for (int i = 0; i < 128; i++)
		logits[i] = 42.0f;
	int32_t tok[2] = { 1, 2 }, bad_tok[2] = { 1, 128 }, bad_pos[2] = { 0, -1 };
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, NULL, tok, NULL, 2, &fo), INFS_EINVAL);
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, NULL, NULL, 2, &fo), INFS_EINVAL);
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, tok, NULL, 0, &fo), INFS_EINVAL);
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, bad_tok, NULL, 2, &fo), INFS_ERANGE);
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, tok, bad_pos, 2, &fo), INFS_ERANGE);
	float kv[2 * 2 * 2 * 16];
	fo.kv_dtype = (infs_dtype)7;
	CHECK_ERR(infs_model_forward(logits, kv, NULL, m, tok, NULL, 2, &fo), INFS_EINVAL);
	fo.kv_dtype = INFS_DTYPE_F32;
	fo.n_past = 3; /* a past without a cache */
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, tok, NULL, 2, &fo), INFS_EINVAL);
	fo.n_past = 0;
	int32_t seq[2] = { 0, 1 };
	fo.seq_ids = seq;
	fo.n_past = 1; /* independent sequences and a past */
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, tok, NULL, 2, &fo), INFS_EINVAL);
	fo.seq_ids = NULL;
	fo.n_past = 0;
	fo.version = 5;
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, tok, NULL, 2, &fo), INFS_EINVAL);
	CHECK_ERR(infs_forward_options_init(&fo, 5), INFS_EINVAL);
	CHECK_OK(infs_forward_options_init(&fo, INFS_FORWARD_OPTIONS_VERSION));

	/* A cache that does not fit the model. */
	void *layers[2] = { kv, kv };
	infs_kv_layout kl = INFS_KV_LAYOUT_INIT;
	kl.dtype = INFS_DTYPE_F32;
	kl.n_layers = 2;
	kl.n_kv_heads = 1;
	kl.head_dim = 16;
	kl.n_blocks = 1;
	kl.block_size = 4;
	kl.k_layers = layers;
	kl.v_layers = layers;
	int32_t table[1] = { 0 };
	fo.cache = &kl;
	fo.block_table = table;
	fo.block_table_len = 1;
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, tok, NULL, 2, &fo), INFS_EMISMATCH);
	kl.n_kv_heads = 2;
	fo.n_past = 5; /* beyond the one block */
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, tok, NULL, 2, &fo), INFS_ERANGE);
	table[0] = 1; /* not a block */
	fo.n_past = 2;
	CHECK_ERR(infs_model_forward(logits, NULL, NULL, m, tok, NULL, 2, &fo), INFS_ERANGE);
	for (int i = 0; i < 128; i++)
		CHECK(logits[i] == 42.0f);

	infs_geometry g;
	CHECK_ERR(infs_model_geometry(&g, m, (infs_dtype)9), INFS_EINVAL);
	CHECK_ERR(infs_model_geometry(NULL, m, INFS_DTYPE_F16), INFS_EINVAL);
	char *id = NULL, *id2 = NULL;
	CHECK_ERR(infs_model_identity(&id, NULL, INFS_DTYPE_F16), INFS_EINVAL);
	CHECK_OK(infs_model_identity(&id, m, INFS_DTYPE_F16));
	CHECK_OK(infs_model_identity(&id2, m, INFS_DTYPE_BF16));
	CHECK(id && id2 && strcmp(id, id2) != 0 && strstr(id, "arch=llama"));
	infs_free(id);
	infs_free(id2);
	infs_model_info info;
	memset(&info, 0, sizeof info);
	CHECK_ERR(infs_model_info_get(&info, m), INFS_EINVAL); /* version unset */
	infs_model_free(m);
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	if (argc != 2)
		CHECK_DONE();
	fixtures = argv[1];
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(tmp, sizeof tmp, "%s/infs_model_bad_XXXXXX", base);
	if (!mkdtemp(tmp)) {
		CHECK(0);
		CHECK_DONE();
	}
	bad_safetensors();
	bad_checkpoints();
	sharded();
	bad_gguf();
	mutations();
	bad_arguments();
	rmdir(tmp);
	CHECK_DONE();
}

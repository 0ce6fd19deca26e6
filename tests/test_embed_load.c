/* infs_embedder_load on variants of the real all-MiniLM-L6-v2 directory, made
 * in a temporary directory from symlinks and edited files: what it refuses
 * (another architecture, modules or pooling it does not support, missing or
 * inconsistent files) and what the configuration changes (pooling,
 * normalisation, max_seq_length, F16 weights). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_path.h"
#include "check.h"
#include "util/dtype.h"
#include "embed/embedder.h"
#include "model/safetensors.h"

static char model[2048], tmp[256];

static const char *const files[] = {"config.json", "vocab.txt", "tokenizer_config.json",
                                    "sentence_bert_config.json", "modules.json",
                                    "model.safetensors"};
#define N_FILES (sizeof files / sizeof files[0])

static void path_of(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", tmp, name);
}

/* Resets tmp to symlinks of the model's files plus its pooling config. */
static void reset(void)
{
	char p[4096], q[4096];
	for (size_t i = 0; i < N_FILES; i++) {
		path_of(p, sizeof p, files[i]);
		unlink(p);
		snprintf(q, sizeof q, "%s/%s", model, files[i]);
		CHECK(symlink(q, p) == 0);
	}
	path_of(p, sizeof p, "1_Pooling/config.json");
	unlink(p);
	snprintf(q, sizeof q, "%s/1_Pooling/config.json", model);
	CHECK(symlink(q, p) == 0);
}

static void put(const char *name, const char *text)
{
	char p[4096];
	path_of(p, sizeof p, name);
	unlink(p);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void drop(const char *name)
{
	char p[4096];
	path_of(p, sizeof p, name);
	CHECK(unlink(p) == 0);
}

static int load(infs_embedder **e)
{
	*e = NULL;
	return infs_embedder_load(e, tmp, NULL);
}

static const char *config_with(const char *key, const char *value)
{
	static char buf[2048];
	snprintf(buf, sizeof buf,
	         "{\"model_type\": \"bert\", \"hidden_act\": \"gelu\", \"hidden_size\": 384, "
	         "\"intermediate_size\": 1536, \"max_position_embeddings\": 512, "
	         "\"num_attention_heads\": 12, \"num_hidden_layers\": 6, \"type_vocab_size\": 2, "
	         "\"vocab_size\": 30522, \"layer_norm_eps\": 1e-12, \"%s\": %s}",
	         key, value);
	return buf;
}

static double dot(const float *a, const float *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* Writes a copy of the model's safetensors with every F32 tensor in F16. */
static int write_f16(const char *out_path)
{
	char src[4096];
	snprintf(src, sizeof src, "%s/model.safetensors", model);
	infs__safetensors *st = NULL;
	if (infs__safetensors_open(&st, src) != INFS_OK)
		return 0;
	size_t n = infs__safetensors_count(st), hcap = 1 << 16, hl = 0, off = 0;
	char *header = malloc(hcap);
	hl += (size_t)snprintf(header + hl, hcap - hl, "{");
	for (size_t i = 0; i < n; i++) {
		const infs__st_tensor *t = infs__safetensors_at(st, i);
		int conv = t->dtype == INFS_ST_F32;
		size_t bytes = conv ? t->n_elems * 2 : t->nbytes;
		hl += (size_t)snprintf(header + hl, hcap - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
		                       i ? "," : "", t->name, conv ? "F16" : t->dtype_name);
		for (uint32_t d = 0; d < t->n_dims; d++)
			hl += (size_t)snprintf(header + hl, hcap - hl, "%s%llu", d ? "," : "",
			                       (unsigned long long)t->shape[d]);
		hl += (size_t)snprintf(header + hl, hcap - hl, "],\"data_offsets\":[%zu,%zu]}", off,
		                       off + bytes);
		off += bytes;
	}
	hl += (size_t)snprintf(header + hl, hcap - hl, "}");
	while (hl % 8)
		header[hl++] = ' ';
	FILE *f = fopen(out_path, "wb");
	int ok = f != NULL && hl < hcap;
	uint8_t len8[8];
	for (int b = 0; b < 8; b++)
		len8[b] = (uint8_t)((uint64_t)hl >> (8 * b));
	ok = ok && fwrite(len8, 1, 8, f) == 8 && fwrite(header, 1, hl, f) == hl;
	for (size_t i = 0; ok && i < n; i++) {
		const infs__st_tensor *t = infs__safetensors_at(st, i);
		if (t->dtype != INFS_ST_F32) {
			ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
			continue;
		}
		for (uint64_t k = 0; ok && k < t->n_elems; k++) {
			float x;
			memcpy(&x, (const char *)t->data + 4 * k, 4);
			uint16_t h = infs__f32_to_f16(x);
			ok = fwrite(&h, 2, 1, f) == 1;
		}
	}
	if (f)
		ok = fclose(f) == 0 && ok;
	free(header);
	infs__safetensors_close(st);
	return ok;
}

int main(void)
{
	cache_path(model, sizeof model, "minilm");
	snprintf(tmp, sizeof tmp, "/tmp/infs-embed-load-XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	char p[4096];
	path_of(p, sizeof p, "1_Pooling");
	CHECK(mkdir(p, 0700) == 0);
	reset();

	infs_embedder *e = NULL;
	CHECK_OK(load(&e));
	if (!e)
		CHECK_DONE();
	const size_t dim = 384;
	const char *texts[] = {"Tomas signed up for a pottery class.", "What does Tomas do?"};
	float ref[2 * 384], out[2 * 384];
	CHECK_OK(infs_embed(ref, e, texts, 2, NULL));
	infs_embedder_free(e);

	/* Refused. */
	put("config.json", config_with("model_type", "\"roberta\""));
	CHECK_ERR(load(&e), INFS_EUNSUPPORTED);
	put("config.json", config_with("hidden_act", "\"relu\""));
	CHECK_ERR(load(&e), INFS_EUNSUPPORTED);
	put("config.json", config_with("position_embedding_type", "\"relative_key\""));
	CHECK_ERR(load(&e), INFS_EUNSUPPORTED);
	put("config.json", config_with("num_attention_heads", "7")); /* 384 % 7 != 0 */
	CHECK_ERR(load(&e), INFS_EFORMAT);
	put("config.json", config_with("intermediate_size", "1000")); /* contradicts the tensors */
	CHECK_ERR(load(&e), INFS_EFORMAT);
	put("config.json", config_with("vocab_size", "100")); /* vocab.txt is longer */
	CHECK_ERR(load(&e), INFS_EFORMAT);
	put("config.json", "{\"model_type\": \"bert\",");
	CHECK_ERR(load(&e), INFS_EFORMAT);
	reset();
	drop("config.json");
	CHECK_ERR(load(&e), INFS_ENOTFOUND);
	reset();
	drop("vocab.txt");
	CHECK_ERR(load(&e), INFS_ENOTFOUND);
	reset();
	drop("model.safetensors");
	CHECK_ERR(load(&e), INFS_ENOTFOUND);
	reset();
	put("tokenizer_config.json", "{\"cls_token\": \"<s>\"}");
	CHECK_ERR(load(&e), INFS_EFORMAT);
	reset();
	put("modules.json", "[{\"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},"
	                    " {\"path\": \"2_Dense\", \"type\": \"sentence_transformers.models.Dense\"}]");
	CHECK_ERR(load(&e), INFS_EUNSUPPORTED);
	reset();
	put("1_Pooling/config.json", "{\"pooling_mode_lasttoken\": true}");
	CHECK_ERR(load(&e), INFS_EUNSUPPORTED);
	put("1_Pooling/config.json",
	    "{\"pooling_mode_cls_token\": true, \"pooling_mode_mean_tokens\": true}");
	CHECK_ERR(load(&e), INFS_EUNSUPPORTED);
	CHECK(e == NULL);

	/* CLS pooling: another unit vector. */
	put("1_Pooling/config.json", "{\"pooling_mode_cls_token\": true}");
	CHECK_OK(load(&e));
	if (e) {
		CHECK_OK(infs_embed(out, e, texts, 2, NULL));
		CHECK(fabs(dot(out, out, dim) - 1) < 1e-5 && dot(out, ref, dim) < 0.99);
	}
	infs_embedder_free(e);

	/* A prompt is refused when the pooling leaves it out. */
	put("1_Pooling/config.json", "{\"pooling_mode_mean_tokens\": true, \"include_prompt\": false}");
	CHECK_OK(load(&e));
	if (e) {
		infs_embed_options eo = INFS_EMBED_OPTIONS_INIT;
		eo.prompt = "query: ";
		CHECK_ERR(infs_embed(out, e, texts, 1, &eo), INFS_EUNSUPPORTED);
		eo.prompt = "";
		CHECK_OK(infs_embed(out, e, texts, 1, &eo));
	}
	infs_embedder_free(e);

	/* No modules.json: mean pooling without normalisation, as
	 * sentence-transformers builds for a plain Hugging Face directory. */
	reset();
	drop("modules.json");
	CHECK_OK(load(&e));
	if (e) {
		CHECK_OK(infs_embed(out, e, texts, 2, NULL));
		for (int t = 0; t < 2; t++) {
			double n2 = dot(out + t * dim, out + t * dim, dim);
			CHECK(fabs(n2 - 1) > 1e-3);
			CHECK(dot(out + t * dim, ref + t * dim, dim) / sqrt(n2) > 0.99999);
		}
	}
	infs_embedder_free(e);

	/* max_seq_length from sentence_bert_config.json, else the tokenizer's. */
	reset();
	put("sentence_bert_config.json", "{\"max_seq_length\": 128}");
	CHECK_OK(load(&e));
	CHECK(infs_embedder_max_seq_length(e) == 128);
	infs_embedder_free(e);
	drop("sentence_bert_config.json");
	CHECK_OK(load(&e));
	CHECK(infs_embedder_max_seq_length(e) == 512); /* model_max_length */
	infs_embedder_free(e);

	/* sentence-transformers' do_lower_case lower-cases before the tokenizer
	 * matches special tokens: "[SEP]" is then three pieces. */
	reset();
	put("sentence_bert_config.json", "{\"max_seq_length\": 256, \"do_lower_case\": true}");
	CHECK_OK(load(&e));
	if (e) {
		int32_t ids[16];
		uint32_t n = 0;
		CHECK_OK(infs__embedder_tokenize(e, "A[SEP]", ids, &n));
		CHECK(n == 6 && ids[1] == 1037 && ids[2] == 1031 && ids[4] == 1033);
	}
	infs_embedder_free(e);

	/* F16 weights: converted at load, nearly the same vectors. */
	reset();
	path_of(p, sizeof p, "model.safetensors");
	unlink(p);
	CHECK(write_f16(p));
	CHECK_OK(load(&e));
	if (e) {
		CHECK_OK(infs_embed(out, e, texts, 2, NULL));
		for (int t = 0; t < 2; t++)
			CHECK(dot(out + t * dim, ref + t * dim, dim) > 0.9999);
	}
	infs_embedder_free(e);

	for (size_t i = 0; i < N_FILES; i++) {
		path_of(p, sizeof p, files[i]);
		unlink(p);
	}
	path_of(p, sizeof p, "1_Pooling/config.json");
	unlink(p);
	path_of(p, sizeof p, "1_Pooling");
	rmdir(p);
	rmdir(tmp);
	CHECK_DONE();
}

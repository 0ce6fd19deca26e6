/* The embedder on a CUDA device against the CPU embedder: the tiny random
 * BertModel of tests/fixtures/embed/tiny_bert.json, written out here as a
 * model directory in each pooling mode (with and without Normalize), and
 * all-MiniLM-L6-v2 from $INFS_CACHE/minilm when it is there. Every text of
 * a batch of varied lengths (one truncated at max_seq_length, an empty
 * one; with and without a prompt; more tokens than one device batch holds)
 * has cosine >= 0.999 with the CPU's vector. The engine's device entries
 * (embed/embed_device.h) give infs_embed's vectors, on two streams, and
 * refuse what they cannot take without queueing anything; threads share
 * one device embedder; a shape's forward pass replayed from its CUDA graph
 * gives the eager vectors. */
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu.h"
#include "../read_file.h"
#include "embed/embed_device.h"
#include "embed/embedder.h"
#include "inferscale/embedder.h"
#include "util/json.h"

static char tmp[256];

static void write_text(const char *name, const char *text)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/%s", tmp, name);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* The shape of a BertModel tensor of n floats, by its name. */
static int tensor_shape(uint64_t shape[2], const char *name, uint64_t n, uint64_t d, uint64_t f)
{
	size_t len = strlen(name);
	const char *bias = ".bias", *lnw = "LayerNorm.weight";
	if ((len > strlen(bias) && strcmp(name + len - strlen(bias), bias) == 0) ||
	    (len > strlen(lnw) && strcmp(name + len - strlen(lnw), lnw) == 0)) {
		shape[0] = n;
		return 1;
	}
	/* the FFN's down projection is [dim][n_ffn]; every other matrix has dim columns */
	uint64_t cols = strstr(name, "attention") == NULL && strstr(name, "output.dense.weight") ? f : d;
	shape[0] = n / cols;
	shape[1] = cols;
	return 2;
}

/* tmp/model.safetensors: every weight of the fixture as F32. */
static void write_safetensors(const infs__json *ws, uint64_t d, uint64_t f)
{
	size_t cap = 1 << 16, hl = 0, off = 0;
	char *header = malloc(cap);
	hl += (size_t)snprintf(header, cap, "{");
	for (size_t i = 0; i < ws->len; i++) {
		uint64_t shape[2], n = ws->items[i].len;
		int nd = tensor_shape(shape, ws->keys[i], n, d, f);
		hl += (size_t)snprintf(header + hl, cap - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%llu", i ? "," : "",
		                       ws->keys[i], (unsigned long long)shape[0]);
		if (nd == 2)
			hl += (size_t)snprintf(header + hl, cap - hl, ",%llu", (unsigned long long)shape[1]);
		hl += (size_t)snprintf(header + hl, cap - hl, "],\"data_offsets\":[%zu,%zu]}", off, off + 4 * n);
		off += 4 * n;
	}
	hl += (size_t)snprintf(header + hl, cap - hl, "}");
	CHECK(hl + 8 < cap);
	while (hl % 8)
		header[hl++] = ' ';
	char p[1024];
	snprintf(p, sizeof p, "%s/model.safetensors", tmp);
	FILE *fp = fopen(p, "wb");
	CHECK(fp != NULL);
	if (!fp) {
		free(header);
		return;
	}
	uint8_t len8[8];
	for (int b = 0; b < 8; b++)
		len8[b] = (uint8_t)((uint64_t)hl >> (8 * b));
	CHECK(fwrite(len8, 1, 8, fp) == 8 && fwrite(header, 1, hl, fp) == hl);
	for (size_t i = 0; i < ws->len; i++)
		for (size_t k = 0; k < ws->items[i].len; k++) {
			float x = (float)ws->items[i].items[k].number;
			CHECK(fwrite(&x, 4, 1, fp) == 1);
		}
	CHECK(fclose(fp) == 0);
	free(header);
}

/* The tiny model's vocabulary: the special tokens, then words. */
static const char *const vocab[] = { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat",
	                             "dog", "sat", "on", "mat", "ran", "##s", "query", ":", "hello",
	                             "world", "big", "red", "blue", "green", "tree" };
#define N_VOCAB (sizeof vocab / sizeof vocab[0])

/* Writes tmp as a sentence-transformers directory of the fixture's model;
 * the pooling configuration comes later (write_pooling). Returns 0 when
 * the fixture cannot be read. */
static int write_tiny(const char *fixtures)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/tiny_bert.json", fixtures);
	size_t len;
	char *text = read_file(p, &len);
	CHECK(text != NULL);
	if (!text)
		return 0;
	infs__json *root = NULL;
	CHECK_OK(infs__json_parse(&root, text, len));
	free(text);
	const infs__json *c = infs__json_get(root, "config"), *ws = infs__json_get(root, "weights");
	CHECK(c && ws && ws->type == INFS_JSON_OBJECT);
	if (!c || !ws) {
		infs__json_free(root);
		return 0;
	}
	CHECK(infs__json_number(infs__json_get(c, "vocab_size"), 0) == N_VOCAB);
	char cfg[1024];
	snprintf(cfg, sizeof cfg,
	         "{\"model_type\": \"bert\", \"hidden_act\": \"gelu\", \"vocab_size\": %.0f, \"hidden_size\": %.0f, "
	         "\"num_hidden_layers\": %.0f, \"num_attention_heads\": %.0f, \"intermediate_size\": %.0f, "
	         "\"max_position_embeddings\": %.0f, \"type_vocab_size\": %.0f, \"layer_norm_eps\": %g}",
	         infs__json_number(infs__json_get(c, "vocab_size"), 0), infs__json_number(infs__json_get(c, "hidden_size"), 0),
	         infs__json_number(infs__json_get(c, "num_hidden_layers"), 0),
	         infs__json_number(infs__json_get(c, "num_attention_heads"), 0),
	         infs__json_number(infs__json_get(c, "intermediate_size"), 0),
	         infs__json_number(infs__json_get(c, "max_position_embeddings"), 0),
	         infs__json_number(infs__json_get(c, "type_vocab_size"), 0),
	         infs__json_number(infs__json_get(c, "layer_norm_eps"), 0));
	write_text("config.json", cfg);
	char voc[512] = "";
	for (size_t i = 0; i < N_VOCAB; i++) {
		strcat(voc, vocab[i]);
		strcat(voc, "\n");
	}
	write_text("vocab.txt", voc);
	write_safetensors(ws, (uint64_t)infs__json_number(infs__json_get(c, "hidden_size"), 0),
	                  (uint64_t)infs__json_number(infs__json_get(c, "intermediate_size"), 0));
	infs__json_free(root);
	snprintf(p, sizeof p, "%s/1_Pooling", tmp);
	CHECK(mkdir(p, 0700) == 0);
	return 1;
}

static void write_pooling(const char *key, int normalize)
{
	char buf[512];
	snprintf(buf, sizeof buf, "{\"word_embedding_dimension\": 12, \"%s\": true}", key);
	write_text("1_Pooling/config.json", buf);
	write_text("modules.json",
	           normalize ? "[{\"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},"
	                       " {\"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"},"
	                       " {\"path\": \"2_Normalize\", \"type\": \"sentence_transformers.models.Normalize\"}]"
	                     : "[{\"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},"
	                       " {\"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}]");
}

static int load(infs_embedder **e, const char *dir, int device)
{
	infs_embedder_options o = INFS_EMBEDDER_OPTIONS_INIT;
	o.n_threads = 2;
	o.device = device;
	*e = NULL;
	return infs_embedder_load(e, dir, &o);
}

/* GPU rows against CPU rows: cosine >= 0.999 for each (and max |diff| <=
 * tol); prints the worst cosine and max |diff|. */
static void compare(const char *what, const float *gpu, const float *cpu, size_t n, size_t dim, float tol)
{
	double worst_cos = 1;
	float worst = 0;
	for (size_t i = 0; i < n; i++) {
		const float *g = gpu + i * dim, *c = cpu + i * dim;
		double gg = 0, cc = 0, gc = 0;
		float md = 0;
		for (size_t k = 0; k < dim; k++) {
			gg += (double)g[k] * g[k];
			cc += (double)c[k] * c[k];
			gc += (double)g[k] * c[k];
			md = fmaxf(md, fabsf(g[k] - c[k]));
		}
		const double cosine = gc / sqrt(gg * cc);
		if (!(cosine >= 0.999) || !(md <= tol))
			fprintf(stderr, "%s text %zu: cosine %.6f, max |diff| %g\n", what, i, cosine, md);
		CHECK(cosine >= 0.999);
		CHECK(md <= tol);
		if (!(cosine >= worst_cos))
			worst_cos = cosine;
		if (!(md <= worst))
			worst = md;
	}
	printf("%s: %zu texts, cosine min %.7f, max |diff| %.3g\n", what, n, worst_cos, worst);
}

/* Texts of every length up to past max_seq_length: words of the tiny
 * vocabulary (and one unknown word), a different count for each. */
static char **make_texts(size_t n, size_t long_words)
{
	static const char *const words[] = { "the", "cat", "sat", "on", "a", "mat", "dogs", "ran", "hello",
		                             "world", "big", "red", "tree", "zebra" };
	char **t = malloc(n * sizeof *t);
	for (size_t i = 0; i < n; i++) {
		size_t nw = i == 0 ? 0 : i == 1 ? long_words : (i * 7) % 13;
		t[i] = malloc(nw * 8 + 1);
		t[i][0] = '\0';
		for (size_t w = 0; w < nw; w++) {
			strcat(t[i], words[(i + 3 * w) % (sizeof words / sizeof words[0])]);
			strcat(t[i], " ");
		}
	}
	return t;
}

static void free_texts(char **t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(t[i]);
	free(t);
}

/* infs_embed on cpu and gpu for texts, without then with a prompt. */
static void compare_embed(const char *what, infs_embedder *cpu, infs_embedder *gpu, const char *const *texts,
                          size_t n, const char *prompt, float tol)
{
	const size_t dim = infs_embedder_dim(cpu);
	float *a = malloc(n * dim * sizeof *a), *b = malloc(n * dim * sizeof *b);
	char name[256];
	for (int with_prompt = 0; with_prompt < 2; with_prompt++) {
		infs_embed_options eo = INFS_EMBED_OPTIONS_INIT;
		eo.prompt = with_prompt ? prompt : NULL;
		CHECK_OK(infs_embed(a, cpu, texts, n, &eo));
		CHECK_OK(infs_embed(b, gpu, texts, n, &eo));
		snprintf(name, sizeof name, "%s%s", what, with_prompt ? ", prompt" : "");
		compare(name, b, a, n, dim, tol);
	}
	free(a);
	free(b);
}

/* The device entries against infs_embed on the device: n texts that fit
 * one device call, on the given streams in turn. */
static void check_device_entries(const char *what, infs_embedder *gpu, const char *const *texts, size_t n,
                                 cudaStream_t s1, cudaStream_t s2)
{
	const size_t dim = infs_embedder_dim(gpu);
	const uint32_t max_seq = infs_embedder_max_seq_length(gpu);
	float *want = malloc(n * dim * sizeof *want), *got = malloc(n * dim * sizeof *got), *d_out;
	CUDA_OK(cudaMalloc((void **)&d_out, 2 * n * dim * sizeof *d_out));
	CHECK_OK(infs_embed(want, gpu, texts, n, NULL));

	/* tokenized here, then through both entries, each on its own stream */
	int32_t *ids = malloc(n * max_seq * sizeof *ids);
	uint32_t *offsets = malloc((n + 1) * sizeof *offsets);
	offsets[0] = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t k = 0;
		CHECK_OK(infs__embedder_tokenize(gpu, texts[i], ids + offsets[i], &k));
		offsets[i + 1] = offsets[i] + k;
	}
	CHECK(offsets[n] <= infs__embedder_device_tokens(gpu));
	CHECK_OK(infs__embed_device(d_out, gpu, texts, n, NULL, s1));
	CHECK_OK(infs__embed_device_tokens(d_out + n * dim, gpu, ids, offsets, (uint32_t)n, s2));
	CUDA_OK(cudaStreamSynchronize(s1));
	CUDA_OK(cudaStreamSynchronize(s2));
	for (int half = 0; half < 2; half++) {
		CUDA_OK(cudaMemcpy(got, d_out + half * n * dim, n * dim * sizeof *got, cudaMemcpyDeviceToHost));
		char name[256];
		snprintf(name, sizeof name, "%s, device entry %s vs infs_embed", what, half ? "(tokens)" : "(texts)");
		compare(name, got, want, n, dim, 1e-6f);
	}
	free(want);
	free(got);
	free(ids);
	free(offsets);
	cudaFree(d_out);
}

/* What the device entries refuse, with nothing written to out. */
static void check_refusals(const char *dir, infs_embedder *cpu, infs_embedder *gpu)
{
	const size_t dim = infs_embedder_dim(gpu);
	const uint32_t max_seq = infs_embedder_max_seq_length(gpu), budget = infs__embedder_device_tokens(gpu);
	infs_embedder *x = NULL;
	CHECK_ERR(load(&x, dir, 1 << 20), INFS_EINVAL); /* no such device */
	CHECK_ERR(load(&x, dir, -2), INFS_EINVAL);
	CHECK(x == NULL);
	CHECK(infs__embedder_device(gpu) == 0 && infs__embedder_device(cpu) == -1);
	CHECK(budget == 64 * max_seq && infs__embedder_device_tokens(cpu) == 0);

	/* one sequence of max_seq ids more than the budget holds */
	const uint32_t n_seq = budget / max_seq + 1;
	int32_t *ids = calloc((size_t)n_seq * max_seq + 1, sizeof *ids);
	uint32_t *offsets = malloc(((size_t)n_seq + 1) * sizeof *offsets);
	for (uint32_t s = 0; s <= n_seq; s++)
		offsets[s] = s * max_seq;
	float *d_out, *host = malloc(dim * sizeof *host);
	const size_t out_bytes = (size_t)n_seq * dim * sizeof(float);
	CUDA_OK(cudaMalloc((void **)&d_out, out_bytes));
	CUDA_OK(cudaMemset(d_out, 0xff, out_bytes));
	CHECK_ERR(infs__embed_device_tokens(d_out, gpu, ids, offsets, n_seq, NULL), INFS_ERANGE);
	uint32_t one[2] = { 0, max_seq + 1 };
	CHECK_ERR(infs__embed_device_tokens(d_out, gpu, ids, one, 1, NULL), INFS_ERANGE);
	one[1] = 0; /* an empty sequence */
	CHECK_ERR(infs__embed_device_tokens(d_out, gpu, ids, one, 1, NULL), INFS_EINVAL);
	one[0] = 1;
	one[1] = 2;
	CHECK_ERR(infs__embed_device_tokens(d_out, gpu, ids, one, 1, NULL), INFS_EINVAL);
	one[0] = 0;
	ids[1] = (int32_t)N_VOCAB; /* outside the vocabulary */
	CHECK_ERR(infs__embed_device_tokens(d_out, gpu, ids, one, 1, NULL), INFS_EINVAL);
	ids[1] = -1;
	CHECK_ERR(infs__embed_device_tokens(d_out, gpu, ids, one, 1, NULL), INFS_EINVAL);
	ids[1] = 0;
	CHECK_ERR(infs__embed_device_tokens(host, gpu, ids, one, 1, NULL), INFS_EINVAL); /* host memory */
	CHECK_ERR(infs__embed_device_tokens(d_out, cpu, ids, one, 1, NULL), INFS_EINVAL);
	CHECK_ERR(infs__embed_device_tokens(NULL, gpu, ids, one, 1, NULL), INFS_EINVAL);
	CHECK_ERR(infs__embed_device_tokens(d_out, gpu, NULL, one, 1, NULL), INFS_EINVAL);
	CHECK_OK(infs__embed_device_tokens(d_out, gpu, ids, one, 0, NULL)); /* nothing to do */

	/* texts: more tokens than the budget in all ([CLS] + [SEP] each) */
	const size_t n_texts = budget / 2 + 1;
	const char **texts = malloc(n_texts * sizeof *texts);
	for (size_t i = 0; i < n_texts; i++)
		texts[i] = "";
	CHECK_ERR(infs__embed_device(d_out, gpu, texts, n_texts, NULL, NULL), INFS_ERANGE);
	CHECK_ERR(infs__embed_device(d_out, cpu, texts, 1, NULL, NULL), INFS_EINVAL);
	texts[0] = NULL;
	CHECK_ERR(infs__embed_device(d_out, gpu, texts, 1, NULL, NULL), INFS_EINVAL);

	/* nothing was queued: out still holds its pattern */
	CUDA_OK(cudaDeviceSynchronize());
	uint8_t *back = malloc(out_bytes);
	CUDA_OK(cudaMemcpy(back, d_out, out_bytes, cudaMemcpyDeviceToHost));
	size_t touched = 0;
	for (size_t i = 0; i < out_bytes; i++)
		touched += back[i] != 0xff;
	CHECK(touched == 0);
	free(back);
	free(texts);
	free(ids);
	free(offsets);
	free(host);
	cudaFree(d_out);
}

struct shared_call {
	infs_embedder *e;
	const char *const *texts;
	size_t n;
	float *out;
	int rc;
};

static void *embed_thread(void *arg)
{
	struct shared_call *c = arg;
	c->rc = infs_embed(c->out, c->e, c->texts, c->n, NULL);
	return NULL;
}

/* Three threads on one device embedder: each gets the single-thread result. */
static void check_threads(infs_embedder *gpu, const char *const *texts, size_t n)
{
	const size_t dim = infs_embedder_dim(gpu);
	float *want = malloc(n * dim * sizeof *want);
	CHECK_OK(infs_embed(want, gpu, texts, n, NULL));
	struct shared_call c[3];
	pthread_t t[3];
	for (int i = 0; i < 3; i++) {
		c[i] = (struct shared_call){ gpu, texts, n, malloc(n * dim * sizeof(float)), -1 };
		CHECK(pthread_create(&t[i], NULL, embed_thread, &c[i]) == 0);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		CHECK(c[i].rc == INFS_OK);
		compare("threads", c[i].out, want, n, dim, 1e-6f);
		free(c[i].out);
	}
	free(want);
}

/* A shape's forward pass runs eagerly first, is captured the second time
 * and replayed after: a new embedder embeds text a (eager), a again
 * (captured, replayed), b of the same length (replayed: b's own vector, the
 * CPU's), a once more (replayed: the eager vector). */
static void check_graphs(const char *dir)
{
	infs_embedder *cpu, *gpu;
	CHECK_OK(load(&cpu, dir, -1));
	CHECK_OK(load(&gpu, dir, 0));
	if (!cpu || !gpu) {
		infs_embedder_free(cpu);
		infs_embedder_free(gpu);
		return;
	}
	const char *a = "the cat sat on a mat", *b = "big red tree ran the dog";
	const size_t dim = infs_embedder_dim(gpu);
	float *v = malloc(5 * dim * sizeof *v), *want_b = malloc(dim * sizeof *want_b);
	CHECK_OK(infs_embed(want_b, cpu, &b, 1, NULL));
	CHECK(infs__embedder_device_graph_runs(gpu) == 0 && infs__embedder_device_graph_runs(cpu) == 0);
	CHECK_OK(infs_embed(v, gpu, &a, 1, NULL));
	CHECK(infs__embedder_device_graph_runs(gpu) == 0);
	CHECK_OK(infs_embed(v + dim, gpu, &a, 1, NULL));
	CHECK(infs__embedder_device_graph_runs(gpu) == 1);
	CHECK_OK(infs_embed(v + 2 * dim, gpu, &b, 1, NULL));
	CHECK(infs__embedder_device_graph_runs(gpu) == 2);
	CHECK_OK(infs_embed(v + 3 * dim, gpu, &a, 1, NULL));
	CHECK(infs__embedder_device_graph_runs(gpu) == 3);
	compare("graph: a captured vs eager", v + dim, v, 1, dim, 1e-6f);
	compare("graph: a replayed vs eager", v + 3 * dim, v, 1, dim, 1e-6f);
	compare("graph: b replayed vs cpu", v + 2 * dim, want_b, 1, dim, 1e-4f);
	float diff = 0;
	for (size_t k = 0; k < dim; k++)
		diff = fmaxf(diff, fabsf(v[2 * dim + k] - v[k]));
	CHECK(diff > 1e-3f); /* b's vector is not a's left in the workspace */
	free(v);
	free(want_b);
	infs_embedder_free(cpu);
	infs_embedder_free(gpu);
}

static void check_tiny(const char *fixtures)
{
	snprintf(tmp, sizeof tmp, "/tmp/infs-gpu-embed-XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	if (!write_tiny(fixtures))
		return;
	static const char *const modes[] = { "pooling_mode_mean_tokens", "pooling_mode_cls_token",
		                             "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens" };
	/* 150 texts of up to max_seq_length (9) tokens: more than 64 * 9 tokens
	 * in all, so infs_embed on the device takes several batches */
	const size_t n = 150;
	char **texts = make_texts(n, 40);
	cudaStream_t s1, s2;
	CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	for (int m = 0; m < 4; m++)
		for (int normalize = 1; normalize >= 0; normalize--) {
			write_pooling(modes[m], normalize);
			infs_embedder *cpu, *gpu;
			CHECK_OK(load(&cpu, tmp, -1));
			CHECK_OK(load(&gpu, tmp, 0));
			if (!cpu || !gpu) {
				infs_embedder_free(cpu);
				infs_embedder_free(gpu);
				continue;
			}
			CHECK(infs_embedder_max_seq_length(gpu) == 9);
			char what[256];
			snprintf(what, sizeof what, "tiny, %s%s", modes[m], normalize ? "" : ", not normalised");
			compare_embed(what, cpu, gpu, (const char *const *)texts, n, "query: ", 1e-4f);
			check_device_entries(what, gpu, (const char *const *)texts, 40, s1, s2);
			if (m == 0 && normalize) {
				check_refusals(tmp, cpu, gpu);
				check_threads(gpu, (const char *const *)texts, n);
				check_graphs(tmp);
			}
			infs_embedder_free(cpu);
			infs_embedder_free(gpu);
		}
	cudaStreamDestroy(s1);
	cudaStreamDestroy(s2);
	free_texts(texts, n);
	static const char *const files[] = { "config.json", "vocab.txt", "model.safetensors", "modules.json",
		                             "1_Pooling/config.json", "1_Pooling" };
	char p[1024];
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", tmp, files[i]);
		remove(p);
	}
	rmdir(tmp);
}

static void check_minilm(void)
{
	char dir[1024], p[1100];
	cache_path(dir, sizeof dir, "minilm");
	snprintf(p, sizeof p, "%s/model.safetensors", dir);
	if (access(p, R_OK) != 0) {
		printf("all-MiniLM-L6-v2 not found at %s: left out\n", dir);
		return;
	}
	infs_embedder *cpu, *gpu;
	CHECK_OK(load(&cpu, dir, -1));
	CHECK_OK(load(&gpu, dir, 0));
	if (cpu && gpu) {
		/* the second text is truncated at max_seq_length (256) */
		const size_t n = 40;
		char **texts = make_texts(n, 400);
		free(texts[2]);
		texts[2] = strdup("Caroline went to the LGBTQ support group on 7 May 2023 and said it was powerful.");
		compare_embed("all-MiniLM-L6-v2", cpu, gpu, (const char *const *)texts, n, "query: ", 1e-3f);
		cudaStream_t s;
		CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
		check_device_entries("all-MiniLM-L6-v2", gpu, (const char *const *)texts, n, s, s);
		cudaStreamDestroy(s);
		free_texts(texts, n);
	}
	infs_embedder_free(cpu);
	infs_embedder_free(gpu);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_gpu_embed FIXTURE-DIR\n");
		return 2;
	}
	gpu_require();
	check_tiny(argv[1]);
	check_minilm();
	CHECK_DONE();
}

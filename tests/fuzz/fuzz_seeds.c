/* Writes the seed inputs of the fuzz corpus into DIR/<target>/: small valid
 * files of each format, so that fuzzing starts from inputs that get past the
 * first checks. Run by hand after a format change:
 *   build-fuzz/tests/fuzz/fuzz_seeds tests/fuzz/corpus */
#include <errno.h>
#include <sys/stat.h>

#include "../gguf_builder.h"
#include "fuzz_util.h"
#include "inferscale/store.h"

static const char *root;

static void seed(const char *target, const char *name, const void *data, size_t size)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", root, target);
	require(mkdir(path, 0755) == 0 || errno == EEXIST);
	snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
	FILE *f = fopen(path, "wb");
	require(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
}

static void seed_text(const char *target, const char *name, const char *text)
{
	seed(target, name, text, strlen(text));
}

/* A store of two namespaces: facts, a segment, a delete, a drop. */
static void store_seed(void)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/store-seed.tmp", root);
	unlink(path);
	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = 2;
	g.n_kv_heads = 1;
	g.head_dim = 4;
	g.rotary_dim = 4;
	g.embed_dim = 4;
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = &g;
	o.identity = "fuzz-seed";
	o.sync = INFS_SYNC_OFF;
	infs_store *s;
	require(infs_store_open(&s, path, &o) == INFS_OK);
	uint16_t kv[2 * 3 * 4];
	for (size_t i = 0; i < sizeof kv / sizeof *kv; i++)
		kv[i] = (uint16_t)(0x3c00 + i);
	int32_t tokens[3] = { 5, 6, 7 };
	float emb[4] = { 1, 0.5f, -0.25f, 0 };
	const char *names[] = { "alice", "bob", "alice", "carol" };
	uint64_t ids[4];
	for (int i = 0; i < 4; i++) {
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = 1 + (uint32_t)i % 3;
		f.tokens = tokens;
		f.embedding = i == 1 ? NULL : emb;
		f.flags = i == 1 ? INFS_FACT_SEGMENT : 0;
		f.k = kv;
		f.v = kv;
		f.text = "Alice likes tea.";
		f.metadata = i ? "{\"turn\":3}" : NULL;
		f.source_id = (uint64_t)i;
		f.timestamp = 1700000000 + i;
		require(infs_fact_put(&ids[i], s, names[i], &f) == INFS_OK);
	}
	require(infs_fact_delete(s, "alice", ids[0]) == INFS_OK);
	require(infs_namespace_drop(s, "carol") == INFS_OK);
	infs_store_close(s);
	FILE *f = fopen(path, "rb");
	require(f != NULL);
	static uint8_t buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	unlink(path);
	seed("store", "two-namespaces.infs", buf, n);
}

/* A safetensors file: an 8-byte header length, the JSON header, the data. */
static void safetensors_seed(void)
{
	const char header[] = "{\"__metadata__\":{\"format\":\"pt\"},"
	                      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
	                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[16,20]},"
	                      "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[20,28]}}";
	gbuf b = { 0 };
	size_t hlen = sizeof header - 1;
	gb_u64(&b, hlen);
	gb_put(&b, header, hlen);
	for (int i = 0; i < 4; i++)
		gb_f32(&b, (float)i);
	gb_u32(&b, 0x3f803f80u);
	gb_u64(&b, 42);
	seed("safetensors", "three-tensors.safetensors", b.p, b.n);
	free(b.p);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_seeds DIR\n");
		return 2;
	}
	root = argv[1];
	store_seed();
	size_t off[3];
	gbuf g = sample_gguf(off);
	seed("gguf", "sample.gguf", g.p, g.n);
	free(g.p);
	safetensors_seed();
	seed_text("json", "config.json",
	          "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":576,\"rope_theta\":100000.0,"
	          "\"rope_scaling\":null,\"tie_word_embeddings\":true,\"eps\":1e-05}");
	seed_text("json", "escapes.json", "[\"a\\u00e9\\ud83d\\ude00\\n\\t\\\"\\\\/\", -0.5e-3, [], {}, {\"\":false}]");
	seed_text("tokenizer", "english.txt", "Caroline is planning a career in counseling.");
	seed_text("tokenizer", "mixed.txt", "  Hello\tworld!\n\n123 456 caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 it's");
	seed_text("tokenizer", "specials.txt", "<|im_start|>user\nhi<|im_end|><|endoftext|>");
	seed("tokenizer", "controls.txt", "hi\x04\x06\x13\x14\x16\x1d\x00there\x7f", 16);
	return 0;
}

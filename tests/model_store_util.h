/* What the tests on the real models share: SmolLM2 and the embedder
 * loaded from the cache, a new store for the model's facts, facts encoded
 * after the engine's header, and the engine tests' setting of all three
 * with the example memory (smollm2_memory). */
#ifndef INFS_TEST_MODEL_STORE_UTIL_H
#define INFS_TEST_MODEL_STORE_UTIL_H

#include <stdlib.h>

#include "cache_path.h"
#include "check.h"
#include "util/json.h"
#include "scratch_util.h"

/* SmolLM2-135M-Instruct Q4_1 and all-MiniLM-L6-v2 from the cache
 * (scripts/fetch-models.sh); 0 (a failed check recorded) when either is
 * missing. */
static inline int load_smollm2(infs_model **m, infs_embedder **emb)
{
	char mpath[1024], epath[1024];
	cache_path(mpath, sizeof mpath, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	cache_path(epath, sizeof epath, "minilm");
	*m = NULL;
	*emb = NULL;
	CHECK_OK(infs_model_load(m, mpath, NULL));
	CHECK_OK(infs_embedder_load(emb, epath, NULL));
	return *m && *emb;
}

/* A new store for a model's facts, as the encode and engine tests need one:
 * the model's geometry and identity for KV in dtype dt, embeddings of
 * embed_dim floats, in a scratch directory (tests/scratch_util.h). */
static inline infs_store *model_store_create(const infs_model *m, infs_dtype dt, uint32_t embed_dim,
                                             const char *name, const char *file, char *path, size_t n)
{
	infs_geometry g;
	CHECK_OK(infs_model_geometry(&g, m, dt));
	g.embed_dim = embed_dim;
	char *identity = NULL;
	CHECK_OK(infs_model_identity(&identity, m, dt));
	scratch_make(name, path, n, file);
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE;
	so.geometry = &g;
	so.identity = identity;
	so.sync = INFS_SYNC_OFF;
	infs_store *st = NULL;
	CHECK_OK(infs_store_open(&st, path, &so));
	infs_free(identity);
	return st;
}

/* A host engine over m with a context of n_ctx tokens in an f16 cache (NULL,
 * a failed check recorded, when it cannot be made). */
static inline infs_engine *host_engine_f16(const infs_model *m, uint32_t n_ctx)
{
	infs_engine_options eo = INFS_ENGINE_OPTIONS_INIT;
	eo.n_ctx = n_ctx;
	eo.kv_dtype = INFS_DTYPE_F16;
	infs_engine *e = NULL;
	CHECK_OK(infs_engine_create(&e, m, &eo));
	return e;
}

/* Encodes n facts (texts, and embed_texts to embed instead when not NULL)
 * into namespace ns after the engine's header, as an application would;
 * their ids go to ids. */
static inline void encode_after_header(uint64_t *ids, infs_store *st, const char *ns, const infs_engine *e,
                                       const infs_model *m, const infs_embedder *emb, const char *const *texts,
                                       const char *const *embed_texts, size_t n)
{
	const int32_t *hdr;
	uint32_t nh;
	CHECK_OK(infs_engine_header(&hdr, &nh, e));
	infs_fact_input *in = malloc(n * sizeof *in);
	for (size_t i = 0; i < n; i++) {
		infs_fact_input x = INFS_FACT_INPUT_INIT;
		x.text = texts[i];
		x.embed_text = embed_texts ? embed_texts[i] : NULL;
		in[i] = x;
	}
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = hdr;
	eo.n_context = nh;
	eo.embedder = emb;
	CHECK_OK(infs_fact_encode(ids, st, ns, m, in, n, &eo));
	free(in);
}

/* The first n facts of a JSONL memory (examples/memory/facts.jsonl): their
 * "text" into texts[i] (free) and rendered into rendered[i] (infs_free);
 * the number read. */
static inline int read_facts(const char *path, char **texts, char **rendered, int n)
{
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	if (!f)
		return 0;
	char line[2048];
	int got = 0;
	while (got < n && fgets(line, sizeof line, f)) {
		infs__json *o = NULL;
		CHECK_OK(infs__json_parse(&o, line, strlen(line)));
		texts[got] = strdup(infs__json_str(infs__json_get(o, "text"), "?"));
		CHECK_OK(infs_fact_render(&rendered[got], texts[got], NULL));
		infs__json_free(o);
		got++;
	}
	fclose(f);
	return got;
}

/* The setting of the engine tests on SmolLM2: the models loaded (*m,
 * *emb), a new store (*st) for them with f16 KV, maya.infs in the scratch
 * folder name (its path in path), and, when facts is not NULL, the first
 * n_facts facts of that JSONL file (examples/memory/facts.jsonl) read into
 * texts and rendered (read_facts). 0, a failed check recorded, when any of
 * it is missing. */
static inline int smollm2_memory(infs_model **m, infs_embedder **emb, infs_store **st, char *path, size_t n,
                                 const char *name, const char *facts, char **texts, char **rendered, int n_facts)
{
	*st = NULL;
	if (!load_smollm2(m, emb))
		return 0;
	if (facts) {
		const int got = read_facts(facts, texts, rendered, n_facts);
		CHECK(got == n_facts);
		if (got != n_facts)
			return 0;
	}
	*st = model_store_create(*m, INFS_DTYPE_F16, infs_embedder_dim(*emb), name, "maya.infs", path, n);
	return *st != NULL;
}

#endif

/* libFuzzer target for the store reader: any file must open cleanly or fail
 * with an error code, and whatever opens must serve only sound records. A
 * store that opens read-only is walked (namespaces, ids, every record,
 * retrieval), then opened for writing, which may drop a torn tail, and given
 * a put, a delete and a compaction. scripts/fuzz.sh builds and runs it. */
#include <glob.h>

#include "fuzz_util.h"
#include "inferscale/retrieve.h"
#include "inferscale/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void touch(const void *p, size_t n)
{
	volatile uint8_t sink = 0;
	for (size_t i = 0; i < n; i += 64)
		sink ^= ((const uint8_t *)p)[i];
	if (n)
		sink ^= ((const uint8_t *)p)[n - 1];
	(void)sink;
}

/* Every namespace: its ids increase, its count agrees, each record reads
 * back whole, and retrieval returns only ids of that namespace. */
static void walk(infs_store *s)
{
	infs_geometry g;
	require(infs_store_geometry(&g, s) == INFS_OK);
	size_t kv_bytes = infs_geometry_kv_token_bytes(&g);
	char **names = NULL;
	size_t n_names = 0;
	if (infs_namespace_list(&names, &n_names, s) != INFS_OK)
		return;
	float *query = calloc(g.embed_dim, sizeof *query);
	require(query != NULL);
	query[0] = 1;
	for (size_t i = 0; i < n_names; i++) {
		uint64_t *ids = NULL, count = 0;
		size_t n_ids = 0;
		if (infs_fact_list(&ids, &n_ids, s, names[i]) != INFS_OK)
			continue;
		require(infs_fact_count(&count, s, names[i]) == INFS_OK && count == n_ids);
		for (size_t j = 0; j < n_ids; j++) {
			require(ids[j] > 0 && (j == 0 || ids[j] > ids[j - 1]));
			infs_fact_record *r = NULL;
			if (infs_fact_get(&r, s, names[i], ids[j]) != INFS_OK)
				continue;
			require(r->id == ids[j] && r->n_tokens >= 1 && r->n_tokens <= INFS_FACT_TOKENS_MAX);
			touch(r->tokens, r->n_tokens * sizeof *r->tokens);
			touch(r->k, r->n_tokens * kv_bytes);
			touch(r->v, r->n_tokens * kv_bytes);
			touch(r->text, strlen(r->text));
			touch(r->metadata, strlen(r->metadata));
			if (r->embedding)
				touch(r->embedding, g.embed_dim * sizeof(float));
			infs_fact_record_free(r);
		}
		infs_hit hits[4];
		size_t n_hits = 0;
		if (infs_retrieve(hits, &n_hits, s, names[i], query, 1, 4, NULL) == INFS_OK) {
			require(n_hits <= 4 && n_hits <= n_ids);
			for (size_t h = 0; h < n_hits; h++) {
				int found = 0;
				for (size_t j = 0; j < n_ids; j++)
					found |= ids[j] == hits[h].id;
				require(found);
			}
		}
		infs_free(ids);
	}
	free(query);
	infs_free(names);
}

/* A writable handle takes a put, a delete of it, and a compaction. */
static void write_some(infs_store *s)
{
	infs_geometry g;
	require(infs_store_geometry(&g, s) == INFS_OK);
	size_t kv = infs_geometry_kv_token_bytes(&g);
	void *k = calloc(1, kv), *v = calloc(1, kv);
	float *emb = calloc(g.embed_dim, sizeof *emb);
	int32_t token = 1;
	require(k && v && emb);
	infs_fact f = INFS_FACT_INIT;
	f.n_tokens = 1;
	f.tokens = &token;
	f.embedding = emb;
	f.k = k;
	f.v = v;
	f.text = "fuzz";
	uint64_t id = 0;
	if (infs_fact_put(&id, s, "fuzz", &f) == INFS_OK) {
		infs_fact_record *r = NULL;
		require(infs_fact_get(&r, s, "fuzz", id) == INFS_OK && r->id == id && !strcmp(r->text, "fuzz"));
		infs_fact_record_free(r);
		require(infs_fact_delete(s, "fuzz", id) == INFS_OK);
	}
	if (infs_store_compact(s) == INFS_OK)
		walk(s);
	free(k);
	free(v);
	free(emb);
}

/* Files a writable open or a compaction may leave beside the store. */
static void clean_beside(const char *path)
{
	char pattern[600];
	snprintf(pattern, sizeof pattern, "%s.*", path);
	glob_t gl;
	if (glob(pattern, 0, NULL, &gl) == 0)
		for (size_t i = 0; i < gl.gl_pathc; i++)
			unlink(gl.gl_pathv[i]);
	globfree(&gl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_write("store", data, size);
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_READONLY;
	o.sync = INFS_SYNC_OFF;
	infs_store *s = NULL;
	int rc = infs_store_open(&s, path, &o);
	require((rc == INFS_OK) == (s != NULL) && rc <= 0);
	if (rc != INFS_OK)
		return 0;
	walk(s);
	infs_store_close(s);
	o.flags = 0;
	if (infs_store_open(&s, path, &o) == INFS_OK) {
		walk(s);
		write_some(s);
		infs_store_close(s);
	}
	clean_beside(path);
	return 0;
}

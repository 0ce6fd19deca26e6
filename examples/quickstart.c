/* quickstart: the library's life cycle in one page, in host memory.
 * Creates a store, puts a user's facts (embedding + pre-RoPE KV), retrieves
 * the best facts for a question vector and injects them into a paged KV cache
 * laid out like vLLM's, then checks one injected key against plain RoPE.
 *
 *   quickstart [store-path]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <inferscale/inferscale.h>

enum { LAYERS = 4, HEADS = 2, DIM = 16, EMBED = 8, BLOCK = 4, BLOCKS = 16 };

static int fail(const char *what, int rc)
{
	fprintf(stderr, "quickstart: %s: %s (%s)\n", what, infs_error_last(), infs_strerror(rc));
	return 1;
}

static float frand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return ((float)((*s >> 8) & 0xffff) / 32768.0f) - 1.0f;
}

int main(int argc, char **argv)
{
	char path[256];
	snprintf(path, sizeof path, "%s", argc > 1 ? argv[1] : "/tmp/inferscale-quickstart.infs");
	unlink(path);

	infs_geometry g = INFS_GEOMETRY_INIT;
	g.n_layers = LAYERS;
	g.n_kv_heads = HEADS;
	g.head_dim = DIM;
	g.rotary_dim = DIM;
	g.rope_theta = 100000.0;
	g.kv_dtype = INFS_DTYPE_F32;
	g.embed_dim = EMBED;

	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE;
	so.geometry = &g;
	so.identity = "quickstart-model/v1";
	infs_store *store;
	int rc = infs_store_open(&store, path, &so);
	if (rc)
		return fail("open", rc);
	printf("inferscale %s: created %s\n", infs_version_string(), path);

	const char *facts[] = { "Maya is a marine biologist who lives in Lisbon.",
	                        "Maya's partner Tomas is a furniture maker.",
	                        "Maya is allergic to peanuts.",
	                        "Maya is learning to play the cello.",
	                        "Maya adopted a three-legged cat named Biscuit." };
	enum { N = sizeof facts / sizeof *facts };
	uint64_t ids[N];
	float emb[N][EMBED];
	unsigned seed = 7;
	for (int f = 0; f < N; f++) {
		uint32_t n_tok = 3 + (uint32_t)f; /* stands in for the fact's token count */
		size_t n = (size_t)LAYERS * n_tok * HEADS * DIM;
		float *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
		int32_t *tok = malloc(n_tok * sizeof *tok);
		for (size_t i = 0; i < n; i++) {
			k[i] = frand(&seed);
			v[i] = frand(&seed);
		}
		for (uint32_t i = 0; i < n_tok; i++)
			tok[i] = (int32_t)(100 * f + i);
		for (int d = 0; d < EMBED; d++)
			emb[f][d] = frand(&seed);
		infs_fact fact = INFS_FACT_INIT;
		fact.n_tokens = n_tok;
		fact.tokens = tok;
		fact.embedding = emb[f];
		fact.k = k;
		fact.v = v;
		fact.text = facts[f];
		rc = infs_fact_put(&ids[f], store, "maya", &fact);
		free(k);
		free(v);
		free(tok);
		if (rc)
			return fail("put", rc);
		printf("  put fact %llu (%u tokens): %s\n", (unsigned long long)ids[f], n_tok, facts[f]);
	}

	/* A question vector close to fact 0 and fact 2. */
	float q[EMBED];
	for (int d = 0; d < EMBED; d++)
		q[d] = emb[0][d] + 0.8f * emb[2][d];
	infs_hit hits[3];
	size_t n_hits;
	rc = infs_retrieve(hits, &n_hits, store, "maya", q, 1, 3, NULL);
	if (rc)
		return fail("retrieve", rc);
	printf("retrieved %zu facts for the question:\n", n_hits);
	uint64_t chosen[3];
	for (size_t i = 0; i < n_hits; i++) {
		infs_fact_record *r;
		if ((rc = infs_fact_get(&r, store, "maya", hits[i].id)))
			return fail("get", rc);
		printf("  #%zu fact %llu score %.3f: %s\n", i + 1, (unsigned long long)hits[i].id,
		       hits[i].score, r->text);
		infs_fact_record_free(r);
		chosen[n_hits - 1 - i] = hits[i].id; /* best-ranked fact nearest the question */
	}

	/* A vLLM-style cache (2, blocks, block_size, heads, dim) per layer, with a
	 * scattered block table. */
	size_t per_layer = (size_t)2 * BLOCKS * BLOCK * HEADS * DIM;
	float *cache = calloc(LAYERS * per_layer, sizeof *cache);
	void *kl[LAYERS], *vl[LAYERS];
	for (int l = 0; l < LAYERS; l++) {
		kl[l] = cache + l * per_layer;
		vl[l] = cache + l * per_layer + per_layer / 2;
	}
	infs_kv_layout kv = INFS_KV_LAYOUT_INIT;
	kv.dtype = INFS_DTYPE_F32;
	kv.n_layers = LAYERS;
	kv.n_kv_heads = HEADS;
	kv.head_dim = DIM;
	kv.n_blocks = BLOCKS;
	kv.block_size = BLOCK;
	kv.k_layers = kl;
	kv.v_layers = vl;
	kv.stride_block = BLOCK * HEADS * DIM;
	kv.stride_slot = HEADS * DIM;
	kv.stride_head = DIM;
	kv.stride_dim = 1;
	int32_t table[] = { 9, 2, 14, 5, 11, 0 };
	uint32_t start = 6, next; /* positions 0..5 hold the system prompt and memory header */
	rc = infs_inject_into_blocks(&next, store, "maya", chosen, n_hits, start, table,
	                             sizeof table / sizeof *table, &kv, NULL);
	if (rc)
		return fail("inject", rc);
	printf("injected positions %u..%u into blocks", start, next - 1);
	for (uint32_t b = start / BLOCK; b <= (next - 1) / BLOCK; b++)
		printf(" %d", table[b]);
	printf("; the question is prefilled from position %u\n", next);

	/* The first injected key, layer 0 head 0, must equal plain RoPE at `start`. */
	infs_fact_record *first;
	if ((rc = infs_fact_get(&first, store, "maya", chosen[0])))
		return fail("get", rc);
	float ref[HEADS * DIM];
	memcpy(ref, first->k, sizeof ref);
	int32_t pos = (int32_t)start;
	if ((rc = infs_rope_rotate(ref, INFS_DTYPE_F32, 1, HEADS, &pos, &g)))
		return fail("rope", rc);
	const float *got = (const float *)kl[0] + table[start / BLOCK] * kv.stride_block + (start % BLOCK) * kv.stride_slot;
	double err = 0;
	for (int i = 0; i < HEADS * DIM; i++)
		err = fmax(err, fabs(got[i] - ref[i]));
	printf("first injected key vs reference RoPE at position %u: max |diff| = %.2e\n", start, err);
	infs_fact_record_free(first);
	free(cache);

	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	if ((rc = infs_store_stats_get(&st, store)))
		return fail("stats", rc);
	printf("store: %llu facts, %llu namespace(s), %llu bytes on disk\n", (unsigned long long)st.n_facts,
	       (unsigned long long)st.n_namespaces, (unsigned long long)st.file_bytes);
	infs_store_close(store);
	return err < 1e-5 ? 0 : 1;
}

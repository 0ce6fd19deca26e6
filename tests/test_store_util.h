/* Helpers shared by the store tests: a scratch directory, a small geometry,
 * and facts whose every field is a function of a seed, so that a test can
 * rebuild what it stored and compare byte for byte. */
#ifndef INFS_TEST_STORE_UTIL_H
#define INFS_TEST_STORE_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scratch_util.h"
#include "test_util.h"
#include "util/dtype.h"

static inline infs_geometry small_geometry(infs_dtype dtype)
{
	infs_geometry g = test_geometry(3, 2, 8, dtype);
	g.embed_dim = 6;
	return g;
}

#define TEST_IDENTITY "test-model/v1 tokenizer=t1 template=none"

/* A fact built from a seed: it owns its buffers. */
typedef struct gen_fact {
	infs_fact fact;
	int32_t *tokens;
	float *embedding;
	void *k, *v;
	char text[64];
	char metadata[64];
	size_t kv_bytes;
} gen_fact;

static inline void gen_fact_make(gen_fact *g, const infs_geometry *geo, uint64_t seed, unsigned flags)
{
	uint64_t st = seed * 7919 + 1;
	memset(g, 0, sizeof *g);
	infs_fact init = INFS_FACT_INIT;
	g->fact = init;
	uint32_t n = 1 + (uint32_t)(seed % 7);
	size_t elems = (size_t)n * geo->n_layers * geo->n_kv_heads * geo->head_dim;
	g->kv_bytes = elems * infs_dtype_size(geo->kv_dtype);
	g->tokens = malloc(n * sizeof *g->tokens);
	g->k = malloc(g->kv_bytes);
	g->v = malloc(g->kv_bytes);
	for (uint32_t i = 0; i < n; i++)
		g->tokens[i] = (int32_t)(rng_next(&st) % 50000);
	for (size_t i = 0; i < elems; i++) {
		infs__store(g->k, geo->kv_dtype, i, rng_float(&st) * 4);
		infs__store(g->v, geo->kv_dtype, i, rng_float(&st));
	}
	if (!(flags & INFS_FACT_SEGMENT) && geo->embed_dim) {
		g->embedding = malloc(geo->embed_dim * sizeof(float));
		for (uint32_t i = 0; i < geo->embed_dim; i++)
			g->embedding[i] = rng_float(&st);
	}
	snprintf(g->text, sizeof g->text, "fact number %llu \xc3\xa9", (unsigned long long)seed);
	snprintf(g->metadata, sizeof g->metadata, "{\"seed\": %llu}", (unsigned long long)seed);
	g->fact.flags = flags;
	g->fact.n_tokens = n;
	g->fact.tokens = g->tokens;
	g->fact.embedding = g->embedding;
	g->fact.k = g->k;
	g->fact.v = g->v;
	g->fact.text = seed % 3 == 0 ? NULL : g->text;
	g->fact.metadata = seed % 5 == 0 ? NULL : g->metadata;
	g->fact.source_id = seed * 1000003;
	g->fact.timestamp = -(int64_t)seed * 17;
}

static inline void gen_fact_free(gen_fact *g)
{
	free(g->tokens);
	free(g->embedding);
	free(g->k);
	free(g->v);
}

/* Whether record r holds exactly the fact generated from seed. */
static inline int gen_fact_matches(const infs_fact_record *r, const infs_geometry *geo, uint64_t seed, unsigned flags)
{
	gen_fact g;
	gen_fact_make(&g, geo, seed, flags);
	const infs_fact *f = &g.fact;
	int ok = r->flags == f->flags && r->n_tokens == f->n_tokens &&
	         !memcmp(r->tokens, f->tokens, f->n_tokens * sizeof *f->tokens) &&
	         !memcmp(r->k, f->k, g.kv_bytes) && !memcmp(r->v, f->v, g.kv_bytes) &&
	         !strcmp(r->text, f->text ? f->text : "") && !strcmp(r->metadata, f->metadata ? f->metadata : "") &&
	         r->source_id == f->source_id && r->timestamp == f->timestamp;
	if (f->embedding)
		ok = ok && r->embedding && !memcmp(r->embedding, f->embedding, geo->embed_dim * sizeof(float));
	else
		ok = ok && r->embedding == NULL;
	gen_fact_free(&g);
	return ok;
}

static inline int open_store(infs_store **s, const char *path, const infs_geometry *g, unsigned flags, infs_sync_mode sync)
{
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = flags;
	o.geometry = g;
	o.identity = g ? TEST_IDENTITY : NULL;
	o.sync = sync;
	return infs_store_open(s, path, &o);
}

#endif

/* infs_fact_encode with a device model against the host model, on every
 * tiny architecture (tests/fixtures/model) and on SmolLM2 when its GGUF is
 * in $INFS_CACHE. The same file is loaded on the host and on device 0 with
 * device_max_tokens 24, so that the 31-token shared context runs in two
 * calls and the 9 facts (1 to 20 tokens, three with their own context of
 * up to 8, one a segment) in several batches, one fitting exactly. Each
 * model encodes into two new stores (KV in f32, bf16 or f16 by turns):
 * every record's tokens, embedding, text and metadata identical, its K and
 * V within the bf16 bound of docs/model-runtime.md scaled by the largest
 * |K|, |V| of the host's. Then on the device: progress once per fact in
 * order; a cancel after fact 3 keeps facts 0..2 (INFS_ECANCELED, the rest
 * 0); a fact longer than device_max_tokens with its own context is refused
 * (INFS_ERANGE) before anything is stored. */
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "../model_store_util.h"

enum { MAX_T = 24, N_CTX = 31, N_FACTS = 9, EMBED = 4, CANCEL_AT = 3 };
static const uint32_t fact_len[N_FACTS] = { 5, 1, 12, 20, 3, 7, 16, 2, 9 };
static const uint32_t own_len[N_FACTS] = { 0, 0, 4, 3, 0, 0, 8, 0, 0 };
static const infs_dtype dtypes[] = { INFS_DTYPE_F32, INFS_DTYPE_BF16, INFS_DTYPE_F16 };

typedef struct progress {
	size_t calls, total, cancel_at;
	int out_of_order;
} progress;

static int on_progress(void *user, size_t done, size_t total)
{
	progress *p = user;
	if (done != p->calls + 1 || total != p->total)
		p->out_of_order = 1;
	p->calls++;
	return p->cancel_at && done == p->cancel_at;
}

/* The facts of one model: token ids, own contexts, embeddings, texts. */
typedef struct facts {
	infs_fact_input in[N_FACTS];
	int32_t ctx[N_CTX], tokens[N_FACTS][20], own[N_FACTS][8];
	float emb[N_FACTS][EMBED];
	char text[N_FACTS][32];
} facts;

static void facts_make(facts *f, uint32_t n_vocab, uint64_t seed)
{
	uint64_t rng = seed;
	for (uint32_t t = 0; t < N_CTX; t++)
		f->ctx[t] = (int32_t)(rng_next(&rng) % n_vocab);
	for (uint32_t i = 0; i < N_FACTS; i++) {
		infs_fact_input x = INFS_FACT_INPUT_INIT;
		for (uint32_t t = 0; t < fact_len[i]; t++)
			f->tokens[i][t] = (int32_t)(rng_next(&rng) % n_vocab);
		for (uint32_t t = 0; t < own_len[i]; t++)
			f->own[i][t] = (int32_t)(rng_next(&rng) % n_vocab);
		for (uint32_t d = 0; d < EMBED; d++)
			f->emb[i][d] = rng_float(&rng);
		snprintf(f->text[i], sizeof f->text[i], "fact %u", i);
		x.tokens = f->tokens[i];
		x.n_tokens = fact_len[i];
		x.context = own_len[i] ? f->own[i] : NULL;
		x.n_context = own_len[i];
		x.text = f->text[i];
		x.metadata = "{\"m\": 1}";
		x.source_id = 100 + i;
		x.timestamp = 1000 + i;
		if (i == 5)
			x.flags = INFS_FACT_SEGMENT;
		else
			x.embedding = f->emb[i];
		f->in[i] = x;
	}
}

static float max_abs_kv(const infs_fact_record *r, infs_dtype dt, size_t n)
{
	float m = 0;
	for (size_t j = 0; j < n; j++)
		m = fmaxf(m, fmaxf(fabsf(infs__load(r->k, dt, j)), fabsf(infs__load(r->v, dt, j))));
	return m;
}

/* Fact i's records of the host (want) and device (got) stores; returns 0
 * when they agree, else prints where the largest difference is. */
static int compare_fact(const char *name, uint32_t i, const infs_fact_record *want, const infs_fact_record *got,
                        const infs_geometry *g)
{
	int bad = 0;
	if (got->n_tokens != want->n_tokens || memcmp(got->tokens, want->tokens, want->n_tokens * 4)) {
		fprintf(stderr, "%s fact %u: tokens differ (%u on the device, %u on the host)\n", name, i, got->n_tokens,
		        want->n_tokens);
		return 1;
	}
	if (got->flags != want->flags || strcmp(got->text, want->text) || strcmp(got->metadata, want->metadata) ||
	    got->source_id != want->source_id || got->timestamp != want->timestamp ||
	    !want->embedding != !got->embedding ||
	    (want->embedding && memcmp(got->embedding, want->embedding, EMBED * sizeof(float)))) {
		fprintf(stderr, "%s fact %u: flags, text, metadata, source, time or embedding differ\n", name, i);
		bad = 1;
	}
	const size_t row = (size_t)g->n_kv_heads * g->head_dim, n = g->n_layers * want->n_tokens * row;
	const float bound = bf16_bound(g->n_layers, max_abs_kv(want, g->kv_dtype, n));
	for (int kv = 0; kv < 2; kv++) {
		const void *a = kv ? got->v : got->k, *b = kv ? want->v : want->k;
		float worst = 0;
		size_t at = 0;
		for (size_t j = 0; j < n; j++) {
			const float d = fabsf(infs__load(a, g->kv_dtype, j) - infs__load(b, g->kv_dtype, j));
			if (isnan(d) || d > worst) {
				worst = d, at = j;
				if (isnan(d))
					break;
			}
		}
		if (!(worst <= bound)) {
			fprintf(stderr, "%s fact %u %c: layer %zu token %zu element %zu: device %g host %g (|diff| %g, bound %g)\n",
			        name, i, kv ? 'V' : 'K', at / (want->n_tokens * row), at / row % want->n_tokens, at % row,
			        infs__load(a, g->kv_dtype, at), infs__load(b, g->kv_dtype, at), worst, bound);
			bad = 1;
		}
	}
	return bad;
}

static void store_remove(infs_store *st, const char *path)
{
	infs_store_close(st);
	snprintf(scratch_dir, sizeof scratch_dir, "%.*s", (int)(strrchr(path, '/') - path), path);
	scratch_cleanup();
}

static void check_model(const char *path, const char *name, int nth)
{
	const infs_dtype dt = dtypes[nth % 3];
	printf("%s (KV in dtype %d)\n", name, (int)dt);
	infs_model *mc, *md;
	if (!gpu_load_pair(&mc, &md, path, MAX_T))
		return;
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, mc));
	facts *f = malloc(sizeof *f);
	facts_make(f, info.n_vocab, 17);
	char pc[600], pd[600];
	infs_store *sc = model_store_create(mc, dt, EMBED, "gpu-encode", "host.infs", pc, sizeof pc);
	infs_store *sd = model_store_create(md, dt, EMBED, "gpu-encode", "device.infs", pd, sizeof pd);
	CHECK(!strcmp(infs_store_identity(sc), infs_store_identity(sd)));
	infs_geometry g;
	CHECK_OK(infs_store_geometry(&g, sd));

	uint64_t ic[N_FACTS], id[N_FACTS];
	progress pr = { .total = N_FACTS };
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = f->ctx;
	eo.n_context = N_CTX;
	CHECK_OK(infs_fact_encode(ic, sc, "u", mc, f->in, N_FACTS, &eo));
	eo.progress = on_progress;
	eo.progress_user = &pr;
	CHECK_OK(infs_fact_encode(id, sd, "u", md, f->in, N_FACTS, &eo));
	CHECK(pr.calls == N_FACTS && !pr.out_of_order);
	int bad = 0;
	for (uint32_t i = 0; i < N_FACTS; i++) {
		infs_fact_record *want = NULL, *got = NULL;
		CHECK_OK(infs_fact_get(&want, sc, "u", ic[i]));
		CHECK_OK(infs_fact_get(&got, sd, "u", id[i]));
		if (want && got)
			bad += compare_fact(name, i, want, got, &g);
		infs_fact_record_free(want);
		infs_fact_record_free(got);
	}
	CHECK(bad == 0);

	/* A cancel after fact 3: facts 0..2 stay. */
	progress pc3 = { .total = N_FACTS, .cancel_at = CANCEL_AT };
	eo.progress_user = &pc3;
	CHECK_ERR(infs_fact_encode(id, sd, "c", md, f->in, N_FACTS, &eo), INFS_ECANCELED);
	CHECK(pc3.calls == CANCEL_AT && !pc3.out_of_order);
	for (uint32_t i = 0; i < N_FACTS; i++)
		CHECK(i < CANCEL_AT ? id[i] != 0 : id[i] == 0);
	uint64_t count = 0;
	CHECK_OK(infs_fact_count(&count, sd, "c"));
	CHECK(count == CANCEL_AT);

	/* Fact 1 given an own context that makes it 30 tokens: refused before
	 * fact 0 is stored; the host model encodes the same facts. */
	static int32_t own[MAX_T];
	for (uint32_t t = 0; t < MAX_T; t++)
		own[t] = (int32_t)(t % info.n_vocab);
	infs_fact_input two[2] = { f->in[0], f->in[3] };
	two[1].context = own;
	two[1].n_context = 10;
	eo.progress = NULL;
	CHECK_ERR(infs_fact_encode(id, sd, "long", md, two, 2, &eo), INFS_ERANGE);
	CHECK(strstr(infs_error_last(), "device_max_tokens") != NULL);
	CHECK(id[0] == 0 && id[1] == 0);
	CHECK_OK(infs_fact_count(&count, sd, "long"));
	CHECK(count == 0);
	CHECK_OK(infs_fact_encode(ic, sc, "long", mc, two, 2, &eo));

	store_remove(sc, pc);
	store_remove(sd, pd);
	free(f);
	infs_model_free(mc);
	infs_model_free(md);
}

int main(int argc, char **argv)
{
	gpu_require();
	CHECK(argc >= 3);
	gpu_each_model(argc, argv, "comparison is", check_model);
	CHECK_DONE();
}

/* A model and a store together: the store is created straight from the
 * model's geometry and identity, a prefix's pre-RoPE KV from the forward
 * pass is put as a fact, injected into a paged cache by the store, and the
 * rest of the sequence prefilled over that cache gives the logits of one
 * plain pass over the whole sequence: to rounding with f32 KV, to f16
 * precision with f16 KV. Run for every tiny model named in argv[2..]. */
#include <math.h>

#include "check.h"
#include "model_compare.h"
#include "model_store_util.h"

static void check_arch(const char *dir, const char *name, infs_dtype dt)
{
	char path[1024], spath[600];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	infs_model *model = NULL;
	CHECK_OK(infs_model_load(&model, path, NULL));
	if (!model)
		return;
	infs_model_info info = model_info(model);

	infs_geometry g;
	CHECK_OK(infs_model_geometry(&g, model, dt));
	infs_store *st = model_store_create(model, dt, 4, "model-store", "store.infs", spath, sizeof spath);

	enum { N = 12, M = 5, BS = 4, NB = 6 };
	int32_t tokens[N];
	for (int i = 0; i < N; i++)
		tokens[i] = (int32_t)((i * 37 + 11) % info.n_vocab);
	size_t V = info.n_vocab, row = (size_t)g.n_kv_heads * g.head_dim;
	float *full = malloc(N * V * sizeof *full), *part = malloc(N * V * sizeof *part);
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.all_logits = 1;
	CHECK_OK(infs_model_forward(full, NULL, NULL, model, tokens, NULL, N, &fo));

	/* The prefix as a fact: pre-RoPE f16 KV straight from the forward pass. */
	size_t es = infs_dtype_size(dt);
	void *k = malloc(g.n_layers * M * row * es), *v = malloc(g.n_layers * M * row * es);
	fo.kv_dtype = dt;
	CHECK_OK(infs_model_forward(NULL, k, v, model, tokens, NULL, M, &fo));
	float emb[4] = { 1, 0, 0, 0 };
	infs_fact f = INFS_FACT_INIT;
	f.n_tokens = M;
	f.tokens = tokens;
	f.embedding = emb;
	f.k = k;
	f.v = v;
	uint64_t id = 0;
	CHECK_OK(infs_fact_put(&id, st, "u", &f));

	/* A vLLM-layout cache: K of every block, then V. */
	size_t per_layer = (size_t)2 * NB * BS * row;
	char *cache = calloc(g.n_layers * per_layer, es);
	void **kl = calloc(g.n_layers, sizeof *kl), **vl = calloc(g.n_layers, sizeof *vl);
	for (uint32_t l = 0; l < g.n_layers; l++) {
		kl[l] = cache + l * per_layer * es;
		vl[l] = cache + (l * per_layer + (size_t)NB * BS * row) * es;
	}
	infs_kv_layout layout = INFS_KV_LAYOUT_INIT;
	layout.dtype = dt;
	layout.n_layers = g.n_layers;
	layout.n_kv_heads = g.n_kv_heads;
	layout.head_dim = g.head_dim;
	layout.n_blocks = NB;
	layout.block_size = BS;
	layout.k_layers = kl;
	layout.v_layers = vl;
	layout.stride_block = BS * row;
	layout.stride_slot = row;
	layout.stride_head = g.head_dim;
	layout.stride_dim = 1;
	const int32_t table[] = { 3, 0, 5 };
	uint32_t next = 0;
	CHECK_OK(infs_inject_into_blocks(&next, st, "u", &id, 1, 0, table, 3, &layout, NULL));
	CHECK(next == M);

	/* The rest over the injected prefix. */
	int32_t pos[N - M];
	for (int i = 0; i < N - M; i++)
		pos[i] = M + i;
	fo.cache = &layout;
	fo.block_table = table;
	fo.block_table_len = 3;
	fo.n_past = M;
	fo.write_cache = 1;
	CHECK_OK(infs_model_forward(part + M * V, NULL, NULL, model, tokens + M, pos, N - M, &fo));
	float worst = 0, big = 0;
	for (size_t i = M * V; i < N * V; i++) {
		float d = fabsf(part[i] - full[i]);
		worst = d > worst || isnan(d) ? d : worst;
		big = fabsf(full[i]) > big ? fabsf(full[i]) : big;
	}
	printf("%s, %s KV: injected prefix + prefill vs one pass: max |logit diff| %.3g (of %.3g)\n", name,
	       dt == INFS_DTYPE_F32 ? "f32" : "f16", worst, big);
	CHECK(worst < (dt == INFS_DTYPE_F32 ? 1e-4f : 2e-2f) * (1 + big));

	free(cache);
	free(kl);
	free(vl);
	free(k);
	free(v);
	free(full);
	free(part);
	infs_store_close(st);
	scratch_cleanup();
	infs_model_free(model);
}

int main(int argc, char **argv)
{
	CHECK(argc >= 3);
	for (int i = 2; i < argc; i++) {
		check_arch(argv[1], argv[i], INFS_DTYPE_F32);
		check_arch(argv[1], argv[i], INFS_DTYPE_F16);
	}
	CHECK_DONE();
}

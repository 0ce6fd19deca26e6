/* Accuracy recovery on the device (infs__recompute_device, and with the
 * question's prefill fused in, infs__recompute_prefill_device) against the
 * host's (infs__recompute) and against the device's own plain forward,
 * then through the device engine.
 *
 * On each tiny model (tests/fixtures/model) and SmolLM2 when it is in
 * $INFS_CACHE: a bf16 paged cache holding a prefill of tokens A, copied
 * byte for byte to the device; other tokens B recomputed in place at
 * positions H..P with a question. The device keeps exactly the rows the
 * shared selection (infs__recompute_select) picks from its own scores,
 * forced rows among them; its deviations and question mass are the
 * host's within bf16 noise, and most kept rows are the host's; it is
 * deterministic (scores, rows and the whole cache bitwise over two runs).
 * Every row kept through the last layer gives the logits of a plain
 * device prefill of A[0..H) B within the bf16 bound, fused or not; half
 * the rows past layer 0 give logits different from both ends (with more
 * than one layer). Fused, the check layer sees what the recompute sees
 * (the same scores and rows, bitwise) and the logits are the recompute's
 * then a prefill's within the bf16 bound and a quarter of how far the
 * recompute moves them. Bad arguments are refused.
 *
 * Then the engine on SmolLM2 and the embedder over the example memory
 * (argv[1]): ratio 0 without a prefix is plain injection bitwise, every
 * row through the last layer is full recompute within the gpu-engine
 * test's tolerance, prefix and deviation modes recompute the counts asked,
 * differ from both ends and repeat bitwise, a batch with recovery answers
 * as single asks do (first logits within a quarter of the question's
 * distance from injection to full recompute), and bad options are
 * refused.
 * argv[1]: facts.jsonl, argv[2]: the model fixtures, argv[3..]: tiny
 * models. Exits 77 without a device. */
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "../model_compare.h"
#include "../model_store_util.h"
#include "engine/engine_impl.h"
#include "engine/kvcache.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/recompute_select.h"

enum { BS = 4, CAP = 64, P = 24, H = 4, NT = P - H, NQ = 5, MAX_T = 64 };

typedef struct fixture {
	infs_model *mc, *md;
	infs_geometry g;
	uint32_t V, L;
	infs__kvcache hc;          /* host cache */
	void *host_init;           /* its bytes after the prefill of A, per layer K then V */
	infs_kv_layout kl;         /* device cache: the same bytes */
	void *k[64], *v[64];
	uint16_t *mem, *init;      /* its memory and a copy after the prefill */
	size_t layer_bytes;        /* of K (or V) of one layer */
	int32_t *table;            /* device copy of hc.table */
	int32_t a[P + NQ], b[P + NQ], q[NQ], pos[NT];
	float *d_logits;
	int32_t *d_tok;
} fixture;

static void reset(fixture *f)
{
	for (uint32_t l = 0; l < f->L; l++) {
		memcpy(f->hc.layout.k_layers[l], (char *)f->host_init + 2 * l * f->layer_bytes, f->layer_bytes);
		memcpy(f->hc.layout.v_layers[l], (char *)f->host_init + (2 * l + 1) * f->layer_bytes, f->layer_bytes);
	}
	CUDA_OK(cudaMemcpy(f->mem, f->init, 2 * f->L * f->layer_bytes, cudaMemcpyDeviceToDevice));
}

static infs__recompute_args args(const fixture *f, infs__paged_kv *pk, int device, uint32_t check, uint32_t keep,
                                 float w)
{
	if (device)
		*pk = (infs__paged_kv){ &f->kl, f->table, f->hc.layout.n_blocks, P, 1 };
	else
		*pk = (infs__paged_kv){ &f->hc.layout, f->hc.table, f->hc.layout.n_blocks, P, 1 };
	return (infs__recompute_args){ .tokens = f->b + H, .positions = f->pos, .n_tokens = NT, .check_layer = check,
		                       .n_keep = keep, .query = f->q, .n_query = NQ, .query_weight = w, .past = pk };
}

/* The device's logits of the question at n_past P over the device cache. */
static void question_logits(fixture *f, float *out)
{
	CUDA_OK(cudaMemcpy(f->d_tok, f->q, NQ * 4, cudaMemcpyHostToDevice));
	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	o.cache = &f->kl;
	o.block_table = f->table;
	o.block_table_len = f->hc.layout.n_blocks;
	o.n_past = P;
	CHECK_OK(infs_model_forward_device(f->d_logits, f->md, f->d_tok, NULL, NQ, &o));
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(out, f->d_logits, f->V * 4, cudaMemcpyDeviceToHost));
}

static int setup(fixture *f, const char *path)
{
	memset(f, 0, sizeof *f);
	if (!gpu_load_pair(&f->mc, &f->md, path, MAX_T))
		return 0;
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, f->mc));
	CHECK_OK(infs_model_geometry(&f->g, f->mc, INFS_DTYPE_BF16));
	f->V = info.n_vocab;
	f->L = info.n_layers;
	uint64_t rng = 7;
	for (int i = 0; i < P + NQ; i++) {
		f->a[i] = (int32_t)(rng_next(&rng) % f->V);
		f->b[i] = i < H ? f->a[i] : (int32_t)(rng_next(&rng) % f->V);
	}
	for (int i = 0; i < NQ; i++)
		f->q[i] = f->b[P + i] = (int32_t)(rng_next(&rng) % f->V);
	for (int i = 0; i < NT; i++)
		f->pos[i] = H + i;
	CHECK_OK(infs__kvcache_init(&f->hc, &f->g, INFS_DTYPE_BF16, CAP, BS));
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.cache = &f->hc.layout;
	fo.block_table = f->hc.table;
	fo.block_table_len = f->hc.layout.n_blocks;
	fo.write_cache = 1;
	CHECK_OK(infs_model_forward(NULL, NULL, NULL, f->mc, f->a, NULL, P, &fo));
	gpu_vllm_cache(&f->kl, &f->mem, f->k, f->v, &f->g, f->hc.layout.n_blocks, BS);
	const infs_kv_layout *h = &f->hc.layout;
	CHECK(h->stride_block == f->kl.stride_block && h->stride_slot == f->kl.stride_slot &&
	      h->stride_head == f->kl.stride_head && h->stride_dim == f->kl.stride_dim);
	f->layer_bytes = (size_t)h->n_blocks * BS * f->g.n_kv_heads * f->g.head_dim * 2;
	f->host_init = malloc(2 * f->L * f->layer_bytes);
	for (uint32_t l = 0; l < f->L; l++) {
		memcpy((char *)f->host_init + 2 * l * f->layer_bytes, h->k_layers[l], f->layer_bytes);
		memcpy((char *)f->host_init + (2 * l + 1) * f->layer_bytes, h->v_layers[l], f->layer_bytes);
		CUDA_OK(cudaMemcpy(f->k[l], h->k_layers[l], f->layer_bytes, cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(f->v[l], h->v_layers[l], f->layer_bytes, cudaMemcpyHostToDevice));
	}
	CUDA_OK(cudaMalloc((void **)&f->init, 2 * f->L * f->layer_bytes));
	CUDA_OK(cudaMemcpy(f->init, f->mem, 2 * f->L * f->layer_bytes, cudaMemcpyDeviceToDevice));
	CUDA_OK(cudaMalloc((void **)&f->table, h->n_blocks * 4));
	CUDA_OK(cudaMemcpy(f->table, f->hc.table, h->n_blocks * 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMalloc((void **)&f->d_logits, (size_t)f->V * 4));
	CUDA_OK(cudaMalloc((void **)&f->d_tok, (P + NQ) * 4));
	return 1;
}

static void teardown(fixture *f)
{
	infs__kvcache_free(&f->hc);
	free(f->host_init);
	cudaFree(f->mem);
	cudaFree(f->init);
	cudaFree(f->table);
	cudaFree(f->d_logits);
	cudaFree(f->d_tok);
	infs_model_free(f->mc);
	infs_model_free(f->md);
}

/* Deviation and question mass at layer 1 (or 0), six rows kept, two of
 * them forced: the device's choice is the shared selection of its own
 * scores, near the host's, deterministic. */
static void selection(fixture *f, const char *name)
{
	const uint32_t check = f->L > 1 ? 1 : 0, keep = 6;
	uint8_t forced[NT] = { 0 };
	forced[0] = forced[10] = 1;
	uint32_t kh[NT], kd[NT], kd2[NT], ks[NT];
	float dh[NT], dd[NT], dd2[NT];
	double mh[NT], md[NT];
	infs__paged_kv pk;
	reset(f);
	infs__recompute_args a = args(f, &pk, 0, check, keep, 0.5f);
	a.forced = forced, a.kept = kh, a.dev = dh, a.mass = mh;
	CHECK_OK(infs__recompute(f->mc, &a));
	a = args(f, &pk, 1, check, keep, 0.5f);
	a.forced = forced, a.kept = kd, a.dev = dd, a.mass = md;
	CHECK_OK(infs__recompute_device(f->md, &a, NULL));
	CHECK_OK(infs__recompute_select(ks, dd, md, f->pos, forced, NT, keep, 0.5f));
	CHECK(!memcmp(ks, kd, keep * sizeof *ks));
	CHECK(kd[0] == 0);
	int has10 = 0, overlap = 0;
	float dmax = 0, ddiff = 0;
	double mmax = 0, mdiff = 0;
	for (uint32_t i = 0; i < keep; i++) {
		has10 |= kd[i] == 10;
		for (uint32_t j = 0; j < keep; j++)
			overlap += kd[i] == kh[j];
	}
	for (uint32_t i = 0; i < NT; i++) {
		dmax = fmaxf(dmax, dh[i]);
		ddiff = fmaxf(ddiff, fabsf(dd[i] - dh[i]));
		mmax = fmax(mmax, mh[i]);
		mdiff = fmax(mdiff, fabs(md[i] - mh[i]));
	}
	printf("  %s: check layer %u, deviation max %.4g (device off by %.3g), question mass max %.4g (off by %.3g), "
	       "%d of %u kept rows the host's\n", name, check, dmax, ddiff, mmax, mdiff, overlap, keep);
	CHECK(has10);
	CHECK(dmax > 0 && ddiff <= 0.1f * dmax);
	CHECK(mmax > 0 && mdiff <= 0.05 * mmax);
	CHECK(overlap >= (int)keep / 2);
	/* Twice the same: scores, rows and the cache, bitwise. */
	uint16_t *after = malloc(2 * f->L * f->layer_bytes), *again = malloc(2 * f->L * f->layer_bytes);
	CUDA_OK(cudaMemcpy(after, f->mem, 2 * f->L * f->layer_bytes, cudaMemcpyDeviceToHost));
	reset(f);
	a.kept = kd2, a.dev = dd2;
	CHECK_OK(infs__recompute_device(f->md, &a, NULL));
	CUDA_OK(cudaMemcpy(again, f->mem, 2 * f->L * f->layer_bytes, cudaMemcpyDeviceToHost));
	CHECK(!memcmp(kd, kd2, keep * sizeof *kd) && !memcmp(dd, dd2, sizeof dd));
	CHECK(!memcmp(after, again, 2 * f->L * f->layer_bytes));
	free(after);
	free(again);
}

/* The logits infs__recompute_prefill_device leaves in f->d_logits. */
static void fused_logits(fixture *f, const infs__recompute_args *a, float *out)
{
	CHECK_OK(infs__recompute_prefill_device(f->md, a, f->d_logits, NULL));
	CUDA_OK(cudaMemcpy(out, f->d_logits, f->V * 4, cudaMemcpyDeviceToHost));
}

/* Every row through the last layer, fused or not, against a plain prefill
 * of A[0..H) B; half the rows past layer 0 differ from both. */
static void ends(fixture *f, const char *name)
{
	float *full = malloc(f->V * 4), *prefill = malloc(f->V * 4), *inj = malloc(f->V * 4), *mid = malloc(f->V * 4);
	float *fus = malloc(f->V * 4);
	infs__paged_kv pk;
	reset(f);
	question_logits(f, inj);
	infs__recompute_args a = args(f, &pk, 1, f->L - 1, NT, 0);
	CHECK_OK(infs__recompute_device(f->md, &a, NULL));
	question_logits(f, full);
	/* the reference: a fresh prefill of A[0..H) B and the question */
	CUDA_OK(cudaMemset(f->mem, 0, 2 * f->L * f->layer_bytes));
	CUDA_OK(cudaMemcpy(f->d_tok, f->b, (P + NQ) * 4, cudaMemcpyHostToDevice));
	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	o.cache = &f->kl;
	o.block_table = f->table;
	o.block_table_len = f->hc.layout.n_blocks;
	CHECK_OK(infs_model_forward_device(f->d_logits, f->md, f->d_tok, NULL, P + NQ, &o));
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(prefill, f->d_logits, f->V * 4, cudaMemcpyDeviceToHost));
	const float bound = bf16_bound(f->L, max_abs(prefill, f->V)), d_full = max_diff(full, prefill, f->V);
	reset(f);
	a = args(f, &pk, 1, f->L - 1, NT, 0);
	fused_logits(f, &a, fus);
	const float d_fused = max_diff(fus, prefill, f->V);
	reset(f);
	/* Check layer 0: on a model of two layers, 1 would be the last. */
	a = args(f, &pk, 1, 0, NT / 2, 0);
	CHECK_OK(infs__recompute_device(f->md, &a, NULL));
	question_logits(f, mid);
	const float mi = max_diff(mid, prefill, f->V), ii = max_diff(inj, prefill, f->V);
	printf("  %s: all rows recomputed vs prefill max |diff| %.3g, fused %.3g (bound %.3g); half the rows %.3g, "
	       "injection %.3g from the prefill\n", name, d_full, d_fused, bound, mi, ii);
	CHECK(d_full <= bound && d_fused <= bound);
	/* Under a sliding window the question may see none of the rows left
	 * out (Mistral's 6 positions here), and then equals the full keep. */
	if (f->L > 1 && !f->md->cfg.sliding_window)
		CHECK(memcmp(mid, inj, f->V * 4) != 0 && memcmp(mid, full, f->V * 4) != 0);
	free(fus);
	free(full);
	free(prefill);
	free(inj);
	free(mid);
}

/* The question's prefill fused into the recompute, half the rows past
 * layer 0, without and with the question's weight, against the recompute
 * followed by a prefill of the question. With the weight the check layer
 * runs the same rows in both (the question among them): the same scores
 * and rows, bitwise. The logits differ only by how the GEMMs group their
 * rows: within the bf16 bound and a quarter of how far the recompute moves
 * them from injection. Deterministic. */
static void fused(fixture *f, const char *name)
{
	const uint32_t V = f->V, keep = NT / 2;
	float *inj = malloc(V * 4), *sep = malloc(V * 4), *fus = malloc(V * 4), *again = malloc(V * 4);
	static const float weights[] = { 0.0f, 0.5f };
	for (size_t wi = 0; wi < sizeof weights / sizeof *weights; wi++) {
		const float w = weights[wi];
		uint32_t ks[NT], kf[NT];
		float ds[NT], df[NT];
		double ms[NT], mf[NT];
		infs__paged_kv pk;
		reset(f);
		question_logits(f, inj);
		reset(f);
		infs__recompute_args a = args(f, &pk, 1, 0, keep, w);
		a.kept = ks, a.dev = ds, a.mass = ms;
		CHECK_OK(infs__recompute_device(f->md, &a, NULL));
		question_logits(f, sep);
		reset(f);
		a.kept = kf, a.dev = df, a.mass = mf;
		fused_logits(f, &a, fus);
		reset(f);
		fused_logits(f, &a, again);
		const float d_fs = max_diff(fus, sep, V), d_si = max_diff(sep, inj, V);
		const float bound = bf16_bound(f->L, max_abs(sep, V));
		printf("  %s: fused, query weight %.1f: %.3g from the recompute then prefill (bound %.3g), which is %.3g "
		       "from injection\n", name, (double)w, d_fs, bound, d_si);
		CHECK(d_fs <= bound && d_fs <= 0.25f * d_si);
		CHECK(!memcmp(fus, again, V * 4));
		if (w > 0)
			CHECK(!memcmp(ks, kf, keep * sizeof *ks) && !memcmp(ds, df, sizeof ds) && !memcmp(ms, mf, sizeof ms));
	}
	free(inj);
	free(sep);
	free(fus);
	free(again);
}

static void refusals(fixture *f)
{
	infs__paged_kv pk;
	infs__recompute_args a = args(f, &pk, 1, 0, 4, 0.5f);
	CHECK_ERR(infs__recompute_device(f->mc, &a, NULL), INFS_EINVAL); /* a host model */
	a.n_keep = NT + 1;
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_ERANGE);
	a = args(f, &pk, 1, f->L, 4, 0.5f);
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_ERANGE);
	a = args(f, &pk, 1, 0, 4, 1.5f);
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_EINVAL);
	a = args(f, &pk, 1, 0, 4, 0.5f);
	a.query = NULL;
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_EINVAL);
	uint8_t forced[NT];
	memset(forced, 1, sizeof forced);
	a = args(f, &pk, 1, 0, 4, 0.5f);
	a.forced = forced;
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_ERANGE);
	int32_t bad_pos[NT];
	memcpy(bad_pos, f->pos, sizeof bad_pos);
	bad_pos[3] = P;
	a = args(f, &pk, 1, 0, 4, 0.5f);
	a.positions = bad_pos;
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_ERANGE);
	a = args(f, &pk, 1, 0, 4, 0.5f);
	pk.block_table = NULL;
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_EINVAL);
	a = args(f, &pk, 1, 0, 4, 0.5f);
	pk.block_table_len = (P + NQ) / BS - 1;
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_ERANGE);
	CHECK(strstr(infs_error_last(), "block table") != NULL);
	a = args(f, &pk, 1, 0, 4, 0.5f);
	pk.write = 0;
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_EINVAL);
	/* More rows and question tokens than the workspace takes. */
	int32_t many_tok[MAX_T], many_pos[MAX_T];
	for (int i = 0; i < MAX_T; i++)
		many_tok[i] = f->b[H], many_pos[i] = H + i % NT;
	a = args(f, &pk, 1, 0, 4, 0.5f);
	a.tokens = many_tok, a.positions = many_pos, a.n_tokens = MAX_T - NQ + 1;
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_ERANGE);
	CHECK(strstr(infs_error_last(), "device_max_tokens") != NULL);
	printf("  refused: %s\n", infs_error_last());
	/* Fused, the whole question runs, whatever its weight. */
	a = args(f, &pk, 1, 0, 4, 0);
	a.tokens = many_tok, a.positions = many_pos, a.n_tokens = MAX_T - NQ + 1;
	CHECK_ERR(infs__recompute_prefill_device(f->md, &a, f->d_logits, NULL), INFS_ERANGE);
	CHECK(strstr(infs_error_last(), "device_max_tokens") != NULL);
	a = args(f, &pk, 1, 0, 4, 0);
	CHECK_ERR(infs__recompute_prefill_device(f->md, &a, NULL, NULL), INFS_EINVAL);
	a.query = NULL;
	CHECK_ERR(infs__recompute_prefill_device(f->md, &a, f->d_logits, NULL), INFS_EINVAL);
	int32_t bad_q[NQ];
	memcpy(bad_q, f->q, sizeof bad_q);
	bad_q[1] = (int32_t)f->V;
	a = args(f, &pk, 1, 0, 4, 0);
	a.query = bad_q;
	CHECK_ERR(infs__recompute_prefill_device(f->md, &a, f->d_logits, NULL), INFS_ERANGE);
	a = args(f, &pk, 1, 0, 4, 0);
	pk.block_table_len = (P + NQ) / BS - 1;
	CHECK_ERR(infs__recompute_prefill_device(f->md, &a, f->d_logits, NULL), INFS_ERANGE);
	/* nothing ran: the cache is untouched */
	uint16_t *now = malloc(2 * f->L * f->layer_bytes), *init = malloc(2 * f->L * f->layer_bytes);
	reset(f);
	CUDA_OK(cudaMemcpy(init, f->mem, 2 * f->L * f->layer_bytes, cudaMemcpyDeviceToHost));
	a = args(f, &pk, 1, 0, NT + 1, 0.5f);
	CHECK_ERR(infs__recompute_device(f->md, &a, NULL), INFS_ERANGE);
	CUDA_OK(cudaMemcpy(now, f->mem, 2 * f->L * f->layer_bytes, cudaMemcpyDeviceToHost));
	CHECK(!memcmp(now, init, 2 * f->L * f->layer_bytes));
	free(now);
	free(init);
}

static void check_model(const char *path, const char *name, int nth)
{
	fixture f;
	printf("%s\n", name);
	if (!setup(&f, path)) {
		CHECK(0);
		return;
	}
	selection(&f, name);
	ends(&f, name);
	fused(&f, name);
	if (nth == 0)
		refusals(&f);
	teardown(&f);
}

/* ---- the engine ---- */

enum { N_FACTS = 12 };

static const char *questions[] = {
	"What is the name of Maya's cat?",
	"Where does Maya live?",
	"What is Maya allergic to?",
};
enum { N_Q = sizeof questions / sizeof *questions };

static float logit_diff(const infs_answer *x, const infs_answer *y)
{
	return max_diff(x->first_logits, y->first_logits, x->n_vocab);
}

static void engine(const char *facts)
{
	char mpath[1024], epath[1024], spath[600];
	cache_path(mpath, sizeof mpath, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
	cache_path(epath, sizeof epath, "minilm");
	infs_model *m = NULL;
	infs_embedder *emb = NULL;
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.device = 0;
	mo.device_max_tokens = 512;
	if (infs_model_load(&m, mpath, &mo) || infs_embedder_load(&emb, epath, NULL)) {
		printf("SmolLM2 or the embedder is not in $INFS_CACHE (%s): the engine's recovery left out\n",
		       infs_error_last());
		infs_model_free(m);
		return;
	}
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	CHECK_OK(infs_model_info_get(&info, m));
	char *texts[N_FACTS], *rendered[N_FACTS];
	const int n = read_facts(facts, texts, rendered, N_FACTS);
	CHECK(n == N_FACTS);
	infs_engine_options eo = INFS_ENGINE_OPTIONS_INIT;
	eo.n_ctx = 1024;
	eo.kv_dtype = INFS_DTYPE_BF16;
	eo.device = 0;
	eo.max_seqs = 4;
	infs_engine *e = NULL;
	CHECK_OK(infs_engine_create(&e, m, &eo));
	infs_store *st = model_store_create(m, INFS_DTYPE_BF16, infs_embedder_dim(emb), "gpu-recovery", "maya.infs",
	                                    spath, sizeof spath);
	if (!e || !st || n != N_FACTS) {
		CHECK(0);
		return;
	}
	uint64_t ids[N_FACTS];
	encode_after_header(ids, st, "maya", e, m, emb, (const char *const *)rendered, (const char *const *)texts,
	                    N_FACTS);
	CHECK_OK(infs_engine_prepare(e, st));
	infs_store_close(st);
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.device = 0;
	st = NULL;
	CHECK_OK(infs_store_open(&st, spath, &so));
	if (!st) {
		CHECK(0);
		return;
	}
	CHECK_OK(infs_engine_prepare(e, st));

	infs_answer *one[N_Q] = { 0 };
	float moved[N_Q] = { 0 }; /* how far full recompute is from injection */
	for (int qi = 0; qi < N_Q; qi++) {
		infs_ask_options o = INFS_ASK_OPTIONS_INIT;
		o.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
		o.k = 6;
		o.generate.max_tokens = 4;
		infs_answer *inj = NULL, *full = NULL, *zero = NULL, *all = NULL, *pre = NULL, *p1 = NULL, *p2 = NULL;
		CHECK_OK(infs_engine_ask(&inj, e, st, emb, "maya", questions[qi], &o));
		if (!inj)
			break;
		o.fact_ids = inj->fact_ids;
		o.n_fact_ids = inj->n_facts;
		o.full_recompute = 1;
		CHECK_OK(infs_engine_ask(&full, e, st, NULL, "maya", questions[qi], &o));
		o.full_recompute = 0;
		o.query_weight = 0.5f; /* ratio 0, no prefix: nothing recomputed */
		CHECK_OK(infs_engine_ask(&zero, e, st, NULL, "maya", questions[qi], &o));
		o.recompute_ratio = 0.5f;
		o.check_layer = info.n_layers - 1;
		CHECK_OK(infs_engine_ask(&all, e, st, NULL, "maya", questions[qi], &o));
		o.recompute_ratio = 0;
		o.check_layer = 0;
		o.query_weight = 0;
		o.prefix_tokens = 2;
		CHECK_OK(infs_engine_ask(&pre, e, st, NULL, "maya", questions[qi], &o));
		o.recompute_ratio = 0.25f;
		o.check_layer = 2;
		o.query_weight = 0.5f;
		CHECK_OK(infs_engine_ask(&p1, e, st, NULL, "maya", questions[qi], &o));
		CHECK_OK(infs_engine_ask(&p2, e, st, NULL, "maya", questions[qi], &o));
		if (!full || !zero || !all || !pre || !p1 || !p2)
			break;
		const size_t bytes = inj->n_vocab * sizeof(float);
		const uint32_t nr = p1->n_recomputable, n_pre = 2 * (uint32_t)inj->n_facts; /* the footer is prefilled */
		printf("%-35s inj \"%s\" full \"%s\" all-rows \"%s\" (|diff| to full %.3f) prefix %.3f 25%%@2+query %.3f; "
		       "injection %.3f from full; TTFT inj %.2f, 25%% %.2f, full %.2f ms\n", questions[qi], inj->text,
		       full->text, all->text, logit_diff(all, full), logit_diff(pre, full), logit_diff(p1, full),
		       logit_diff(inj, full), inj->ttft_ms, p1->ttft_ms, full->ttft_ms);
		CHECK(!memcmp(zero->first_logits, inj->first_logits, bytes) && zero->n_recomputed == 0);
		CHECK(logit_diff(all, full) < 0.5f);
		CHECK(argmax(all->first_logits, all->n_vocab) == argmax(full->first_logits, full->n_vocab));
		CHECK(all->n_recomputed == all->n_recomputable && all->n_recomputable == nr && nr > 0);
		CHECK(pre->n_recomputed == n_pre && pre->n_recomputable == nr);
		CHECK(memcmp(pre->first_logits, inj->first_logits, bytes) != 0);
		const uint32_t share = (uint32_t)(0.25 * nr + 0.5);
		CHECK(p1->n_recomputed == (share > n_pre ? share : n_pre)); /* the prefixes are kept */
		CHECK(memcmp(p1->first_logits, inj->first_logits, bytes) != 0);
		CHECK(memcmp(p1->first_logits, full->first_logits, bytes) != 0);
		CHECK(!memcmp(p1->first_logits, p2->first_logits, bytes) && !strcmp(p1->text, p2->text));
		one[qi] = p1;
		moved[qi] = logit_diff(inj, full);
		infs_answer *as[] = { inj, full, zero, all, pre, p2 };
		for (size_t i = 0; i < sizeof as / sizeof *as; i++)
			infs_answer_free(as[i]);
	}
	/* A batch with recovery: each request recomputed after its injection,
	 * as a single ask is (same facts: retrieval by the same embedder), its
	 * first logits near the single ask's against how far recovery can
	 * move them. */
	infs_ask_options o = INFS_ASK_OPTIONS_INIT;
	o.fact_scale = 1.0f; /* uncalibrated (tests/test_calibration.c) */
	o.k = 6;
	o.generate.max_tokens = 4;
	o.recompute_ratio = 0.25f;
	o.check_layer = 2;
	o.query_weight = 0.5f;
	infs_answer *many[N_Q] = { 0 };
	CHECK_OK(infs_engine_ask_batch(many, e, st, emb, "maya", questions, N_Q, &o));
	for (int qi = 0; qi < N_Q; qi++) {
		if (!many[qi] || !one[qi]) {
			CHECK(0);
			continue;
		}
		printf("batch %d: first logits |diff| %.3f to the single ask (injection to full recompute %.3f)\n", qi,
		       logit_diff(many[qi], one[qi]), moved[qi]);
		CHECK(many[qi]->n_recomputed == one[qi]->n_recomputed);
		CHECK(argmax(many[qi]->first_logits, many[qi]->n_vocab) == argmax(one[qi]->first_logits, one[qi]->n_vocab));
		CHECK(logit_diff(many[qi], one[qi]) <= 0.25f * moved[qi]);
		infs_answer_free(many[qi]);
		infs_answer_free(one[qi]);
	}
	/* Bad options, on the device engine as on the host. */
	infs_answer *ans = NULL;
	o.query_weight = 1.5f;
	CHECK_ERR(infs_engine_ask(&ans, e, st, emb, "maya", questions[0], &o), INFS_ERANGE);
	o.query_weight = 0.5f;
	o.check_layer = info.n_layers;
	CHECK_ERR(infs_engine_ask(&ans, e, st, emb, "maya", questions[0], &o), INFS_ERANGE);
	CHECK(ans == NULL && strstr(infs_error_last(), "check_layer"));

	for (int i = 0; i < n; i++) {
		free(texts[i]);
		infs_free(rendered[i]);
	}
	infs_engine_free(e);
	infs_store_close(st);
	scratch_cleanup();
	infs_embedder_free(emb);
	infs_model_free(m);
}

int main(int argc, char **argv)
{
	CHECK(argc >= 3);
	gpu_require();
	gpu_each_model(argc - 1, argv + 1, "recompute checks", check_model);
	engine(argv[1]);
	CHECK_DONE();
}

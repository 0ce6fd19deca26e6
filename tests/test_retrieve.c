/* infs_retrieve end to end: a store's namespace searched against brute
 * force over what was put (both metrics, k = 1, 7, n, > n, 4096, batches),
 * ties by id, the cache of row norms following puts and deletes, bad
 * arguments, and namespace isolation under adversarial names: another
 * namespace's facts and any segment are never returned. With FAISS, the
 * store's index ("Flat") answers exactly like the exact search and follows
 * changes to the namespace; threads search while another one writes. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "test_util.h"
#include "scratch_util.h"

#define DIM 16

static infs_geometry geometry(void)
{
	infs_geometry g = test_geometry(1, 1, 4, INFS_DTYPE_F32);
	g.embed_dim = DIM;
	return g;
}

static uint64_t put(infs_store *st, const char *ns, const float *emb, int segment)
{
	int32_t tok = 1;
	float kv[4] = { 1, 2, 3, 4 };
	infs_fact f = INFS_FACT_INIT;
	f.flags = segment ? INFS_FACT_SEGMENT : 0;
	f.n_tokens = 1;
	f.tokens = &tok;
	f.embedding = segment ? NULL : emb;
	f.k = kv;
	f.v = kv;
	uint64_t id = 0;
	CHECK_OK(infs_fact_put(&id, st, ns, &f));
	return id;
}

/* The namespace as brute force sees it. */
typedef struct facts {
	size_t n;
	uint64_t ids[600];
	float emb[600][DIM];
} facts;

static void add(facts *f, infs_store *st, const char *ns, const float *emb)
{
	memcpy(f->emb[f->n], emb, sizeof f->emb[0]);
	f->ids[f->n++] = put(st, ns, emb, 0);
}

static int contains(const facts *f, uint64_t id)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->ids[i] == id)
			return 1;
	return 0;
}

/* Every hit is a fact of f, best first with ties by id, scored as brute
 * force scores it, and no fact left out scores higher than the last hit. */
static void check_hits(const infs_hit *h, size_t got, const facts *f, const float *q, size_t k, int cosine,
                       const char *what)
{
	size_t want = k < f->n ? k : f->n;
	if (got != want) {
		fprintf(stderr, "%s: %zu hits, expected %zu\n", what, got, want);
		check_failures++;
		return;
	}
	double qn = 0;
	for (int d = 0; d < DIM; d++)
		qn += (double)q[d] * q[d];
	qn = sqrt(qn);
	double ref[600];
	for (size_t i = 0; i < f->n; i++) {
		double s = 0, en = 0;
		for (int d = 0; d < DIM; d++) {
			s += (double)q[d] * f->emb[i][d];
			en += (double)f->emb[i][d] * f->emb[i][d];
		}
		ref[i] = cosine ? (en > 0 ? s / (qn * sqrt(en)) : 0) : s;
	}
	unsigned char taken[600] = { 0 };
	for (size_t j = 0; j < got; j++) {
		size_t i = 0;
		while (i < f->n && f->ids[i] != h[j].id)
			i++;
		if (i == f->n || taken[i]) {
			fprintf(stderr, "%s: hit %zu is id %llu, not a (new) fact of the namespace\n", what, j,
			        (unsigned long long)h[j].id);
			check_failures++;
			return;
		}
		taken[i] = 1;
		if (fabs(ref[i] - h[j].score) > 1e-5 * (1 + fabs(ref[i]))) {
			fprintf(stderr, "%s: id %llu scores %.9g, brute force %.9g\n", what, (unsigned long long)h[j].id,
			        h[j].score, ref[i]);
			check_failures++;
			return;
		}
		if (j > 0 && (h[j].score > h[j - 1].score || (h[j].score == h[j - 1].score && h[j].id < h[j - 1].id))) {
			fprintf(stderr, "%s: hits %zu and %zu out of order\n", what, j - 1, j);
			check_failures++;
			return;
		}
	}
	for (size_t i = 0; i < f->n; i++)
		if (!taken[i] && got && ref[i] > h[got - 1].score + 1e-5) {
			fprintf(stderr, "%s: id %llu (%.9g) beats the last hit (%.9g)\n", what, (unsigned long long)f->ids[i],
			        ref[i], h[got - 1].score);
			check_failures++;
			return;
		}
}

static infs_hit hits[5 * 4096];
static size_t hit_n[5];

static void brute_force(infs_store *st, const char *ns, const facts *f, infs_backend backend)
{
	static const size_t ks[] = { 1, 7, 0, 1, 4096 };
	float q[5 * DIM];
	for (int i = 0; i < 5 * DIM; i++)
		q[i] = frnd();
	char what[128];
	for (int cosine = 0; cosine < 2; cosine++)
		for (int ki = 0; ki < 5; ki++) {
			size_t k = ki == 2 ? f->n : ki == 3 ? f->n + 5 : ks[ki];
			infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
			o.metric = cosine ? INFS_METRIC_COSINE : INFS_METRIC_IP;
			o.backend = backend;
			for (size_t nq = 1; nq <= 5; nq += 4) {
				CHECK_OK(infs_retrieve(hits, hit_n, st, ns, q, nq, k, &o));
				for (size_t i = 0; i < nq; i++) {
					snprintf(what, sizeof what, "%s backend %d %s k %zu batch %zu query %zu", ns, (int)backend,
					         cosine ? "cosine" : "ip", k, nq, i);
					check_hits(hits + i * k, hit_n[i], f, q + i * DIM, k, cosine, what);
				}
			}
		}
}

typedef struct hammer {
	infs_store *st;
	const facts *f;
	uint64_t stable_id; /* a fact of "u1" nobody deletes: injected meanwhile */
	int writer;
	int errors;
} hammer;

static void *hammer_run(void *arg)
{
	hammer *h = arg;
	float q[DIM];
	infs_hit out[20];
	size_t n;
	float kc[16 * 4], vc[16 * 4];
	void *kl[1] = { kc }, *vl[1] = { vc };
	infs_kv_layout lay = INFS_KV_LAYOUT_INIT;
	lay.dtype = INFS_DTYPE_F32;
	lay.n_layers = lay.n_kv_heads = 1;
	lay.head_dim = 4;
	lay.n_blocks = 1;
	lay.block_size = 16;
	lay.k_layers = kl;
	lay.v_layers = vl;
	lay.stride_block = 64, lay.stride_slot = 4, lay.stride_head = 4, lay.stride_dim = 1;
	int32_t bt[1] = { 0 };
	for (int it = 0; it < 200; it++) {
		for (int d = 0; d < DIM; d++)
			q[d] = (float)((it * 7 + d) % 11) - 5;
		if (h->writer) {
			uint64_t id = 0;
			int32_t tok = 1;
			float kv[4] = { 0 };
			infs_fact fact = INFS_FACT_INIT;
			fact.n_tokens = 1;
			fact.tokens = &tok;
			fact.embedding = q;
			fact.k = fact.v = kv;
			h->errors += infs_fact_put(&id, h->st, "busy", &fact) != INFS_OK;
			if (it % 3 == 0)
				h->errors += infs_fact_delete(h->st, "busy", id) != INFS_OK;
			continue;
		}
		uint32_t next = 0;
		h->errors += infs_inject_into_blocks(&next, h->st, "u1", &h->stable_id, 1, (uint32_t)it % 16, bt, 1, &lay,
		                                     NULL) != INFS_OK;
		h->errors += next != (uint32_t)it % 16 + 1 || vc[(it % 16) * 4 + 3] != 4;
		infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
		o.metric = it % 2 ? INFS_METRIC_COSINE : INFS_METRIC_IP;
		o.backend = it % 4 < 2 ? INFS_BACKEND_AUTO : INFS_BACKEND_EXACT;
		h->errors += infs_retrieve(out, &n, h->st, "busy", q, 1, 20, &o) != INFS_OK;
		for (size_t j = 0; j < n; j++)
			h->errors += contains(h->f, out[j].id); /* never one of the other namespace */
	}
	return NULL;
}

int main(void)
{
	char path[600];
	scratch_make("retrieve", path, sizeof path, "store.infs");
	infs_geometry g = geometry();
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.flags = INFS_OPEN_CREATE;
	so.geometry = &g;
	so.identity = "test-model";
	so.sync = INFS_SYNC_OFF;
#ifdef INFS_HAVE_FAISS
	so.faiss_index = "Flat";
	so.faiss_min_facts = 1000000; /* AUTO stays exact; FAISS is asked for explicitly */
#endif
	infs_store *st = NULL;
	CHECK_OK(infs_store_open(&st, path, &so));
	if (!st)
		CHECK_DONE();

	/* "u1" and its look-alikes, each with facts and segments */
	static facts u1, other;
	size_t alike_n[6] = { 0 };
	float e[DIM];
	static const char *const look_alikes[] = { "u1 ", "U1", "u", "u10", "u1/", ("\xc3\xbc" "1") };
	for (int i = 0; i < 500; i++) {
		for (int d = 0; d < DIM; d++)
			e[d] = frnd();
		add(&u1, st, "u1", e);
		if (i % 50 == 0)
			put(st, "u1", NULL, 1);
		if (i % 10 == 0) {
			for (int d = 0; d < DIM; d++)
				e[d] = frnd() * 3; /* larger: they would win inner-product searches */
			add(&other, st, look_alikes[i / 10 % 6], e);
			alike_n[i / 10 % 6]++;
			put(st, look_alikes[i / 10 % 6], NULL, 1);
		}
	}
	brute_force(st, "u1", &u1, INFS_BACKEND_AUTO);
	brute_force(st, "u1", &u1, INFS_BACKEND_EXACT);

	/* equal scores: duplicates of one embedding come back by increasing id */
	static facts dup;
	for (int d = 0; d < DIM; d++)
		e[d] = (float)(d % 3) - 1;
	for (int i = 0; i < 20; i++)
		add(&dup, st, "dup", e);
	for (int metric = 0; metric < 2; metric++) {
		infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
		o.metric = (infs_metric)metric;
		CHECK_OK(infs_retrieve(hits, hit_n, st, "dup", e, 1, 20, &o));
		CHECK(hit_n[0] == 20);
		for (size_t j = 0; j < hit_n[0]; j++)
			CHECK(hits[j].id == dup.ids[j] && hits[j].score == hits[0].score);
	}

	/* the cached row norms follow the namespace: a new fact along the query
	 * wins, and is gone once deleted */
	float q[DIM];
	for (int d = 0; d < DIM; d++)
		q[d] = frnd();
	CHECK_OK(infs_retrieve(hits, hit_n, st, "u1", q, 1, 3, NULL));
	uint64_t before = hits[0].id;
	float along[DIM];
	for (int d = 0; d < DIM; d++)
		along[d] = q[d] * 0.01f;
	uint64_t winner = put(st, "u1", along, 0);
	CHECK_OK(infs_retrieve(hits, hit_n, st, "u1", q, 1, 3, NULL));
	CHECK(hits[0].id == winner && fabsf(hits[0].score - 1) < 1e-5f);
	CHECK_OK(infs_fact_delete(st, "u1", winner));
	CHECK_OK(infs_retrieve(hits, hit_n, st, "u1", q, 1, 3, NULL));
	CHECK(hits[0].id == before);

	/* empty and unknown namespaces give nothing */
	put(st, "segments-only", NULL, 1);
	hit_n[0] = 99;
	CHECK_OK(infs_retrieve(hits, hit_n, st, "segments-only", q, 1, 5, NULL));
	CHECK(hit_n[0] == 0);
	hit_n[0] = hit_n[1] = 99;
	float q2[2 * DIM];
	memcpy(q2, q, sizeof q);
	memcpy(q2 + DIM, q, sizeof q);
	CHECK_OK(infs_retrieve(hits, hit_n, st, "nobody", q2, 2, 4096, NULL));
	CHECK(hit_n[0] == 0 && hit_n[1] == 0);
	CHECK_OK(infs_namespace_drop(st, "dup"));
	CHECK_OK(infs_retrieve(hits, hit_n, st, "dup", e, 1, 5, NULL));
	CHECK(hit_n[0] == 0);

	/* each look-alike namespace only ever sees its own facts */
	for (size_t a = 0; a < 6; a++) {
		infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
		o.metric = INFS_METRIC_IP;
		CHECK_OK(infs_retrieve(hits, hit_n, st, look_alikes[a], q, 1, 4096, &o));
		CHECK(hit_n[0] == alike_n[a]);
		for (size_t j = 0; j < hit_n[0]; j++)
			CHECK(contains(&other, hits[j].id) && !contains(&u1, hits[j].id));
	}

	/* bad arguments */
	infs_retrieve_options o = INFS_RETRIEVE_OPTIONS_INIT;
	float nanq[DIM], infq[DIM], zero[DIM] = { 0 };
	memcpy(nanq, q, sizeof q);
	memcpy(infq, q, sizeof q);
	nanq[5] = NAN;
	infq[0] = -INFINITY;
	CHECK_ERR(infs_retrieve(NULL, hit_n, st, "u1", q, 1, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, NULL, st, "u1", q, 1, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, hit_n, NULL, "u1", q, 1, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, NULL, q, 1, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "", q, 1, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1\n", q, 1, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u\xff", q, 1, 3, NULL), INFS_EINVAL);
	char longns[300];
	memset(longns, 'u', sizeof longns - 1);
	longns[sizeof longns - 1] = '\0';
	CHECK_ERR(infs_retrieve(hits, hit_n, st, longns, q, 1, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", NULL, 1, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", q, 0, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", q, 1, 0, NULL), INFS_ERANGE);
	CHECK(strstr(infs_error_last(), "k 0") != NULL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", q, 1, INFS_RETRIEVE_K_MAX + 1, NULL), INFS_ERANGE);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", nanq, 1, 3, NULL), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "non-finite value at 5") != NULL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", infq, 1, 3, NULL), INFS_EINVAL);
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", zero, 1, 3, NULL), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "zero") != NULL);
	o.metric = INFS_METRIC_IP; /* a zero query is fine for inner product: all tie, by id */
	CHECK_OK(infs_retrieve(hits, hit_n, st, "u1", zero, 1, 3, &o));
	CHECK(hit_n[0] == 3 && hits[0].id == u1.ids[0] && hits[2].id == u1.ids[2] && hits[0].score == 0);
	o.version = 0;
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", q, 1, 3, &o), INFS_EINVAL);
	o.version = INFS_RETRIEVE_OPTIONS_VERSION, o.metric = (infs_metric)2;
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", q, 1, 3, &o), INFS_EINVAL);
	o.metric = INFS_METRIC_COSINE, o.backend = (infs_backend)4;
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", q, 1, 3, &o), INFS_EINVAL);
	o.backend = INFS_BACKEND_CUDA; /* no device copy (or no CUDA at all) */
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", q, 1, 3, &o), INFS_EUNSUPPORTED);
	CHECK(strstr(infs_error_last(), "CUDA") != NULL);
	infs_retrieve_options dflt;
	CHECK_OK(infs_retrieve_options_init(&dflt, INFS_RETRIEVE_OPTIONS_VERSION));
	CHECK(dflt.metric == INFS_METRIC_COSINE && dflt.backend == INFS_BACKEND_AUTO);
	CHECK_ERR(infs_retrieve_options_init(&dflt, 3), INFS_EINVAL);
	CHECK_ERR(infs_retrieve_options_init(NULL, INFS_RETRIEVE_OPTIONS_VERSION), INFS_EINVAL);

#ifdef INFS_HAVE_FAISS
	/* the store's Flat index answers like the exact search, and follows a put */
	infs_retrieve_options fo = INFS_RETRIEVE_OPTIONS_INIT, xo = INFS_RETRIEVE_OPTIONS_INIT;
	fo.backend = INFS_BACKEND_FAISS;
	xo.backend = INFS_BACKEND_EXACT;
	static infs_hit xh[5 * 4096];
	size_t xn[5];
	float q5[5 * DIM];
	for (int i = 0; i < 5 * DIM; i++)
		q5[i] = frnd();
	uint64_t winners[2];
	for (int round = 0; round < 2; round++) {
		for (int metric = 0; metric < 2; metric++) {
			fo.metric = xo.metric = (infs_metric)metric;
			CHECK_OK(infs_retrieve(hits, hit_n, st, "u1", q5, 5, 64, &fo));
			CHECK_OK(infs_retrieve(xh, xn, st, "u1", q5, 5, 64, &xo));
			for (size_t i = 0; i < 5; i++) {
				CHECK(hit_n[i] == xn[i]);
				for (size_t j = 0; j < hit_n[i] && j < xn[i]; j++)
					CHECK(hits[i * 64 + j].id == xh[i * 64 + j].id && hits[i * 64 + j].score == xh[i * 64 + j].score);
			}
		}
		for (int d = 0; d < DIM; d++)
			along[d] = q5[d] * 5;
		winners[round] = put(st, "u1", along, 0);
		u1.ids[u1.n] = winners[round];
		memcpy(u1.emb[u1.n++], along, sizeof along);
	}
	fo.metric = INFS_METRIC_COSINE;
	/* the two puts along the first query tie: by id */
	CHECK_OK(infs_retrieve(hits, hit_n, st, "u1", q5, 1, 2, &fo));
	CHECK(hits[0].id == winners[0] && hits[1].id == winners[1] && hits[0].score == hits[1].score);
	brute_force(st, "u1", &u1, INFS_BACKEND_FAISS);
	for (size_t a = 0; a < 6; a++) {
		CHECK_OK(infs_retrieve(hits, hit_n, st, look_alikes[a], q, 1, 4096, &fo));
		CHECK(hit_n[0] == alike_n[a]);
		for (size_t j = 0; j < hit_n[0]; j++)
			CHECK(contains(&other, hits[j].id) && !contains(&u1, hits[j].id));
	}
#else
	o = (infs_retrieve_options)INFS_RETRIEVE_OPTIONS_INIT;
	o.backend = INFS_BACKEND_FAISS;
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", q, 1, 3, &o), INFS_EUNSUPPORTED);
#endif

	/* readers searching (norms and indexes rebuilt under them) and injecting
	 * while a writer changes the namespace */
	for (int i = 0; i < 50; i++) {
		for (int d = 0; d < DIM; d++)
			e[d] = frnd();
		put(st, "busy", e, 0);
	}
	infs_store_close(st);
	so.flags = 0;
#ifdef INFS_HAVE_FAISS
	so.faiss_min_facts = 1; /* AUTO uses FAISS here */
#endif
	CHECK_OK(infs_store_open(&st, path, &so));
	hammer hm[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		hm[i] = (hammer){ st, &u1, u1.ids[0], i == 0, 0 };
		pthread_create(&th[i], NULL, hammer_run, &hm[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK(hm[i].errors == 0);
	}
	infs_store_close(st);

	/* a store without embeddings cannot be searched */
	g.embed_dim = 0;
	char path2[600];
	snprintf(path2, sizeof path2, "%s/noemb.infs", scratch_dir);
	so.flags = INFS_OPEN_CREATE;
	CHECK_OK(infs_store_open(&st, path2, &so));
	CHECK_ERR(infs_retrieve(hits, hit_n, st, "u1", q, 1, 3, NULL), INFS_EUNSUPPORTED);
	infs_store_close(st);
	scratch_cleanup();
	CHECK_DONE();
}

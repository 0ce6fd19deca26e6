/* The shared prompt cannot be poisoned: names under INFS_RESERVED_PREFIX are
 * refused for puts, encodes, deletes and drops while reads stay allowed, and
 * the engine takes a record for its header only when it is a segment of that
 * role, whatever other records of the reserved namespace hold. The attack on
 * SmolLM2: records carrying the header's tokens with random KV, put where the
 * engine looks, must leave the answer what it was. */
#include <string.h>

#include "check.h"
#include "model_store_util.h"
#include "store/store.h"

static const char *const facts[] = {
	"- Alice's PIN is 4321.\n",
	"- Alice likes chess.\n",
	"- Alice lives in Lisbon.\n",
};
enum { N_FACTS = 3 };
static const char question[] = "What is Alice's PIN?";

/* Encodes the facts into "alice" after the engine's header. */
static void encode_alice(infs_store *st, infs_engine *e, const infs_model *m, const infs_embedder *emb)
{
	uint64_t ids[N_FACTS];
	encode_after_header(ids, st, "alice", e, m, emb, facts, NULL, N_FACTS);
}

static infs_answer *ask(infs_engine *e, infs_store *st, const infs_embedder *emb)
{
	infs_ask_options ao = INFS_ASK_OPTIONS_INIT;
	ao.k = N_FACTS;
	ao.generate.max_tokens = 16;
	infs_answer *a = NULL;
	CHECK_OK(infs_engine_ask(&a, e, st, emb, "alice", question, &ao));
	return a;
}

/* Finite f16 values of magnitude 0.25 .. 4, random signs: KV that is
 * nothing like the header's. */
static void random_kv(uint16_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		uint32_t r = seed >> 8;
		p[i] = (uint16_t)((r & 0x8000u) | ((13u + (r >> 10) % 4u) << 10) | (r & 0x3ffu));
	}
}

int main(void)
{
	char p1[600], p2[600];
	infs_model *m;
	infs_embedder *emb;
	if (!load_smollm2(&m, &emb))
		CHECK_DONE();
	uint32_t dim = infs_embedder_dim(emb);
	infs_engine_options eo = INFS_ENGINE_OPTIONS_INIT;
	eo.n_ctx = 512;
	eo.kv_dtype = INFS_DTYPE_F16;
	infs_engine *e = NULL;
	CHECK_OK(infs_engine_create(&e, m, &eo));
	infs_store *st = model_store_create(m, INFS_DTYPE_F16, dim, "reserved", "one.infs", p1, sizeof p1);
	if (!e || !st)
		CHECK_DONE();

	/* The reference answer on an untouched store. */
	CHECK_OK(infs_engine_prepare(e, st));
	encode_alice(st, e, m, emb);
	infs_answer *ref = ask(e, st, emb);
	if (!ref)
		CHECK_DONE();
	printf("answer: \"%s\"\n", ref->text);
	CHECK(strstr(ref->text, "4321") != NULL);

	/* A poisoned header: the header's tokens, random KV. */
	const int32_t *hdr;
	uint32_t nh;
	CHECK_OK(infs_engine_header(&hdr, &nh, e));
	infs_geometry g;
	CHECK_OK(infs_store_geometry(&g, st));
	size_t kv_n = infs_geometry_kv_token_bytes(&g) * nh / 2;
	uint16_t *k = malloc(kv_n * 2), *v = malloc(kv_n * 2);
	float *vec = calloc(dim, sizeof *vec);
	CHECK(k && v && vec);
	if (!k || !v || !vec)
		CHECK_DONE();
	random_kv(k, kv_n, 1);
	random_kv(v, kv_n, 2);
	vec[0] = 1.0f;
	infs_fact seg = INFS_FACT_INIT;
	seg.flags = INFS_FACT_SEGMENT;
	seg.n_tokens = nh;
	seg.tokens = hdr;
	seg.k = k;
	seg.v = v;
	seg.metadata = "{\"segment\":\"header\"}";
	infs_fact plain = seg;
	plain.flags = 0;
	plain.embedding = vec;
	plain.metadata = "";

	/* Every write to a reserved name is refused, with a message saying so. */
	uint64_t id = 0, *seg_ids = NULL;
	size_t n_seg = 0;
	CHECK_OK(infs_fact_list(&seg_ids, &n_seg, st, INFS_SEGMENT_NAMESPACE));
	CHECK(n_seg == 2);
	const char *reserved[] = { INFS_SEGMENT_NAMESPACE, "inferscale.", "inferscale.other" };
	for (int i = 0; i < 3; i++) {
		CHECK_ERR(infs_fact_put(&id, st, reserved[i], &seg), INFS_EINVAL);
		CHECK(strstr(infs_error_last(), "reserved") != NULL);
		CHECK_ERR(infs_fact_put(&id, st, reserved[i], &plain), INFS_EINVAL);
		CHECK_ERR(infs_namespace_drop(st, reserved[i]), INFS_EINVAL);
		CHECK(strstr(infs_error_last(), "reserved") != NULL);
		for (size_t j = 0; j < n_seg; j++) {
			CHECK_ERR(infs_fact_delete(st, reserved[i], seg_ids[j]), INFS_EINVAL);
			CHECK(strstr(infs_error_last(), "reserved") != NULL);
		}
		infs_fact_input x = INFS_FACT_INPUT_INIT;
		x.flags = INFS_FACT_SEGMENT;
		x.tokens = hdr;
		x.n_tokens = nh;
		uint64_t eid = 7;
		CHECK_ERR(infs_fact_encode(&eid, st, reserved[i], m, &x, 1, NULL), INFS_EINVAL);
		CHECK(strstr(infs_error_last(), "reserved") != NULL);
		CHECK(eid == 7); /* refused before anything was done */
	}
	/* Names that only look alike are ordinary. */
	CHECK_OK(infs_fact_put(&id, st, "inferscale", &plain));
	CHECK_OK(infs_fact_put(&id, st, "Inferscale.segments", &plain));
	CHECK_OK(infs_namespace_drop(st, "inferscale"));
	CHECK_OK(infs_fact_delete(st, "Inferscale.segments", id));

	/* Reads of the reserved namespace stay allowed; retrieval never
	 * returns its segments. */
	uint64_t count = 0;
	CHECK_OK(infs_fact_count(&count, st, INFS_SEGMENT_NAMESPACE));
	CHECK(count == 2);
	infs_fact_record *r = NULL;
	CHECK_OK(infs_fact_get(&r, st, INFS_SEGMENT_NAMESPACE, seg_ids[0]));
	CHECK(r && r->flags & INFS_FACT_SEGMENT);
	infs_fact_record_free(r);
	infs_hit hits[4];
	size_t n_hits = 99;
	CHECK_OK(infs_retrieve(hits, &n_hits, st, INFS_SEGMENT_NAMESPACE, vec, 1, 4, NULL));
	CHECK(n_hits == 0);
	infs_free(seg_ids);

	/* The same question after the refused attack: the same answer. */
	infs_answer *after = ask(e, st, emb);
	CHECK(after && !strcmp(after->text, ref->text));
	infs_answer_free(after);
	infs_store_close(st);
	scratch_cleanup();
	infs_store *st2 = model_store_create(m, INFS_DTYPE_F16, dim, "reserved", "two.infs", p2, sizeof p2);
	if (!st2)
		CHECK_DONE();

	/* Records that hold the header's tokens but are not the header segment,
	 * written where the engine looks through the library's internal path
	 * before the engine first prepares that store: a fact, a segment of
	 * another role, and one with no role. None is taken for the header. */
	infs_fact other = seg;
	other.metadata = "{\"segment\":\"footer\"}";
	infs_fact none = seg;
	none.metadata = "";
	uint64_t poison[3];
	CHECK_OK(infs__fact_put(&poison[0], st2, INFS_SEGMENT_NAMESPACE, &plain));
	CHECK_OK(infs__fact_put(&poison[1], st2, INFS_SEGMENT_NAMESPACE, &other));
	CHECK_OK(infs__fact_put(&poison[2], st2, INFS_SEGMENT_NAMESPACE, &none));
	CHECK_OK(infs_engine_prepare(e, st2));
	CHECK_OK(infs_fact_count(&count, st2, INFS_SEGMENT_NAMESPACE));
	CHECK(count == 5); /* the engine wrote its own header and footer */
	encode_alice(st2, e, m, emb);
	infs_answer *poisoned = ask(e, st2, emb);
	if (poisoned) {
		printf("answer with decoys: \"%s\"\n", poisoned->text);
		CHECK(!strcmp(poisoned->text, ref->text));
		CHECK(poisoned->n_prompt == ref->n_prompt);
	}
	infs_answer_free(poisoned);

	infs_answer_free(ref);
	free(k);
	free(v);
	free(vec);
	infs_engine_free(e);
	infs_store_close(st2);
	scratch_cleanup();
	infs_embedder_free(emb);
	infs_model_free(m);
	CHECK_DONE();
}

/* The record format in one place: docs/store-format.md's tables name the
 * constant of every field they list, and each must equal its offset there;
 * every constant must appear in a table. Then each part of the file encodes
 * and decodes back to the same values. */
#include "util/geometry.h"
#include "store/store_record.h"
#include "test_store_util.h"

#define C(name) { #name, name, 0 }
static struct {
	const char *name;
	unsigned value;
	int seen;
} consts[] = {
	C(INFS__HDR_MAGIC), C(INFS__HDR_VERSION), C(INFS__HDR_LEN), C(INFS__HDR_N_LAYERS),
	C(INFS__HDR_N_KV_HEADS), C(INFS__HDR_HEAD_DIM), C(INFS__HDR_ROTARY_DIM), C(INFS__HDR_ROPE_STYLE),
	C(INFS__HDR_ROPE_SCALING), C(INFS__HDR_KV_DTYPE), C(INFS__HDR_EMBED_DIM), C(INFS__HDR_ROPE_ORIGINAL_MAX_POS),
	C(INFS__HDR_IDENTITY_LEN), C(INFS__HDR_ROPE_THETA), C(INFS__HDR_ROPE_FACTOR), C(INFS__HDR_ROPE_LOW_FREQ_FACTOR),
	C(INFS__HDR_ROPE_HIGH_FREQ_FACTOR), C(INFS__HDR_ROPE_BETA_FAST), C(INFS__HDR_ROPE_BETA_SLOW),
	C(INFS__HDR_ROPE_ATTN_FACTOR), C(INFS__HDR_IDENTITY), C(INFS__SLOT_SEQ), C(INFS__SLOT_RECORDS),
	C(INFS__SLOT_END), C(INFS__SLOT_CRC), C(INFS__SLOT_ZERO), C(INFS__HEAD_MAGIC), C(INFS__HEAD_TYPE),
	C(INFS__HEAD_BODY_LEN), C(INFS__HEAD_BODY_CRC), C(INFS__HEAD_CRC), C(INFS__REC_HEAD), C(INFS__PUT_ID),
	C(INFS__PUT_FLAGS), C(INFS__PUT_N_TOKENS), C(INFS__PUT_SOURCE_ID), C(INFS__PUT_TIMESTAMP), C(INFS__PUT_NS_LEN),
	C(INFS__PUT_EMBED_N), C(INFS__PUT_TEXT_LEN), C(INFS__PUT_META_LEN), C(INFS__PUT_FIXED), C(INFS__DELETE_ID),
	C(INFS__DELETE_NS_LEN), C(INFS__DELETE_FIXED), C(INFS__DROP_NS_LEN), C(INFS__DROP_FIXED), C(INFS__NEXT_ID),
};
#define N_CONSTS (sizeof consts / sizeof *consts)

/* Rows "| OFFSET | ... | `NAME` |": NAME's value must be OFFSET. */
static void check_doc(const char *path)
{
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	if (!f)
		return;
	char line[1024];
	int rows = 0;
	while (fgets(line, sizeof line, f)) {
		unsigned off;
		char *name = strstr(line, "| `INFS__");
		if (sscanf(line, "| %u |", &off) != 1 || !name)
			continue;
		name += 3;
		char *end = strchr(name, '`');
		if (!end || strcmp(end, "` |\n") != 0)
			continue;
		*end = '\0';
		size_t i = 0;
		while (i < N_CONSTS && strcmp(consts[i].name, name) != 0)
			i++;
		if (i == N_CONSTS) {
			fprintf(stderr, "%s names %s, which the test does not know\n", path, name);
			CHECK(0);
			continue;
		}
		if (consts[i].value != off)
			fprintf(stderr, "%s: %s is at %u in the table, %u in store_record.h\n", path, name, off,
			        consts[i].value);
		CHECK(consts[i].value == off);
		consts[i].seen++;
		rows++;
	}
	fclose(f);
	CHECK(rows == (int)N_CONSTS);
	for (size_t i = 0; i < N_CONSTS; i++)
		if (consts[i].seen != 1) {
			fprintf(stderr, "%s: %s is in %d table rows, not 1\n", path, consts[i].name, consts[i].seen);
			CHECK(0);
		}
}

/* Concatenates n iovecs into buf; returns the length. */
static size_t flatten(unsigned char *buf, const struct iovec *iov, int n)
{
	size_t len = 0;
	for (int i = 0; i < n; i++) {
		memcpy(buf + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	return len;
}

static void check_round_trips(void)
{
	infs_geometry g = small_geometry(INFS_DTYPE_BF16), back;
	g.rope_scaling = INFS_ROPE_SCALING_YARN;
	g.rope_factor = 4, g.rope_beta_fast = 32, g.rope_beta_slow = 1, g.rope_attn_factor = 1.25;
	g.rope_original_max_pos = 4096;
	unsigned char hdr[INFS__HEADER_FIXED + INFS_IDENTITY_MAX + 8];
	size_t len = infs__header_encode(hdr, &g, TEST_IDENTITY, 2);
	uint32_t version, hlen, id_len;
	infs__header_peek(&version, &hlen, hdr);
	infs__header_decode(&back, &id_len, hdr);
	CHECK(len % 8 == 0 && hlen == len && version == 2 && infs__header_sound(hdr, hlen));
	CHECK(!memcmp(hdr, "INFSTORE", 8) && id_len == strlen(TEST_IDENTITY));
	CHECK(!strcmp((const char *)hdr + INFS__HDR_IDENTITY, TEST_IDENTITY));
	CHECK(infs__geometry_diff(&g, &back) == NULL && back.rope_attn_factor == 1.25);
	hdr[INFS__HDR_EMBED_DIM] ^= 1;
	CHECK(!infs__header_sound(hdr, hlen));

	unsigned char sb[INFS__SLOT];
	infs__slot slot = { 7, 12, 4096 }, sback;
	infs__slot_encode(sb, &slot);
	CHECK(infs__slot_decode(&sback, sb) && sback.seq == 7 && sback.n_records == 12 && sback.end == 4096);
	sb[INFS__SLOT_END] ^= 1;
	CHECK(!infs__slot_decode(&sback, sb));

	gen_fact f;
	gen_fact_make(&f, &g, 7, 0); /* 7: with text and metadata */
	size_t kv_token = infs_geometry_kv_token_bytes(&g);
	infs__put_fields p = { 41, 0, f.fact.n_tokens, f.fact.source_id, f.fact.timestamp, 5, g.embed_dim,
		               (uint32_t)strlen(f.fact.text), (uint32_t)strlen(f.fact.metadata) };
	unsigned char fixed[INFS__PUT_FIXED];
	struct iovec iov[1 + INFS__PUT_IOV];
	int n = 1 + infs__put_encode(iov + 1, fixed, &p, "alice", &f.fact, kv_token);
	static unsigned char rec[1 << 16];
	uint64_t body_len = infs__head_encode(rec, INFS__REC_PUT, iov + 1, n - 1);
	infs__put_layout l;
	infs__put_layout_of(&l, &p, kv_token);
	CHECK(flatten(rec + INFS__REC_HEAD, iov + 1, n - 1) == body_len && body_len == l.end);
	infs__rec_head h;
	CHECK(infs__head_has_magic(rec) && infs__head_decode(&h, rec));
	CHECK(h.type == INFS__REC_PUT && h.body_len == body_len);
	infs__put_fields pb;
	infs__put_decode(&pb, rec + INFS__REC_HEAD);
	CHECK(!memcmp(&pb, &p, sizeof p));
	infs__record r;
	infs__put_view(&r, rec + INFS__REC_HEAD, kv_token);
	CHECK(r.id == 41 && r.n_tokens == f.fact.n_tokens && r.source_id == f.fact.source_id &&
	      r.timestamp == f.fact.timestamp);
	CHECK(!memcmp(r.tokens, f.fact.tokens, 4 * (size_t)r.n_tokens));
	CHECK(!memcmp(r.embedding, f.fact.embedding, 4 * (size_t)g.embed_dim));
	CHECK(!memcmp(r.k, f.fact.k, f.kv_bytes) && !memcmp(r.v, f.fact.v, f.kv_bytes));
	CHECK(!strcmp(r.text, f.fact.text) && !strcmp(r.metadata, f.fact.metadata));
	CHECK(!strcmp((const char *)rec + INFS__REC_HEAD + l.ns, "alice"));
	rec[INFS__HEAD_TYPE] ^= 1;
	CHECK(!infs__head_decode(&h, rec));
	gen_fact_free(&f);

	uint64_t id;
	uint32_t ns_len;
	unsigned char dfixed[INFS__DELETE_FIXED], body[64];
	struct iovec div[INFS__NS_IOV];
	infs__delete_encode(div, dfixed, 99, "bob", 3);
	CHECK(flatten(body, div, INFS__NS_IOV) == infs__ns_body_len(INFS__DELETE_FIXED, 3));
	infs__delete_decode(&id, &ns_len, body);
	CHECK(id == 99 && ns_len == 3 && !strcmp((const char *)body + INFS__DELETE_FIXED, "bob"));
	infs__drop_encode(div, dfixed, "carol", 5);
	CHECK(flatten(body, div, INFS__NS_IOV) == infs__ns_body_len(INFS__DROP_FIXED, 5));
	infs__drop_decode(&ns_len, body);
	CHECK(ns_len == 5 && !strcmp((const char *)body + INFS__DROP_FIXED, "carol"));
	infs__next_id_encode(body, 123456789012ull);
	CHECK(infs__next_id_decode(body) == 123456789012ull);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s docs/store-format.md\n", argv[0]);
		return 2;
	}
	check_doc(argv[1]);
	check_round_trips();
	CHECK_DONE();
}

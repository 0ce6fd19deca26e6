/* Encode and decode of every part of the store file, side by side (the
 * layout is in store_record.h and docs/store-format.md). */
#include "store/store_record.h"

#include <string.h>

#include "store/crc32c.h"

static const unsigned char zeros[8];

static void put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static void putf64(unsigned char *p, double v)
{
	memcpy(p, &v, 8);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static double getf64(const unsigned char *p)
{
	double v;
	memcpy(&v, p, 8);
	return v;
}

size_t infs__header_encode(unsigned char *buf, const infs_geometry *g, const char *identity, uint32_t version)
{
	size_t id_len = strlen(identity);
	size_t len = (size_t)infs__header_len(id_len);
	memset(buf, 0, len);
	memcpy(buf + INFS__HDR_MAGIC, INFS__STORE_MAGIC, 8);
	put32(buf + INFS__HDR_VERSION, version);
	put32(buf + INFS__HDR_LEN, (uint32_t)len);
	put32(buf + INFS__HDR_N_LAYERS, g->n_layers);
	put32(buf + INFS__HDR_N_KV_HEADS, g->n_kv_heads);
	put32(buf + INFS__HDR_HEAD_DIM, g->head_dim);
	put32(buf + INFS__HDR_ROTARY_DIM, g->rotary_dim);
	put32(buf + INFS__HDR_ROPE_STYLE, (uint32_t)g->rope_style);
	put32(buf + INFS__HDR_ROPE_SCALING, (uint32_t)g->rope_scaling);
	put32(buf + INFS__HDR_KV_DTYPE, (uint32_t)g->kv_dtype);
	put32(buf + INFS__HDR_EMBED_DIM, g->embed_dim);
	put32(buf + INFS__HDR_ROPE_ORIGINAL_MAX_POS, g->rope_original_max_pos);
	put32(buf + INFS__HDR_IDENTITY_LEN, (uint32_t)id_len);
	putf64(buf + INFS__HDR_ROPE_THETA, g->rope_theta);
	putf64(buf + INFS__HDR_ROPE_FACTOR, g->rope_factor);
	putf64(buf + INFS__HDR_ROPE_LOW_FREQ_FACTOR, g->rope_low_freq_factor);
	putf64(buf + INFS__HDR_ROPE_HIGH_FREQ_FACTOR, g->rope_high_freq_factor);
	putf64(buf + INFS__HDR_ROPE_BETA_FAST, g->rope_beta_fast);
	putf64(buf + INFS__HDR_ROPE_BETA_SLOW, g->rope_beta_slow);
	putf64(buf + INFS__HDR_ROPE_ATTN_FACTOR, g->rope_attn_factor);
	memcpy(buf + INFS__HDR_IDENTITY, identity, id_len);
	put32(buf + len - 4, infs__crc32c(0, buf, len - 4));
	return len;
}

void infs__header_peek(uint32_t *version, uint32_t *len, const unsigned char *buf)
{
	*version = get32(buf + INFS__HDR_VERSION);
	*len = get32(buf + INFS__HDR_LEN);
}

bool infs__header_sound(const unsigned char *buf, uint32_t len)
{
	return infs__crc32c(0, buf, len - 4) == get32(buf + len - 4);
}

void infs__header_decode(infs_geometry *g, uint32_t *id_len, const unsigned char *buf)
{
	infs_geometry geo = INFS_GEOMETRY_INIT;
	geo.n_layers = get32(buf + INFS__HDR_N_LAYERS);
	geo.n_kv_heads = get32(buf + INFS__HDR_N_KV_HEADS);
	geo.head_dim = get32(buf + INFS__HDR_HEAD_DIM);
	geo.rotary_dim = get32(buf + INFS__HDR_ROTARY_DIM);
	geo.rope_style = (infs_rope_style)get32(buf + INFS__HDR_ROPE_STYLE);
	geo.rope_scaling = (infs_rope_scaling)get32(buf + INFS__HDR_ROPE_SCALING);
	geo.kv_dtype = (infs_dtype)get32(buf + INFS__HDR_KV_DTYPE);
	geo.embed_dim = get32(buf + INFS__HDR_EMBED_DIM);
	geo.rope_original_max_pos = get32(buf + INFS__HDR_ROPE_ORIGINAL_MAX_POS);
	geo.rope_theta = getf64(buf + INFS__HDR_ROPE_THETA);
	geo.rope_factor = getf64(buf + INFS__HDR_ROPE_FACTOR);
	geo.rope_low_freq_factor = getf64(buf + INFS__HDR_ROPE_LOW_FREQ_FACTOR);
	geo.rope_high_freq_factor = getf64(buf + INFS__HDR_ROPE_HIGH_FREQ_FACTOR);
	geo.rope_beta_fast = getf64(buf + INFS__HDR_ROPE_BETA_FAST);
	geo.rope_beta_slow = getf64(buf + INFS__HDR_ROPE_BETA_SLOW);
	geo.rope_attn_factor = getf64(buf + INFS__HDR_ROPE_ATTN_FACTOR);
	*g = geo;
	*id_len = get32(buf + INFS__HDR_IDENTITY_LEN);
}

void infs__slot_encode(unsigned char *buf, const infs__slot *slot)
{
	put64(buf + INFS__SLOT_SEQ, slot->seq);
	put64(buf + INFS__SLOT_RECORDS, slot->n_records);
	put64(buf + INFS__SLOT_END, slot->end);
	put32(buf + INFS__SLOT_CRC, infs__crc32c(0, buf, INFS__SLOT_CRC));
	put32(buf + INFS__SLOT_ZERO, 0);
}

bool infs__slot_decode(infs__slot *slot, const unsigned char *buf)
{
	slot->seq = get64(buf + INFS__SLOT_SEQ);
	slot->n_records = get64(buf + INFS__SLOT_RECORDS);
	slot->end = get64(buf + INFS__SLOT_END);
	return infs__crc32c(0, buf, INFS__SLOT_CRC) == get32(buf + INFS__SLOT_CRC);
}

uint64_t infs__head_encode(unsigned char *head, uint32_t type, const struct iovec *body, int n)
{
	uint64_t body_len = 0;
	uint32_t crc = 0;
	for (int i = 0; i < n; i++) {
		body_len += body[i].iov_len;
		crc = infs__crc32c(crc, body[i].iov_base, body[i].iov_len);
	}
	put32(head + INFS__HEAD_MAGIC, INFS__REC_MAGIC);
	put32(head + INFS__HEAD_TYPE, type);
	put64(head + INFS__HEAD_BODY_LEN, body_len);
	put32(head + INFS__HEAD_BODY_CRC, crc);
	put32(head + INFS__HEAD_CRC, infs__crc32c(0, head, INFS__HEAD_CRC));
	return body_len;
}

bool infs__head_has_magic(const unsigned char *p)
{
	return get32(p + INFS__HEAD_MAGIC) == INFS__REC_MAGIC;
}

bool infs__head_decode(infs__rec_head *h, const unsigned char *head)
{
	h->type = get32(head + INFS__HEAD_TYPE);
	h->body_len = get64(head + INFS__HEAD_BODY_LEN);
	h->body_crc = get32(head + INFS__HEAD_BODY_CRC);
	return get32(head + INFS__HEAD_MAGIC) == INFS__REC_MAGIC &&
	       infs__crc32c(0, head, INFS__HEAD_CRC) == get32(head + INFS__HEAD_CRC) && h->body_len % 8 == 0;
}

void infs__put_layout_of(infs__put_layout *l, const infs__put_fields *p, uint64_t kv_token_bytes)
{
	uint64_t kv = kv_token_bytes * p->n_tokens;
	l->ns = INFS__PUT_FIXED;
	l->tokens = l->ns + infs__pad8((uint64_t)p->ns_len + 1);
	l->emb = l->tokens + infs__pad8((uint64_t)p->n_tokens * 4);
	l->k = l->emb + infs__pad8((uint64_t)p->embed_n * 4);
	l->v = l->k + infs__pad8(kv);
	l->text = l->v + infs__pad8(kv);
	l->meta = l->text + infs__pad8((uint64_t)p->text_len + 1);
	l->end = l->meta + infs__pad8((uint64_t)p->meta_len + 1);
}

/* len bytes at p and zero padding to 8, as two iovecs. */
static int iov_pad(struct iovec *iov, const void *p, size_t len)
{
	iov[0].iov_base = (void *)p;
	iov[0].iov_len = len;
	iov[1].iov_base = (void *)zeros;
	iov[1].iov_len = (size_t)infs__pad8(len) - len;
	return 2;
}

/* A string, its terminating NUL and zero padding to 8, as two iovecs. */
static int iov_str(struct iovec *iov, const char *str, size_t len)
{
	iov_pad(iov, str, len);
	iov[1].iov_len = (size_t)infs__pad8(len + 1) - len;
	return 2;
}

int infs__put_encode(struct iovec *iov, unsigned char fixed[INFS__PUT_FIXED], const infs__put_fields *p,
                     const char *ns, const infs_fact *f, uint64_t kv_token_bytes)
{
	put64(fixed + INFS__PUT_ID, p->id);
	put32(fixed + INFS__PUT_FLAGS, p->flags);
	put32(fixed + INFS__PUT_N_TOKENS, p->n_tokens);
	put64(fixed + INFS__PUT_SOURCE_ID, p->source_id);
	put64(fixed + INFS__PUT_TIMESTAMP, (uint64_t)p->timestamp);
	put32(fixed + INFS__PUT_NS_LEN, p->ns_len);
	put32(fixed + INFS__PUT_EMBED_N, p->embed_n);
	put32(fixed + INFS__PUT_TEXT_LEN, p->text_len);
	put32(fixed + INFS__PUT_META_LEN, p->meta_len);
	size_t kv = (size_t)(kv_token_bytes * p->n_tokens);
	int n = 0;
	iov[n].iov_base = fixed;
	iov[n++].iov_len = INFS__PUT_FIXED;
	n += iov_str(iov + n, ns, p->ns_len);
	n += iov_pad(iov + n, f->tokens, (size_t)p->n_tokens * 4);
	n += iov_pad(iov + n, f->embedding, (size_t)p->embed_n * 4);
	n += iov_pad(iov + n, f->k, kv);
	n += iov_pad(iov + n, f->v, kv);
	n += iov_str(iov + n, f->text ? f->text : "", p->text_len);
	n += iov_str(iov + n, f->metadata ? f->metadata : "", p->meta_len);
	return n;
}

void infs__put_decode(infs__put_fields *p, const unsigned char *body)
{
	p->id = get64(body + INFS__PUT_ID);
	p->flags = get32(body + INFS__PUT_FLAGS);
	p->n_tokens = get32(body + INFS__PUT_N_TOKENS);
	p->source_id = get64(body + INFS__PUT_SOURCE_ID);
	p->timestamp = (int64_t)get64(body + INFS__PUT_TIMESTAMP);
	p->ns_len = get32(body + INFS__PUT_NS_LEN);
	p->embed_n = get32(body + INFS__PUT_EMBED_N);
	p->text_len = get32(body + INFS__PUT_TEXT_LEN);
	p->meta_len = get32(body + INFS__PUT_META_LEN);
}

void infs__put_view(infs__record *out, const unsigned char *body, uint64_t kv_token_bytes)
{
	infs__put_fields p;
	infs__put_layout l;
	infs__put_decode(&p, body);
	infs__put_layout_of(&l, &p, kv_token_bytes);
	out->id = p.id;
	out->flags = p.flags;
	out->n_tokens = p.n_tokens;
	out->tokens = (const int32_t *)(const void *)(body + l.tokens);
	out->embedding = p.embed_n ? (const float *)(const void *)(body + l.emb) : NULL;
	out->k = body + l.k;
	out->v = body + l.v;
	out->text = (const char *)body + l.text;
	out->metadata = (const char *)body + l.meta;
	out->source_id = p.source_id;
	out->timestamp = p.timestamp;
}

void infs__delete_encode(struct iovec *iov, unsigned char fixed[INFS__DELETE_FIXED], uint64_t id, const char *ns,
                         uint32_t ns_len)
{
	memset(fixed, 0, INFS__DELETE_FIXED);
	put64(fixed + INFS__DELETE_ID, id);
	put32(fixed + INFS__DELETE_NS_LEN, ns_len);
	iov[0] = (struct iovec){ fixed, INFS__DELETE_FIXED };
	iov_str(iov + 1, ns, ns_len);
}

void infs__delete_decode(uint64_t *id, uint32_t *ns_len, const unsigned char *body)
{
	*id = get64(body + INFS__DELETE_ID);
	*ns_len = get32(body + INFS__DELETE_NS_LEN);
}

void infs__drop_encode(struct iovec *iov, unsigned char fixed[INFS__DROP_FIXED], const char *ns, uint32_t ns_len)
{
	memset(fixed, 0, INFS__DROP_FIXED);
	put32(fixed + INFS__DROP_NS_LEN, ns_len);
	iov[0] = (struct iovec){ fixed, INFS__DROP_FIXED };
	iov_str(iov + 1, ns, ns_len);
}

void infs__drop_decode(uint32_t *ns_len, const unsigned char *body)
{
	*ns_len = get32(body + INFS__DROP_NS_LEN);
}

void infs__next_id_encode(unsigned char body[INFS__NEXT_ID_FIXED], uint64_t next_id)
{
	put64(body + INFS__NEXT_ID, next_id);
}

uint64_t infs__next_id_decode(const unsigned char *body)
{
	return get64(body + INFS__NEXT_ID);
}

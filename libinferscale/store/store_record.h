/* The store file's byte layout, in one place: the header, the commit
 * slots, the record head and the body of every record kind, each with its
 * field offsets and its encoder beside its decoder. docs/store-format.md
 * describes the same layout table by table. Everything is little-endian. */
#ifndef INFS_STORE_RECORD_H
#define INFS_STORE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "store/store.h"

/* Records hold arrays in native byte order and are served from a mapping of
 * the file, so the format is defined as little-endian only. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store format is little-endian");

#define INFS__STORE_MAGIC "INFSTORE"
#define INFS__STORE_FORMAT 2u
#define INFS__HEADER_MAX 65536u  /* the largest header_len any format version may use */
#define INFS__REC_MAGIC 0x52464e49u /* "INFR" */

static inline uint64_t infs__pad8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

/* The header: fixed fields, then the identity string, its NUL, zero
 * padding and, in the last four bytes, the CRC-32C of the rest. The magic,
 * version, length and checksum places hold for every format version. */
enum infs__header_field {
	INFS__HDR_MAGIC = 0,
	INFS__HDR_VERSION = 8,
	INFS__HDR_LEN = 12,
	INFS__HDR_N_LAYERS = 16,
	INFS__HDR_N_KV_HEADS = 20,
	INFS__HDR_HEAD_DIM = 24,
	INFS__HDR_ROTARY_DIM = 28,
	INFS__HDR_ROPE_STYLE = 32,
	INFS__HDR_ROPE_SCALING = 36,
	INFS__HDR_KV_DTYPE = 40,
	INFS__HDR_EMBED_DIM = 44,
	INFS__HDR_ROPE_ORIGINAL_MAX_POS = 48,
	INFS__HDR_IDENTITY_LEN = 52,
	INFS__HDR_ROPE_THETA = 56,
	INFS__HDR_ROPE_FACTOR = 64,
	INFS__HDR_ROPE_LOW_FREQ_FACTOR = 72,
	INFS__HDR_ROPE_HIGH_FREQ_FACTOR = 80,
	INFS__HDR_ROPE_BETA_FAST = 88,
	INFS__HDR_ROPE_BETA_SLOW = 96,
	INFS__HDR_ROPE_ATTN_FACTOR = 104,
	INFS__HDR_IDENTITY = 112,
	INFS__HEADER_FIXED = INFS__HDR_IDENTITY, /* bytes before the identity string */
};

/* The length of the header for an identity of id_len bytes. */
static inline uint64_t infs__header_len(uint64_t id_len)
{
	return infs__pad8(INFS__HEADER_FIXED + id_len + 1 + 4);
}

/* Writes the whole header (infs__header_len(strlen(identity)) bytes, at
 * most INFS__HEADER_FIXED + INFS_IDENTITY_MAX + 8) and returns its length. */
size_t infs__header_encode(unsigned char *buf, const infs_geometry *g, const char *identity, uint32_t version);
/* The version and header_len from the first 16 bytes of a header. */
void infs__header_peek(uint32_t *version, uint32_t *len, const unsigned char *buf);
/* Whether the checksum in the last four of a header's len bytes holds. */
bool infs__header_sound(const unsigned char *buf, uint32_t len);
/* The geometry and identity length of a header whose checksum held. */
void infs__header_decode(infs_geometry *g, uint32_t *id_len, const unsigned char *buf);

/* Format 2: two commit slots follow the header; the log starts after them. */
enum infs__slot_field {
	INFS__SLOT_SEQ = 0,
	INFS__SLOT_RECORDS = 8,
	INFS__SLOT_END = 16,
	INFS__SLOT_CRC = 24,  /* of bytes [0, 24) */
	INFS__SLOT_ZERO = 28,
	INFS__SLOT = 32,
	INFS__SLOTS = 2 * INFS__SLOT,
};

typedef struct infs__slot {
	uint64_t seq, n_records, end;
} infs__slot;

void infs__slot_encode(unsigned char *buf, const infs__slot *slot);
/* False when the slot's checksum fails (never written, or torn); the
 * fields are decoded either way. */
bool infs__slot_decode(infs__slot *slot, const unsigned char *buf);

/* Every record: this head, then body_len bytes of body. */
enum infs__head_field {
	INFS__HEAD_MAGIC = 0,
	INFS__HEAD_TYPE = 4,
	INFS__HEAD_BODY_LEN = 8,
	INFS__HEAD_BODY_CRC = 16,
	INFS__HEAD_CRC = 20,  /* of bytes [0, 20) */
	INFS__REC_HEAD = 24,
};

enum infs__rec_type { INFS__REC_PUT = 1, INFS__REC_DELETE = 2, INFS__REC_DROP = 3, INFS__REC_NEXT_ID = 4 };

typedef struct infs__rec_head {
	uint32_t type;
	uint64_t body_len;
	uint32_t body_crc;
} infs__rec_head;

/* Fills a record head for the body iov[0..n-1] and returns the body length. */
uint64_t infs__head_encode(unsigned char *head, uint32_t type, const struct iovec *body, int n);
/* Whether a record head could start at p (its magic): the cheap test
 * before infs__head_decode when searching for records. */
bool infs__head_has_magic(const unsigned char *p);
/* False when the head is not sound: another magic, a failed checksum, or
 * a body length that is not a multiple of 8. */
bool infs__head_decode(infs__rec_head *h, const unsigned char *head);

/* Put (type 1): these fixed fields, then the arrays of infs__put_layout. */
enum infs__put_field {
	INFS__PUT_ID = 0,
	INFS__PUT_FLAGS = 8,
	INFS__PUT_N_TOKENS = 12,
	INFS__PUT_SOURCE_ID = 16,
	INFS__PUT_TIMESTAMP = 24,
	INFS__PUT_NS_LEN = 32,
	INFS__PUT_EMBED_N = 36,
	INFS__PUT_TEXT_LEN = 40,
	INFS__PUT_META_LEN = 44,
	INFS__PUT_FIXED = 48,
};

typedef struct infs__put_fields {
	uint64_t id;
	uint32_t flags, n_tokens;
	uint64_t source_id;
	int64_t timestamp;
	uint32_t ns_len, embed_n, text_len, meta_len;
} infs__put_fields;

/* Where the arrays of a put record's body lie, from the body's start. */
typedef struct infs__put_layout {
	uint64_t ns, tokens, emb, k, v, text, meta, end;
} infs__put_layout;

void infs__put_layout_of(infs__put_layout *l, const infs__put_fields *p, uint64_t kv_token_bytes);

/* The body of a put of fact f as iovecs that point at the caller's arrays
 * (K and V are not copied), with the fixed fields encoded into fixed.
 * iov needs INFS__PUT_IOV entries; returns how many it used. */
#define INFS__PUT_IOV 15
int infs__put_encode(struct iovec *iov, unsigned char fixed[INFS__PUT_FIXED], const infs__put_fields *p,
                     const char *ns, const infs_fact *f, uint64_t kv_token_bytes);
void infs__put_decode(infs__put_fields *p, const unsigned char *body);
/* The put record whose (verified) body is at body, in place. */
void infs__put_view(infs__record *out, const unsigned char *body, uint64_t kv_token_bytes);

/* Delete (type 2): the id, the namespace's length, zero, then the namespace. */
enum infs__delete_field { INFS__DELETE_ID = 0, INFS__DELETE_NS_LEN = 8, INFS__DELETE_FIXED = 16 };
/* Namespace drop (type 3): the namespace's length, zero, the namespace. */
enum infs__drop_field { INFS__DROP_NS_LEN = 0, INFS__DROP_FIXED = 8 };
/* Next id (type 4): the next id, alone. */
enum infs__next_id_field { INFS__NEXT_ID = 0, INFS__NEXT_ID_FIXED = 8 };

/* The length of a delete or drop body of fixed bytes and a namespace. */
static inline uint64_t infs__ns_body_len(uint64_t fixed, uint64_t ns_len)
{
	return infs__pad8(fixed + ns_len + 1);
}

/* The bodies as INFS__NS_IOV iovecs, with the fixed fields encoded into
 * fixed. */
#define INFS__NS_IOV 3
void infs__delete_encode(struct iovec *iov, unsigned char fixed[INFS__DELETE_FIXED], uint64_t id, const char *ns,
                         uint32_t ns_len);
void infs__delete_decode(uint64_t *id, uint32_t *ns_len, const unsigned char *body);
void infs__drop_encode(struct iovec *iov, unsigned char fixed[INFS__DROP_FIXED], const char *ns, uint32_t ns_len);
void infs__drop_decode(uint32_t *ns_len, const unsigned char *body);
void infs__next_id_encode(unsigned char body[INFS__NEXT_ID_FIXED], uint64_t next_id);
uint64_t infs__next_id_decode(const unsigned char *body);

#endif

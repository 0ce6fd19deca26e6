#include "text/bpe.h"

#include <stdlib.h>
#include <string.h>

#include "inferscale/common.h"
#include "util/buf.h"

struct infs__bpe {
	uint32_t n_vocab;
	infs__buf pool;         /* every token's bytes, back to back */
	size_t *start;          /* token id -> offset in pool */
	uint32_t *len;          /* token id -> byte length */
	int32_t *slots;         /* open-addressing table of ids keyed by their bytes */
	size_t n_slots;         /* a power of two, at least twice n_vocab */
	/* Merges: open addressing on the pair, value rank and result. */
	uint64_t *mkey;         /* (left << 32 | right) + 1; 0 marks an empty slot */
	uint32_t *mrank;
	int32_t *mresult;
	size_t n_merges, m_slots;
	int32_t byte_token[256];
};

int infs__ids_push(infs__ids *ids, int32_t id)
{
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 64;
		int32_t *v = realloc(ids->v, cap * sizeof *v);
		if (!v)
			return INFS_ENOMEM;
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
	return INFS_OK;
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t hash_pair(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

int infs__bpe_new(infs__bpe **out, uint32_t n_vocab)
{
	infs__bpe *b = calloc(1, sizeof *b);
	if (!b)
		return INFS_ENOMEM;
	b->n_vocab = n_vocab;
	b->n_slots = 16;
	while (b->n_slots < (size_t)n_vocab * 2)
		b->n_slots *= 2;
	b->start = calloc(n_vocab ? n_vocab : 1, sizeof *b->start);
	b->len = calloc(n_vocab ? n_vocab : 1, sizeof *b->len);
	b->slots = malloc(b->n_slots * sizeof *b->slots);
	if (!b->start || !b->len || !b->slots) {
		infs__bpe_free(b);
		return INFS_ENOMEM;
	}
	memset(b->slots, 0xff, b->n_slots * sizeof *b->slots);
	for (int i = 0; i < 256; i++)
		b->byte_token[i] = -1;
	*out = b;
	return INFS_OK;
}

static const uint8_t *tok_bytes(const infs__bpe *b, uint32_t id)
{
	return (const uint8_t *)b->pool.p + b->start[id];
}

void infs__bpe_free(infs__bpe *b)
{
	if (!b)
		return;
	infs__buf_free(&b->pool);
	free(b->start);
	free(b->len);
	free(b->slots);
	free(b->mkey);
	free(b->mrank);
	free(b->mresult);
	free(b);
}

uint32_t infs__bpe_vocab_size(const infs__bpe *b)
{
	return b->n_vocab;
}

const uint8_t *infs__bpe_token(const infs__bpe *b, uint32_t id, size_t *len)
{
	*len = b->len[id];
	return tok_bytes(b, id);
}

int32_t infs__bpe_lookup(const infs__bpe *b, const void *bytes, size_t len)
{
	size_t mask = b->n_slots - 1;
	for (size_t i = hash_bytes(bytes, len) & mask;; i = (i + 1) & mask) {
		int32_t id = b->slots[i];
		if (id < 0)
			return -1;
		if (b->len[id] == len && memcmp(tok_bytes(b, id), bytes, len) == 0)
			return id;
	}
}

int infs__bpe_set_token(infs__bpe *b, uint32_t id, const void *bytes, size_t len)
{
	if (id >= b->n_vocab || len > UINT32_MAX)
		return INFS_EINVAL;
	size_t start = b->pool.n;
	if (infs__buf_put(&b->pool, bytes, len))
		return INFS_ENOMEM;
	b->start[id] = start;
	b->len[id] = (uint32_t)len;
	if (len == 1 && (b->byte_token[*(const uint8_t *)bytes] < 0 ||
	                 b->byte_token[*(const uint8_t *)bytes] > (int32_t)id))
		b->byte_token[*(const uint8_t *)bytes] = (int32_t)id;
	/* The table holds each byte string once, for its lowest id. */
	size_t mask = b->n_slots - 1;
	for (size_t i = hash_bytes(bytes, len) & mask;; i = (i + 1) & mask) {
		int32_t other = b->slots[i];
		if (other < 0) {
			b->slots[i] = (int32_t)id;
			return INFS_OK;
		}
		if (b->len[other] == len && memcmp(tok_bytes(b, other), bytes, len) == 0) {
			if ((int32_t)id < other)
				b->slots[i] = (int32_t)id;
			return INFS_OK;
		}
	}
}

static size_t merge_slot(const infs__bpe *b, uint64_t key)
{
	size_t mask = b->m_slots - 1;
	size_t i = hash_pair(key) & mask;
	while (b->mkey[i] && b->mkey[i] != key)
		i = (i + 1) & mask;
	return i;
}

static int grow_merges(infs__bpe *b)
{
	size_t n = b->m_slots ? b->m_slots * 2 : 1024;
	uint64_t *key = calloc(n, sizeof *key);
	uint32_t *rank = malloc(n * sizeof *rank);
	int32_t *result = malloc(n * sizeof *result);
	if (!key || !rank || !result) {
		free(key);
		free(rank);
		free(result);
		return INFS_ENOMEM;
	}
	infs__bpe old = *b;
	b->mkey = key;
	b->mrank = rank;
	b->mresult = result;
	b->m_slots = n;
	for (size_t i = 0; i < old.m_slots; i++)
		if (old.mkey[i]) {
			size_t j = merge_slot(b, old.mkey[i]);
			b->mkey[j] = old.mkey[i];
			b->mrank[j] = old.mrank[i];
			b->mresult[j] = old.mresult[i];
		}
	free(old.mkey);
	free(old.mrank);
	free(old.mresult);
	return INFS_OK;
}

int infs__bpe_add_merge(infs__bpe *b, int32_t left, int32_t right, uint32_t rank)
{
	if (left < 0 || right < 0 || (uint32_t)left >= b->n_vocab || (uint32_t)right >= b->n_vocab)
		return INFS_EINVAL;
	size_t ll = b->len[left], rl = b->len[right];
	uint8_t small[256];
	uint8_t *cat = ll + rl <= sizeof small ? small : malloc(ll + rl);
	if (!cat)
		return INFS_ENOMEM;
	memcpy(cat, tok_bytes(b, left), ll);
	memcpy(cat + ll, tok_bytes(b, right), rl);
	int32_t result = infs__bpe_lookup(b, cat, ll + rl);
	if (cat != small)
		free(cat);
	if (result < 0)
		return INFS_EFORMAT;
	if ((b->n_merges + 1) * 2 > b->m_slots) {
		int rc = grow_merges(b);
		if (rc != INFS_OK)
			return rc;
	}
	uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
	size_t i = merge_slot(b, key);
	if (b->mkey[i])
		return INFS_OK;
	b->mkey[i] = key;
	b->mrank[i] = rank;
	b->mresult[i] = result;
	b->n_merges++;
	return INFS_OK;
}

/* The merge of (left, right): its rank and result, or 0 when there is none. */
static int find_merge(const infs__bpe *b, int32_t left, int32_t right, uint32_t *rank, int32_t *result)
{
	if (!b->m_slots)
		return 0;
	uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
	size_t i = merge_slot(b, key);
	if (!b->mkey[i])
		return 0;
	*rank = b->mrank[i];
	*result = b->mresult[i];
	return 1;
}

/* A candidate merge of the symbol at pos with its right neighbour, valid
 * only while both still hold left and right. */
typedef struct cand {
	uint32_t rank;
	uint32_t pos;
	int32_t left, right, result;
} cand;

static int cand_less(const cand *a, const cand *b)
{
	return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(cand *h, size_t *n, cand c)
{
	size_t i = (*n)++;
	while (i > 0 && cand_less(&c, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = c;
}

static cand heap_pop(cand *h, size_t *n)
{
	cand top = h[0], last = h[--*n];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		const cand *best = &last;
		if (l < *n && cand_less(&h[l], best))
			m = l, best = &h[l];
		if (l + 1 < *n && cand_less(&h[l + 1], best))
			m = l + 1;
		if (m == i)
			break;
		h[i] = h[m];
		i = m;
	}
	if (*n)
		h[i] = last;
	return top;
}

void infs__bpe_scratch_free(infs__bpe_scratch *s)
{
	free(s->mem);
	s->mem = NULL;
	s->cap = 0;
}

int infs__bpe_encode(const infs__bpe *b, const uint8_t *piece, size_t len, int whole_first,
                     infs__bpe_scratch *scratch, infs__ids *out)
{
	if (len == 0)
		return INFS_OK;
	if (whole_first || len == 1) {
		int32_t id = infs__bpe_lookup(b, piece, len);
		if (id >= 0)
			return infs__ids_push(out, id);
	}
	if (len > UINT32_MAX / 4)
		return INFS_ERANGE;
	/* Symbols: token id and neighbours; a merged-away symbol gets id -1.
	 * Each merge removes a symbol and adds at most two candidates, so the
	 * heap never holds more than 3 * len of them. */
	size_t need = 3 * len * sizeof(int32_t) + 3 * len * sizeof(cand);
	if (need > scratch->cap) {
		void *mem = realloc(scratch->mem, need);
		if (!mem)
			return INFS_ENOMEM;
		scratch->mem = mem;
		scratch->cap = need;
	}
	cand *heap = scratch->mem;
	int32_t *id = (int32_t *)(heap + 3 * len);
	int32_t *prev = id + len;
	int32_t *next = prev + len;
	/* A byte without a token is left out, so its neighbours may merge: what
	 * Hugging Face's BPE does when the model has no unknown token. Putting
	 * the unknown token there instead would let user text produce a control
	 * token (SmolLM2's is <|endoftext|>). */
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (b->byte_token[piece[i]] >= 0)
			id[n++] = b->byte_token[piece[i]];
	if (n == 0)
		return INFS_OK;
	for (size_t i = 0; i < n; i++) {
		prev[i] = (int32_t)i - 1;
		next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
	}
	size_t nh = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		cand c = { 0, (uint32_t)i, id[i], id[i + 1], 0 };
		if (c.left >= 0 && c.right >= 0 && find_merge(b, c.left, c.right, &c.rank, &c.result))
			heap_push(heap, &nh, c);
	}
	while (nh) {
		cand c = heap_pop(heap, &nh);
		int32_t r = next[c.pos];
		if (id[c.pos] != c.left || r < 0 || id[r] != c.right)
			continue;
		id[c.pos] = c.result;
		id[r] = -1;
		next[c.pos] = next[r];
		if (next[r] >= 0)
			prev[next[r]] = (int32_t)c.pos;
		int32_t p = prev[c.pos], q = next[c.pos];
		cand n1 = { 0, (uint32_t)p, p >= 0 ? id[p] : -1, c.result, 0 };
		if (p >= 0 && n1.left >= 0 && find_merge(b, n1.left, n1.right, &n1.rank, &n1.result))
			heap_push(heap, &nh, n1);
		cand n2 = { 0, c.pos, c.result, q >= 0 ? id[q] : -1, 0 };
		if (q >= 0 && n2.right >= 0 && find_merge(b, n2.left, n2.right, &n2.rank, &n2.result))
			heap_push(heap, &nh, n2);
	}
	int rc = INFS_OK;
	for (int32_t i = 0; i >= 0 && rc == INFS_OK; i = next[i]) {
		if (id[i] >= 0)
			rc = infs__ids_push(out, id[i]);
	}
	return rc;
}

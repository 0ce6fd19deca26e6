/* BERT tokenization. The steps and their order follow tokenizers'
 * BertNormalizer (clean text, isolate CJK ideographs, strip accents, then
 * lower-case), BertPreTokenizer (split on whitespace and punctuation) and
 * WordPiece, which is what sentence-transformers runs for BERT models. */
#include "embed/wordpiece.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "inferscale/common.h"
#include "text/unicode.h"

struct infs__wordpiece {
	char *blob;         /* every token, NUL-terminated, in id order */
	uint32_t *off;      /* token id -> offset in blob */
	uint32_t *len;      /* token id -> bytes */
	uint32_t n;
	int32_t *slots;     /* open-addressing hash table of ids, -1 empty */
	uint32_t mask;      /* slots - 1, a power of two minus one */
	uint32_t max_bytes; /* the longest token, "##" included */
	int lowercase, strip_accents, chinese_chars;
	uint32_t max_word_chars;
	int32_t special[INFS_WP_N_SPECIAL];
};

static uint32_t fnv1a(uint32_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

#define FNV_BASIS 2166136261u

/* Looks up ("##" if cont) + s[0..n). */
static int32_t lookup(const infs__wordpiece *wp, int cont, const char *s, size_t n)
{
	size_t total = n + (cont ? 2 : 0);
	if (total > wp->max_bytes)
		return -1;
	uint32_t h = fnv1a(cont ? fnv1a(FNV_BASIS, "##", 2) : FNV_BASIS, s, n);
	for (uint32_t i = h & wp->mask;; i = (i + 1) & wp->mask) {
		int32_t id = wp->slots[i];
		if (id < 0)
			return -1;
		const char *t = wp->blob + wp->off[id];
		if (wp->len[id] == total && (!cont || memcmp(t, "##", 2) == 0) &&
		    memcmp(t + (cont ? 2 : 0), s, n) == 0)
			return id;
	}
}

int32_t infs__wordpiece_id(const infs__wordpiece *wp, const char *tok, size_t len)
{
	return lookup(wp, 0, tok, len);
}

uint32_t infs__wordpiece_vocab_size(const infs__wordpiece *wp)
{
	return wp->n;
}

int32_t infs__wordpiece_special(const infs__wordpiece *wp, int which)
{
	return wp->special[which];
}

void infs__wordpiece_free(infs__wordpiece *wp)
{
	if (!wp)
		return;
	free(wp->blob);
	free(wp->off);
	free(wp->len);
	free(wp->slots);
	free(wp);
}

int infs__wordpiece_create(infs__wordpiece **out, const char *vocab, size_t len,
                           const infs__wordpiece_config *cfg)
{
	size_t lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += vocab[i] == '\n';
	if (len && vocab[len - 1] != '\n')
		lines++;
	if (lines == 0)
		return infs__error(INFS_EFORMAT, "vocabulary: no tokens");
	if (lines > INT32_MAX / 4)
		return infs__error(INFS_EFORMAT, "vocabulary: %zu tokens is too many", lines);
	uint32_t cap = 1;
	while (cap < 2 * lines)
		cap <<= 1;

	infs__wordpiece *wp = calloc(1, sizeof *wp);
	if (!wp)
		return infs__error(INFS_ENOMEM, "vocabulary: out of memory");
	wp->blob = malloc(len + 1);
	wp->off = malloc(lines * sizeof *wp->off);
	wp->len = malloc(lines * sizeof *wp->len);
	wp->slots = malloc((size_t)cap * sizeof *wp->slots);
	if (!wp->blob || !wp->off || !wp->len || !wp->slots) {
		infs__wordpiece_free(wp);
		return infs__error(INFS_ENOMEM, "vocabulary: out of memory");
	}
	memset(wp->slots, 0xff, (size_t)cap * sizeof *wp->slots);
	wp->mask = cap - 1;
	wp->lowercase = cfg->lowercase;
	wp->strip_accents = cfg->strip_accents;
	wp->chinese_chars = cfg->chinese_chars;
	wp->max_word_chars = cfg->max_word_chars;

	size_t pos = 0, b = 0;
	for (uint32_t id = 0; id < lines; id++) {
		size_t end = pos;
		while (end < len && vocab[end] != '\n')
			end++;
		size_t n = end - pos;
		/* as tokenizers' read_file: trailing whitespace is not part of a token */
		while (n && (vocab[pos + n - 1] == '\r' || vocab[pos + n - 1] == ' ' ||
		             vocab[pos + n - 1] == '\t'))
			n--;
		memcpy(wp->blob + b, vocab + pos, n);
		wp->blob[b + n] = '\0';
		wp->off[id] = (uint32_t)b;
		wp->len[id] = (uint32_t)n;
		if (n > wp->max_bytes)
			wp->max_bytes = (uint32_t)n;
		b += n + 1;
		pos = end + 1;
		wp->n = id + 1;
		/* insert, replacing an earlier line with the same text */
		uint32_t h = fnv1a(FNV_BASIS, wp->blob + wp->off[id], n);
		for (uint32_t i = h & wp->mask;; i = (i + 1) & wp->mask) {
			int32_t old = wp->slots[i];
			if (old < 0 || (wp->len[old] == n &&
			                memcmp(wp->blob + wp->off[old], wp->blob + wp->off[id], n) == 0)) {
				wp->slots[i] = (int32_t)id;
				break;
			}
		}
	}
	for (int s = 0; s < INFS_WP_N_SPECIAL; s++) {
		const char *t = cfg->special[s];
		wp->special[s] = t ? lookup(wp, 0, t, strlen(t)) : -1;
		if (wp->special[s] < 0) {
			infs__wordpiece_free(wp);
			return infs__error(INFS_EFORMAT, "vocabulary: special token \"%s\" is not in it",
			                   t ? t : "(none)");
		}
	}
	*out = wp;
	return INFS_OK;
}

/* ---- normalisation -------------------------------------------------------- */

/* What tokenizers' BertNormalizer removes: NUL, U+FFFD and "other"
 * characters (Cc, Cf, Co; unassigned code points are kept), except the
 * whitespace controls. */
static int is_removed(uint32_t cp)
{
	if (cp == 0 || cp == 0xfffd)
		return 1;
	if (cp == '\t' || cp == '\n' || cp == '\r')
		return 0;
	infs__uc_cat c = infs__uc_category(cp);
	return c == INFS_UC_CC || c == INFS_UC_CF || c == INFS_UC_CO || c == INFS_UC_CS;
}

/* BERT counts all ASCII non-alphanumeric printable characters as punctuation
 * ($, +, ^, ...), besides Unicode's P* categories. */
static int is_bert_punct(uint32_t cp)
{
	if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
	    (cp >= 123 && cp <= 126))
		return 1;
	return infs__uc_is_punct(cp);
}

/* Normalises text[0..len) into code points: a malloc'd array in *out, its
 * length in *n. */
static int normalise(const infs__wordpiece *wp, const char *text, size_t len, uint32_t **out,
                     size_t *n)
{
	/* clean and isolate CJK: at most three code points per input byte */
	uint32_t *a = malloc((3 * len + 1) * sizeof *a);
	if (!a)
		return INFS_ENOMEM;
	size_t na = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		int k = infs__utf8_decode((const uint8_t *)text + i, len - i, &cp);
		i += (size_t)(k < 0 ? -k : k);
		if (is_removed(cp))
			continue;
		if (infs__uc_is_space(cp)) {
			a[na++] = ' ';
		} else if (wp->chinese_chars && infs__uc_is_cjk(cp)) {
			a[na++] = ' ';
			a[na++] = cp;
			a[na++] = ' ';
		} else {
			a[na++] = cp;
		}
	}
	if (wp->strip_accents) {
		size_t need = infs__uc_nfd(a, na, NULL, 0);
		uint32_t *d = malloc((need + 1) * sizeof *d);
		if (!d) {
			free(a);
			return INFS_ENOMEM;
		}
		infs__uc_nfd(a, na, d, need);
		free(a);
		a = d;
		na = 0;
		for (size_t i = 0; i < need; i++)
			if (infs__uc_category(d[i]) != INFS_UC_MN)
				a[na++] = d[i];
	}
	if (wp->lowercase) {
		uint32_t *l = malloc((3 * na + 1) * sizeof *l);
		if (!l) {
			free(a);
			return INFS_ENOMEM;
		}
		size_t nl = 0;
		for (size_t i = 0; i < na; i++)
			nl += infs__uc_lower(a[i], l + nl);
		free(a);
		a = l;
		na = nl;
	}
	*out = a;
	*n = na;
	return INFS_OK;
}

/* ---- WordPiece ------------------------------------------------------------ */

struct sink {
	int32_t *ids;
	uint32_t n, limit; /* ids are written below limit, counted beyond it */
};

static void emit(struct sink *s, int32_t id)
{
	if (s->n < s->limit)
		s->ids[s->n] = id;
	s->n++;
}

/* The word cps[0..nc): greedy longest-match-first pieces, or [UNK] for the
 * whole word when it is too long or some part of it matches nothing. buf has
 * room for the word's UTF-8 and pos for nc + 1 offsets. */
static void word_pieces(const infs__wordpiece *wp, const uint32_t *cps, size_t nc, char *buf,
                        size_t *pos, struct sink *s)
{
	if (nc > wp->max_word_chars) {
		emit(s, wp->special[INFS_WP_UNK]);
		return;
	}
	pos[0] = 0;
	for (size_t i = 0; i < nc; i++)
		pos[i + 1] = pos[i] + infs__utf8_encode(cps[i], (uint8_t *)buf + pos[i]);
	uint32_t first = s->n;
	for (size_t start = 0; start < nc;) {
		int32_t id = -1;
		size_t end = nc;
		for (; end > start; end--) {
			id = lookup(wp, start > 0, buf + pos[start], pos[end] - pos[start]);
			if (id >= 0)
				break;
		}
		if (id < 0) {
			s->n = first;
			emit(s, wp->special[INFS_WP_UNK]);
			return;
		}
		emit(s, id);
		start = end;
	}
}

/* Normalises, splits and appends the pieces of text[0..len). */
static int encode_chunk(const infs__wordpiece *wp, const char *text, size_t len, struct sink *s)
{
	uint32_t *cps;
	size_t n;
	if (normalise(wp, text, len, &cps, &n) != INFS_OK)
		return INFS_ENOMEM;
	char *buf = malloc(4 * n + 1);
	size_t *pos = malloc((n + 1) * sizeof *pos);
	if (!buf || !pos) {
		free(buf);
		free(pos);
		free(cps);
		return INFS_ENOMEM;
	}
	for (size_t i = 0; i < n && s->n < s->limit;) {
		if (infs__uc_is_space(cps[i])) {
			i++;
		} else if (is_bert_punct(cps[i])) {
			word_pieces(wp, cps + i, 1, buf, pos, s);
			i++;
		} else {
			size_t j = i;
			while (j < n && !infs__uc_is_space(cps[j]) && !is_bert_punct(cps[j]))
				j++;
			word_pieces(wp, cps + i, j - i, buf, pos, s);
			i = j;
		}
	}
	free(buf);
	free(pos);
	free(cps);
	return INFS_OK;
}

/* Bytes normalised at a time: a long text is cut at ASCII whitespace, which
 * ends a word and cannot be inside a UTF-8 sequence, so the result is the
 * same while memory stays bounded and the work stops once the pieces have
 * reached max_len. */
#define CHUNK 4096

static int encode_span(const infs__wordpiece *wp, const char *text, size_t len, struct sink *s)
{
	for (size_t at = 0; at < len && s->n < s->limit;) {
		size_t end = len - at > CHUNK ? at + CHUNK : len;
		while (end < len && text[end] != ' ' && text[end] != '\n' && text[end] != '\t' &&
		       text[end] != '\r')
			end++;
		if (encode_chunk(wp, text + at, end - at, s) != INFS_OK)
			return INFS_ENOMEM;
		at = end;
	}
	return INFS_OK;
}

/* The leftmost occurrence of a special token in text[from..len), the longest
 * one where several start there: its start in *at and its index, or -1. */
static int next_special(const infs__wordpiece *wp, const char *text, size_t len, size_t from,
                        size_t *at)
{
	int best = -1;
	size_t best_at = len, best_len = 0;
	for (int k = 0; k < INFS_WP_N_SPECIAL; k++) {
		int32_t id = wp->special[k];
		const char *t = wp->blob + wp->off[id];
		size_t tl = wp->len[id];
		if (tl == 0 || tl > len - from)
			continue;
		const char *hit = memmem(text + from, len - from, t, tl);
		if (!hit)
			continue;
		size_t h = (size_t)(hit - text);
		if (h < best_at || (h == best_at && tl > best_len)) {
			best = k;
			best_at = h;
			best_len = tl;
		}
	}
	*at = best_at;
	return best;
}

int infs__wordpiece_encode(const infs__wordpiece *wp, const char *text, size_t len,
                           uint32_t max_len, int32_t *ids, uint32_t *n_ids)
{
	struct sink s = {ids, 0, max_len - 1};
	emit(&s, wp->special[INFS_WP_CLS]);
	/* Special tokens written in the text are matched before normalisation,
	 * as tokenizers matches its added tokens. */
	for (size_t from = 0; from < len && s.n < s.limit;) {
		size_t at;
		int k = next_special(wp, text, len, from, &at);
		if (encode_span(wp, text + from, at - from, &s) != INFS_OK)
			return infs__error(INFS_ENOMEM, "tokenizer: out of memory");
		if (k < 0)
			break;
		emit(&s, wp->special[k]);
		from = at + wp->len[wp->special[k]];
	}
	if (s.n > s.limit)
		s.n = s.limit;
	ids[s.n++] = wp->special[INFS_WP_SEP];
	*n_ids = s.n;
	return INFS_OK;
}

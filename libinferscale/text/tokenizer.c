/* Building a byte-level BPE tokenizer from GGUF metadata or a Hugging Face
 * tokenizer.json, and encoding / decoding with it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/file.h"
#include "gguf/gguf.h"
#include "util/json.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

/* GPT-2's byte alphabet: byte-level vocabularies spell byte b as the
 * character b when it is printable (33..126, 161..172, 174..255) and as
 * U+0100 + k for the k-th other byte, so that tokens never hold spaces or
 * control characters. */
static int printable_byte(unsigned b)
{
	return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
}

typedef struct alphabet {
	int16_t byte_of[256 + 68]; /* character -> byte, -1 outside the alphabet */
} alphabet;

static void alphabet_init(alphabet *a)
{
	unsigned k = 0;
	for (unsigned i = 0; i < sizeof a->byte_of / sizeof *a->byte_of; i++)
		a->byte_of[i] = -1;
	for (unsigned b = 0; b < 256; b++)
		a->byte_of[printable_byte(b) ? b : 256 + k++] = (int16_t)b;
}

/* The bytes a vocabulary string spells. Strings with a character outside the
 * alphabet are their own UTF-8 text (as transformers reads such tokens).
 * out has room for len bytes. */
static size_t unspell(const alphabet *a, const char *s, size_t len, uint8_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		int k = infs__utf8_decode((const uint8_t *)s + i, len - i, &cp);
		if (k < 0 || cp >= sizeof a->byte_of / sizeof *a->byte_of || a->byte_of[cp] < 0) {
			memcpy(out, s, len);
			return len;
		}
		out[n++] = (uint8_t)a->byte_of[cp];
		i += (size_t)k;
	}
	return n;
}

void infs_tokenizer_free(infs_tokenizer *tok)
{
	if (!tok)
		return;
	infs__bpe_free(tok->bpe);
	free(tok->special);
	free(tok->added);
	free(tok->chat_template);
	free(tok);
}

static int new_tokenizer(infs_tokenizer **out, uint32_t n_vocab)
{
	infs_tokenizer *tok = calloc(1, sizeof *tok);
	if (!tok)
		return infs__error(INFS_ENOMEM, "tokenizer: no memory");
	tok->bos = tok->eos = -1;
	tok->special = calloc(n_vocab ? n_vocab : 1, 1);
	tok->added = calloc(n_vocab ? n_vocab : 1, sizeof *tok->added);
	if (!tok->special || !tok->added || infs__bpe_new(&tok->bpe, n_vocab) != INFS_OK) {
		infs_tokenizer_free(tok);
		return infs__error(INFS_ENOMEM, "tokenizer: no memory for %u tokens", n_vocab);
	}
	*out = tok;
	return INFS_OK;
}

/* Sets token id from its vocabulary string; added tokens are literal. */
static int set_token(infs_tokenizer *tok, const alphabet *a, uint32_t id, const char *s, size_t len,
                     int added, int special)
{
	uint8_t small[256];
	uint8_t *buf = len <= sizeof small ? small : malloc(len);
	if (!buf)
		return infs__error(INFS_ENOMEM, "tokenizer: no memory");
	size_t n = added ? (memcpy(buf, s, len), len) : unspell(a, s, len, buf);
	int rc = infs__bpe_set_token(tok->bpe, id, buf, n);
	if (buf != small)
		free(buf);
	if (rc != INFS_OK)
		return infs__error(rc, "tokenizer: cannot set token %u", id);
	if (added) {
		if (tok->n_added == infs__bpe_vocab_size(tok->bpe))
			return infs__error(INFS_EFORMAT, "tokenizer: more added tokens than token ids");
		infs__added_token *t = &tok->added[tok->n_added++];
		t->id = (int32_t)id;
		t->special = special;
		tok->special[id] = (uint8_t)special;
	}
	return INFS_OK;
}

/* Adds the merge "left right" (vocabulary spelling) with the given rank. */
static int add_merge(infs_tokenizer *tok, const alphabet *a, const char *left, size_t ll, const char *right,
                     size_t rl, uint32_t rank)
{
	uint8_t *buf = malloc(ll + rl + 1);
	if (!buf)
		return infs__error(INFS_ENOMEM, "tokenizer: no memory");
	size_t nl = unspell(a, left, ll, buf), nr = unspell(a, right, rl, buf + nl);
	int32_t l = infs__bpe_lookup(tok->bpe, buf, nl), r = infs__bpe_lookup(tok->bpe, buf + nl, nr);
	free(buf);
	int rc = l < 0 || r < 0 ? INFS_EFORMAT : infs__bpe_add_merge(tok->bpe, l, r, rank);
	if (rc == INFS_EFORMAT)
		return infs__error(INFS_EFORMAT, "tokenizer: merge %u (\"%.*s %.*s\") %s", rank, (int)(ll > 40 ? 40 : ll),
		                   left, (int)(rl > 40 ? 40 : rl), right,
		                   l < 0 || r < 0 ? "names a token not in the vocabulary"
		                                  : "makes a token not in the vocabulary");
	if (rc != INFS_OK)
		return infs__error(rc, "tokenizer: cannot add merge %u", rank);
	return INFS_OK;
}

static int cmp_added(const void *pa, const void *pb)
{
	const infs__added_token *a = pa, *b = pb;
	if (a->len && b->len && a->text[0] != b->text[0])
		return a->text[0] < b->text[0] ? -1 : 1;
	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

/* Fills in the added tokens' text and orders them for matching; empty ones
 * could never be matched and are dropped. */
static void finish_added(infs_tokenizer *tok)
{
	size_t n = 0;
	for (size_t i = 0; i < tok->n_added; i++) {
		infs__added_token t = tok->added[i];
		t.text = infs__bpe_token(tok->bpe, (uint32_t)t.id, &t.len);
		if (t.len)
			tok->added[n++] = t;
	}
	tok->n_added = n;
	qsort(tok->added, n, sizeof *tok->added, cmp_added);
}

static int check_id(const char *what, int64_t id, uint32_t n_vocab, int32_t *out)
{
	if (id < 0 || id >= (int64_t)n_vocab)
		return infs__error(INFS_EFORMAT, "tokenizer: %s %lld is outside the vocabulary of %u", what,
		                   (long long)id, n_vocab);
	*out = (int32_t)id;
	return INFS_OK;
}

/* ---- GGUF ---- */

enum { GGUF_TOKEN_NORMAL = 1, GGUF_TOKEN_CONTROL = 3, GGUF_TOKEN_USER_DEFINED = 4 };

int infs__tokenizer_from_gguf(infs_tokenizer **out, const infs__gguf *g, const char *path)
{
	if (!out || !g)
		return infs__error(INFS_EINVAL, "infs__tokenizer_from_gguf: %s is NULL", out ? "g" : "out");
	*out = NULL;
	if (!path)
		path = "<gguf>";
	infs__gguf_str model, pre = { "gpt2", 4 };
	int rc = infs__gguf_get_str(g, "tokenizer.ggml.model", &model);
	if (rc != INFS_OK)
		return infs__error_wrap(rc == INFS_ENOTFOUND ? INFS_EFORMAT : rc, "tokenizer: %s", path);
	if (!infs__gguf_str_eq(model, "gpt2"))
		return infs__error(INFS_EUNSUPPORTED,
		                   "tokenizer: %s: tokenizer model '%.*s' is not supported (only byte-level BPE, 'gpt2')",
		                   path, (int)(model.len > 40 ? 40 : model.len), model.ptr);
	rc = infs__gguf_get_str(g, "tokenizer.ggml.pre", &pre);
	if (rc != INFS_OK && rc != INFS_ENOTFOUND)
		return infs__error_wrap(rc, "tokenizer: %s", path);
	char pre_name[64];
	snprintf(pre_name, sizeof pre_name, "%.*s", (int)(pre.len > 63 ? 63 : pre.len), pre.ptr);
	int kind = infs__pretok_from_gguf(pre_name);
	if (kind < 0)
		return infs__error(INFS_EUNSUPPORTED, "tokenizer: %s: pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported",
		                   path, pre_name);

	const infs__gguf_value *tokens, *merges, *types = NULL;
	if ((rc = infs__gguf_get_arr(g, "tokenizer.ggml.tokens", INFS_GGUF_STRING, &tokens)) != INFS_OK ||
	    (rc = infs__gguf_get_arr(g, "tokenizer.ggml.merges", INFS_GGUF_STRING, &merges)) != INFS_OK)
		return infs__error_wrap(rc == INFS_ENOTFOUND ? INFS_EFORMAT : rc, "tokenizer: %s", path);
	rc = infs__gguf_get_arr(g, "tokenizer.ggml.token_type", INFS_GGUF_I64, &types);
	if (rc == INFS_ENOTFOUND)
		types = NULL;
	else if (rc != INFS_OK)
		return infs__error_wrap(rc, "tokenizer: %s", path);
	if (tokens->n == 0 || tokens->n > INT32_MAX)
		return infs__error(INFS_EFORMAT, "tokenizer: %s: %llu tokens", path, (unsigned long long)tokens->n);
	if (types && types->n != tokens->n)
		return infs__error(INFS_EFORMAT, "tokenizer: %s: %llu token types for %llu tokens", path,
		                   (unsigned long long)types->n, (unsigned long long)tokens->n);
	uint32_t n_vocab = (uint32_t)tokens->n;

	infs_tokenizer *tok;
	if ((rc = new_tokenizer(&tok, n_vocab)) != INFS_OK)
		return rc;
	tok->pretok = (infs__pretok)kind;
	alphabet a;
	alphabet_init(&a);
	for (uint32_t i = 0; i < n_vocab && rc == INFS_OK; i++) {
		int64_t type = types ? infs__gguf_arr_int(types, i) : GGUF_TOKEN_NORMAL;
		int added = type == GGUF_TOKEN_CONTROL || type == GGUF_TOKEN_USER_DEFINED;
		rc = set_token(tok, &a, i, tokens->strs[i].ptr, (size_t)tokens->strs[i].len, added,
		               type == GGUF_TOKEN_CONTROL);
	}
	for (uint64_t i = 0; i < merges->n && rc == INFS_OK; i++) {
		const char *m = merges->strs[i].ptr;
		size_t len = (size_t)merges->strs[i].len;
		const char *sp = memchr(m, ' ', len);
		if (!sp) {
			rc = infs__error(INFS_EFORMAT, "tokenizer: merge %llu has no space", (unsigned long long)i);
			break;
		}
		rc = add_merge(tok, &a, m, (size_t)(sp - m), sp + 1, len - (size_t)(sp - m) - 1, (uint32_t)i);
	}
	static const struct {
		const char *key;
		size_t field;
	} ids[] = {
		{ "tokenizer.ggml.bos_token_id", offsetof(infs_tokenizer, bos) },
		{ "tokenizer.ggml.eos_token_id", offsetof(infs_tokenizer, eos) },
	};
	for (size_t i = 0; i < sizeof ids / sizeof *ids && rc == INFS_OK; i++) {
		int64_t v;
		int r = infs__gguf_get_int(g, ids[i].key, &v);
		if (r == INFS_OK)
			rc = check_id(ids[i].key, v, n_vocab, (int32_t *)((char *)tok + ids[i].field));
		else if (r != INFS_ENOTFOUND)
			rc = r;
	}
	/* llama.cpp adds BOS to BPE vocabularies only when the file says so. */
	if (rc == INFS_OK && (rc = infs__gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &tok->add_bos)) == INFS_ENOTFOUND)
		rc = INFS_OK;
	if (rc == INFS_OK && (rc = infs__gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &tok->add_eos)) == INFS_ENOTFOUND)
		rc = INFS_OK;
	infs__gguf_str tmpl;
	if (rc == INFS_OK && infs__gguf_get_str(g, "tokenizer.chat_template", &tmpl) == INFS_OK &&
	    !(tok->chat_template = strndup(tmpl.ptr, (size_t)tmpl.len)))
		rc = infs__error(INFS_ENOMEM, "tokenizer: no memory");
	if (rc != INFS_OK) {
		infs_tokenizer_free(tok);
		return infs__error_wrap(rc, "tokenizer: %s", path);
	}
	finish_added(tok);
	*out = tok;
	return INFS_OK;
}

/* ---- tokenizer.json ---- */

/* Far above any tokenizer.json (Llama 3's is 9 MB). */
#define MAX_JSON_BYTES (256u << 20)

static int parse_json_file(const char *path, infs__json **out)
{
	char *text = NULL;
	size_t len = 0;
	int rc = infs__file_read(&text, &len, path, MAX_JSON_BYTES);
	if (rc != INFS_OK)
		return infs__error_wrap(rc, "tokenizer");
	rc = infs__json_parse(out, text, len);
	free(text);
	if (rc != INFS_OK)
		return infs__error_wrap(rc, "tokenizer: %s", path);
	return INFS_OK;
}

static int json_type_is(const infs__json *v, infs__json_type type)
{
	return v && v->type == type;
}

/* "A B" or ["A", "B"]. */
static int merge_parts(const infs__json *m, const char **l, size_t *ll, const char **r, size_t *rl)
{
	if (m->type == INFS_JSON_STRING) {
		const char *sp = memchr(m->string, ' ', m->len);
		if (!sp)
			return 0;
		*l = m->string;
		*ll = (size_t)(sp - m->string);
		*r = sp + 1;
		*rl = m->len - *ll - 1;
		return 1;
	}
	if (m->type == INFS_JSON_ARRAY && m->len == 2 && m->items[0].type == INFS_JSON_STRING &&
	    m->items[1].type == INFS_JSON_STRING) {
		*l = m->items[0].string;
		*ll = m->items[0].len;
		*r = m->items[1].string;
		*rl = m->items[1].len;
		return 1;
	}
	return 0;
}

/* The split of a tokenizer.json pre_tokenizer, or -1. */
static int json_pretok(const infs__json *pt, char *why, size_t why_len)
{
	const char *type = infs__json_str(infs__json_get(pt, "type"), "null");
	if (strcmp(type, "ByteLevel") == 0) {
		const infs__json *re = infs__json_get(pt, "use_regex");
		if (re && re->type == INFS_JSON_BOOL && !re->boolean) {
			snprintf(why, why_len, "ByteLevel without its regex");
			return -1;
		}
		const infs__json *ap = infs__json_get(pt, "add_prefix_space");
		if (ap && ap->type == INFS_JSON_BOOL && ap->boolean) {
			snprintf(why, why_len, "ByteLevel with add_prefix_space");
			return -1;
		}
		return INFS_PRETOK_GPT2;
	}
	const infs__json *seq = infs__json_get(pt, "pretokenizers");
	if (strcmp(type, "Sequence") == 0 && json_type_is(seq, INFS_JSON_ARRAY) && seq->len == 2) {
		const infs__json *a = &seq->items[0], *b = &seq->items[1];
		const char *ta = infs__json_str(infs__json_get(a, "type"), "");
		const char *tb = infs__json_str(infs__json_get(b, "type"), "");
		const infs__json *ind = infs__json_get(a, "individual_digits");
		if (strcmp(ta, "Digits") == 0 && ind && ind->type == INFS_JSON_BOOL && ind->boolean &&
		    json_pretok(b, why, why_len) == INFS_PRETOK_GPT2)
			return INFS_PRETOK_DIGITS_GPT2;
		const infs__json *re = infs__json_get(b, "use_regex");
		const char *pattern = infs__json_str(infs__json_get(infs__json_get(a, "pattern"), "Regex"), NULL);
		const char *behavior = infs__json_str(infs__json_get(a, "behavior"), "");
		if (strcmp(ta, "Split") == 0 && pattern && strcmp(behavior, "Isolated") == 0 &&
		    strcmp(tb, "ByteLevel") == 0 && re && re->type == INFS_JSON_BOOL && !re->boolean) {
			int kind = infs__pretok_from_regex(pattern);
			if (kind >= 0)
				return kind;
			snprintf(why, why_len, "Split regex \"%.60s\"", pattern);
			return -1;
		}
	}
	snprintf(why, why_len, "pre_tokenizer of type %s", type);
	return -1;
}

/* NFC, alone or as the only member of a Sequence. */
static int is_nfc(const infs__json *norm)
{
	const char *type = infs__json_str(infs__json_get(norm, "type"), "");
	const infs__json *list = infs__json_get(norm, "normalizers");
	if (strcmp(type, "Sequence") == 0 && list && list->type == INFS_JSON_ARRAY && list->len == 1)
		return is_nfc(&list->items[0]);
	return strcmp(type, "NFC") == 0;
}

static const char *token_content(const infs__json *v)
{
	if (v && v->type == INFS_JSON_STRING)
		return v->string;
	return infs__json_str(infs__json_get(v, "content"), NULL);
}

/* The post-processor's BOS / EOS: a TemplateProcessing whose single-sequence
 * template starts (ends) with a special token. */
static void json_post(infs_tokenizer *tok, const infs__json *pp)
{
	const char *type = infs__json_str(infs__json_get(pp, "type"), "");
	const infs__json *list = infs__json_get(pp, "processors");
	if (strcmp(type, "Sequence") == 0 && json_type_is(list, INFS_JSON_ARRAY)) {
		for (size_t i = 0; i < list->len; i++)
			json_post(tok, &list->items[i]);
		return;
	}
	const infs__json *single = infs__json_get(pp, "single");
	if (strcmp(type, "TemplateProcessing") != 0 || !json_type_is(single, INFS_JSON_ARRAY) || single->len == 0)
		return;
	const infs__json *specials = infs__json_get(pp, "special_tokens");
	for (int end = 0; end < 2; end++) {
		const infs__json *item = &single->items[end ? single->len - 1 : 0];
		const char *name = infs__json_str(infs__json_get(infs__json_get(item, "SpecialToken"), "id"), NULL);
		const infs__json *ids = infs__json_get(infs__json_get(specials, name ? name : ""), "ids");
		if (!name || !json_type_is(ids, INFS_JSON_ARRAY) || ids->len != 1)
			continue;
		double id = infs__json_number(&ids->items[0], -1);
		if (id < 0 || id >= infs__bpe_vocab_size(tok->bpe))
			continue;
		if (end) {
			tok->add_eos = 1;
			tok->eos = (int32_t)id;
		} else {
			tok->add_bos = 1;
			tok->bos = (int32_t)id;
		}
	}
}

/* tokenizer_config.json: BOS, EOS, add_bos_token, the chat template. */
static int json_config(infs_tokenizer *tok, const char *path)
{
	infs__json *cfg;
	int rc = parse_json_file(path, &cfg);
	if (rc == INFS_ENOTFOUND)
		return INFS_OK;
	if (rc != INFS_OK)
		return rc;
	const char *names[2] = { token_content(infs__json_get(cfg, "bos_token")),
		                 token_content(infs__json_get(cfg, "eos_token")) };
	int32_t *fields[2] = { &tok->bos, &tok->eos };
	for (int i = 0; i < 2; i++) {
		if (!names[i])
			continue;
		int32_t id = infs__bpe_lookup(tok->bpe, names[i], strlen(names[i]));
		/* An added token's bytes are its content; look there first. */
		for (size_t k = 0; k < tok->n_added; k++)
			if (tok->added[k].len == strlen(names[i]) && memcmp(tok->added[k].text, names[i], tok->added[k].len) == 0)
				id = tok->added[k].id;
		if (id >= 0 && *fields[i] < 0)
			*fields[i] = id;
	}
	const infs__json *ab = infs__json_get(cfg, "add_bos_token");
	if (ab && ab->type == INFS_JSON_BOOL && ab->boolean)
		tok->add_bos = 1;
	const infs__json *t = infs__json_get(cfg, "chat_template");
	const char *tmpl = infs__json_str(t, NULL);
	if (t && t->type == INFS_JSON_ARRAY)
		for (size_t i = 0; i < t->len; i++)
			if (strcmp(infs__json_str(infs__json_get(&t->items[i], "name"), ""), "default") == 0)
				tmpl = infs__json_str(infs__json_get(&t->items[i], "template"), NULL);
	if (tmpl && !(tok->chat_template = strdup(tmpl)))
		rc = infs__error(INFS_ENOMEM, "tokenizer: no memory");
	infs__json_free(cfg);
	return rc;
}

static int load_json(infs_tokenizer **out, const char *path, const char *config_path)
{
	infs__json *root;
	int rc = parse_json_file(path, &root);
	if (rc != INFS_OK)
		return rc;
	infs_tokenizer *tok = NULL;
	char why[128];
	const infs__json *model = infs__json_get(root, "model");
	const infs__json *vocab = infs__json_get(model, "vocab");
	const infs__json *merges = infs__json_get(model, "merges");
	const infs__json *added = infs__json_get(root, "added_tokens");
	const infs__json *norm = infs__json_get(root, "normalizer");
	const infs__json *fb = infs__json_get(model, "byte_fallback");
	const char *mtype = infs__json_str(infs__json_get(model, "type"), "?");
	int kind = -1;
	if (strcmp(mtype, "BPE") != 0) {
		rc = infs__error(INFS_EUNSUPPORTED, "tokenizer: %s: model type %s is not supported (only BPE)", path, mtype);
		goto done;
	}
	if (!json_type_is(vocab, INFS_JSON_OBJECT) || !json_type_is(merges, INFS_JSON_ARRAY)) {
		rc = infs__error(INFS_EFORMAT, "tokenizer: %s: model.vocab or model.merges is missing", path);
		goto done;
	}
	int nfc = 0;
	if (norm && norm->type != INFS_JSON_NULL && !(nfc = is_nfc(norm))) {
		rc = infs__error(INFS_EUNSUPPORTED, "tokenizer: %s: normalizer %s is not supported (only NFC)", path,
		                 infs__json_str(infs__json_get(norm, "type"), "?"));
		goto done;
	}
	if (fb && fb->type == INFS_JSON_BOOL && fb->boolean) {
		rc = infs__error(INFS_EUNSUPPORTED, "tokenizer: %s: byte_fallback BPE is not supported", path);
		goto done;
	}
	if ((kind = json_pretok(infs__json_get(root, "pre_tokenizer"), why, sizeof why)) < 0) {
		rc = infs__error(INFS_EUNSUPPORTED, "tokenizer: %s: %s is not supported", path, why);
		goto done;
	}
	/* Ids are given explicitly; the vocabulary spans the largest. */
	double max_id = -1;
	for (size_t i = 0; i < vocab->len; i++)
		if (vocab->items[i].type == INFS_JSON_NUMBER && vocab->items[i].number > max_id)
			max_id = vocab->items[i].number;
	for (size_t i = 0; added && added->type == INFS_JSON_ARRAY && i < added->len; i++) {
		double id = infs__json_number(infs__json_get(&added->items[i], "id"), -1);
		if (id > max_id)
			max_id = id;
	}
	if (max_id < 0 || max_id >= INT32_MAX) {
		rc = infs__error(INFS_EFORMAT, "tokenizer: %s: no usable vocabulary", path);
		goto done;
	}
	if ((rc = new_tokenizer(&tok, (uint32_t)max_id + 1)) != INFS_OK)
		goto done;
	tok->pretok = (infs__pretok)kind;
	tok->nfc = nfc;
	const infs__json *im = infs__json_get(model, "ignore_merges");
	tok->whole_first = im && im->type == INFS_JSON_BOOL && im->boolean;
	alphabet a;
	alphabet_init(&a);
	for (size_t i = 0; i < vocab->len && rc == INFS_OK; i++) {
		double id = infs__json_number(&vocab->items[i], -1);
		if (id < 0 || id != (double)(int32_t)id) {
			rc = infs__error(INFS_EFORMAT, "tokenizer: %s: token %zu has no valid id", path, i);
			break;
		}
		rc = set_token(tok, &a, (uint32_t)id, vocab->keys[i], strlen(vocab->keys[i]), 0, 0);
	}
	for (size_t i = 0; i < merges->len && rc == INFS_OK; i++) {
		const char *l = NULL, *r = NULL;
		size_t ll = 0, rl = 0;
		if (!merge_parts(&merges->items[i], &l, &ll, &r, &rl))
			rc = infs__error(INFS_EFORMAT, "tokenizer: %s: merge %zu is malformed", path, i);
		else
			rc = add_merge(tok, &a, l, ll, r, rl, (uint32_t)i);
	}
	for (size_t i = 0; added && added->type == INFS_JSON_ARRAY && i < added->len && rc == INFS_OK; i++) {
		const infs__json *t = &added->items[i];
		const infs__json *content = infs__json_get(t, "content"), *sp = infs__json_get(t, "special");
		const infs__json *ls = infs__json_get(t, "lstrip"), *rs = infs__json_get(t, "rstrip");
		double id = infs__json_number(infs__json_get(t, "id"), -1);
		if (!json_type_is(content, INFS_JSON_STRING) || id < 0 || id != (double)(int32_t)id) {
			rc = infs__error(INFS_EFORMAT, "tokenizer: %s: added token %zu is malformed", path, i);
			break;
		}
		rc = set_token(tok, &a, (uint32_t)id, content->string, content->len, 1, sp && sp->boolean);
		if (rc == INFS_OK) {
			tok->added[tok->n_added - 1].lstrip = ls && ls->type == INFS_JSON_BOOL && ls->boolean;
			tok->added[tok->n_added - 1].rstrip = rs && rs->type == INFS_JSON_BOOL && rs->boolean;
		}
	}
	if (rc == INFS_OK) {
		finish_added(tok);
		json_post(tok, infs__json_get(root, "post_processor"));
		rc = json_config(tok, config_path);
	}
done:
	infs__json_free(root);
	if (rc != INFS_OK) {
		infs_tokenizer_free(tok);
		return rc;
	}
	*out = tok;
	return INFS_OK;
}

int infs_tokenizer_load(infs_tokenizer **out, const char *path)
{
	if (!out || !path)
		return infs__error(INFS_EINVAL, "infs_tokenizer_load: %s is NULL", out ? "path" : "out");
	*out = NULL;
	struct stat st;
	if (stat(path, &st) != 0)
		return infs__error(errno == ENOENT ? INFS_ENOTFOUND : INFS_EIO, "infs_tokenizer_load: %s: %s", path,
		                   strerror(errno));
	size_t plen = strlen(path);
	char *json_path = malloc(plen + 32), *config_path = malloc(plen + 32);
	if (!json_path || !config_path) {
		free(json_path);
		free(config_path);
		return infs__error(INFS_ENOMEM, "infs_tokenizer_load: no memory");
	}
	int rc;
	if (S_ISDIR(st.st_mode)) {
		snprintf(json_path, plen + 32, "%s/tokenizer.json", path);
		snprintf(config_path, plen + 32, "%s/tokenizer_config.json", path);
		rc = load_json(out, json_path, config_path);
	} else {
		char magic[4] = { 0 };
		int fd;
		size_t size;
		rc = infs__file_open(&fd, &size, path, UINT64_MAX);
		if (rc != INFS_OK) {
			free(json_path);
			free(config_path);
			return infs__error_wrap(rc, "infs_tokenizer_load");
		}
		int is_gguf = size >= 4 && read(fd, magic, 4) == 4 && memcmp(magic, "GGUF", 4) == 0;
		close(fd);
		if (is_gguf) {
			infs__gguf *g;
			rc = infs__gguf_open(&g, path);
			if (rc == INFS_OK) {
				rc = infs__tokenizer_from_gguf(out, g, path);
				infs__gguf_close(g);
			}
		} else {
			const char *slash = strrchr(path, '/');
			size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
			snprintf(config_path, plen + 32, "%.*stokenizer_config.json", (int)dir, path);
			rc = load_json(out, path, config_path);
		}
	}
	free(json_path);
	free(config_path);
	return rc;
}

/* ---- encoding ---- */

/* The pieces of one text already encoded, so that a repeated word is
 * copied rather than merged again (Hugging Face keeps a similar cache). A
 * slot names the piece by its place in the text and its tokens by their
 * place in the output, which only grows. */
typedef struct piece_slot {
	size_t at;      /* piece offset in the text; SIZE_MAX when the slot is empty */
	size_t ids_at;  /* first token in the output */
	uint32_t len;   /* piece bytes */
	uint32_t n_ids;
} piece_slot;

typedef struct piece_cache {
	piece_slot *slots;
	size_t cap, used; /* cap is a power of two */
} piece_cache;

typedef struct encoder {
	const infs_tokenizer *tok;
	const char *text;
	infs__ids *ids;
	infs__bpe_scratch *scratch;
	piece_cache *cache;
} encoder;

static uint64_t hash_piece(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
	return h;
}

/* The slot of piece text[at..at+len): its entry, or the empty slot for it. */
static piece_slot *cache_slot(const piece_cache *c, const char *text, size_t at, size_t len)
{
	size_t mask = c->cap - 1;
	for (size_t i = hash_piece(text + at, len) & mask;; i = (i + 1) & mask) {
		piece_slot *s = &c->slots[i];
		if (s->at == SIZE_MAX || (s->len == len && memcmp(text + s->at, text + at, len) == 0))
			return s;
	}
}

static int cache_grow(piece_cache *c, const char *text)
{
	piece_cache bigger = { NULL, c->cap ? c->cap * 2 : 1024, c->used };
	bigger.slots = malloc(bigger.cap * sizeof *bigger.slots);
	if (!bigger.slots)
		return INFS_ENOMEM;
	for (size_t i = 0; i < bigger.cap; i++)
		bigger.slots[i].at = SIZE_MAX;
	for (size_t i = 0; i < c->cap; i++)
		if (c->slots[i].at != SIZE_MAX)
			*cache_slot(&bigger, text, c->slots[i].at, c->slots[i].len) = c->slots[i];
	free(c->slots);
	*c = bigger;
	return INFS_OK;
}

static int encode_piece(void *ctx, size_t start, size_t end)
{
	encoder *e = ctx;
	piece_cache *c = e->cache;
	size_t len = end - start;
	if (len > UINT32_MAX)
		return INFS_ERANGE;
	if ((c->used + 1) * 2 > c->cap) {
		int rc = cache_grow(c, e->text);
		if (rc != INFS_OK)
			return rc;
	}
	piece_slot *slot = cache_slot(c, e->text, start, len);
	if (slot->at != SIZE_MAX) {
		int rc = INFS_OK;
		for (uint32_t k = 0; k < slot->n_ids && rc == INFS_OK; k++)
			rc = infs__ids_push(e->ids, e->ids->v[slot->ids_at + k]);
		return rc;
	}
	size_t ids_at = e->ids->n;
	int rc = infs__bpe_encode(e->tok->bpe, (const uint8_t *)e->text + start, len, e->tok->whole_first,
	                          e->scratch, e->ids);
	if (rc == INFS_OK && e->ids->n - ids_at <= UINT32_MAX) {
		*slot = (piece_slot){ start, ids_at, (uint32_t)len, (uint32_t)(e->ids->n - ids_at) };
		c->used++;
	}
	return rc;
}

/* text[0..len) in NFC, as a malloc'd string, or NULL when it is ASCII
 * (which NFC leaves alone). */
static int nfc_text(const char *text, size_t len, char **out, size_t *out_len)
{
	*out = NULL;
	size_t i = 0;
	while (i < len && (uint8_t)text[i] < 0x80)
		i++;
	if (i == len)
		return INFS_OK;
	/* A code point decomposes into at most 4, and one takes at most 4 bytes. */
	uint32_t *cps = malloc((len * (INFS_UC_MAX_DECOMP + 1) + 1) * sizeof *cps);
	char *buf = malloc(4 * len + 1);
	if (!cps || !buf) {
		free(cps);
		free(buf);
		return INFS_ENOMEM;
	}
	uint32_t *in = cps + len * INFS_UC_MAX_DECOMP;
	size_t n = 0;
	for (i = 0; i < len;) {
		int k = infs__utf8_decode((const uint8_t *)text + i, len - i, &in[n++]);
		i += (size_t)(k < 0 ? -k : k);
	}
	size_t m = infs__uc_compose(cps, infs__uc_nfd(in, n, cps, len * INFS_UC_MAX_DECOMP));
	size_t bytes = 0;
	for (i = 0; i < m; i++)
		bytes += infs__utf8_encode(cps[i], (uint8_t *)buf + bytes);
	free(cps);
	*out = buf;
	*out_len = bytes;
	return INFS_OK;
}

static int encode_plain(encoder *e, size_t start, size_t end)
{
	const char *text = e->text + start;
	size_t len = end - start;
	char *norm = NULL;
	if (e->tok->nfc) {
		int rc = nfc_text(text, len, &norm, &len);
		if (rc != INFS_OK)
			return rc;
		if (norm)
			text = norm;
	}
	/* The cache refers to this text, so it lives as long as the text. */
	piece_cache cache = { 0 };
	encoder sub = { e->tok, text, e->ids, e->scratch, &cache };
	int rc = infs__pretokenize(e->tok->pretok, text, len, encode_piece, &sub);
	free(cache.slots);
	free(norm);
	return rc;
}

/* Length of the whitespace character ending at text + end (> start), or 0. */
static size_t space_before(const char *text, size_t start, size_t end)
{
	size_t b = end - 1;
	while (b > start && end - b < 4 && ((uint8_t)text[b] & 0xc0) == 0x80)
		b--;
	uint32_t cp;
	int k = infs__utf8_decode((const uint8_t *)text + b, end - b, &cp);
	return k > 0 && b + (size_t)k == end && infs__uc_is_space(cp) ? (size_t)k : 0;
}

/* Length of the whitespace character at text + i (< len), or 0. */
static size_t space_at(const char *text, size_t len, size_t i)
{
	uint32_t cp;
	int k = infs__utf8_decode((const uint8_t *)text + i, len - i, &cp);
	return k > 0 && infs__uc_is_space(cp) ? (size_t)k : 0;
}

/* The longest added token at text + i, or NULL. */
static const infs__added_token *match_added(const infs_tokenizer *tok, const char *text, size_t len, size_t i,
                                            int parse_special)
{
	/* added is sorted by first byte, then longest first. */
	size_t lo = 0, hi = tok->n_added;
	uint8_t c = (uint8_t)text[i];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (tok->added[mid].text[0] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo; k < tok->n_added && tok->added[k].text[0] == c; k++) {
		const infs__added_token *t = &tok->added[k];
		if ((parse_special || !t->special) && t->len <= len - i && memcmp(text + i, t->text, t->len) == 0)
			return t;
	}
	return NULL;
}

static int encode(const infs_tokenizer *tok, const char *text, size_t len, unsigned flags, infs__ids *ids)
{
	int rc = INFS_OK;
	if ((flags & INFS_TOKENIZE_ADD_SPECIAL) && tok->add_bos && tok->bos >= 0)
		rc = infs__ids_push(ids, tok->bos);
	infs__bpe_scratch scratch = { 0 };
	encoder e = { tok, text, ids, &scratch, NULL };
	size_t seg = 0, i = 0;
	int parse_special = (flags & INFS_TOKENIZE_PARSE_SPECIAL) != 0;
	while (rc == INFS_OK && i < len) {
		const infs__added_token *t = tok->n_added ? match_added(tok, text, len, i, parse_special) : NULL;
		if (!t) {
			i++;
			continue;
		}
		size_t end = i, k;
		if (t->lstrip)
			while (end > seg && (k = space_before(text, seg, end)) > 0)
				end -= k;
		rc = encode_plain(&e, seg, end);
		if (rc == INFS_OK)
			rc = infs__ids_push(ids, t->id);
		i += t->len;
		if (t->rstrip)
			while (i < len && (k = space_at(text, len, i)) > 0)
				i += k;
		seg = i;
	}
	if (rc == INFS_OK)
		rc = encode_plain(&e, seg, len);
	if (rc == INFS_OK && (flags & INFS_TOKENIZE_ADD_SPECIAL) && tok->add_eos && tok->eos >= 0)
		rc = infs__ids_push(ids, tok->eos);
	infs__bpe_scratch_free(&scratch);
	return rc;
}

/* When text is not well-formed UTF-8, a copy with each maximal ill-formed
 * subpart replaced by U+FFFD (Python's errors="replace", so that the tokens
 * are those transformers gives for the text Python decodes); else NULL. */
static int replace_invalid(const char *text, size_t len, char **out, size_t *out_len)
{
	const uint8_t *s = (const uint8_t *)text;
	size_t i = 0, bad = 0;
	uint32_t cp;
	while (i < len) {
		int k = infs__utf8_decode(s + i, len - i, &cp);
		bad += k < 0;
		i += (size_t)(k < 0 ? -k : k);
	}
	*out = NULL;
	if (!bad)
		return INFS_OK;
	/* Each replacement (3 bytes) stands for at least one byte. */
	char *buf = malloc(len + 2 * bad + 1);
	if (!buf)
		return INFS_ENOMEM;
	size_t n = 0;
	for (i = 0; i < len;) {
		int k = infs__utf8_decode(s + i, len - i, &cp);
		if (k > 0) {
			memcpy(buf + n, s + i, (size_t)k);
			n += (size_t)k;
			i += (size_t)k;
		} else {
			memcpy(buf + n, "\xef\xbf\xbd", 3);
			n += 3;
			i += (size_t)-k;
		}
	}
	*out = buf;
	*out_len = n;
	return INFS_OK;
}

int infs_tokenize(const infs_tokenizer *tok, const char *text, size_t len, unsigned flags, infs_token *out,
                  size_t cap, size_t *n_out)
{
	if (!tok || !n_out || (!text && len) || (!out && cap))
		return infs__error(INFS_EINVAL, "infs_tokenize: %s is NULL",
		                   !tok ? "tok" : !n_out ? "n_out" : !out ? "out" : "text");
	if (flags & ~(unsigned)(INFS_TOKENIZE_ADD_SPECIAL | INFS_TOKENIZE_PARSE_SPECIAL))
		return infs__error(INFS_EINVAL, "infs_tokenize: unknown flags 0x%x", flags);
	infs__ids ids = { 0 };
	char *valid = NULL;
	int rc = replace_invalid(text ? text : "", len, &valid, &len);
	if (rc == INFS_OK)
		rc = encode(tok, valid ? valid : text ? text : "", len, flags, &ids);
	free(valid);
	if (rc != INFS_OK) {
		free(ids.v);
		return infs__error(rc, "infs_tokenize: %s", rc == INFS_ENOMEM ? "no memory" : "cannot encode the text");
	}
	*n_out = ids.n;
	if (!out && cap == 0) {
		free(ids.v);
		return INFS_OK;
	}
	if (ids.n > cap) {
		free(ids.v);
		return infs__error(INFS_ERANGE, "infs_tokenize: %zu tokens do not fit in %zu", *n_out, cap);
	}
	if (ids.n)
		memcpy(out, ids.v, ids.n * sizeof *out);
	free(ids.v);
	return INFS_OK;
}

int infs_detokenize(const infs_tokenizer *tok, const infs_token *tokens, size_t n, unsigned flags, char *out,
                    size_t cap, size_t *n_out)
{
	if (!tok || !n_out || (!tokens && n) || (!out && cap))
		return infs__error(INFS_EINVAL, "infs_detokenize: %s is NULL",
		                   !tok ? "tok" : !n_out ? "n_out" : !out ? "out" : "tokens");
	if (flags & ~(unsigned)INFS_DETOKENIZE_SKIP_SPECIAL)
		return infs__error(INFS_EINVAL, "infs_detokenize: unknown flags 0x%x", flags);
	uint32_t n_vocab = infs__bpe_vocab_size(tok->bpe);
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (tokens[i] < 0 || (uint32_t)tokens[i] >= n_vocab)
			return infs__error(INFS_EINVAL, "infs_detokenize: token %zu is %d, outside the vocabulary of %u", i,
			                   (int)tokens[i], n_vocab);
		size_t len;
		infs__bpe_token(tok->bpe, (uint32_t)tokens[i], &len);
		if (!((flags & INFS_DETOKENIZE_SKIP_SPECIAL) && tok->special[tokens[i]]))
			total += len;
	}
	*n_out = total;
	if (!out && cap == 0)
		return INFS_OK;
	if (total >= cap)
		return infs__error(INFS_ERANGE, "infs_detokenize: %zu bytes and a NUL do not fit in %zu", total, cap);
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		if ((flags & INFS_DETOKENIZE_SKIP_SPECIAL) && tok->special[tokens[i]])
			continue;
		size_t len;
		const uint8_t *p = infs__bpe_token(tok->bpe, (uint32_t)tokens[i], &len);
		memcpy(out + at, p, len);
		at += len;
	}
	out[at] = '\0';
	return INFS_OK;
}

int infs_token_to_piece(const infs_tokenizer *tok, infs_token token, char *out, size_t cap, size_t *n_out)
{
	return infs_detokenize(tok, &token, 1, 0, out, cap, n_out);
}

infs_token infs_tokenizer_bos(const infs_tokenizer *tok)
{
	return tok ? tok->bos : -1;
}

infs_token infs_tokenizer_eos(const infs_tokenizer *tok)
{
	return tok ? tok->eos : -1;
}

size_t infs_tokenizer_vocab_size(const infs_tokenizer *tok)
{
	return tok ? infs__bpe_vocab_size(tok->bpe) : 0;
}

int infs_tokenizer_is_special(const infs_tokenizer *tok, infs_token token)
{
	return tok && token >= 0 && (uint32_t)token < infs__bpe_vocab_size(tok->bpe) && tok->special[token];
}

/* How many tokens facts may take in the engine's prompt: the limit a fact
 * is checked against before it is stored (infs_engine_fact_limit,
 * infs_engine_fact_check), and, at each question, the retrieved facts that
 * fit next to it (infs__fit_facts), so that one over-long stored fact never
 * makes every question of its namespace fail. */
#include <ctype.h>
#include <string.h>

#include "engine/fit.h"
#include "store/store.h"
#include "util/error.h"

/* Positions one sequence holds: n_ctx rounded up to whole blocks. */
static uint32_t capacity(const infs_engine *e)
{
	return e->dev ? e->seq_blocks * e->block_size : e->cache.capacity;
}

/* Tokens of text as facts are tokenized (no BOS, special tokens as text). */
static int count_tokens(size_t *out, const infs_engine *e, const char *text, unsigned flags)
{
	const infs_tokenizer *tok = infs_model_tokenizer(e->model);
	if (!tok)
		return infs__error(INFS_EUNSUPPORTED, "the model has no tokenizer");
	return infs_tokenize(tok, text, strlen(text), flags, NULL, 0, out);
}

int infs_engine_fact_limit(uint32_t *out, const infs_engine *e)
{
	if (!out || !e)
		return infs__error(INFS_EINVAL, "infs_engine_fact_limit: %s is NULL", out ? "engine" : "out_tokens");
	int rc = infs__engine_need_prompt(e, "infs_engine_fact_limit");
	size_t n_suffix = 0;
	if (!rc)
		rc = count_tokens(&n_suffix, e, e->prompt.suffix, INFS_TOKENIZE_PARSE_SPECIAL);
	if (rc)
		return infs__error_wrap(rc, "infs_engine_fact_limit");
	uint64_t fixed = (uint64_t)e->prompt.n_header + e->prompt.n_footer + n_suffix + INFS_ENGINE_QUESTION_ROOM;
	*out = capacity(e) > fixed ? (uint32_t)(capacity(e) - fixed) : 0;
	return INFS_OK;
}

int infs_engine_fact_check(uint32_t *out, const infs_engine *e, const char *text, const char *metadata)
{
	if (!e || !text)
		return infs__error(INFS_EINVAL, "infs_engine_fact_check: %s is NULL", e ? "text" : "engine");
	const char *t = text;
	while (*t && isspace((unsigned char)*t))
		t++;
	if (!*t)
		return infs__error(INFS_EINVAL, "the fact is %s: give it some text", *text ? "only white space" : "empty");
	uint32_t limit = 0;
	int rc = infs_engine_fact_limit(&limit, e);
	if (rc)
		return rc;
	char *rendered = NULL;
	size_t n = 0;
	if ((rc = infs_fact_render(&rendered, text, metadata)))
		return infs__error_wrap(rc, "infs_engine_fact_check");
	rc = count_tokens(&n, e, rendered, 0);
	infs_free(rendered);
	if (rc)
		return infs__error_wrap(rc, "infs_engine_fact_check");
	if (out)
		*out = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	if (n > limit)
		return infs__error(INFS_ERANGE, "the fact has %zu tokens; the engine's context holds %u (n_ctx) with room "
		                   "for the header and a question, which leaves %u for a fact: split the fact or raise n_ctx",
		                   n, capacity(e), limit);
	return INFS_OK;
}

int infs__fit_facts(infs_hit *hits, size_t *n, size_t *n_left_out, const infs_engine *e, infs_store *store,
                    const char *ns, uint32_t n_question, const infs_ask_options *o)
{
	/* n_question counts the footer, prefilled with the question. */
	const uint64_t fixed = (uint64_t)e->prompt.n_header + n_question + 1;
	uint64_t room = capacity(e) > fixed ? capacity(e) - fixed : 0;
	/* Recovery on a device runs the facts' rows (and the question's, to
	 * weigh them) in one step of the model. */
	if (e->dev && !o->full_recompute && o->recompute_ratio > 0.0f) {
		const uint64_t used = o->query_weight > 0.0f ? n_question : 0;
		const uint64_t step = e->ops->max_tokens(e->dev), rows = step > used ? step - used : 0;
		if (rows < room)
			room = rows;
	}
	size_t kept = 0;
	uint64_t taken = 0;
	int rc = INFS_OK;
	infs__store_read_lock(store);
	for (size_t i = 0; i < *n && !rc; i++) {
		infs__record r;
		if ((rc = infs__store_find(&r, store, ns, hits[i].id)))
			break;
		if (taken + r.n_tokens <= room) {
			taken += r.n_tokens;
			hits[kept++] = hits[i];
		}
	}
	infs__store_read_unlock(store);
	if (rc)
		return rc;
	*n_left_out = *n - kept;
	*n = kept;
	return INFS_OK;
}

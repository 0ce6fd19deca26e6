/* The tokens of a composed prompt read from the store: the facts' (for
 * accuracy recovery), and the whole prompt of full recompute (header,
 * facts, question), one builder for the single ask and the batch. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "store/store.h"
#include "util/error.h"

/* The composed prompt's fact tokens, injection order:
 * read in place under the store's read lock, never copying a record's KV.
 * lens (NULL, or n counts): each fact's token count. */
int infs__fact_tokens(int32_t **out, uint32_t *n_out, uint32_t *lens, infs_store *store, const char *ns,
                      const uint64_t *order, size_t n)
{
	int32_t *all = NULL;
	size_t len = 0;
	int rc = INFS_OK;
	infs__store_read_lock(store);
	for (size_t i = 0; i < n && !rc; i++) {
		infs__record r;
		rc = infs__store_find(&r, store, ns, order[i]);
		int32_t *grown = rc ? NULL : realloc(all, (len + r.n_tokens) * sizeof *all);
		if (!rc && !grown)
			rc = infs__error(INFS_ENOMEM, "out of memory for the prompt");
		if (!rc) {
			all = grown;
			memcpy(all + len, r.tokens, r.n_tokens * sizeof *all);
			len += r.n_tokens;
			if (lens)
				lens[i] = r.n_tokens;
		}
	}
	infs__store_read_unlock(store);
	if (rc) {
		free(all);
		return rc;
	}
	*out = all;
	*n_out = (uint32_t)len;
	return INFS_OK;
}

int infs__full_prompt(int32_t **out, uint32_t *n_out, uint32_t *n_fact_tokens, const infs_engine *e,
                      infs_store *store, const char *ns, const uint64_t *order, size_t n, const int32_t *qt,
                      uint32_t nq)
{
	int32_t *ft = NULL;
	uint32_t nf = 0;
	int rc = infs__fact_tokens(&ft, &nf, NULL, store, ns, order, n);
	if (rc)
		return rc;
	const size_t total = (size_t)e->prompt.n_header + nf + nq;
	int32_t *all = total <= UINT32_MAX ? malloc((total ? total : 1) * sizeof *all) : NULL;
	if (!all) {
		free(ft);
		return infs__error(total > UINT32_MAX ? INFS_ERANGE : INFS_ENOMEM,
		                   "infs_engine_ask: no room for a prompt of %zu tokens", total);
	}
	memcpy(all, e->prompt.header, e->prompt.n_header * sizeof *all);
	if (nf)
		memcpy(all + e->prompt.n_header, ft, nf * sizeof *all);
	if (nq)
		memcpy(all + e->prompt.n_header + nf, qt, nq * sizeof *all);
	free(ft);
	*out = all;
	*n_out = (uint32_t)total;
	if (n_fact_tokens)
		*n_fact_tokens = nf;
	return INFS_OK;
}

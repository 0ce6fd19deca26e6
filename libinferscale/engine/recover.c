/* Accuracy recovery of an injected prompt: the facts' tokens recomputed
 * in place, in the host engine's cache or the block pool's. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "util/error.h"

/* Accuracy recovery after the injection of header and facts
 * (order[0..nh)): the facts' tokens, which lie right after the header,
 * recomputed in place (infs__recompute). With recompute_ratio 0
 * only each chunk's first prefix_tokens run, through every layer; else all
 * run through the check layer, where the prefixes are kept and the
 * ratio's share (at least the prefixes) is filled by score. The question's
 * tokens qt[0..nq) help score with query_weight. In the block pool the
 * sequence's blocks are table (host memory); table NULL: the host engine's
 * own cache. With table and logits set, the question's prefill goes in the
 * same pass when rows and question fit one step (*prefilled then set). */
int infs__recover(infs_answer *a, infs_engine *e, infs_store *store, const char *ns, const uint64_t *order,
                  size_t nh, const int32_t *qt, uint32_t nq, const infs_ask_options *o, uint32_t n_past,
                  const int32_t *table, float *logits, int *prefilled)
{
	if (prefilled)
		*prefilled = 0;
	int32_t *ft = NULL, *tok = NULL, *pos = NULL;
	uint8_t *forced = NULL;
	uint32_t nf = 0, *lens = malloc((nh ? nh : 1) * sizeof *lens);
	int rc = lens ? infs__fact_tokens(&ft, &nf, lens, store, ns, order, nh)
	              : infs__error(INFS_ENOMEM, "infs_engine_ask: out of memory");
	if (rc) {
		free(lens);
		return rc;
	}
	const uint32_t first = e->prompt.n_header, n = nf;
	if (first + n != n_past) {
		free(ft);
		free(lens);
		return infs__error(INFS_EFORMAT, "infs_engine_ask: the injected prompt holds %u positions, its tokens %u",
		                   n_past, first + n);
	}
	tok = malloc((n ? n : 1) * sizeof *tok);
	pos = malloc((n ? n : 1) * sizeof *pos);
	forced = calloc(n ? n : 1, 1);
	if (!tok || !pos || !forced) {
		rc = infs__error(INFS_ENOMEM, "infs_engine_ask: out of memory");
	} else {
		if (nf)
			memcpy(tok, ft, nf * sizeof *tok);
		uint32_t n_forced = 0;
		for (uint32_t c = 0, at = 0; c < nh; at += lens[c++])
			for (uint32_t j = 0; j < lens[c] && j < o->prefix_tokens; j++, n_forced++)
				forced[at + j] = 1;
		uint32_t rows = 0;
		for (uint32_t i = 0; i < n; i++)
			if (o->recompute_ratio > 0.0f || forced[i]) { /* ratio 0: only the prefixes run */
				tok[rows] = tok[i];
				pos[rows++] = (int32_t)(first + i);
			}
		uint32_t keep = (uint32_t)((double)o->recompute_ratio * n + 0.5);
		keep = o->recompute_ratio > 0.0f ? (keep < n_forced ? n_forced : keep < n ? keep : n) : rows;
		infs__paged_kv past = { &e->cache.layout, e->cache.table, e->cache.layout.n_blocks, n_past, 1 };
		infs__calib calib;
		const int calibrated = infs__calib_of(&calib, o, nh, first, n_past);
		infs__recompute_args ra = { .tokens = tok, .positions = pos, .n_tokens = rows,
			                    .check_layer = o->check_layer, .n_keep = keep,
			                    .forced = o->recompute_ratio > 0.0f ? forced : NULL, .query = qt,
			                    .n_query = nq, .query_weight = o->query_weight,
			                    .past = &past, .pool = e->pool };
		/* One pass over the weights instead of two. */
		const int fuse = table && logits && prefilled && rows && nq &&
		                 (uint64_t)rows + nq <= e->batch_ops->max_tokens(e->batch);
		ra.calib = fuse && calibrated ? &calib : NULL; /* the question's rows, when they run here */
		if (rows && table)
			rc = e->batch_ops->recompute(e->batch, &ra, table, n_past, fuse ? logits : NULL);
		else if (rows)
			rc = infs__recompute(e->model, &ra);
		a->n_recomputable = n;
		/* A check layer that is the last lets every row through every layer. */
		a->n_recomputed = o->check_layer + 1 == e->geom.n_layers ? rows : ra.n_keep;
		if (!rc && fuse)
			*prefilled = 1;
	}
	free(ft);
	free(lens);
	free(tok);
	free(pos);
	free(forced);
	return rc;
}

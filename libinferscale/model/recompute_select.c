/* The selection of accuracy recovery and the checks of its arguments,
 * shared by the host (model/forward.c) and the device
 * (model/forward_device.c) recompute. */
#include <math.h>
#include <stdlib.h>

#include "model/recompute_select.h"
#include "util/error.h"

int infs__recompute_check(const infs_model *m, const infs__recompute_args *a, const char *fn)
{
	const infs__model_config *c = &m->cfg;
	const infs__paged_kv *pk = a->past;
	if (!pk || !pk->cache || !pk->write || !a->positions || !a->tokens)
		return infs__error(INFS_EINVAL, "%s: needs tokens, explicit positions and a written cache", fn);
	if (a->n_tokens == 0)
		return infs__error(INFS_EINVAL, "%s: no tokens", fn);
	if (a->check_layer >= c->n_layers || a->n_keep > a->n_tokens)
		return infs__error(INFS_ERANGE, "%s: check layer %u of %u, keep %u of %u", fn, a->check_layer,
		                   c->n_layers, a->n_keep, a->n_tokens);
	if (!(a->query_weight >= 0.0f && a->query_weight <= 1.0f) || (a->query_weight > 0 && (!a->query || !a->n_query)))
		return infs__error(INFS_EINVAL, "%s: query weight %g with %u question tokens", fn,
		                   (double)a->query_weight, a->query ? a->n_query : 0);
	uint32_t n_forced = 0;
	for (uint32_t i = 0; a->forced && i < a->n_tokens; i++)
		n_forced += a->forced[i] != 0;
	if (n_forced > a->n_keep)
		return infs__error(INFS_ERANGE, "%s: %u forced rows, keep %u", fn, n_forced, a->n_keep);
	for (uint32_t i = 0; i < a->n_tokens; i++) {
		if (a->tokens[i] < 0 || (uint32_t)a->tokens[i] >= c->n_vocab)
			return infs__error(INFS_ERANGE, "%s: token %u is %d, not in 0..%u", fn, i, a->tokens[i],
			                   c->n_vocab - 1);
		if (a->positions[i] < 0 || (uint32_t)a->positions[i] >= pk->n_past)
			return infs__error(INFS_ERANGE, "%s: position %d is not in the cache's %u", fn, a->positions[i],
			                   pk->n_past);
	}
	for (uint32_t i = 0; a->query_weight > 0 && i < a->n_query; i++)
		if (a->query[i] < 0 || (uint32_t)a->query[i] >= c->n_vocab)
			return infs__error(INFS_ERANGE, "%s: question token %u is %d, not in 0..%u", fn, i, a->query[i],
			                   c->n_vocab - 1);
	return INFS_OK;
}

/* A row's score at the check layer. */
typedef struct scored_row {
	float score;
	int32_t pos;
	uint32_t row;
} scored_row;

/* Highest score first; equal ones by position, then row. */
static int score_cmp(const void *x, const void *y)
{
	const scored_row *a = x, *b = y;
	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	if (a->pos != b->pos)
		return a->pos < b->pos ? -1 : 1;
	return a->row < b->row ? -1 : a->row > b->row;
}

static int row_cmp(const void *x, const void *y)
{
	const scored_row *a = x, *b = y;
	return a->row < b->row ? -1 : a->row > b->row;
}

int infs__recompute_select(uint32_t *keep, const float *dev, const double *mass, const int32_t *pos,
                           const uint8_t *forced, uint32_t n, uint32_t n_keep, float w)
{
	scored_row *rows = malloc((n ? n : 1) * sizeof *rows);
	if (!rows)
		return infs__error(INFS_ENOMEM, "accuracy recovery: out of memory for %u rows", n);
	double dmax = 0, amax = 0;
	for (uint32_t i = 0; i < n; i++) {
		dmax = dev[i] > dmax ? dev[i] : dmax;
		amax = mass && mass[i] > amax ? mass[i] : amax;
	}
	for (uint32_t i = 0; i < n; i++) {
		/* w = 0: the bare deviation, so the order is exactly CacheBlend's. */
		double d = dmax > 0 ? dev[i] / dmax : 0, q = amax > 0 ? mass[i] / amax : 0;
		rows[i] = (scored_row){ w > 0 ? (float)((1.0 - w) * d + w * q) : dev[i], pos[i], i };
		if (forced && forced[i])
			rows[i].score = INFINITY;
	}
	qsort(rows, n, sizeof *rows, score_cmp);
	qsort(rows, n_keep, sizeof *rows, row_cmp);
	for (uint32_t i = 0; i < n_keep; i++)
		keep[i] = rows[i].row;
	free(rows);
	return INFS_OK;
}

/* What the host and the device recompute share (infs__recompute,
 * infs__recompute_device; model/forward.h gives their semantics): the
 * checks of their arguments and the choice, at the check layer, of the
 * rows that go on. One function for both, so that the same scores keep the
 * same rows wherever the layers ran. */
#ifndef INFS_RECOMPUTE_SELECT_H
#define INFS_RECOMPUTE_SELECT_H

#include <stdint.h>

#include "model/forward.h"

/* The checks both paths make before anything runs: a written cache and
 * explicit positions, every one below past->n_past, the check layer, keep
 * and the forced rows, the question's weight and tokens, token ids. The
 * cache itself is the caller's to check (host or device). */
int infs__recompute_check(const infs_model *m, const infs__recompute_args *a, const char *fn);

/* The n_keep rows of n that go on past the check layer, into keep[] in
 * increasing row order. dev[i]: row i's squared key deviation; mass (NULL
 * without a question, else per row): the attention mass the question gives
 * row i's position; pos[i]: its position. The score is dev, or with w > 0
 * (1 - w) dev / max dev + w mass / max mass; forced rows score above all;
 * ties go to the lower position, then the lower row: a total order, so the
 * choice is deterministic. n_keep <= n. */
int infs__recompute_select(uint32_t *keep, const float *dev, const double *mass, const int32_t *pos,
                           const uint8_t *forced, uint32_t n, uint32_t n_keep, float w);

#endif

/* How much of the engine's context facts may take (fit.c). */
#ifndef INFS_FIT_H
#define INFS_FIT_H

#include "engine/engine_impl.h"

/* Keeps, of hits[0..*n) (best first), the best-ranked facts of namespace
 * ns whose tokens fit the context next to header, footer and a question of
 * n_question tokens (with its suffix) and the answer's first token, in
 * rank order; *n becomes their number and *n_left_out the number dropped.
 * Options o (taken) add the device's step limit when accuracy recovery
 * runs the facts' rows there. */
int infs__fit_facts(infs_hit *hits, size_t *n, size_t *n_left_out, const infs_engine *e, infs_store *store,
                    const char *ns, uint32_t n_question, const infs_ask_options *o);

#endif

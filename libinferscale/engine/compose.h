/* The prompt layout of the engine (see infs_engine_options). */
#ifndef INFS_COMPOSE_H
#define INFS_COMPOSE_H

#include "inferscale/engine.h"

typedef struct infs__compose {
	int32_t *header;   /* system turn up to the facts */
	uint32_t n_header;
	int32_t *footer;   /* from the end of the facts to the question */
	uint32_t n_footer;
	char *suffix;      /* template text after the question (the assistant turn's opening) */
} infs__compose;

/* Renders the model's chat template around markers and tokenizes the
 * pieces. system and intro NULL: the defaults. */
int infs__compose_init(infs__compose *c, const infs_model *model, const char *system, const char *intro);
void infs__compose_free(infs__compose *c);

/* What the engine prefills after the facts: the footer's tokens, the
 * question's, the suffix's. The footer is prefilled, not injected, so that
 * its KV sees the facts as full recompute's does (a footer encoded after
 * the header alone moved the first token even with one fact injected
 * where it was encoded). *out released with free(). */
int infs__compose_question(int32_t **out, uint32_t *n_out, const infs__compose *c, const infs_model *model,
                           const char *question);

/* What tests read of an engine: its cache and its prompt layout. */
typedef struct infs__engine_view {
	const infs_kv_layout *layout;
	const int32_t *table;
	const infs__compose *prompt;
} infs__engine_view;

const infs__engine_view *infs__engine_view_of(const infs_engine *e);

#endif

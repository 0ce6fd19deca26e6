/* What the tool tells a user about the next step (cli_hints.c). */
#ifndef CLI_HINTS_H
#define CLI_HINTS_H

#include "inferscale/inferscale.h"

/* 0 when path exists; else says to run encode first and returns 1. */
int cli_need_store(const char *path);
/* 0 when the model (what: "model") or embedder at path exists; else says
 * how to get the default models and returns 1. option: what gives another. */
int cli_need_model(const char *path, const char *what, const char *option);
/* A warning on stderr for each namespace of ns[0..n) (once each) that
 * holds no facts: its answers come from the model alone. */
void cli_warn_empty(infs_store *store, const char *const *ns, size_t n);
/* A warning on stderr when facts of answer x were left out of its prompt. */
void cli_warn_left_out(const infs_answer *x, uint32_t n_ctx);

#endif

/* Internals of the embedder handle that tests reach. */
#ifndef INFS_EMBEDDER_H
#define INFS_EMBEDDER_H

#include <stdint.h>

#include "inferscale/embedder.h"

/* The token ids infs_embed encodes for text (no prompt): room for
 * infs_embedder_max_seq_length ids. INFS_ENOMEM only. */
int infs__embedder_tokenize(const infs_embedder *e, const char *text, int32_t *ids, uint32_t *n);

#endif

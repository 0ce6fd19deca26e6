/* inferscale — GPU-native memory injection for personalized LLM serving.
 * The one header to include. See docs/abi.md for the conventions. */
#ifndef INFERSCALE_H
#define INFERSCALE_H

#include "inferscale/common.h"
#include "inferscale/geometry.h"
#include "inferscale/store.h"
#include "inferscale/retrieve.h"
#include "inferscale/inject.h"
#include "inferscale/model.h"
#include "inferscale/tokenizer.h"
#include "inferscale/embedder.h"

#endif

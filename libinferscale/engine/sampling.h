/* Next-token sampling: greedy, or temperature with nucleus (top-p)
 * truncation from a seeded generator. */
#ifndef INFS_SAMPLING_H
#define INFS_SAMPLING_H

#include <stdint.h>

typedef struct infs__sampler {
	float temperature; /* <= 0: greedy */
	float top_p;       /* (0, 1] */
	uint64_t state;    /* splitmix64 state */
	float *prob;       /* n_vocab floats of work space */
	int32_t *order;    /* n_vocab ids of work space */
	uint32_t n_vocab;
} infs__sampler;

int infs__sampler_init(infs__sampler *s, uint32_t n_vocab, float temperature, float top_p, uint64_t seed);
void infs__sampler_free(infs__sampler *s);

/* The highest logit's id; the lowest id among equals. */
int32_t infs__argmax(const float *logits, uint32_t n);

/* Draws the next token from logits. */
int32_t infs__sample(infs__sampler *s, const float *logits);

#endif

/* How far an answer is from a reference answer to the same question (bench
 * and eval: injection against full recompute, full recompute in two steps
 * against one, one store's dtype against another's). */
#ifndef DIVERGENCE_H
#define DIVERGENCE_H

#include <stddef.h>

#include "inferscale/inferscale.h"

typedef struct divergence {
	int top1; /* the most likely first tokens are the same */
	int same; /* the whole answers are the same */
	double kl; /* KL(ref || x) of the first token's distributions, nats */
} divergence;

/* x against ref, answers of the same model. */
divergence answer_divergence(const infs_answer *ref, const infs_answer *x);

/* Divergences summed over questions, reported as means. */
typedef struct divergence_sum {
	size_t top1, same;
	double kl;
} divergence_sum;

/* Adds x against ref to s; returns the divergence added. */
divergence divergence_add(divergence_sum *s, const infs_answer *ref, const infs_answer *x);

#endif

/* The metrics of `inferscale eval` (docs/eval.md): SQuAD-style token F1,
 * recall of LoCoMo evidence turns, and a seeded sample of questions. */
#ifndef EVAL_METRICS_H
#define EVAL_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* Token F1 of answer pred against gold, in [0, 1], after SQuAD's
 * normalisation of both: ASCII lowercase, ASCII punctuation removed, the
 * words a, an and the removed, split on blanks. Two empty answers score 1,
 * one empty answer 0. Returns 0, or -1 when out of memory. */
int eval_f1(double *out, const char *pred, const char *gold);

/* The dia ids (turns such as "D1:3") of gold[0..n_gold), counted in *total,
 * and how many of them are among those of have[0..n_have) (the return
 * value). Each string may hold several ids separated by ';', ',' or
 * blanks. */
size_t eval_evidence_found(size_t *total, const char *const *gold, size_t n_gold, const char *const *have,
                           size_t n_have);

/* k distinct indices of 0..n-1 (k <= n), increasing, into out: the same for
 * the same seed. */
void eval_sample(size_t *out, size_t n, size_t k, uint64_t seed);

#endif

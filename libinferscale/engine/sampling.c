/* Next-token sampling. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "engine/sampling.h"
#include "util/splitmix.h"

int infs__sampler_init(infs__sampler *s, uint32_t n_vocab, float temperature, float top_p, uint64_t seed)
{
	memset(s, 0, sizeof *s);
	s->temperature = temperature;
	s->top_p = top_p;
	s->state = seed;
	s->n_vocab = n_vocab;
	if (temperature > 0) {
		s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
		s->order = malloc((size_t)n_vocab * sizeof *s->order);
		if (!s->prob || !s->order) {
			infs__sampler_free(s);
			return infs__error(INFS_ENOMEM, "sampler: out of memory for %u logits", n_vocab);
		}
	}
	return INFS_OK;
}

void infs__sampler_free(infs__sampler *s)
{
	free(s->prob);
	free(s->order);
	s->prob = NULL;
	s->order = NULL;
}

int32_t infs__argmax(const float *logits, uint32_t n)
{
	uint32_t best = 0;
	for (uint32_t i = 1; i < n; i++)
		if (logits[i] > logits[best])
			best = i;
	return (int32_t)best;
}

/* qsort's comparator takes no argument: the probabilities it sorts by are
 * passed per thread. */
static _Thread_local const float *sort_prob;

/* Descending probability; ties by increasing id, so the order is total. */
static int by_prob(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	float px = sort_prob[x], py = sort_prob[y];
	return px > py ? -1 : px < py ? 1 : (x > y) - (x < y);
}

int32_t infs__sample(infs__sampler *s, const float *logits)
{
	uint32_t n = s->n_vocab;
	if (s->temperature <= 0)
		return infs__argmax(logits, n);
	float mx = logits[infs__argmax(logits, n)];
	double sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		s->prob[i] = expf((logits[i] - mx) / s->temperature);
		sum += s->prob[i];
	}
	uint32_t keep = n;
	for (uint32_t i = 0; i < n; i++)
		s->order[i] = (int32_t)i;
	if (s->top_p < 1) {
		sort_prob = s->prob;
		qsort(s->order, n, sizeof *s->order, by_prob);
		double acc = 0;
		for (keep = 0; keep < n;) {
			acc += s->prob[s->order[keep++]];
			if (acc >= s->top_p * sum)
				break;
		}
		sum = acc;
	}
	double u = (double)(infs__splitmix64(&s->state) >> 11) * 0x1.0p-53 * sum, acc = 0;
	for (uint32_t i = 0; i < keep; i++) {
		acc += s->prob[s->order[i]];
		if (u < acc)
			return s->order[i];
	}
	return s->order[keep - 1];
}

#include "divergence.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* KL(p || q) of the softmax distributions of logits lp and lq, in nats. */
static double kl_logits(const float *lp, const float *lq, uint32_t n)
{
	double mp = lp[0], mq = lq[0], zp = 0, zq = 0;
	for (uint32_t i = 1; i < n; i++) {
		mp = lp[i] > mp ? lp[i] : mp;
		mq = lq[i] > mq ? lq[i] : mq;
	}
	for (uint32_t i = 0; i < n; i++) {
		zp += exp(lp[i] - mp);
		zq += exp(lq[i] - mq);
	}
	double lzp = mp + log(zp), lzq = mq + log(zq), kl = 0;
	for (uint32_t i = 0; i < n; i++) {
		double a = lp[i] - lzp, b = lq[i] - lzq;
		kl += exp(a) * (a - b);
	}
	return kl > 0 ? kl : 0;
}

static uint32_t argmax(const float *x, uint32_t n)
{
	uint32_t b = 0;
	for (uint32_t i = 1; i < n; i++)
		b = x[i] > x[b] ? i : b;
	return b;
}

divergence answer_divergence(const infs_answer *ref, const infs_answer *x)
{
	divergence d;
	d.top1 = argmax(ref->first_logits, ref->n_vocab) == argmax(x->first_logits, x->n_vocab);
	d.same = !strcmp(x->text, ref->text);
	d.kl = kl_logits(ref->first_logits, x->first_logits, x->n_vocab);
	return d;
}

divergence divergence_add(divergence_sum *s, const infs_answer *ref, const infs_answer *x)
{
	const divergence d = answer_divergence(ref, x);
	s->top1 += (size_t)d.top1;
	s->same += (size_t)d.same;
	s->kl += d.kl;
	return d;
}

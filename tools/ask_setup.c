#include "ask_setup.h"

#include <stdlib.h>
#include <string.h>

#include "cli_fail.h"

void ask_options(infs_ask_options *o, const cli_args *a, uint32_t k, int full)
{
	infs_ask_options init = INFS_ASK_OPTIONS_INIT;
	*o = init;
	o->k = k;
	o->full_recompute = full;
	o->generate.max_tokens = a->max_tokens;
	o->generate.temperature = a->temperature;
	o->generate.top_p = a->top_p;
	o->generate.seed = a->seed;
	if (full)
		return;
	if (a->recovery) { /* the mode asked for replaces the engine's default */
		o->recompute_ratio = 0;
		o->check_layer = 0;
		o->prefix_tokens = 0;
		o->query_weight = 0;
	}
	if (a->n_cal) {
		o->fact_temperature = a->cal_t[0];
		o->fact_scale = a->cal_s[0];
	}
	if (a->select) {
		o->recompute_ratio = a->recompute_set ? a->recompute : 0.15f;
		o->check_layer = a->check_set ? a->check_layer : 2;
	}
	if (a->prefix_mode)
		o->prefix_tokens = a->prefix_set ? a->prefix : 2;
	if (a->query_mode)
		o->query_weight = a->query_weight_set ? a->query_weight : 0.5f;
}

void questions_free(questions *Q)
{
	free(Q->q);
	free(Q->ns);
	jsonl_lines_free(&Q->L);
}

int questions_load(questions *Q, const cli_args *a)
{
	memset(Q, 0, sizeof *Q);
	char why[512];
	if (a->questions && jsonl_lines_read(&Q->L, a->questions, why, sizeof why))
		return fail("%s", why);
	Q->n = a->questions ? Q->L.n : 1;
	Q->q = calloc(Q->n ? Q->n : 1, sizeof *Q->q);
	Q->ns = calloc(Q->n ? Q->n : 1, sizeof *Q->ns);
	if (!Q->q || !Q->ns)
		return fail("out of memory");
	for (size_t i = 0; i < Q->n; i++) {
		if (!a->questions) {
			Q->q[i] = a->positional;
			Q->ns[i] = a->ns;
			continue;
		}
		Q->q[i] = jsonl_str(jsonl_get(Q->L.doc[i].v, "question"), NULL);
		Q->ns[i] = a->ns ? a->ns : jsonl_str(jsonl_get(Q->L.doc[i].v, "namespace"), NULL);
		if (!Q->q[i] || !Q->ns[i])
			return fail("%s:%zu: no \"question\" or \"namespace\"", a->questions, Q->L.no[i]);
	}
	return 0;
}

/* What the tool tells a user about the next step: a store or a model that
 * is not there and how to get it, a namespace without facts, facts left out
 * of a prompt that could not hold them. Errors and warnings are one line on
 * stderr. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_hints.h"
#include "cli_remote.h"

int cli_need_store(const char *path)
{
	struct stat st;
	/* With --remote a lost file is made again from the server. */
	if (cli_remote_url || stat(path, &st) == 0 || errno != ENOENT)
		return 0;
	fprintf(stderr, "inferscale: %s: no such store: run inferscale encode --store %s FACTS.jsonl first\n", path,
	        path);
	return 1;
}

int cli_need_model(const char *path, const char *what, const char *option)
{
	struct stat st;
	if (stat(path, &st) == 0 || errno != ENOENT)
		return 0;
	fprintf(stderr, "inferscale: %s: no such %s: get the default models with scripts/fetch-models.sh "
	        "(a source checkout) or inferscale fetch-models (the Python package: python -m inferscale "
	        "fetch-models), or give %s\n", path, what, option);
	return 1;
}

void cli_warn_empty(infs_store *store, const char *const *ns, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t j = 0;
		while (j < i && strcmp(ns[j], ns[i]))
			j++;
		uint64_t count = 0;
		if (j < i || infs_fact_count(&count, store, ns[i]) || count)
			continue;
		fprintf(stderr, "inferscale: warning: namespace \"%s\" has no facts: its answers come from the model "
		        "alone (inferscale encode adds facts)\n", ns[i]);
	}
}

void cli_warn_left_out(const infs_answer *x, uint32_t n_ctx)
{
	if (!x->n_left_out)
		return;
	fprintf(stderr, "inferscale: warning: %zu of the %zu facts retrieved did not fit the context (%u tokens) "
	        "next to the question and %s left out\n", x->n_left_out, x->n_left_out + x->n_facts, n_ctx,
	        x->n_left_out == 1 ? "was" : "were");
}

/* inferscale encode FACTS.jsonl: facts into a store, every line read and
 * checked before anything is written, and nothing left behind when
 * encoding fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_commands.h"
#include "cli_fail.h"
#include "cli_progress.h"
#include "cli_runtime.h"
#include "fact_lines.h"

/* Deletes the facts ids[0..n) (namespace ns[i] each; 0: none) that an
 * encode stored before it failed, so that it leaves the store as it found
 * it; *left counts those that stay. */
static void take_back(infs_store *store, const uint64_t *ids, const char *const *ns, size_t n, size_t *left)
{
	*left = 0;
	for (size_t i = 0; i < n; i++)
		*left += ids[i] && infs_fact_delete(store, ns[i], ids[i]) != 0;
	infs_store_sync(store);
}

static int run(const cli_args *a)
{
	/* Every line is read and checked before anything is written. */
	fact_lines F;
	char why[1024];
	if (fact_lines_read(&F, a->positional, a->ns, stderr, why, sizeof why)) {
		fact_lines_free(&F);
		return fail("%s", why);
	}
	runtime r;
	if (runtime_open(&r, a, 1)) {
		runtime_free(&r);
		fact_lines_free(&F);
		return 1;
	}
	const int32_t *hdr;
	uint32_t nh;
	int rc = 0;
	if (infs_engine_header(&hdr, &nh, r.engine))
		rc = lib_fail("engine");
	const size_t n = F.n ? F.n : 1;
	infs_fact_input *batch = calloc(n, sizeof *batch);
	uint64_t *ids = calloc(n, sizeof *ids);         /* in the order written */
	const char **ids_ns = calloc(n, sizeof *ids_ns); /* their namespaces */
	char *done = calloc(n, 1);
	if (!rc && (!batch || !ids || !ids_ns || !done))
		rc = fail("out of memory");
	/* What only the model can tell (a fact too long for the context), for
	 * every fact before any is written. */
	for (size_t i = 0; !rc && i < F.n; i++)
		if (infs_engine_fact_check(NULL, r.engine, F.f[i].text, F.f[i].meta))
			rc = fail("%s:%zu: %s", a->positional, F.f[i].line, infs_error_last());
	/* One call per namespace, in order of first appearance. */
	progress pg = progress_start(F.n, a->quiet);
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = hdr;
	eo.n_context = nh;
	eo.embedder = r.embedder;
	eo.progress = show_progress;
	eo.progress_user = &pg;
	size_t n_ns = 0, written = 0;
	for (size_t i = 0; !rc && i < F.n; i++) {
		if (done[i])
			continue;
		const char *ns = F.f[i].ns;
		size_t nb = 0;
		for (size_t j = i; j < F.n; j++) {
			if (done[j] || strcmp(F.f[j].ns, ns))
				continue;
			done[j] = 1;
			infs_fact_input f = INFS_FACT_INPUT_INIT;
			f.text = F.f[j].rendered;
			f.embed_text = F.f[j].text;
			f.metadata = F.f[j].meta;
			f.source_id = F.f[j].source_id;
			f.timestamp = F.f[j].timestamp;
			ids_ns[written + nb] = ns;
			batch[nb++] = f;
		}
		if (infs_fact_encode(ids + written, r.store, ns, r.model, batch, nb, &eo)) {
			if (pg.show == 1)
				fputc('\n', stderr);
			/* Those stored before the failure are taken back out. */
			snprintf(why, sizeof why, "%s", infs_error_last());
			size_t left;
			take_back(r.store, ids, ids_ns, written + nb, &left);
			if (left)
				rc = fail("encoding namespace \"%s\": %s; %zu facts of %s stay in %s (deleting them failed: %s)", ns,
				          why, left, a->positional, a->store, infs_error_last());
			else
				rc = fail("encoding namespace \"%s\": %s; nothing of %s was written", ns, why, a->positional);
			break;
		}
		written += nb;
		pg.base += nb;
		n_ns++;
	}
	if (pg.show == 1 && !rc)
		fputc('\n', stderr);
	if (!rc && infs_store_sync(r.store))
		rc = lib_fail(a->store);
	if (!rc)
		printf("encoded %zu facts into %zu namespace%s of %s\n", written, n_ns, n_ns == 1 ? "" : "s", a->store);
	free(batch);
	free(ids);
	free(ids_ns);
	free(done);
	runtime_free(&r);
	fact_lines_free(&F);
	return rc;
}

static int check(const cli_args *a)
{
	if (!a->store)
		return fail("%s needs --store PATH", a->cmd) + 1;
	if (!a->positional)
		return fail("encode needs a FACTS.jsonl file") + 1;
	return 0;
}

static const char *const opts[] = { "--store", "--namespace", CLI_OPTS_MODELS, "--kv-dtype", "--quiet", NULL };

const cli_command cmd_encode = {
	.name = "encode",
	.args = "FACTS.jsonl",
	.what = "Encodes facts into the store: one JSON object a line with \"text\" and \"namespace\";\n"
	        "\"speaker\", \"date\", other string members and the string members of a \"metadata\"\n"
	        "object are kept as the fact's metadata. Each fact's KV is that of its rendered text,\n"
	        "encoded after the engine's header; its embedding is that of the bare text.\n",
	.opts = opts,
	.positional = "file",
	.max_tokens = 64,
	.check = check,
	.run = run,
};

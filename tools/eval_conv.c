#include "eval_conv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fail.h"
#include "cli_progress.h"
#include "file_text.h"
#include "locomo_turns.h"

void conv_free(conv *c)
{
	for (size_t i = 0; i < c->n_facts; i++) {
		free(c->facts[i].meta.p);
		free(c->facts[i].evidence.p);
		infs_free(c->facts[i].rendered);
		free(c->facts[i].context);
		free(c->facts[i].context_tokens);
	}
	free(c->facts);
	locomo_free(&c->lc);
	free(c->text);
}

int conv_read(conv *c, const char *path)
{
	memset(c, 0, sizeof *c);
	size_t len;
	char why[1024];
	char err[4352]; /* a path of up to PATH_MAX and its error */
	if (file_text_read(&c->text, &len, path, err, sizeof err))
		return fail("%s", err);
	if (locomo_read(&c->lc, c->text, len, path, why, sizeof why))
		return fail("%s", why);
	if (!(c->facts = calloc(c->lc.n_facts, sizeof *c->facts)))
		return fail("out of memory");
	for (size_t i = 0; i < c->lc.n_facts; i++) {
		const locomo_fact *l = &c->lc.facts[i];
		conv_fact *f = &c->facts[c->n_facts++];
		f->text = l->text;
		str_puts(&f->evidence, l->evidence);
		str_puts(&f->meta, "{\"speaker\":");
		str_json(&f->meta, l->speaker);
		str_puts(&f->meta, ",\"date\":");
		str_json(&f->meta, l->date);
		str_puts(&f->meta, ",\"evidence\":");
		str_json(&f->meta, l->evidence);
		str_puts(&f->meta, "}");
		if (infs_fact_render(&f->rendered, f->text, f->meta.p))
			return fail("%s: \"%s\".\"%s\"[%zu]: %s", path, l->session, l->speaker, l->index, infs_error_last());
	}
	return 0;
}

int conv_contexts(conv *c, const char *path, unsigned w)
{
	locomo_turns t;
	char why[256];
	if (locomo_turns_read(&t, c->lc.doc.v, why, sizeof why))
		return fail("%s: --context-turns: %s", path, why);
	int rc = 0;
	for (size_t i = 0; !rc && i < c->n_facts; i++) {
		conv_fact *f = &c->facts[i];
		size_t n_turns;
		if (locomo_context(&f->context, &n_turns, &t, f->evidence.p, w))
			rc = fail("out of memory");
		c->n_no_context += !rc && !f->context;
	}
	locomo_turns_free(&t);
	return rc;
}

int conv_context_tokens(conv *c, const infs_model *m)
{
	const infs_tokenizer *tok = infs_model_tokenizer(m);
	if (!tok)
		return lib_fail("--context-turns: the model's tokenizer");
	for (size_t i = 0; i < c->n_facts; i++) {
		conv_fact *f = &c->facts[i];
		size_t len = f->context ? strlen(f->context) : 0, n = 0;
		if (!len)
			continue;
		if (infs_tokenize(tok, f->context, len, 0, NULL, 0, &n))
			return lib_fail("--context-turns: tokenizing");
		if (n > UINT32_MAX || !(f->context_tokens = malloc((n ? n : 1) * sizeof *f->context_tokens)))
			return fail("out of memory");
		if (infs_tokenize(tok, f->context, len, 0, f->context_tokens, n, &n))
			return lib_fail("--context-turns: tokenizing");
		f->n_context = (uint32_t)n;
		c->context_tokens += n;
	}
	return 0;
}

int eval_encode(conv *c, const runtime *r, infs_store *store, int ref, const cli_args *a)
{
	const int32_t *hdr;
	uint32_t nh;
	if (infs_engine_header(&hdr, &nh, r->engine))
		return lib_fail("engine");
	infs_fact_input *in = calloc(c->n_facts, sizeof *in);
	uint64_t *ids = calloc(c->n_facts, sizeof *ids);
	int rc = !in || !ids ? fail("out of memory") : 0;
	for (size_t i = 0; !rc && i < c->n_facts; i++) {
		infs_fact_input f = INFS_FACT_INPUT_INIT;
		f.text = c->facts[i].rendered;
		f.embed_text = c->facts[i].text;
		f.metadata = c->facts[i].meta.p;
		f.context = c->facts[i].context_tokens;
		f.n_context = c->facts[i].n_context;
		in[i] = f;
	}
	progress pg = progress_start(c->n_facts, a->quiet);
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = hdr;
	eo.n_context = nh;
	eo.embedder = r->embedder;
	eo.progress = show_progress;
	eo.progress_user = &pg;
	double t0 = now_s();
	if (!rc && infs_fact_encode(ids, store, EVAL_NS, r->model, in, c->n_facts, &eo))
		rc = fail("%s: encoding the facts%s: %s", a->positional, ref ? " (reference)" : "", infs_error_last());
	if (!ref)
		c->encode_ms = 1e3 * (now_s() - t0);
	if (pg.show == 1)
		fputc('\n', stderr);
	for (size_t i = 0; !rc && i < c->n_facts; i++)
		*(ref ? &c->facts[i].ref_id : &c->facts[i].id) = ids[i];
	free(in);
	free(ids);
	return rc;
}

/* Prompt layout: [system + memory header][facts][footer + question] in the
 * model's chat template. The template is rendered once with two markers in
 * place of the facts and of the question and cut there, so that every
 * template the tokenizer knows gets the layout without code of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/compose.h"
#include "engine/encode.h"
#include "util/error.h"
#include "util/json.h"

#define MARK_FACTS "\x01infs-facts\x01"
#define MARK_QUESTION "\x01infs-question\x01"

static const char default_system[] =
	"You are a helpful assistant with a memory of the user. Answer the user's question "
	"briefly, using what the memory says.";
static const char default_intro[] = "Memory:";

void infs__compose_free(infs__compose *c)
{
	free(c->header);
	free(c->footer);
	free(c->suffix);
	memset(c, 0, sizeof *c);
}

int infs__compose_init(infs__compose *c, const infs_model *model, const char *system, const char *intro)
{
	memset(c, 0, sizeof *c);
	const infs_tokenizer *tok = infs_model_tokenizer(model);
	if (!tok)
		return infs__error(INFS_EUNSUPPORTED, "the model has no tokenizer, so no prompt layout");
	system = system ? system : default_system;
	intro = intro ? intro : default_intro;
	size_t len = strlen(system) + strlen(intro) + sizeof MARK_FACTS + 4;
	char *sys = malloc(len);
	if (!sys)
		return infs__error(INFS_ENOMEM, "prompt layout: out of memory");
	snprintf(sys, len, "%s\n\n%s\n" MARK_FACTS, system, intro);
	infs_chat_message msgs[2] = { { "system", sys }, { "user", MARK_QUESTION } };
	size_t n = 0;
	int rc = infs_chat_render(tok, INFS_CHAT_AUTO, msgs, 2, INFS_CHAT_ADD_GENERATION_PROMPT, NULL, 0, &n);
	char *text = rc ? NULL : malloc(n + 1);
	if (!rc && !text)
		rc = infs__error(INFS_ENOMEM, "prompt layout: out of memory");
	if (!rc)
		rc = infs_chat_render(tok, INFS_CHAT_AUTO, msgs, 2, INFS_CHAT_ADD_GENERATION_PROMPT, text, n + 1, &n);
	free(sys);
	if (rc) {
		free(text);
		return rc;
	}
	const char *f = strstr(text, MARK_FACTS), *q = f ? strstr(f, MARK_QUESTION) : NULL;
	if (!f || !q || strstr(q + 1, MARK_FACTS) || strstr(q + 1, MARK_QUESTION)) {
		free(text);
		return infs__error(INFS_EUNSUPPORTED, "prompt layout: the chat template does not keep the system message before the user's");
	}
	const char *fe = f + strlen(MARK_FACTS), *qe = q + strlen(MARK_QUESTION);
	char *header = strndup(text, (size_t)(f - text)), *footer = strndup(fe, (size_t)(q - fe));
	c->suffix = strdup(qe);
	free(text);
	if (!header || !footer || !c->suffix) {
		free(header);
		free(footer);
		infs__compose_free(c);
		return infs__error(INFS_ENOMEM, "prompt layout: out of memory");
	}
	/* Header and footer are template text: chat markers in them are markers. */
	rc = infs__encode_tokenize(&c->header, &c->n_header, model, header, INFS_TOKENIZE_PARSE_SPECIAL);
	if (!rc)
		rc = infs__encode_tokenize(&c->footer, &c->n_footer, model, footer, INFS_TOKENIZE_PARSE_SPECIAL);
	if (!rc && (!c->n_header || !c->n_footer))
		rc = infs__error(INFS_EUNSUPPORTED, "prompt layout: the chat template gives an empty %s",
		                 c->n_header ? "footer" : "header");
	free(header);
	free(footer);
	if (rc)
		infs__compose_free(c);
	return rc;
}

int infs__compose_question(int32_t **out, uint32_t *n_out, const infs__compose *c, const infs_model *model,
                           const char *question)
{
	int32_t *q = NULL, *s = NULL;
	uint32_t nq = 0, ns = 0, nf = c->n_footer;
	/* The question is user text: special tokens in it stay plain text. */
	int rc = infs__encode_tokenize(&q, &nq, model, question, 0);
	if (!rc && !nq)
		rc = infs__error(INFS_EINVAL, "the question is empty");
	if (!rc)
		rc = infs__encode_tokenize(&s, &ns, model, c->suffix, INFS_TOKENIZE_PARSE_SPECIAL);
	int32_t *all = rc ? NULL : malloc(((size_t)nf + nq + ns + 1) * sizeof *all);
	if (!rc && !all)
		rc = infs__error(INFS_ENOMEM, "prompt layout: out of memory");
	if (!rc) {
		memcpy(all, c->footer, nf * sizeof *all);
		memcpy(all + nf, q, nq * sizeof *all);
		memcpy(all + nf + nq, s, ns * sizeof *all);
		*out = all;
		*n_out = nf + nq + ns;
	}
	if (rc)
		free(all);
	free(q);
	free(s);
	return rc;
}

int infs_fact_render(char **out, const char *text, const char *metadata)
{
	if (!out || !text)
		return infs__error(INFS_EINVAL, "infs_fact_render: %s is NULL", out ? "text" : "out");
	infs__json *meta = NULL;
	if (metadata && *metadata) {
		int rc = infs__json_parse(&meta, metadata, strlen(metadata));
		if (rc)
			return infs__error_wrap(rc, "infs_fact_render: metadata");
	}
	const char *date = infs__json_str(infs__json_get(meta, "date"), "");
	const char *speaker = infs__json_str(infs__json_get(meta, "speaker"), "");
	size_t n = strlen(text) + strlen(date) + strlen(speaker) + 16;
	char *s = malloc(n);
	if (!s) {
		infs__json_free(meta);
		return infs__error(INFS_ENOMEM, "infs_fact_render: out of memory");
	}
	size_t at = (size_t)snprintf(s, n, "- ");
	if (*date)
		at += (size_t)snprintf(s + at, n - at, "(%s) ", date);
	if (*speaker)
		at += (size_t)snprintf(s + at, n - at, "%s: ", speaker);
	snprintf(s + at, n - at, "%s\n", text);
	infs__json_free(meta);
	*out = s;
	return INFS_OK;
}

#include "jsonl_lines.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "say.h"

void jsonl_lines_free(jsonl_lines *l)
{
	for (size_t i = 0; i < l->n; i++) {
		jsonl_free(&l->doc[i]);
		free(l->text[i]);
	}
	free(l->doc);
	free(l->text);
	free(l->no);
	memset(l, 0, sizeof *l);
}

/* Room for line n (0-based): the three arrays grow together. */
static int grow(jsonl_lines *l, size_t *cap)
{
	if (l->n < *cap)
		return 0;
	size_t c = *cap ? 2 * *cap : 64;
	char **t = realloc(l->text, c * sizeof *t);
	if (t)
		l->text = t;
	jsonl *d = t ? realloc(l->doc, c * sizeof *d) : NULL;
	if (d)
		l->doc = d;
	size_t *no = d ? realloc(l->no, c * sizeof *no) : NULL;
	if (no)
		l->no = no;
	if (!no)
		return -1;
	*cap = c;
	return 0;
}

int jsonl_lines_read(jsonl_lines *out, const char *path, char *why, size_t n_why)
{
	memset(out, 0, sizeof *out);
	FILE *f = fopen(path, "rb");
	if (!f)
		return say(why, n_why, "%s: %s", path, strerror(errno));
	size_t cap = 0;
	int rc = 0;
	for (size_t no = 1; !rc; no++) {
		char *line = NULL;
		size_t line_cap = 0;
		ssize_t len = getline(&line, &line_cap, f);
		if (len < 0) {
			free(line);
			break;
		}
		if (strspn(line, " \t\r\n") == (size_t)len) {
			free(line);
			continue;
		}
		if (grow(out, &cap)) {
			free(line);
			rc = say(why, n_why, "%s: out of memory at line %zu", path, no);
			break;
		}
		/* Kept with its document, whose strings it holds. */
		jsonl *doc = &out->doc[out->n];
		memset(doc, 0, sizeof *doc);
		out->text[out->n] = line;
		out->no[out->n++] = no;
		char where[256];
		if (jsonl_parse_limited(doc, line, (size_t)len, JSONL_LINE_VALUES_MAX))
			rc = !strcmp(doc->err, "more values than the limit")
			             ? say(why, n_why, "%s:%zu: more than %u JSON values in one line", path, no,
			                   JSONL_LINE_VALUES_MAX)
			             : say(why, n_why, "%s:%zu: JSON line %zu column %zu: %s", path, no, doc->line, doc->col,
			                   doc->err);
		else if (doc->v->type != JSONL_OBJECT)
			rc = say(why, n_why, "%s:%zu: not a JSON object", path, no);
		else if (jsonl_find_nul(doc->v, "", where, sizeof where))
			rc = say(why, n_why, "%s:%zu: \"%s\" holds a NUL character", path, no, where);
	}
	if (!rc && ferror(f))
		rc = say(why, n_why, "%s: %s", path, strerror(errno));
	fclose(f);
	if (rc)
		jsonl_lines_free(out);
	return rc;
}

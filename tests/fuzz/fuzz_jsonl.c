/* libFuzzer target for inferscale encode's input (tools/fact_lines.c over
 * tools/jsonl_lines.c and tools/json_number.c): any file is read or
 * refused with one line naming it, and what is read keeps the promises the
 * encode relies on: every fact has a non-empty text, a namespace the
 * library takes, metadata that is a JSON object within the library's limit,
 * a rendering within the text limit, and integers read exactly (a plain
 * integer token prints back as itself). */
#include "fact_lines.h"
#include "fuzz_util.h"
#include "inferscale/inferscale.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The number member key of line o as written, when it is a plain integer
 * (digits, an optional minus): then *text and *len are its token. */
static int plain_integer(const jsonl_value *o, const char *key, const char **text, size_t *len)
{
	const jsonl_value *v = jsonl_get(o, key);
	if (!v || v->type != JSONL_NUMBER)
		return 0;
	for (size_t i = v->str[0] == '-'; i < v->len; i++)
		if (v->str[i] < '0' || v->str[i] > '9')
			return 0;
	*text = v->str;
	*len = v->len;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_write("jsonl", data, size);
	fact_lines F;
	char why[1024] = "";
	/* Every other line in one namespace given for all, as --namespace. */
	const char *ns = size && data[0] & 1 ? "given" : NULL;
	int rc = fact_lines_read(&F, path, ns, NULL, why, sizeof why);
	if (rc) {
		require(rc == -1 && why[0] && !strchr(why, '\n') && !strncmp(why, path, strlen(path)));
		fact_lines_free(&F);
		return 0;
	}
	require(why[0] == '\0' && F.n == F.lines.n);
	for (size_t i = 0; i < F.n; i++) {
		const fact_line *f = &F.f[i];
		size_t ns_len = strlen(f->ns);
		require(f->text[0] && ns_len >= 1 && ns_len <= INFS_NAMESPACE_MAX);
		require(strncmp(f->ns, INFS_RESERVED_PREFIX, sizeof INFS_RESERVED_PREFIX - 1));
		require(strlen(f->meta) < INFS_METADATA_MAX && strlen(f->rendered) < INFS_TEXT_MAX);
		require(f->line >= 1 && (i == 0 || f->line > F.f[i - 1].line));
		/* the metadata is a JSON object that the tool's reader takes back */
		char *copy = strdup(f->meta);
		jsonl doc = { 0 };
		require(copy && !jsonl_parse(&doc, copy, strlen(copy)) && doc.v->type == JSONL_OBJECT);
		jsonl_free(&doc);
		free(copy);
		const char *tok;
		size_t len;
		char back[32];
		const jsonl_value *o = F.lines.doc[i].v;
		if (plain_integer(o, "source_id", &tok, &len) && tok[0] != '-') {
			snprintf(back, sizeof back, "%llu", (unsigned long long)f->source_id);
			require(strlen(back) == len && !memcmp(back, tok, len));
		}
		if (plain_integer(o, "timestamp", &tok, &len) && (len != 2 || memcmp(tok, "-0", 2))) {
			snprintf(back, sizeof back, "%lld", (long long)f->timestamp);
			require(strlen(back) == len && !memcmp(back, tok, len));
		}
	}
	fact_lines_free(&F);
	return 0;
}

/* libFuzzer target for inferscale eval's conversation readers
 * (tools/locomo_read.c, tools/locomo_turns.c): any text is read or refused
 * with one line, and what is read holds together: facts with text and
 * evidence, questions of categories 1-4 with their places in "qa"
 * increasing, and the turns and contexts of --context-turns built for every
 * fact without fault. */
#include "fuzz_util.h"
#include "locomo_read.h"
#include "locomo_turns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size ? size : 1), why[1024] = "";
	require(text != NULL);
	memcpy(text, data, size);
	locomo_doc d;
	int rc = locomo_read(&d, text, size, "f.json", why, sizeof why);
	if (rc) {
		require(rc == -1 && !strncmp(why, "f.json: ", 8) && !strchr(why, '\n'));
	} else {
		require(d.n_facts && d.n_qs);
		for (size_t i = 0; i < d.n_facts; i++)
			require(d.facts[i].text[0] && d.facts[i].evidence && d.facts[i].speaker && d.facts[i].date &&
			        !strncmp(d.facts[i].session, "session_", 8));
		for (size_t i = 0; i < d.n_qs; i++)
			require(d.qs[i]->type == JSONL_OBJECT && (!i || d.qa_index[i] > d.qa_index[i - 1]));
		locomo_turns t;
		if (!locomo_turns_read(&t, d.doc.v, why, sizeof why)) {
			require(t.n > 0);
			for (size_t i = 0; i < d.n_facts; i++) {
				char *ctx = NULL;
				size_t n = 0;
				require(!locomo_context(&ctx, &n, &t, d.facts[i].evidence, 1 + (unsigned)(i % 4)));
				require((ctx == NULL) == (n == 0) && n <= 4);
				free(ctx);
			}
			locomo_turns_free(&t);
		} else {
			require(why[0] && !strchr(why, '\n'));
		}
	}
	locomo_free(&d);
	free(text);
	return 0;
}

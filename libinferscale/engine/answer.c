/* An answer's text and its release: the tokens that end an answer left
 * out, the rest detokenized. */
#include <stdlib.h>

#include "engine/engine_impl.h"
#include "util/error.h"

int infs__token_ends(const infs_tokenizer *tok, int32_t t)
{
	return t == infs_tokenizer_eos(tok) || t < 0 || (size_t)t >= infs_tokenizer_vocab_size(tok) ||
	       infs_tokenizer_is_special(tok, t);
}

int infs__answer_text(char **out, const infs_tokenizer *tok, const int32_t *ids, uint32_t n)
{
	int32_t *kept = malloc((n ? n : 1) * sizeof *kept);
	if (!kept)
		return infs__error(INFS_ENOMEM, "out of memory for the answer");
	uint32_t nk = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!infs__token_ends(tok, ids[i]))
			kept[nk++] = ids[i];
	size_t len = 0;
	int rc = infs_detokenize(tok, kept, nk, INFS_DETOKENIZE_SKIP_SPECIAL, NULL, 0, &len);
	char *s = rc ? NULL : malloc(len + 1);
	if (!rc && !s)
		rc = infs__error(INFS_ENOMEM, "out of memory for the answer");
	if (!rc)
		rc = infs_detokenize(tok, kept, nk, INFS_DETOKENIZE_SKIP_SPECIAL, s, len + 1, &len);
	free(kept);
	if (rc) {
		free(s);
		return rc;
	}
	*out = s;
	return INFS_OK;
}

void infs_answer_free(infs_answer *a)
{
	if (!a)
		return;
	free(a->text);
	free(a->fact_ids);
	free(a->scores);
	free(a->first_logits);
	free(a);
}

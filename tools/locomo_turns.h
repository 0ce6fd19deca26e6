/* The turns of a LoCoMo-format conversation and a fact's encoding context
 * drawn from them (inferscale eval --context-turns, docs/eval.md): the
 * turns up to and including the fact's evidence turn, each
 * "speaker: text\n". */
#ifndef LOCOMO_TURNS_H
#define LOCOMO_TURNS_H

#include <stddef.h>

#include "jsonl.h"

typedef struct locomo_turn {
	const char *speaker, *dia_id, *text; /* the document's strings */
} locomo_turn;

typedef struct locomo_turns {
	locomo_turn *turn;   /* in conversation order */
	size_t n;
	size_t *by_id;       /* indices of turn, sorted by dia_id */
} locomo_turns;

/* Reads the turns of a conversation document: every "session_N" (N
 * written without leading zeros) that is a list of {speaker, dia_id, text}
 * strings, sessions by increasing N, each list in order. The sessions lie
 * in the object "conversation" when the document has one (LoCoMo's release)
 * and else at its top level (the flattened files of ../shared/data/locomo).
 * Returns 0, or -1 with a message in why: a session that is not a list of
 * such turns, a dia_id given twice, no turns at all, or no memory. The
 * turns point into doc's strings, which must outlive them. */
int locomo_turns_read(locomo_turns *out, const jsonl_value *doc, char *why, size_t n_why);
void locomo_turns_free(locomo_turns *t);

/* The index of the turn whose dia_id is id, or -1. */
long locomo_turn_find(const locomo_turns *t, const char *id);

/* The encoding context of a fact whose evidence is turn ids joined by ';'
 * (blanks around each allowed, as in "D8:6; D9:17"): of its first id's
 * turn, the w turns ending with it, across session boundaries (fewer at
 * the conversation's start), each written "speaker: text\n". *out is that
 * text (free it), or NULL when w is 0 or the first id is empty or names no
 * turn; *n_turns is the number of turns in it. Returns 0, or -1 when out
 * of memory. */
int locomo_context(char **out, size_t *n_turns, const locomo_turns *t, const char *evidence, unsigned w);

#endif

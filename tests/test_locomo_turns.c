/* The conversation turns of inferscale eval --context-turns
 * (tools/locomo_turns.c): their order across sessions, the context chosen
 * for facts of tests/fixtures/locomo/tiny.json (a session boundary, a list
 * of evidence ids, the conversation's start, unknown ids), and the refusal
 * of malformed turns.
 * usage: test_locomo_turns tests/fixtures/locomo/tiny.json */
#include <string.h>

#include "check.h"
#include "locomo_turns.h"
#include "read_file.h"

/* The context of evidence at w turns in t, compared with want (NULL: none)
 * and its number of turns. */
static void expect(const locomo_turns *t, const char *evidence, unsigned w, const char *want, size_t want_turns)
{
	char *got = (char *)"unset";
	size_t n = 99;
	CHECK(!locomo_context(&got, &n, t, evidence, w));
	int ok = want ? got && !strcmp(got, want) : !got;
	if (!ok || n != want_turns)
		fprintf(stderr, "evidence \"%s\", w %u: got %zu turns \"%s\", expected %zu \"%s\"\n",
		        evidence ? evidence : "(null)", w, n, got ? got : "(none)", want_turns, want ? want : "(none)");
	CHECK(ok);
	CHECK(n == want_turns);
	free(got);
}

#define T1 "Ana: I adopted a grey cat last week, her name is Pixel.\n"
#define T2 "Ben: Lovely! I signed up for the marathon in October.\n"
#define T3 "Ana: Good luck. The night shifts at the hospital keep me busy.\n"
#define T4 "Ben: After training I always eat a big bowl of ramen.\n"
#define T5 "Ana: I just came back from a trip with my sister.\n"
#define T6 "Ana: We spent a week in Lisbon.\n"
#define T7 "Ben: I ran 30 kilometres last weekend.\n"

static void test_tiny(const char *path)
{
	size_t len;
	char *text = read_file(path, &len), why[256] = "";
	CHECK(text != NULL);
	if (!text)
		return;
	jsonl doc = { 0 };
	CHECK(!jsonl_parse(&doc, text, len));
	locomo_turns t;
	CHECK(!locomo_turns_read(&t, doc.v, why, sizeof why));
	CHECK(t.n == 7);
	const char *order[] = { "D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2", "D2:3" };
	for (size_t i = 0; i < 7 && i < t.n; i++) {
		CHECK(!strcmp(t.turn[i].dia_id, order[i]));
		CHECK(locomo_turn_find(&t, order[i]) == (long)i);
	}
	/* The facts of the fixture at w = 2: the turn before the evidence turn
	 * and the evidence turn itself. */
	expect(&t, "D1:3", 2, T2 T3, 2);                /* Ana's night shifts */
	expect(&t, "D1:1", 2, T1, 1);                   /* Pixel: the conversation's first turn */
	expect(&t, "D2:1;D2:2", 2, T4 T5, 2);           /* Lisbon: its first id, across sessions */
	expect(&t, "D2:3", 3, T5 T6 T7, 3);
	expect(&t, "D2:3", 1, T7, 1);                   /* the evidence turn alone */
	expect(&t, "D2:3", 64, T1 T2 T3 T4 T5 T6 T7, 7); /* the whole conversation */
	/* Blanks around ids, as in "D8:6; D9:17". */
	expect(&t, " D1:2 ; D1:4", 1, T2, 1);
	/* No context: no evidence, an unknown or partial id, w 0. */
	expect(&t, "D9:9", 2, NULL, 0);
	expect(&t, "D1", 2, NULL, 0);
	expect(&t, "D9:9;D1:2", 2, NULL, 0); /* only the first id counts */
	expect(&t, "", 2, NULL, 0);
	expect(&t, ";D1:2", 2, NULL, 0);
	expect(&t, NULL, 2, NULL, 0);
	expect(&t, "D1:3", 0, NULL, 0);
	CHECK(locomo_turn_find(&t, "D2:4") == -1);
	locomo_turns_free(&t);
	jsonl_free(&doc);
	free(text);
}

/* Reads json's turns: 0 and them, or -1 with a message holding what. */
static int read_doc(locomo_turns *t, const char *json, const char *what)
{
	char *text = strdup(json), why[256] = "";
	jsonl doc = { 0 };
	CHECK(text && !jsonl_parse(&doc, text, strlen(text)));
	int rc = locomo_turns_read(t, doc.v, why, sizeof why);
	if (rc && (!what || !strstr(why, what))) {
		fprintf(stderr, "%s: \"%s\", expected \"%s\"\n", json, why, what ? what : "success");
		CHECK(0);
	}
	if (!rc && what) {
		fprintf(stderr, "%s: read, expected \"%s\"\n", json, what);
		CHECK(0);
	}
	/* The turns point into the text: kept for the successful case. */
	if (rc) {
		jsonl_free(&doc);
		free(text);
		return rc;
	}
	char *got;
	size_t n;
	CHECK(!locomo_context(&got, &n, t, "D10:1", 3));
	CHECK(got && !strcmp(got, "B: two\nA: three\nB: ten\n") && n == 3);
	free(got);
	locomo_turns_free(t);
	jsonl_free(&doc);
	free(text);
	return 0;
}

static void test_docs(void)
{
	locomo_turns t;
	/* Under "conversation", by session number (10 after 2), other keys
	 * (session_2_date_time, session_02) no sessions. */
	CHECK(!read_doc(&t,
	                "{\"conversation\": {\"session_10\": [{\"speaker\": \"B\", \"dia_id\": \"D10:1\", \"text\": \"ten\"}],"
	                " \"session_02\": 7, \"session_2_date_time\": \"x\","
	                " \"session_2\": [{\"speaker\": \"B\", \"dia_id\": \"D2:1\", \"text\": \"two\"},"
	                " {\"speaker\": \"A\", \"dia_id\": \"D2:2\", \"text\": \"three\", \"img_url\": []}],"
	                " \"session_1\": [{\"speaker\": \"A\", \"dia_id\": \"D1:1\", \"text\": \"one\"}]}}",
	                NULL));
	/* At the top level, the same. */
	CHECK(!read_doc(&t,
	                "{\"session_2\": [{\"speaker\": \"B\", \"dia_id\": \"D2:1\", \"text\": \"two\"},"
	                " {\"speaker\": \"A\", \"dia_id\": \"D2:2\", \"text\": \"three\"}],"
	                " \"session_10\": [{\"speaker\": \"B\", \"dia_id\": \"D10:1\", \"text\": \"ten\"}]}",
	                NULL));
	/* Keys that only look like sessions are no sessions. */
	char json[] = "{\"session_1\": [{\"speaker\": \"A\", \"dia_id\": \"D1:1\", \"text\": \"x\"}],"
	              " \"session_02\": [{\"speaker\": \"A\", \"dia_id\": \"D2:1\", \"text\": \"y\"}],"
	              " \"session_3x\": [{\"speaker\": \"A\", \"dia_id\": \"D3:1\", \"text\": \"z\"}],"
	              " \"session_\": 1, \"session_1234567890\": 2}";
	jsonl doc = { 0 };
	char why[256] = "";
	CHECK(!jsonl_parse(&doc, json, strlen(json)));
	CHECK(!locomo_turns_read(&t, doc.v, why, sizeof why));
	CHECK(t.n == 1 && locomo_turn_find(&t, "D1:1") == 0 && locomo_turn_find(&t, "D2:1") == -1);
	locomo_turns_free(&t);
	jsonl_free(&doc);
	/* Malformed turns are refused, naming where. */
	CHECK(read_doc(&t, "{\"session_1\": \"hello\"}", "\"session_1\" is not a list of turns"));
	CHECK(read_doc(&t, "{\"conversation\": {\"session_3\": {}}}", "\"conversation.session_3\" is not a list"));
	CHECK(read_doc(&t,
	               "{\"session_1\": [{\"speaker\": \"A\", \"dia_id\": \"D1:1\", \"text\": \"x\"},"
	               " {\"speaker\": \"A\", \"dia_id\": \"D1:2\"}]}",
	               "\"session_1\"[1] is not a turn"));
	CHECK(read_doc(&t, "{\"session_1\": [{\"speaker\": \"A\", \"dia_id\": 3, \"text\": \"x\"}]}",
	               "\"session_1\"[0] is not a turn"));
	CHECK(read_doc(&t, "{\"session_1\": [{\"speaker\": \"A\", \"dia_id\": \"\", \"text\": \"x\"}]}",
	               "\"session_1\"[0] is not a turn"));
	CHECK(read_doc(&t, "{\"session_1\": [\"A: x\"]}", "\"session_1\"[0] is not a turn"));
	CHECK(read_doc(&t,
	               "{\"session_1\": [{\"speaker\": \"A\", \"dia_id\": \"D1:1\", \"text\": \"x\"}],"
	               " \"session_2\": [{\"speaker\": \"B\", \"dia_id\": \"D1:1\", \"text\": \"y\"}]}",
	               "dia_id \"D1:1\" names two turns"));
	CHECK(read_doc(&t, "{\"conversation\": [1]}", "\"conversation\" is not an object"));
	CHECK(read_doc(&t, "{\"session_1_observation\": {}, \"session_1\": []}", "no conversation turns"));
	CHECK(read_doc(&t, "{\"qa\": []}", "no conversation turns"));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_locomo_turns tests/fixtures/locomo/tiny.json\n");
		return 2;
	}
	test_tiny(argv[1]);
	test_docs();
	CHECK_DONE();
}

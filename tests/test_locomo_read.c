/* The LoCoMo reader of inferscale eval (tools/locomo_read.c): the facts and
 * questions of tests/fixtures/locomo/tiny.json, sessions in numeric order
 * whatever their number of digits (no wrap-around at 2^32), session keys
 * with leading zeros refused rather than taken for another session, and no
 * crash on any of the documents that crashed it.
 * usage: test_locomo_read tests/fixtures/locomo/tiny.json */
#include <string.h>

#include "check.h"
#include "locomo_read.h"
#include "read_file.h"

/* Reads a copy of text: 0 or -1, with why. */
static int read_text(locomo_doc *d, char **copy, const char *text, char *why, size_t n)
{
	*copy = strdup(text);
	return locomo_read(d, *copy, strlen(text), "t.json", why, n);
}

static void test_tiny(const char *path)
{
	size_t len;
	char *text = read_file(path, &len), why[256] = "";
	CHECK(text != NULL);
	locomo_doc d;
	CHECK(!locomo_read(&d, text, len, path, why, sizeof why));
	CHECK(d.n_facts == 6 && d.n_qs == 3);
	CHECK(!strcmp(d.facts[0].text, "Ana adopted a grey cat named Pixel.") && !strcmp(d.facts[0].speaker, "Ana"));
	CHECK(!strcmp(d.facts[0].date, "1:00 pm on 3 May, 2023") && !strcmp(d.facts[0].evidence, "D1:1"));
	CHECK(!strcmp(d.facts[3].evidence, "D1:4")); /* a list of one */
	CHECK(!strcmp(d.facts[4].evidence, "D2:1;D2:2") && !strcmp(d.facts[4].date, "9:30 am on 20 June, 2023"));
	CHECK(!strcmp(d.facts[4].session, "session_2_observation") && d.facts[4].index == 0);
	locomo_free(&d);
	free(text);
}

static const char *const qa = "\"qa\": [{\"question\": \"q?\", \"answer\": 4, \"category\": 1}]";

static void test_sessions(void)
{
	locomo_doc d;
	char *t, why[256] = "", doc[1024];
	/* Any number of digits, in numeric order, each with its own date; a
	 * repeated key counts once, its last value. */
	snprintf(doc, sizeof doc,
	         "{\"session_18446744073709551616_observation\": {\"A\": [[\"f5\", \"D5:1\"]]},"
	         " \"session_4294967297_observation\": {\"A\": [[\"f4\", \"D4:1\"]]},"
	         " \"session_4294967297_date_time\": \"later\","
	         " \"session_10_observation\": {\"A\": [[\"f3\", []]]},"
	         " \"session_2_observation\": {\"B\": [[\"old\", \"D2:1\"]]},"
	         " \"session_1_observation\": {\"A\": [[\"f1\", \"D1:1\"]]},"
	         " \"session_2_observation\": {\"B\": [[\"f2\", [\"D2:1\", \"D2:2\"]]]},"
	         " \"session_1_date_time\": \"first\", \"session__observation\": 1, \"session_1x_observation\": 2, %s}",
	         qa);
	CHECK(!read_text(&d, &t, doc, why, sizeof why));
	static const char *const order[] = { "f1", "f2", "f3", "f4", "f5" };
	CHECK(d.n_facts == 5);
	for (size_t i = 0; i < d.n_facts && i < 5; i++)
		CHECK(!strcmp(d.facts[i].text, order[i]));
	if (d.n_facts == 5) {
		CHECK(!strcmp(d.facts[0].date, "first") && !strcmp(d.facts[3].date, "later") && !*d.facts[4].date);
		CHECK(!strcmp(d.facts[1].evidence, "D2:1;D2:2") && !strcmp(d.facts[2].evidence, ""));
	}
	locomo_free(&d);
	free(t);

	/* The documents that crashed the reader: a session number with a
	 * leading zero (looked up again without it), one past 2^32 (wrapped
	 * around to another session). */
	CHECK(read_text(&d, &t, "{\"session_01_observation\": {\"A\": [[\"x\",\"D1:1\"]]}, \"qa\": []}", why,
	                sizeof why) == -1);
	CHECK(!strcmp(why, "t.json: \"session_01_observation\": a session's number is written without leading zeros"));
	locomo_free(&d);
	free(t);
	CHECK(read_text(&d, &t, "{\"session_4294967297_observation\": {\"A\": [[\"x\",\"D1:1\"]]}, \"qa\": []}", why,
	                sizeof why) == -1);
	CHECK(!strcmp(why, "t.json: no questions of categories 1-4 in \"qa\"") && d.n_facts == 1);
	locomo_free(&d);
	free(t);
	/* A speaker named with a newline is quoted on one line (a fuzzing
	 * finding). */
	CHECK(read_text(&d, &t, "{\"session_1_observation\": {\"Be\\n\": [[ []]]}, \"qa\": []}", why, sizeof why) == -1);
	CHECK(!strcmp(why, "t.json: \"session_1_observation\".\"Be\\u000a\"[0] is not [fact text, evidence turn or list of "
	                   "them]"));
	locomo_free(&d);
	free(t);
	snprintf(doc, sizeof doc, "{\"session_0_observation\": {\"A\": [[\"x\",\"D0:1\"]]}, %s}", qa);
	CHECK(!read_text(&d, &t, doc, why, sizeof why) && d.n_facts == 1);
	locomo_free(&d);
	free(t);
	snprintf(doc, sizeof doc, "{\"session_3_observation\": {\"A\": [[\"x\",\"D3:1\"]]}, \"session_3_date_time\": 3, %s}", qa);
	CHECK(read_text(&d, &t, doc, why, sizeof why) == -1 && !strcmp(why, "t.json: \"session_3_date_time\" is not a string"));
	locomo_free(&d);
	free(t);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s tiny.json\n", argv[0]);
		return 2;
	}
	test_tiny(argv[1]);
	test_sessions();
	if (check_failures)
		fprintf(stderr, "%d checks failed\n", check_failures);
	return check_failures != 0;
}

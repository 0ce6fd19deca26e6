/* The command-line tool's JSON reader (tools/jsonl.c): the lines the tool
 * reads, escapes, NULs kept in strings, and malformed lines with where
 * they fail. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "jsonl.h"

/* Parses a copy of text (the reader writes into it); *buf is freed by the
 * caller after doc. */
static int parse(jsonl *doc, char **buf, const char *text)
{
	*buf = strdup(text);
	return jsonl_parse(doc, *buf, strlen(text));
}

static void test_line(void)
{
	jsonl d = { 0 };
	char *t;
	CHECK(!parse(&d, &t, " {\"text\": \"Maya \\\"likes\\\" tea\", \"n\": -1.5e2, \"ok\": true, \"no\": false,"
	                     " \"x\": null, \"tags\": [\"a\", [], {}], \"meta\": {\"date\": \"2024\"}, \"text\": \"last\"}\r\n"));
	const jsonl_value *o = d.v;
	CHECK(o->type == JSONL_OBJECT && o->len == 8 && o->span == d.n);
	CHECK(!strcmp(jsonl_str(jsonl_get(o, "text"), ""), "last")); /* the last duplicate */
	CHECK(!strcmp(d.v[1].str, "Maya \"likes\" tea") && d.v[1].len == 16);
	CHECK(jsonl_num(jsonl_get(o, "n"), 0) == -150.0);
	CHECK(jsonl_get(o, "ok")->type == JSONL_TRUE && jsonl_get(o, "no")->type == JSONL_FALSE);
	CHECK(jsonl_get(o, "x")->type == JSONL_NULL);
	CHECK(jsonl_num(jsonl_get(o, "x"), 7) == 7 && !jsonl_str(jsonl_get(o, "n"), NULL));
	CHECK(!jsonl_get(o, "missing") && !jsonl_get(jsonl_get(o, "tags"), "a") && !jsonl_get(NULL, "a"));
	const jsonl_value *tags = jsonl_get(o, "tags");
	CHECK(tags->type == JSONL_ARRAY && tags->len == 3 && tags->span == 4);
	const jsonl_value *m = tags + 1;
	CHECK(m->type == JSONL_STRING && !m->key && !strcmp(m->str, "a"));
	m = jsonl_next(m);
	CHECK(m->type == JSONL_ARRAY && m->len == 0);
	m = jsonl_next(m);
	CHECK(m->type == JSONL_OBJECT && m->len == 0);
	CHECK(jsonl_next(tags) == jsonl_get(o, "meta"));
	CHECK(!strcmp(jsonl_str(jsonl_get(jsonl_get(o, "meta"), "date"), ""), "2024"));
	jsonl_free(&d);
	free(t);
}

static void test_escapes(void)
{
	jsonl d = { 0 };
	char *t;
	/* \u escapes to 1, 2, 3 and 4 bytes (a surrogate pair), a lone high
	 * surrogate before a non-surrogate escape, a lone low one, and the
	 * one-letter escapes. */
	CHECK(!parse(&d, &t, "[\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\", \"\\ud800\\u0041\\udc00\","
	                     " \"\\b\\f\\n\\r\\t\\/\\\\\", \"caf\xc3\xa9\"]"));
	CHECK(d.n == 5);
	CHECK(!strcmp(d.v[1].str, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") && d.v[1].len == 10);
	CHECK(!strcmp(d.v[2].str, "\xef\xbf\xbd" "A\xef\xbf\xbd") && d.v[2].len == 7);
	CHECK(!strcmp(d.v[3].str, "\b\f\n\r\t/\\"));
	CHECK(!strcmp(d.v[4].str, "caf\xc3\xa9")); /* raw UTF-8 passes through */
	jsonl_free(&d);
	free(t);

	/* A NUL is kept, and the length says so. */
	CHECK(!parse(&d, &t, "{\"ns\": \"maya\\u0000mallory\"}"));
	CHECK(d.v[1].len == 12 && strlen(d.v[1].str) == 4 && !memcmp(d.v[1].str + 5, "mallory", 7));
	jsonl_free(&d);
	free(t);
}

static void test_numbers(void)
{
	static const struct {
		const char *text;
		double value;
	} ok[] = { { "0", 0 }, { "-0", 0 }, { "12", 12 }, { "1.25", 1.25 }, { "2e3", 2000 }, { "1E+2", 100 },
	           { "-5e-1", -0.5 }, { " 7 ", 7 } };
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		jsonl d = { 0 };
		char *t;
		CHECK(!parse(&d, &t, ok[i].text));
		CHECK(d.n == 1 && d.v->type == JSONL_NUMBER && d.v->num == ok[i].value);
		jsonl_free(&d);
		free(t);
	}
	/* The number's end need not be followed by anything readable. */
	char digits[] = { '4', '2' };
	jsonl d = { 0 };
	CHECK(!jsonl_parse(&d, digits, 1) && d.v->num == 4);
	jsonl_free(&d);
}

/* A malformed text: where it fails (line, column) and why. */
static void bad(const char *text, size_t line, size_t col, const char *err)
{
	jsonl d = { 0 };
	char *t;
	int rc = parse(&d, &t, text);
	CHECK(rc == -1);
	if (rc == -1 && (d.line != line || d.col != col || strcmp(d.err, err))) {
		fprintf(stderr, "%s: line %zu column %zu \"%s\", expected %zu %zu \"%s\"\n", text, d.line, d.col,
		        d.err, line, col, err);
		check_failures++;
	}
	jsonl_free(&d);
	free(t);
}

static void test_errors(void)
{
	bad("", 1, 1, "unexpected end of text");
	bad("   \n", 2, 1, "unexpected end of text");
	bad("{\"text\": \"x\", \"namespace\": \n", 2, 1, "unexpected end of text");
	bad("{\"a\": 1} x", 1, 10, "trailing characters after the value");
	bad("{\"a\" 1}", 1, 6, "expected ':'");
	bad("{a: 1}", 1, 2, "expected a string key");
	bad("{\"a\": 1,}", 1, 9, "expected a string key");
	bad("[1 2]", 1, 4, "expected ',' or ']'");
	bad("{\"a\": 1 \"b\"}", 1, 9, "expected ',' or '}'");
	bad("{\"k\\u0000\": 1}", 1, 11, "a key holds a NUL character");
	bad("\"abc", 1, 5, "unterminated string");
	bad("\"a\tb\"", 1, 3, "control character in string");
	bad("\"\\x\"", 1, 4, "bad escape in string");
	bad("\"\\u12g4\"", 1, 6, "bad \\u escape");
	bad("\"\\u12", 1, 6, "bad \\u escape");
	bad("\"\\ud800\\u12\"", 1, 12, "bad \\u escape");
	bad("tru", 1, 1, "unexpected character");
	bad("nul", 1, 1, "unexpected character");
	/* JSON's number grammar, not strtod's. */
	bad("+1", 1, 1, "bad number");
	bad("01", 1, 1, "bad number");
	bad("1.", 1, 1, "bad number");
	bad(".5", 1, 1, "bad number");
	bad("1e", 1, 1, "bad number");
	bad("-", 1, 1, "bad number");
	bad("nan", 1, 1, "unexpected character");
	bad("inf", 1, 1, "bad number");
	bad("0x10", 1, 2, "trailing characters after the value");
	bad("1234567890123456789012345678901234567890123456789012345678901234", 1, 1,
	    "number longer than 63 characters");
	/* Lines are counted between tokens only: an escaped newline is not one. */
	bad("[\"a\\nb\",\n  x]", 2, 3, "bad number");
}

/* JSON text is UTF-8 (RFC 8259): raw bytes in strings and keys must be
 * well-formed, by the library's rules (no overlong forms, no surrogates,
 * nothing above U+10FFFF), so that what the tool passes on is accepted. */
static void test_utf8(void)
{
	static const char *const ill[] = {
		"\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf0\x80\x80\xaf",
		"\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\x80", "\xbf", "\xe2\x82", "\xe2\x82x",
		"\xf0\x9f\x98", "\xc3",
	};
	for (size_t i = 0; i < sizeof ill / sizeof ill[0]; i++) {
		char text[64];
		snprintf(text, sizeof text, "[\"ok %s\"]", ill[i]);
		bad(text, 1, 6, "invalid UTF-8 in a string");
		snprintf(text, sizeof text, "{\"k%s\": 1}", ill[i]);
		bad(text, 1, 4, "invalid UTF-8 in a string");
	}
	jsonl d = { 0 };
	char *t;
	CHECK(!parse(&d, &t, "[\"\x7f \xc2\x80 \xdf\xbf \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80 \xef\xbf\xbf "
	                     "\xf0\x90\x80\x80 \xf4\x8f\xbf\xbf\"]"));
	CHECK(d.n == 2 && d.v[1].len == 33);
	jsonl_free(&d);
	free(t);
}

/* Where a NUL is, named on one line however the keys on the way are
 * spelled (a fuzzing finding: a key of escaped newlines made the tool's
 * one-line error several lines). */
static void test_nul_path(void)
{
	jsonl d = { 0 };
	char *t, where[256], shown[16];
	CHECK(!parse(&d, &t, "{\"a\\nb\": [\"x\", {\"\\u0001\": \"y\\u0000\"}]}"));
	CHECK(jsonl_find_nul(d.v, "", where, sizeof where));
	CHECK(!strcmp(where, "a\\u000ab[1].\\u0001"));
	jsonl_free(&d);
	free(t);
	CHECK(!strcmp(jsonl_shown(shown, sizeof shown, "ab\tc"), "ab\\u0009c"));
	CHECK(!strcmp(jsonl_shown(shown, sizeof shown, "abcdefghijklmnopq"), "abcdefghijkl..."));
	CHECK(!strcmp(jsonl_shown(shown, sizeof shown, "abcdefghijklmno"), "abcdefghijklmno"));
	CHECK(!strcmp(jsonl_shown(shown, sizeof shown, "abcdefghijk\n"), "abcdefghijk..."));
}

/* A number keeps its text as written, for readers that need it exactly. */
static void test_number_text(void)
{
	jsonl d = { 0 };
	char *t;
	CHECK(!parse(&d, &t, "[18446744073709551615, -1.5e3,0]"));
	CHECK(d.n == 4 && d.v[1].len == 20 && !memcmp(d.v[1].str, "18446744073709551615", 20));
	CHECK(d.v[2].len == 6 && !memcmp(d.v[2].str, "-1.5e3", 6) && d.v[2].num == -1500);
	CHECK(d.v[3].len == 1 && d.v[3].str[0] == '0');
	CHECK(!jsonl_str(&d.v[1], NULL)); /* still not a string */
	jsonl_free(&d);
	free(t);
}

/* A limit on the values of one text, so that a line's tree stays small
 * however the line is made (a value costs more than the byte or two that
 * spell it). */
static void test_limit(void)
{
	jsonl d = { 0 };
	char text[] = "{\"a\": [1, 2], \"b\": \"x\"}";
	CHECK(!jsonl_parse_limited(&d, text, strlen(text), 5) && d.n == 5);
	jsonl_free(&d);
	char again[] = "{\"a\": [1, 2], \"b\": \"x\"}";
	CHECK(jsonl_parse_limited(&d, again, strlen(again), 4) == -1);
	CHECK(d.err && !strcmp(d.err, "more values than the limit") && d.line == 1 && d.col == 20);
	CHECK(d.cap <= 4);
	jsonl_free(&d);
}

static void test_depth(void)
{
	char deep[300 * 2 + 1];
	for (int i = 0; i < 300; i++) {
		deep[i] = '[';
		deep[300 + i] = ']';
	}
	deep[600] = '\0';
	bad(deep, 1, 257, "nesting too deep");
	jsonl d = { 0 };
	char *t;
	deep[256] = '\0'; /* 256 levels open: the limit itself is fine */
	memset(deep + 256, ']', 256);
	deep[512] = '\0';
	CHECK(!parse(&d, &t, deep) && d.n == 256 && d.v->span == 256 && d.v[255].len == 0);
	jsonl_free(&d);
	free(t);
}

int main(void)
{
	test_line();
	test_escapes();
	test_numbers();
	test_errors();
	test_utf8();
	test_nul_path();
	test_number_text();
	test_limit();
	test_depth();
	if (check_failures)
		fprintf(stderr, "%d checks failed\n", check_failures);
	return check_failures != 0;
}

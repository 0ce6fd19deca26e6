/* The JSON reader: values, escapes, errors with positions, no leaks. */
#include <string.h>

#include "check.h"
#include "util/json.h"

static int parse(infs__json **out, const char *s)
{
	return infs__json_parse(out, s, strlen(s));
}

int main(void)
{
	infs__json *j;
	CHECK_OK(parse(&j, " {\"a\": [1, 2.5e1, -3], \"b\": {\"c\": \"x\\u00e9\\ud83d\\ude00\\n\"},"
	                   " \"t\": true, \"f\": false, \"n\": null, \"a\": 7} "));
	CHECK(j && j->type == INFS_JSON_OBJECT && j->len == 6);
	CHECK(infs__json_number(infs__json_get(j, "a"), 0) == 7); /* last duplicate wins */
	const infs__json *arr = &j->items[0];
	CHECK(arr->type == INFS_JSON_ARRAY && arr->len == 3 && arr->items[1].number == 25 && arr->items[2].number == -3);
	const char *c = infs__json_str(infs__json_get(infs__json_get(j, "b"), "c"), NULL);
	CHECK(c && strcmp(c, "x\xc3\xa9\xf0\x9f\x98\x80\n") == 0);
	CHECK(infs__json_get(j, "t")->boolean == 1 && infs__json_get(j, "f")->boolean == 0);
	CHECK(infs__json_get(j, "n")->type == INFS_JSON_NULL);
	CHECK(infs__json_get(j, "missing") == NULL);
	CHECK(infs__json_get(arr, "a") == NULL);
	infs__json_free(j);

	const char *bad[] = { "", "{", "[1,]", "{\"a\" 1}", "\"abc", "tru", "[1] x", "{\"a\":\"\\q\"}",
	                      "\"\\ud83", "[01x]", "{\"k\": [1, {\"x\": [}]}",
	                      "{\"text\\u0000x\": 1}" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		j = (infs__json *)1;
		CHECK_ERR(parse(&j, bad[i]), INFS_EFORMAT);
		CHECK(j == NULL);
	}
	CHECK_ERR(parse(&j, "{\n  \"a\": x}"), INFS_EFORMAT);
	CHECK(strstr(infs_error_last(), "line 2 column 8") != NULL);

	char deep[600];
	memset(deep, '[', 300);
	memset(deep + 300, ']', 300);
	deep[599] = '\0';
	CHECK_ERR(infs__json_parse(&j, deep, 600 - 1), INFS_EFORMAT);
	CHECK(strstr(infs_error_last(), "deep") != NULL);
	CHECK_DONE();
}

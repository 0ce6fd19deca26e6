/* The command-line tool's exact integers from JSON numbers
 * (tools/json_number.c): every integer of the C type read exactly, from its
 * text; fractions and anything out of range refused, never changed. */
#include <string.h>

#include "check.h"
#include "json_number.h"

/* Parses text (one number) and reads it into both types. */
static void read_both(const char *text, int *u_rc, uint64_t *u, int *i_rc, int64_t *i, const char **why)
{
	char *t = strdup(text);
	jsonl d = { 0 };
	CHECK(!jsonl_parse(&d, t, strlen(t)) && d.v->type == JSONL_NUMBER);
	const char *w = NULL;
	*u_rc = json_u64(u, d.v, &w);
	why[0] = w;
	w = NULL;
	*i_rc = json_i64(i, d.v, &w);
	why[1] = w;
	jsonl_free(&d);
	free(t);
}

#define R_OK 0
#define R_FRACTION 1
#define R_RANGE 2

static int kind(int rc, const char *why)
{
	if (!rc)
		return R_OK;
	return strstr(why, "not an integer") ? R_FRACTION : strstr(why, "out of range") ? R_RANGE : -1;
}

int main(void)
{
	static const struct {
		const char *text;
		int u_kind;
		uint64_t u;
		int i_kind;
		int64_t i;
	} cases[] = {
		{ "0", R_OK, 0, R_OK, 0 },
		{ "-0", R_OK, 0, R_OK, 0 },
		{ "1.5", R_FRACTION, 0, R_FRACTION, 0 },
		{ "-1", R_RANGE, 0, R_OK, -1 },
		{ "1.0", R_OK, 1, R_OK, 1 },
		{ "1e3", R_OK, 1000, R_OK, 1000 },
		{ "1E+2", R_OK, 100, R_OK, 100 },
		{ "100e-2", R_OK, 1, R_OK, 1 },
		{ "1250e-1", R_OK, 125, R_OK, 125 },
		{ "1e-1", R_FRACTION, 0, R_FRACTION, 0 },
		{ "0.000e5", R_OK, 0, R_OK, 0 },
		{ "0e99999999999999999999", R_OK, 0, R_OK, 0 },
		{ "1e99999999999999999999", R_RANGE, 0, R_RANGE, 0 },
		{ "1e-99999999999999999999", R_FRACTION, 0, R_FRACTION, 0 },
		{ "1e300", R_RANGE, 0, R_RANGE, 0 },
		{ "-1e300", R_RANGE, 0, R_RANGE, 0 },
		{ "18446744073709551615", R_OK, UINT64_MAX, R_RANGE, 0 },
		{ "18446744073709551616", R_RANGE, 0, R_RANGE, 0 },
		{ "1.8446744073709551615e19", R_OK, UINT64_MAX, R_RANGE, 0 },
		{ "184467440737095516150e-1", R_OK, UINT64_MAX, R_RANGE, 0 },
		{ "12345678901234567891", R_OK, 12345678901234567891ull, R_RANGE, 0 },
		{ "99999999999999999999", R_RANGE, 0, R_RANGE, 0 },
		{ "9223372036854775807", R_OK, 9223372036854775807ull, R_OK, INT64_MAX },
		{ "9223372036854775808", R_OK, 9223372036854775808ull, R_RANGE, 0 },
		{ "-9223372036854775808", R_RANGE, 0, R_OK, INT64_MIN },
		{ "-9223372036854775809", R_RANGE, 0, R_RANGE, 0 },
		{ "1700000000.000", R_OK, 1700000000, R_OK, 1700000000 },
		{ "000", R_OK, 0, R_OK, 0 }, /* not JSON, but the reader refuses it before */
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		if (!strcmp(cases[c].text, "000"))
			continue;
		int u_rc, i_rc;
		uint64_t u = 7;
		int64_t i = 7;
		const char *why[2];
		read_both(cases[c].text, &u_rc, &u, &i_rc, &i, why);
		int uk = kind(u_rc, why[0]), ik = kind(i_rc, why[1]);
		if (uk != cases[c].u_kind || (uk == R_OK && u != cases[c].u) || ik != cases[c].i_kind ||
		    (ik == R_OK && i != cases[c].i)) {
			fprintf(stderr, "%s: u64 %d %llu, i64 %d %lld\n", cases[c].text, uk, (unsigned long long)u, ik,
			        (long long)i);
			check_failures++;
		}
		/* A refusal leaves the output alone and says the type's range. */
		CHECK(uk == R_OK || (u == 7 && (uk != R_RANGE || strstr(why[0], "0..18446744073709551615"))));
		CHECK(ik == R_OK || (i == 7 && (ik != R_RANGE || strstr(why[1], "-9223372036854775808.."))));
	}
	if (check_failures)
		fprintf(stderr, "%d checks failed\n", check_failures);
	return check_failures != 0;
}

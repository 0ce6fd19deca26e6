#include "json_number.h"

#include <stddef.h>

enum { EXACT_OK, EXACT_FRACTION, EXACT_RANGE };

/* The number spelled by s[0..n) (JSON's grammar, which the reader checked)
 * as a sign and a magnitude below 2^64, exactly. Its digits, integer and
 * fraction together, times 10^e10: zeros at both ends are dropped first, so
 * what is left is an integer when e10 >= 0, and its length says at once
 * whether it can fit in 64 bits. */
static int exact(int *neg, uint64_t *mag, const char *s, size_t n)
{
	size_t i = 0;
	*neg = i < n && s[i] == '-';
	i += (size_t)*neg;
	const char *digits[2];
	size_t len[2] = { 0, 0 };
	digits[0] = s + i;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++, len[0]++;
	digits[1] = s + i + 1;
	if (i < n && s[i] == '.')
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			len[1]++;
	/* The exponent, saturated: the text is at most 63 characters, so a
	 * magnitude past a million means nothing but "huge" or "tiny". */
	long e10 = 0;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		int eneg = ++i < n && s[i] == '-';
		i += i < n && (s[i] == '-' || s[i] == '+');
		for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			e10 = e10 < 1000000 ? e10 * 10 + (s[i] - '0') : e10;
		e10 = eneg ? -e10 : e10;
	}
	e10 -= (long)len[1];
	/* The digits as one sequence d(0..m): the integer part, then the
	 * fraction's. */
	size_t m = len[0] + len[1], lo = 0, hi = m;
#define DIGIT(k) ((k) < len[0] ? digits[0][k] : digits[1][(k) - len[0]])
	while (lo < hi && DIGIT(lo) == '0')
		lo++;
	while (hi > lo && DIGIT(hi - 1) == '0')
		hi--, e10++;
	*mag = 0;
	if (lo == hi)
		return EXACT_OK; /* zero, whatever its exponent */
	if (e10 < 0)
		return EXACT_FRACTION;
	if ((long)(hi - lo) + e10 > 20)
		return EXACT_RANGE;
	uint64_t v = 0;
	for (size_t k = lo; k < hi; k++)
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(DIGIT(k) - '0'), &v))
			return EXACT_RANGE;
#undef DIGIT
	for (long k = 0; k < e10; k++)
		if (__builtin_mul_overflow(v, 10, &v))
			return EXACT_RANGE;
	*mag = v;
	return EXACT_OK;
}

int json_u64(uint64_t *out, const jsonl_value *v, const char **why)
{
	int neg;
	uint64_t mag;
	int rc = exact(&neg, &mag, v->str, v->len);
	if (rc == EXACT_OK && neg && mag)
		rc = EXACT_RANGE;
	if (rc == EXACT_OK) {
		*out = mag;
		return 0;
	}
	*why = rc == EXACT_FRACTION ? "is not an integer" : "is out of range (0..18446744073709551615)";
	return -1;
}

int json_i64(int64_t *out, const jsonl_value *v, const char **why)
{
	int neg;
	uint64_t mag;
	int rc = exact(&neg, &mag, v->str, v->len);
	if (rc == EXACT_OK && mag > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
		rc = EXACT_RANGE;
	if (rc == EXACT_OK) {
		/* -2^63 has no positive counterpart: negated one less, then 1 off. */
		*out = neg && mag ? -(int64_t)(mag - 1) - 1 : (int64_t)mag;
		return 0;
	}
	*why = rc == EXACT_FRACTION ? "is not an integer"
	                            : "is out of range (-9223372036854775808..9223372036854775807)";
	return -1;
}

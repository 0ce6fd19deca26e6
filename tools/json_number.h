/* Integers of a JSON document read exactly: from the number as written
 * (jsonl_value.str), never through a double, so that every integer that
 * fits the C type is read exactly and no other is changed into one. A
 * number is an integer when its value is: 1.0, 1e3 and 100e-2 are; 1.5 and
 * 1e-1 are not. */
#ifndef JSON_NUMBER_H
#define JSON_NUMBER_H

#include <stdint.h>

#include "jsonl.h"

/* v's number (v must be a NUMBER) into *out: 0, or -1 with *why "is not an
 * integer" or "is out of range (0..18446744073709551615)"; -0 is 0. */
int json_u64(uint64_t *out, const jsonl_value *v, const char **why);
/* The same into int64_t, range -9223372036854775808..9223372036854775807. */
int json_i64(int64_t *out, const jsonl_value *v, const char **why);

#endif

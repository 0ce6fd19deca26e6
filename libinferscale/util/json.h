/* A small JSON reader for model files: config.json, tokenizer.json and the
 * safetensors header. Parses the whole text into a tree. */
#ifndef INFS_JSON_H
#define INFS_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum infs__json_type {
	INFS_JSON_NULL,
	INFS_JSON_BOOL,
	INFS_JSON_NUMBER,
	INFS_JSON_STRING,
	INFS_JSON_ARRAY,
	INFS_JSON_OBJECT
} infs__json_type;

typedef struct infs__json infs__json;
struct infs__json {
	infs__json_type type;
	int boolean;
	double number;
	char *string;      /* STRING: UTF-8, NUL-terminated (may hold NULs: see len) */
	size_t len;        /* STRING: bytes; ARRAY/OBJECT: number of items */
	infs__json *items; /* ARRAY/OBJECT: len values */
	char **keys;       /* OBJECT: len keys, NUL-terminated */
};

/* Parses text[0..len). On error returns INFS_EFORMAT with the line and column
 * in the message. Nesting deeper than 256 levels is refused. */
int infs__json_parse(infs__json **out, const char *text, size_t len);
void infs__json_free(infs__json *root);

/* The value of key in an object, or NULL when obj is not an object or lacks
 * the key (the last duplicate wins). */
const infs__json *infs__json_get(const infs__json *obj, const char *key);

/* Convenience readers: return def when v is missing or of another type. */
double infs__json_number(const infs__json *v, double def);
const char *infs__json_str(const infs__json *v, const char *def);

#endif

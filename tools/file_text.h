/* A file read whole into memory, for the readers that parse it in place
 * (charts.c, eval's conversation). */
#ifndef FILE_TEXT_H
#define FILE_TEXT_H

#include <stddef.h>

/* Reads path into *out (malloc'd, *n bytes, not terminated): 0, or -1 with
 * a message naming path in err[0..n_err). Free *out in either case. */
int file_text_read(char **out, size_t *n, const char *path, char *err, size_t n_err);

#endif

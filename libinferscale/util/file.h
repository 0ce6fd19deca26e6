/* Opening and reading the files that loaders take (model, tokenizer and
 * embedder files): only regular files, refused before anything can block, so
 * that a FIFO waits for no writer and a device is never read. */
#ifndef INFS_FILE_H
#define INFS_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Opens path read-only and returns its descriptor and size. The open does
 * not block (O_NONBLOCK, cleared afterwards), and anything but a regular
 * file is closed again and refused. Errors, with the path in the message:
 * INFS_ENOTFOUND (no such file), INFS_EINVAL (a directory, FIFO, device or
 * socket), INFS_ERANGE (above max bytes), INFS_EIO (any other failure). */
int infs__file_open(int *fd, size_t *size, const char *path, uint64_t max);

/* Reads the whole regular file path (at most max bytes) into a malloc'd
 * buffer with a NUL after its len bytes. Errors as infs__file_open(), plus
 * INFS_EIO when fewer bytes than its size can be read (it shrank) and
 * INFS_ENOMEM. */
int infs__file_read(char **out, size_t *len, const char *path, uint64_t max);

/* "dir/name" in a malloc'd string, NULL when out of memory: the path of a
 * file in a model's or embedder's folder. */
char *infs__path_join(const char *dir, const char *name);

#endif

#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

static const char *kind(mode_t mode)
{
	return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
	       : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

int infs__file_open(int *fd, size_t *size, const char *path, uint64_t max)
{
	/* Without O_NONBLOCK, opening a FIFO waits for a writer. */
	int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (f < 0) {
		int e = errno;
		return infs__error(e == ENOENT ? INFS_ENOTFOUND : e == EISDIR ? INFS_EINVAL : INFS_EIO, "%s: %s", path,
		                   strerror(e));
	}
	struct stat st;
	int rc = INFS_OK;
	if (fstat(f, &st) != 0)
		rc = infs__error(INFS_EIO, "%s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		rc = infs__error(INFS_EINVAL, "%s is %s, not a regular file", path, kind(st.st_mode));
	else if (st.st_size < 0 || (uint64_t)st.st_size > max || (uint64_t)st.st_size > SIZE_MAX - 1)
		rc = infs__error(INFS_ERANGE, "%s: %lld bytes is above the %llu this file may have", path,
		                 (long long)st.st_size, (unsigned long long)max);
	else if (fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK) != 0)
		rc = infs__error(INFS_EIO, "%s: %s", path, strerror(errno));
	if (rc != INFS_OK) {
		close(f);
		return rc;
	}
	*fd = f;
	*size = (size_t)st.st_size;
	return INFS_OK;
}

int infs__file_read(char **out, size_t *len, const char *path, uint64_t max)
{
	int fd;
	size_t size;
	int rc = infs__file_open(&fd, &size, path, max);
	if (rc != INFS_OK)
		return rc;
	char *buf = malloc(size + 1);
	if (!buf) {
		close(fd);
		return infs__error(INFS_ENOMEM, "%s: no memory for %zu bytes", path, size);
	}
	size_t got = 0;
	while (got < size) {
		ssize_t k = read(fd, buf + got, size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? infs__error(INFS_EIO, "%s: read failed: %s", path, strerror(errno))
			           : infs__error(INFS_EIO, "%s: read %zu of its %zu bytes (it shrank)", path, got, size);
			break;
		}
		got += (size_t)k;
	}
	close(fd);
	if (rc != INFS_OK) {
		free(buf);
		return rc;
	}
	buf[size] = '\0';
	*out = buf;
	*len = size;
	return INFS_OK;
}

char *infs__path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);
	if (p) {
		memcpy(p, dir, a);
		p[a] = '/';
		memcpy(p + a + 1, name, b + 1);
	}
	return p;
}

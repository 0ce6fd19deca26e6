/* Replies read from the socket straight into hiredis's reader buffer:
 * hiredis reads 16 KiB at a time onto the stack and copies them there, so a
 * megabyte value costs a copy more and sixty-four calls; here the rest of a
 * value whose length is known is asked for in one read. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/sds.h>

#include "remote/remote_impl.h"

/* hiredis 1.0 prefixed its copy of sds with hi_. */
#if HIREDIS_MAJOR >= 1
typedef hisds sds;
#define sdsavail hi_sdsavail
#define sdsempty hi_sdsempty
#define sdsfree hi_sdsfree
#define sdslen hi_sdslen
#define sdsIncrLen hi_sdsIncrLen
#define sdsMakeRoomFor hi_sdsMakeRoomFor
#endif

/* Bytes to read for the reply the reader is in: the rest of a bulk string
 * whose length is known (so that a value is read whole with few calls, and
 * its end is the end of what was read: nothing left to move down in the
 * reader's buffer), else a chunk. Only a hint: any read is parsed the same.
 * The reader is at a bulk string when its next byte is '$', or when the
 * byte it consumed last is (its type read, its length line not yet): read
 * from the buffer, not from the reader's tasks, whose layout differs
 * between hiredis versions. */
static size_t want_bytes(const redisReader *rd)
{
	enum { CHUNK = 64 << 10, MAX = 8 << 20 };
	const char *p = rd->buf + rd->pos, *end = rd->buf + rd->len;
	if (p < end && *p == '$')
		p++;
	else if (!(rd->pos > 0 && rd->buf[rd->pos - 1] == '$'))
		return CHUNK;
	const char *cr = memchr(p, '\r', (size_t)(end - p));
	if (!cr || cr + 1 >= end)
		return CHUNK;
	long long len = 0;
	for (const char *q = p; q < cr; q++) {
		if (*q < '0' || *q > '9' || len > MAX)
			return CHUNK;
		len = len * 10 + (*q - '0');
	}
	size_t total = (size_t)(cr + 2 - (rd->buf + rd->pos)) + (size_t)len + 2, have = rd->len - rd->pos;
	return total > have ? total - have : CHUNK;
}

/* Reads from the socket straight into the reader's buffer (hiredis reads
 * 16 KiB at a time onto the stack and copies them there). */
static int read_into_reader(redisContext *c)
{
	redisReader *rd = c->reader;
	if (rd->pos == rd->len && rd->maxbuf && sdsavail(rd->buf) > rd->maxbuf) { /* as hiredis: not kept */
		sds empty = sdsempty();
		if (empty) {
			sdsfree(rd->buf);
			rd->buf = empty;
			rd->pos = rd->len = 0;
		}
	}
	size_t want = want_bytes(rd);
	sds b = sdsMakeRoomFor(rd->buf, want);
	if (!b) {
		c->err = REDIS_ERR_OOM;
		snprintf(c->errstr, sizeof c->errstr, "out of memory");
		return REDIS_ERR;
	}
	rd->buf = b;
	ssize_t n;
	do
		n = read(c->fd, b + sdslen(b), want);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		c->err = n ? REDIS_ERR_IO : REDIS_ERR_EOF;
		snprintf(c->errstr, sizeof c->errstr, "%s", n ? strerror(errno) : "Server closed the connection");
		return REDIS_ERR;
	}
	sdsIncrLen(b, (int)n);
	rd->len = sdslen(b);
	return REDIS_OK;
}

int infs__resp_get_reply(redisContext *c, void **rep)
{
	*rep = NULL;
	int done = 0;
	if (redisGetReplyFromReader(c, rep) != REDIS_OK)
		return REDIS_ERR;
	if (*rep)
		return REDIS_OK;
	do
		if (redisBufferWrite(c, &done) != REDIS_OK)
			return REDIS_ERR;
	while (!done);
	while (!*rep)
		if (read_into_reader(c) != REDIS_OK || redisGetReplyFromReader(c, rep) != REDIS_OK)
			return REDIS_ERR;
	return REDIS_OK;
}

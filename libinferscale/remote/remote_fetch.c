/* The values of many keys of one slot, read straight into one buffer: their
 * sizes first (STRLEN), then GETs sent in batches and each value's bytes
 * read from the socket into its place in an arena that the connections
 * keep from one fetch to the next. hiredis would read them onto its own
 * buffer, then copy each into a reply of its own: memory that is new, page
 * after page, for every namespace fetched (on a VM, a page's first touch
 * costs more than its copy). The next batch is sent before the replies of
 * the one before are read, so the server writes while the values already
 * here are summed. A redirection, an error or a lost connection leaves the
 * rest to infs__resp_pipeline, which follows the cluster and reports the
 * failure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/error.h"
#include "store/store.h"
#include "remote/remote_impl.h"

/* An arena above this is given back after each fetch, not kept. */
#define KEEP_MAX ((size_t)256 << 20)

/* A batch: up to BATCH values and BATCH_BYTES bytes (at least one value),
 * two in flight: what the server holds for the connection stays bounded.
 * HEAD: a read for a reply's first line asks for no more than this, so
 * that a value's bytes go from the socket to their place, not through the
 * line buffer. */
enum { BATCH = 64, LINE = 64 << 10, HEAD = 64 };
#define BATCH_BYTES ((size_t)16 << 20)

void infs__values_free(infs__values *v)
{
	for (size_t i = 0; v->own && i < v->n; i++)
		if (v->own[i])
			free(v->val[i]);
	free(v->val);
	free(v->len);
	free(v->crc);
	free(v->own);
	memset(v, 0, sizeof *v);
}

/* A reader over the socket: lines through a small buffer, values straight
 * into place. */
typedef struct sock {
	int fd;
	char *buf;
	size_t pos, len;
} sock;

/* Up to max more bytes into the line buffer. */
static bool fill(sock *k, size_t max)
{
	if (k->pos == k->len)
		k->pos = k->len = 0;
	if (k->len == LINE) {
		memmove(k->buf, k->buf + k->pos, k->len - k->pos);
		k->len -= k->pos;
		k->pos = 0;
	}
	size_t room = LINE - k->len < max ? LINE - k->len : max;
	ssize_t n;
	do
		n = read(k->fd, k->buf + k->len, room);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return false;
	k->len += (size_t)n;
	return true;
}

/* The next line without its CRLF, NUL-terminated in place; NULL on a lost
 * connection or a line longer than the buffer. */
static char *line(sock *k)
{
	for (;;) {
		char *cr = k->len > k->pos ? memchr(k->buf + k->pos, '\r', k->len - k->pos) : NULL;
		if (cr && cr + 1 < k->buf + k->len) {
			char *l = k->buf + k->pos;
			*cr = '\0';
			k->pos = (size_t)(cr + 2 - k->buf);
			return l;
		}
		if ((k->pos == 0 && k->len == LINE) || !fill(k, HEAD))
			return NULL;
	}
}

/* n bytes into dst (NULL: dropped), then the CRLF. The rest of a value is
 * read with the start of what follows it (its CRLF, the next reply's first
 * line) in one call. */
static bool payload(sock *k, unsigned char *dst, size_t n)
{
	size_t have = k->len - k->pos < n ? k->len - k->pos : n;
	if (dst)
		memcpy(dst, k->buf + k->pos, have);
	k->pos += have;
	if (k->pos == k->len)
		k->pos = k->len = 0;
	for (size_t got = have; got < n;) {
		if (!dst) {
			k->pos = k->len = 0;
			if (!fill(k, LINE))
				return false;
			size_t take = k->len < n - got ? k->len : n - got;
			k->pos = take;
			got += take;
			continue;
		}
		struct iovec iov[2] = { { dst + got, n - got }, { k->buf + k->len, 0 } };
		iov[1].iov_len = LINE - k->len < HEAD ? LINE - k->len : HEAD;
		ssize_t r = readv(k->fd, iov, 2);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		size_t in_dst = (size_t)r < n - got ? (size_t)r : n - got;
		got += in_dst;
		k->len += (size_t)r - in_dst;
	}
	while (k->len - k->pos < 2)
		if (!fill(k, HEAD))
			return false;
	k->pos += 2;
	return true;
}

static void drop(infs__resp *r, size_t i)
{
	redisFree(r->nodes[i].c);
	r->nodes[i].c = NULL;
}

/* Sends the GETs of keys[at, at + m) on node i's connection. false: not
 * sent (the connection is dropped, or hiredis holds unread replies). */
static bool fast_send(infs__resp *r, size_t i, const char *const *keys, size_t at, size_t m)
{
	redisContext *c = r->nodes[i].c;
	if (!c || c->reader->pos != c->reader->len)
		return false;
	for (size_t j = 0; j < m; j++) {
		const char *argv[2] = { "GET", keys[at + j] };
		if (redisAppendCommandArgv(c, 2, argv, NULL) != REDIS_OK)
			goto lost;
	}
	int done = 0;
	do
		if (redisBufferWrite(c, &done) != REDIS_OK)
			goto lost;
	while (!done);
	return true;
lost:
	drop(r, i);
	return false;
}

/* The replies of the batch keys[at, at + m) sent by fast_send, values read
 * into out's places. false when the batch must go through
 * infs__resp_pipeline; the connection is left clean, or dropped (always
 * when the replies of a next batch, more, are still on it). */
static bool fast_read(infs__resp *r, size_t i, sock *k, size_t at, size_t m, const size_t *cap, infs__values *out,
                      bool more)
{
	bool clean = true;
	for (size_t j = 0; j < m; j++) {
		char *l = line(k);
		if (!l)
			goto lost;
		if (l[0] != '$') { /* an error or a redirection: one line */
			if (l[0] != '-')
				goto lost;
			clean = false;
			continue;
		}
		char *end;
		long long len = strtoll(l + 1, &end, 10);
		if (*end || len < -1)
			goto lost;
		if (len == -1) /* deleted since its id was listed */
			continue;
		bool fits = clean && cap[at + j] && (size_t)len <= cap[at + j];
		if (!payload(k, fits ? out->val[at + j] : NULL, (size_t)len))
			goto lost;
		if (fits) { /* summed while in the caches */
			out->len[at + j] = (size_t)len;
			out->crc[at + j] = infs__store_value_crc(out->val[at + j], (size_t)len);
		} else
			clean = false;
	}
	if ((!more && k->pos != k->len) /* more than was asked for */ || (more && !clean))
		goto lost;
	return clean;
lost:
	drop(r, i);
	return false;
}

/* The batch through infs__resp_pipeline: its values copied out. */
static int slow_batch(infs__resp *r, const char *route, const char *const *keys, size_t at, size_t m,
                      infs__values *out, const char *fn)
{
	redisReply *rep[BATCH];
	const char *argv[BATCH][2];
	const char *const *av[BATCH] = { 0 };
	int ac[BATCH] = { 0 };
	for (size_t j = 0; j < m; j++) {
		argv[j][0] = "GET";
		argv[j][1] = keys[at + j];
		av[j] = argv[j];
		ac[j] = 2;
		out->val[at + j] = NULL; /* what the fast try wrote is not kept */
		out->len[at + j] = 0;
	}
	int rc = infs__resp_pipeline(r, route, rep, m, ac, av, NULL, fn);
	if (rc)
		return rc;
	for (size_t j = 0; j < m; j++) {
		unsigned char *v = NULL;
		if (!rc && rep[j]->type == REDIS_REPLY_STRING && !(v = malloc(rep[j]->len ? rep[j]->len : 1)))
			rc = infs__error(INFS_ENOMEM, "%s: out of memory for a %zu-byte value", fn, rep[j]->len);
		if (v) {
			memcpy(v, rep[j]->str, rep[j]->len);
			out->val[at + j] = v;
			out->len[at + j] = rep[j]->len;
			out->crc[at + j] = infs__store_value_crc(v, rep[j]->len);
			out->own[at + j] = true;
		}
		freeReplyObject(rep[j]);
	}
	return rc;
}

/* The number of values of the batch from at: up to BATCH values and
 * BATCH_BYTES bytes, at least one. */
static size_t batch_len(const size_t *cap, size_t at, size_t n)
{
	size_t m = 1, bytes = cap[at];
	while (at + m < n && m < BATCH && bytes + cap[at + m] <= BATCH_BYTES)
		bytes += cap[at + m++];
	return m;
}

/* The sizes of keys[0, n) (0: none), asked for in one pipeline: one round
 * trip, not one a batch. */
static int sizes(infs__resp *r, const char *route, const char *const *keys, size_t n, size_t *cap, const char *fn)
{
	redisReply **rep = malloc(n * sizeof *rep);
	const char *(*argv)[2] = malloc(n * sizeof *argv);
	const char *const **av = malloc(n * sizeof *av);
	int *ac = malloc(n * sizeof *ac);
	int rc = rep && argv && av && ac ? INFS_OK : infs__error(INFS_ENOMEM, "%s: out of memory for %zu sizes", fn, n);
	for (size_t j = 0; !rc && j < n; j++) {
		argv[j][0] = "STRLEN";
		argv[j][1] = keys[j];
		av[j] = argv[j];
		ac[j] = 2;
	}
	if (!rc)
		rc = infs__resp_pipeline(r, route, rep, n, ac, av, NULL, fn);
	for (size_t j = 0; !rc && j < n; j++) {
		cap[j] = rep[j]->type == REDIS_REPLY_INTEGER && rep[j]->integer > 0 ? (size_t)rep[j]->integer : 0;
		freeReplyObject(rep[j]);
	}
	free(rep);
	free(argv);
	free(av);
	free(ac);
	return rc;
}

int infs__resp_get_values(infs__values *out, infs__resp *r, const char *route, const char *const *keys, size_t n,
                          const char *fn)
{
	memset(out, 0, sizeof *out);
	out->n = n;
	size_t *cap = calloc(n ? n : 1, sizeof *cap);
	out->val = calloc(n ? n : 1, sizeof *out->val);
	out->len = calloc(n ? n : 1, sizeof *out->len);
	out->own = calloc(n ? n : 1, sizeof *out->own);
	out->crc = calloc(n ? n : 1, sizeof *out->crc);
	sock k = { .buf = malloc(LINE) };
	int rc = cap && out->val && out->len && out->own && out->crc && k.buf ? INFS_OK
	                                                          : infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	if (!rc && n)
		rc = sizes(r, route, keys, n, cap, fn);
	size_t total = 0;
	for (size_t i = 0; !rc && i < n; i++)
		total += (cap[i] + 63) & ~(size_t)63;
	if (!rc && total > r->arena_cap) {
		infs__resp_arena_free(r);
		void *a = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (a == MAP_FAILED) {
			rc = infs__error(INFS_ENOMEM, "%s: out of memory for %zu bytes of values", fn, total);
		} else {
			r->arena = a;
			r->arena_cap = total;
		}
	}
	for (size_t i = 0, off = 0; !rc && i < n; i++) {
		out->val[i] = cap[i] ? r->arena + off : NULL;
		off += (cap[i] + 63) & ~(size_t)63;
	}
	/* The fast path while it works, two batches in flight; once a batch
	 * leaves it, the rest go the slow way. */
	size_t node = 0, sent = 0; /* sent: the end of the batches sent */
	bool fast = !rc && n && infs__node_connect(r, node = infs__resp_node(r, route), fn) == INFS_OK;
	if (fast)
		k.fd = r->nodes[node].c->fd;
	for (size_t at = 0, m; !rc && at < n; at += m) {
		m = batch_len(cap, at, n);
		bool ok = fast && (sent > at || fast_send(r, node, keys, at, m)), more = false;
		if (ok && at + m < n) {
			size_t m2 = batch_len(cap, at + m, n);
			ok = more = fast_send(r, node, keys, at + m, m2); /* dropped: this batch's replies too */
			sent = at + m + m2;
		}
		if (ok && fast_read(r, node, &k, at, m, cap, out, more)) {
			for (size_t j = 0; j < m; j++)
				if (!cap[at + j] || !out->len[at + j])
					out->val[at + j] = NULL; /* none on the server (or deleted meanwhile) */
		} else {
			fast = false;
			rc = slow_batch(r, route, keys, at, m, out, fn);
		}
	}
	free(cap);
	free(k.buf);
	if (rc)
		infs__values_free(out);
	return rc;
}

void infs__resp_arena_free(infs__resp *r)
{
	if (r->arena)
		munmap(r->arena, r->arena_cap);
	r->arena = NULL;
	r->arena_cap = 0;
}

void infs__resp_arena_trim(infs__resp *r)
{
	if (r->arena_cap > KEEP_MAX)
		infs__resp_arena_free(r);
}

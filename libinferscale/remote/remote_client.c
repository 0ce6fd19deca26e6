/* One connection to a Redis or Valkey server through hiredis: the address
 * from a URL, connecting with a timeout, ACL authentication, and commands
 * sent in one round trip, every failure an INFS_EIO that names the server. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "remote/remote_impl.h"

static int bad_url(const char *url, const char *why)
{
	return infs__error(INFS_EINVAL,
	                   "infs_store_open: remote \"%s\" %s (write redis://[user[:password]@]host[:port] or host:port)",
	                   url, why);
}

int infs__resp_init(infs__resp *r, const char *url, const char *user, const char *password, unsigned timeout_ms)
{
	memset(r, 0, sizeof *r);
	r->port = 6379;
	r->timeout_ms = timeout_ms ? timeout_ms : 2000;
	const char *p = url;
	if (strncmp(p, "redis://", 8) == 0)
		p += 8;
	else if (strstr(p, "://"))
		return bad_url(url, "has a scheme other than redis://");
	const char *at = strrchr(p, '@');
	char *url_user = NULL, *url_pass = NULL;
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		url_user = strndup(p, (size_t)((colon ? colon : at) - p));
		url_pass = colon ? strndup(colon + 1, (size_t)(at - colon - 1)) : NULL;
		p = at + 1;
	}
	size_t host_len;
	const char *port = NULL;
	if (*p == '[') { /* [ipv6]:port */
		const char *close = strchr(p, ']');
		if (!close) {
			free(url_user);
			free(url_pass);
			return bad_url(url, "opens a [ without closing it");
		}
		host_len = (size_t)(close - p - 1);
		p++;
		port = close[1] == ':' ? close + 2 : NULL;
	} else {
		const char *colon = strchr(p, ':');
		const char *slash = strchr(p, '/');
		host_len = colon ? (size_t)(colon - p) : slash ? (size_t)(slash - p) : strlen(p);
		port = colon ? colon + 1 : NULL;
	}
	int rc = INFS_OK;
	if (host_len == 0 || host_len > INFS__REMOTE_HOST_MAX)
		rc = bad_url(url, "has no host, or one too long");
	if (!rc && port) {
		char *end;
		long v = strtol(port, &end, 10);
		if (end == port || (*end && strcmp(end, "/") != 0) || v < 1 || v > 65535)
			rc = bad_url(url, "has a port that is not 1..65535");
		r->port = (int)v;
	}
	if (!rc) {
		memcpy(r->host, p, host_len);
		r->host[host_len] = '\0';
		snprintf(r->where, sizeof r->where, "%s:%d", r->host, r->port);
		const char *u = user ? user : url_user, *pw = password ? password : url_pass;
		if ((u && *u && !(r->user = strdup(u))) || (pw && !(r->password = strdup(pw))))
			rc = infs__error(INFS_ENOMEM, "infs_store_open: out of memory");
	}
	free(url_user);
	free(url_pass);
	if (rc)
		infs__resp_free(r);
	return rc;
}

void infs__resp_free(infs__resp *r)
{
	if (r->c)
		redisFree(r->c);
	free(r->user);
	free(r->password);
	r->c = NULL;
	r->user = r->password = NULL;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The connection's failure as INFS_EIO; the connection is dropped, so the
 * next call connects again. */
static int fail(infs__resp *r, const char *fn, const char *what, double started)
{
	char why[160];
	if (now_ms() - started >= r->timeout_ms * 0.9)
		snprintf(why, sizeof why, "no answer within %u ms", r->timeout_ms);
	else
		snprintf(why, sizeof why, "%s", r->c && r->c->errstr[0] ? r->c->errstr : "the connection failed");
	if (r->c) {
		redisFree(r->c);
		r->c = NULL;
	}
	return infs__error(INFS_EIO,
	                   "%s: remote tier %s: %s: %s; nothing was acknowledged (check that the server runs and "
	                   "answers there, then call again)",
	                   fn, r->where, what, why);
}

int infs__resp_connect(infs__resp *r, const char *fn)
{
	if (r->c)
		return INFS_OK;
	struct timeval tv = { (time_t)(r->timeout_ms / 1000), (suseconds_t)(r->timeout_ms % 1000) * 1000 };
	double t0 = now_ms();
	r->c = redisConnectWithTimeout(r->host, r->port, tv);
	if (!r->c)
		return infs__error(INFS_ENOMEM, "%s: out of memory for a connection to %s", fn, r->where);
	if (r->c->err)
		return fail(r, fn, "connecting", t0);
	if (redisSetTimeout(r->c, tv) != REDIS_OK)
		return fail(r, fn, "setting the timeout", t0);
	/* Values are facts' KV, often megabytes: the reader keeps a buffer of
	 * up to 8 MiB between replies instead of growing it again for each. */
	r->c->reader->maxbuf = 8u << 20;
	if (!r->password)
		return INFS_OK;
	const char *argv[3] = { "AUTH", r->user ? r->user : r->password, r->password };
	int argc = r->user ? 3 : 2;
	redisReply *reply = redisCommandArgv(r->c, argc, argv, NULL);
	if (!reply)
		return fail(r, fn, "authenticating", t0);
	int rc = INFS_OK;
	if (reply->type == REDIS_REPLY_ERROR) {
		rc = infs__error(INFS_EIO, "%s: remote tier %s refused the user%s%s: %s (check the ACL user and password)",
		                 fn, r->where, r->user ? " " : "", r->user ? r->user : "", reply->str);
		redisFree(r->c);
		r->c = NULL;
	}
	freeReplyObject(reply);
	return rc;
}

int infs__resp_pipeline(infs__resp *r, redisReply **replies, size_t n, const int *argc, const char *const *const *argv,
                        const size_t *const *argvlen, const char *fn)
{
	int rc = infs__resp_connect(r, fn);
	if (rc)
		return rc;
	double t0 = now_ms();
	for (size_t i = 0; i < n; i++)
		if (redisAppendCommandArgv(r->c, argc[i], (const char **)argv[i], argvlen ? argvlen[i] : NULL) !=
		    REDIS_OK)
			return fail(r, fn, "sending", t0);
	size_t got = 0;
	const char *err = NULL;
	for (; got < n; got++) {
		void *rep = NULL;
		if (redisGetReply(r->c, &rep) != REDIS_OK || !rep)
			break;
		replies[got] = rep;
		if (!err && replies[got]->type == REDIS_REPLY_ERROR)
			err = replies[got]->str;
	}
	if (got == n && !err)
		return INFS_OK;
	if (err)
		rc = infs__error(INFS_EIO, "%s: remote tier %s answered: %s; nothing was acknowledged", fn, r->where, err);
	for (size_t i = 0; i < got; i++)
		freeReplyObject(replies[i]);
	return got == n ? rc : fail(r, fn, "waiting for the answer", t0);
}

int infs__resp_command(infs__resp *r, redisReply **reply, int argc, const char *const *argv, const size_t *argvlen,
                       const char *fn)
{
	return infs__resp_pipeline(r, reply, 1, &argc, &argv, argvlen ? &argvlen : NULL, fn);
}

/* The connections to a Redis or Valkey server, or to the nodes of a Redis
 * Cluster, through hiredis: the addresses from a list of URLs, connecting
 * with a timeout, ACL authentication, and commands sent in one round trip
 * to the node that owns their slot, following the cluster's redirections;
 * every failure an INFS_EIO that names the server. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/error.h"
#include "remote/remote_impl.h"

/* Redirections and retries one call follows before it gives up. */
#define MAX_ROUNDS 16

static int bad_url(const char *url, const char *why)
{
	return infs__error(INFS_EINVAL,
	                   "infs_store_open: remote \"%s\" %s (write redis://[user[:password]@]host[:port] or host:port, "
	                   "several seeds of a cluster separated by commas)",
	                   url, why);
}

/* One seed of url, the bytes [p, p + len): its node is added to r, its
 * user and password (when r has none yet) kept in *url_user, *url_pass. */
static int parse_seed(infs__resp *r, const char *url, const char *p, size_t len, char **url_user, char **url_pass)
{
	char *one = strndup(p, len);
	if (!one)
		return infs__error(INFS_ENOMEM, "infs_store_open: out of memory");
	const char *q = one;
	int rc = INFS_OK;
	if (strncmp(q, "redis://", 8) == 0)
		q += 8;
	else if (strstr(q, "://"))
		rc = bad_url(url, "has a scheme other than redis://");
	const char *at = strrchr(q, '@');
	if (!rc && at) {
		const char *colon = memchr(q, ':', (size_t)(at - q));
		if (!*url_user && !*url_pass) {
			*url_user = strndup(q, (size_t)((colon ? colon : at) - q));
			*url_pass = colon ? strndup(colon + 1, (size_t)(at - colon - 1)) : NULL;
		}
		q = at + 1;
	}
	size_t host_len = 0;
	const char *port = NULL;
	if (!rc && *q == '[') { /* [ipv6]:port */
		const char *close = strchr(q, ']');
		if (!close)
			rc = bad_url(url, "opens a [ without closing it");
		else {
			host_len = (size_t)(close - q - 1);
			q++;
			port = close[1] == ':' ? close + 2 : NULL;
		}
	} else if (!rc) {
		const char *colon = strchr(q, ':');
		const char *slash = strchr(q, '/');
		host_len = colon ? (size_t)(colon - q) : slash ? (size_t)(slash - q) : strlen(q);
		port = colon ? colon + 1 : NULL;
	}
	if (!rc && (host_len == 0 || host_len > INFS__REMOTE_HOST_MAX))
		rc = bad_url(url, "has no host, or one too long");
	long v = 6379;
	if (!rc && port) {
		char *end;
		v = strtol(port, &end, 10);
		if (end == port || (*end && strcmp(end, "/") != 0) || v < 1 || v > 65535)
			rc = bad_url(url, "has a port that is not 1..65535");
	}
	if (!rc && infs__cluster_node(r, q, host_len, (int)v) < 0)
		rc = infs__error(INFS_ENOMEM, "infs_store_open: out of memory");
	free(one);
	return rc;
}

/* Node i in messages, as "host:port". */
static void name(infs__resp *r, size_t i)
{
	snprintf(r->where, sizeof r->where, "%s:%d", r->nodes[i].host, r->nodes[i].port);
}

/* Node i is the one of the last command. */
static void set_where(infs__resp *r, size_t i)
{
	r->at = i;
	name(r, i);
}

int infs__resp_init(infs__resp *r, const char *url, const char *user, const char *password, unsigned timeout_ms)
{
	memset(r, 0, sizeof *r);
	r->timeout_ms = timeout_ms ? timeout_ms : 2000;
	char *url_user = NULL, *url_pass = NULL;
	int rc = INFS_OK;
	for (const char *p = url;; p++) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == 0) {
			rc = bad_url(url, "has an empty seed");
			break;
		}
		size_t before = r->n_nodes;
		if ((rc = parse_seed(r, url, p, len, &url_user, &url_pass)))
			break;
		if (r->n_nodes == before) {
			rc = bad_url(url, "names a seed twice");
			break;
		}
		if (!comma)
			break;
		p = comma;
	}
	r->n_seeds = r->n_nodes;
	if (!rc) {
		set_where(r, 0);
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
	for (size_t i = 0; i < r->n_nodes; i++)
		if (r->nodes[i].c)
			redisFree(r->nodes[i].c);
	free(r->nodes);
	free(r->slots);
	infs__resp_arena_free(r);
	free(r->user);
	free(r->password);
	r->nodes = NULL;
	r->slots = NULL;
	r->user = r->password = NULL;
	r->n_nodes = r->n_seeds = r->cap = 0;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static bool timed_out(const infs__resp *r, double started)
{
	return now_ms() - started >= r->timeout_ms * 0.9;
}

/* Node i's failure as INFS_EIO; its connection is dropped, so the next
 * call connects again. */
static int fail(infs__resp *r, size_t i, const char *fn, const char *what, double started)
{
	infs__node *n = &r->nodes[i];
	char why[160];
	if (timed_out(r, started))
		snprintf(why, sizeof why, "no answer within %u ms", r->timeout_ms);
	else
		snprintf(why, sizeof why, "%s", n->c && n->c->errstr[0] ? n->c->errstr : "the connection failed");
	if (n->c) {
		redisFree(n->c);
		n->c = NULL;
	}
	name(r, i);
	return infs__error(INFS_EIO,
	                   "%s: remote tier %s: %s: %s; nothing was acknowledged (check that the server runs and "
	                   "answers there, then call again)",
	                   fn, r->where, what, why);
}

int infs__node_connect(infs__resp *r, size_t i, const char *fn)
{
	infs__node *n = &r->nodes[i];
	if (n->c)
		return INFS_OK;
	struct timeval tv = { (time_t)(r->timeout_ms / 1000), (suseconds_t)(r->timeout_ms % 1000) * 1000 };
	double t0 = now_ms();
	n->c = redisConnectWithTimeout(n->host, n->port, tv);
	if (!n->c)
		return infs__error(INFS_ENOMEM, "%s: out of memory for a connection to %s:%d", fn, n->host, n->port);
	if (n->c->err)
		return fail(r, i, fn, "connecting", t0);
	if (redisSetTimeout(n->c, tv) != REDIS_OK)
		return fail(r, i, fn, "setting the timeout", t0);
	/* Values are facts' KV, often megabytes: the reader keeps a buffer of
	 * up to 8 MiB between replies instead of growing it again for each. */
	n->c->reader->maxbuf = 8u << 20;
	if (!r->password)
		return INFS_OK;
	const char *argv[3] = { "AUTH", r->user ? r->user : r->password, r->password };
	int argc = r->user ? 3 : 2;
	redisReply *reply = redisCommandArgv(n->c, argc, argv, NULL);
	if (!reply)
		return fail(r, i, fn, "authenticating", t0);
	int rc = INFS_OK;
	if (reply->type == REDIS_REPLY_ERROR) {
		name(r, i);
		rc = infs__error(INFS_EIO, "%s: remote tier %s refused the user%s%s: %s (check the ACL user and password)",
		                 fn, r->where, r->user ? " " : "", r->user ? r->user : "", reply->str);
		redisFree(n->c);
		n->c = NULL;
	}
	freeReplyObject(reply);
	return rc;
}

int infs__resp_connect(infs__resp *r, const char *fn)
{
	if (r->nodes[r->at].c)
		return INFS_OK;
	int rc = INFS_EIO;
	for (size_t i = 0; i < r->n_seeds; i++) {
		if ((rc = infs__node_connect(r, i, fn)) == INFS_OK) {
			set_where(r, i);
			return INFS_OK;
		}
		if (rc != INFS_EIO)
			return rc;
	}
	if (r->n_seeds > 1)
		rc = infs__error_wrap(rc, "none of the %zu seeds answered; the last one", r->n_seeds);
	return rc;
}

bool infs__resp_connected(const infs__resp *r)
{
	return r->nodes[r->at].c != NULL;
}

static bool is_cmd(const char *const *argv, const size_t *argvlen, const char *name)
{
	size_t len = argvlen ? argvlen[0] : strlen(argv[0]);
	return len == strlen(name) && strncasecmp(argv[0], name, len) == 0;
}

/* Sends the commands todo[0..m) to node i, each after an ASKING when
 * asking (one before a MULTI covers its transaction), and reads their
 * replies into replies[todo[k]]. On a failed connection the replies read
 * here are freed again. */
static int exchange(infs__resp *r, size_t i, redisReply **replies, const size_t *todo, size_t m, bool asking,
                    const int *argc, const char *const *const *argv, const size_t *const *argvlen, const char *fn)
{
	static const char *const ask_argv[] = { "ASKING" };
	redisContext *c = r->nodes[i].c;
	double t0 = now_ms();
	bool in_multi = false;
	for (size_t k = 0; k < m; k++) {
		size_t j = todo[k];
		const size_t *len = argvlen ? argvlen[j] : NULL;
		if ((asking && !in_multi && redisAppendCommandArgv(c, 1, (const char **)ask_argv, NULL) != REDIS_OK) ||
		    redisAppendCommandArgv(c, argc[j], (const char **)argv[j], len) != REDIS_OK)
			return fail(r, i, fn, "sending", t0);
		if (is_cmd(argv[j], len, "MULTI"))
			in_multi = true;
		else if (is_cmd(argv[j], len, "EXEC") || is_cmd(argv[j], len, "DISCARD"))
			in_multi = false;
	}
	in_multi = false;
	for (size_t k = 0; k < m; k++) {
		size_t j = todo[k];
		const size_t *len = argvlen ? argvlen[j] : NULL;
		void *rep = NULL;
		bool ok = true;
		if (asking && !in_multi) {
			ok = infs__resp_get_reply(c, &rep) == REDIS_OK && rep;
			if (rep)
				freeReplyObject(rep);
			rep = NULL;
		}
		if (ok)
			ok = infs__resp_get_reply(c, &rep) == REDIS_OK && rep;
		if (!ok) {
			for (size_t q = 0; q < k; q++) {
				freeReplyObject(replies[todo[q]]);
				replies[todo[q]] = NULL;
			}
			return fail(r, i, fn, "waiting for the answer", t0);
		}
		replies[j] = rep;
		if (is_cmd(argv[j], len, "MULTI"))
			in_multi = true;
		else if (is_cmd(argv[j], len, "EXEC") || is_cmd(argv[j], len, "DISCARD"))
			in_multi = false;
	}
	return INFS_OK;
}

/* The node for a slot: the map's, or the last one used. */
static size_t node_for(const infs__resp *r, long slot)
{
	return slot >= 0 && r->slots && r->slots[slot] ? (size_t)r->slots[slot] - 1 : r->at;
}

size_t infs__resp_node(const infs__resp *r, const char *route)
{
	return node_for(r, route ? (long)infs__cluster_slot(route, strlen(route)) : -1);
}

/* Node dead stopped answering: its slots are asked of the other nodes
 * (a replica takes them over). Without a cluster, the next seed that
 * answers takes its place. Keeps the thread's error message. */
static void route_around(infs__resp *r, size_t dead, double deadline, const char *fn)
{
	char msg[1024];
	snprintf(msg, sizeof msg, "%s", infs_error_last());
	for (size_t k = 1; k < r->n_nodes && now_ms() < deadline; k++) {
		size_t j = (dead + k) % r->n_nodes;
		if (infs__cluster_refresh(r, j, fn) == INFS_OK)
			break;
		if (!r->slots && r->nodes[j].c) { /* it answers, but is no cluster */
			set_where(r, j);
			break;
		}
	}
	infs__error(INFS_EIO, "%s", msg);
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

int infs__resp_pipeline(infs__resp *r, const char *route, redisReply **replies, size_t n, const int *argc,
                        const char *const *const *argv, const size_t *const *argvlen, const char *fn)
{
	size_t *todo = malloc(n * sizeof *todo);
	if (!todo)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	bool txn = false;
	for (size_t i = 0; i < n; i++) {
		replies[i] = NULL;
		todo[i] = i;
		txn |= is_cmd(argv[i], argvlen ? argvlen[i] : NULL, "MULTI");
	}
	const double t0 = now_ms(), deadline = t0 + r->timeout_ms;
	long slot = route ? (long)infs__cluster_slot(route, strlen(route)) : -1;
	size_t node = node_for(r, slot), m = n;
	bool asking = false;
	int rc = INFS_OK;
	char redirected[128] = "";
	for (int round = 0;;) {
		double ta = now_ms();
		rc = infs__node_connect(r, node, fn);
		if (!rc)
			rc = exchange(r, node, replies, todo, m, asking, argc, argv, argvlen, fn);
		if (rc) {
			/* A node that went away (not one that is slow): with other
			 * nodes known, the call goes on where its slot is now, until
			 * the timeout. Every write is safe to send again. */
			if (rc != INFS_EIO || r->n_nodes < 2 || timed_out(r, ta) || now_ms() >= deadline)
				goto out;
			route_around(r, node, deadline, fn);
			size_t next = node_for(r, slot);
			if (next == node) /* not failed over yet */
				sleep_ms(50);
			node = next;
			asking = false;
			continue;
		}
		set_where(r, node);
		/* The cluster's redirections: MOVED before ASK before TRYAGAIN. */
		char kind = 0;
		unsigned to_slot = 0;
		size_t to = node, m2 = 0;
		for (size_t k = 0; k < m; k++) {
			char k1;
			unsigned s1 = 0;
			size_t n1 = node;
			redisReply *rep = replies[todo[k]];
			if (!infs__cluster_redirect(r, rep, node, &k1, &s1, &n1))
				continue;
			if (!kind || k1 == 'M' || (k1 == 'A' && kind == 'T')) {
				kind = k1, to_slot = s1, to = n1;
				snprintf(redirected, sizeof redirected, "%s", rep->str);
			}
			freeReplyObject(rep);
			replies[todo[k]] = NULL;
			todo[m2++] = todo[k];
		}
		if (!kind)
			break;
		if ((kind != 'T' && ++round > MAX_ROUNDS) || now_ms() >= deadline) {
			rc = infs__error(INFS_EIO, "%s: remote tier %s: the cluster kept redirecting or refusing the call "
			                 "(last: %s); nothing was acknowledged (check CLUSTER INFO, then call again)", fn,
			                 r->where, redirected);
			goto out;
		}
		if (txn) { /* a transaction goes again whole */
			for (size_t i = 0; i < n; i++) {
				if (replies[i])
					freeReplyObject(replies[i]);
				replies[i] = NULL;
				todo[i] = i;
			}
			m = n;
		} else {
			m = m2;
		}
		asking = false;
		if (kind == 'M') {
			r->moved++;
			/* the whole map, from the node that knows; one slot at least */
			if (infs__cluster_refresh(r, to, fn) != INFS_OK || node_for(r, to_slot) != to)
				if (infs__cluster_learn(r, to_slot, to) != INFS_OK) {
					rc = infs__error(INFS_ENOMEM, "%s: out of memory", fn);
					goto out;
				}
			node = slot >= 0 ? node_for(r, slot) : to;
		} else if (kind == 'A') {
			r->asked++;
			node = to;
			asking = true;
		} else {
			sleep_ms(20);
			node = node_for(r, slot);
		}
	}
	const char *err = NULL;
	for (size_t i = 0; i < n && !err; i++)
		if (replies[i]->type == REDIS_REPLY_ERROR)
			err = replies[i]->str;
	if (err)
		rc = infs__error(INFS_EIO, "%s: remote tier %s answered: %s; nothing was acknowledged", fn, r->where, err);
out:
	if (rc)
		for (size_t i = 0; i < n; i++)
			if (replies[i]) {
				freeReplyObject(replies[i]);
				replies[i] = NULL;
			}
	free(todo);
	return rc;
}

int infs__resp_command(infs__resp *r, const char *route, redisReply **reply, int argc, const char *const *argv,
                       const size_t *argvlen, const char *fn)
{
	return infs__resp_pipeline(r, route, reply, 1, &argc, &argv, argvlen ? &argvlen : NULL, fn);
}

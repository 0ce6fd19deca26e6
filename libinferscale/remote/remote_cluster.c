/* Redis Cluster for the remote tier: the slot of a key, the nodes a
 * cluster names, its redirections (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) and
 * its map of slots to primaries (CLUSTER SLOTS). A namespace's keys share
 * one hash tag, so all of a user's commands go to one node. */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "remote/remote_impl.h"

/* CRC16-CCITT (XMODEM), as the cluster computes it. */
static uint16_t crc16(const unsigned char *p, size_t n)
{
	uint16_t crc = 0;
	for (size_t i = 0; i < n; i++) {
		crc ^= (uint16_t)(p[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned infs__cluster_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);
	if (open) {
		size_t rest = len - (size_t)(open + 1 - key);
		const char *close = memchr(open + 1, '}', rest);
		if (close && close > open + 1)
			return crc16((const unsigned char *)open + 1, (size_t)(close - open - 1)) & (INFS__CLUSTER_SLOTS - 1);
	}
	return crc16((const unsigned char *)key, len) & (INFS__CLUSTER_SLOTS - 1);
}

long infs__cluster_node(infs__resp *r, const char *host, size_t host_len, int port)
{
	if (host_len > INFS__REMOTE_HOST_MAX)
		return -1;
	for (size_t i = 0; i < r->n_nodes; i++)
		if (r->nodes[i].port == port && strlen(r->nodes[i].host) == host_len &&
		    memcmp(r->nodes[i].host, host, host_len) == 0)
			return (long)i;
	if (r->n_nodes == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 8;
		infs__node *nodes = realloc(r->nodes, cap * sizeof *nodes);
		if (!nodes)
			return -1;
		r->nodes = nodes;
		r->cap = cap;
	}
	infs__node *n = &r->nodes[r->n_nodes];
	memset(n, 0, sizeof *n);
	memcpy(n->host, host, host_len);
	n->host[host_len] = '\0';
	n->port = port;
	return (long)r->n_nodes++;
}

/* "host:port" (the host may be empty, or an IPv6 address: the port is
 * after the last colon) as a node of r; node_from's host when empty. */
static bool node_of(infs__resp *r, const char *s, size_t node_from, size_t *node)
{
	const char *colon = strrchr(s, ':');
	if (!colon)
		return false;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || (*end && *end != '@') || port < 1 || port > 65535)
		return false;
	const char *host = s;
	size_t host_len = (size_t)(colon - s);
	if (host_len == 0) {
		host = r->nodes[node_from].host;
		host_len = strlen(host);
	}
	long i = infs__cluster_node(r, host, host_len, (int)port);
	if (i < 0)
		return false;
	*node = (size_t)i;
	return true;
}

bool infs__cluster_redirect(infs__resp *r, const redisReply *rep, size_t node_from, char *kind, unsigned *slot,
                            size_t *node)
{
	if (!rep || rep->type != REDIS_REPLY_ERROR)
		return false;
	if (strncmp(rep->str, "TRYAGAIN", 8) == 0 || strncmp(rep->str, "CLUSTERDOWN", 11) == 0) {
		*kind = 'T';
		return true;
	}
	const char *p;
	if (strncmp(rep->str, "MOVED ", 6) == 0)
		p = rep->str + 6, *kind = 'M';
	else if (strncmp(rep->str, "ASK ", 4) == 0)
		p = rep->str + 4, *kind = 'A';
	else
		return false;
	char *end;
	unsigned long s = strtoul(p, &end, 10);
	if (end == p || *end != ' ' || s >= INFS__CLUSTER_SLOTS)
		return false;
	*slot = (unsigned)s;
	return node_of(r, end + 1, node_from, node);
}

int infs__cluster_learn(infs__resp *r, unsigned slot, size_t node)
{
	if (!r->slots && !(r->slots = calloc(INFS__CLUSTER_SLOTS, sizeof *r->slots)))
		return INFS_ENOMEM;
	r->slots[slot] = (uint16_t)(node + 1);
	return INFS_OK;
}

int infs__cluster_refresh(infs__resp *r, size_t i, const char *fn)
{
	int rc = infs__node_connect(r, i, fn);
	if (rc)
		return rc;
	redisReply *rep = redisCommand(r->nodes[i].c, "CLUSTER SLOTS");
	if (!rep) { /* the node went away: the next command connects again */
		redisFree(r->nodes[i].c);
		r->nodes[i].c = NULL;
		return INFS_EIO;
	}
	uint16_t *map = calloc(INFS__CLUSTER_SLOTS, sizeof *map);
	rc = rep->type == REDIS_REPLY_ARRAY && map ? INFS_OK : INFS_EIO;
	/* [[start, end, [host, port, id, ...], replicas...], ...] */
	for (size_t k = 0; !rc && k < rep->elements; k++) {
		const redisReply *e = rep->element[k];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY ||
		    e->element[2]->elements < 2 || e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
		    e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
			rc = INFS_EIO;
			break;
		}
		long long lo = e->element[0]->integer, hi = e->element[1]->integer;
		const redisReply *host = e->element[2]->element[0];
		long long port = e->element[2]->element[1]->integer;
		if (lo < 0 || hi >= INFS__CLUSTER_SLOTS || lo > hi || port < 1 || port > 65535) {
			rc = INFS_EIO;
			break;
		}
		/* an empty or unknown ("?") host: the node asked */
		bool same = host->len == 0 || (host->len == 1 && host->str[0] == '?');
		long n = infs__cluster_node(r, same ? r->nodes[i].host : host->str,
		                            same ? strlen(r->nodes[i].host) : host->len, (int)port);
		if (n < 0) {
			rc = INFS_ENOMEM;
			break;
		}
		for (long long s = lo; s <= hi; s++)
			map[s] = (uint16_t)(n + 1);
	}
	freeReplyObject(rep);
	if (rc) {
		free(map);
		return rc;
	}
	free(r->slots);
	r->slots = map;
	return INFS_OK;
}

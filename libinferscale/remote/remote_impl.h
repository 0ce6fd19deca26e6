/* The remote tier's private parts: the servers' addresses and connections
 * (remote_client.c), replies read straight into hiredis's buffer
 * (remote_read.c), a namespace's values read straight into place
 * (remote_fetch.c), Redis Cluster's slots and redirections
 * (remote_cluster.c), the key names (remote_keys.c), the set of namespaces
 * this handle has brought in (remote_seen.c). */
#ifndef INFS_REMOTE_IMPL_H
#define INFS_REMOTE_IMPL_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INFS__REMOTE_PREFIX_MAX 64
#define INFS__REMOTE_HOST_MAX 255

/* One server: a single one, a seed, or a node a cluster named. */
typedef struct infs__node {
	char host[INFS__REMOTE_HOST_MAX + 1];
	int port;
	redisContext *c; /* NULL until connected, and after an error */
} infs__node;

#define INFS__CLUSTER_SLOTS 16384

/* The connections to the servers, used under the tier's lock. A single
 * server is nodes[0]. With a Redis Cluster, every command goes to the node
 * that owns its key's slot: the map is learned from the nodes' MOVED
 * answers and their CLUSTER SLOTS, ASK is followed once with ASKING, and a
 * node that stops answering makes the map be asked again of the others
 * (its replica takes its slots over). */
typedef struct infs__resp {
	infs__node *nodes;       /* the seeds first, then the nodes a cluster named */
	size_t n_nodes, n_seeds, cap;
	size_t at;               /* the node of the last command */
	uint16_t *slots;         /* slot -> node index + 1 (0: not known); NULL until a cluster redirected */
	char *user, *password;
	unsigned timeout_ms;
	unsigned long moved, asked;              /* redirections followed, for tests and stats */
	unsigned char *arena;                    /* fetched values land here, kept from one fetch to the next */
	size_t arena_cap;
	char where[INFS__REMOTE_HOST_MAX + 16]; /* "host:port" of the last node, for messages */
} infs__resp;

/* Parses a comma-separated list of seeds, each
 * "redis://[user[:password]@]host[:port][/]", "host:port" or "host" (port
 * 6379), into r; user and password, when not NULL, replace the URLs'. */
int infs__resp_init(infs__resp *r, const char *url, const char *user, const char *password, unsigned timeout_ms);
void infs__resp_free(infs__resp *r);

/* Connects to the first seed that answers (unless connected already) and
 * authenticates; INFS_EIO naming the servers and what to check. */
int infs__resp_connect(infs__resp *r, const char *fn);

/* Whether the connection of the last command is still up (its failure was
 * an answer, not a lost server). */
bool infs__resp_connected(const infs__resp *r);

/* Sends n commands in one round trip (cmds[i] has argc[i] arguments) to
 * the node that owns the slot of key route (NULL: any node; every key of
 * the commands must share route's slot) and reads their n replies into
 * replies[] (freed with freeReplyObject). Cluster redirections are
 * followed; a MULTI among the commands makes them all go again together.
 * A failed connection or an error reply is INFS_EIO naming the server, the
 * call fn and the next step; no reply is left to free then. */
int infs__resp_pipeline(infs__resp *r, const char *route, redisReply **replies, size_t n, const int *argc,
                        const char *const *const *argv, const size_t *const *argvlen, const char *fn);

/* redisGetReply, reading through the socket straight into the reader's
 * buffer (remote_read.c). */
int infs__resp_get_reply(redisContext *c, void **rep);

/* One command (infs__resp_pipeline of one). */
int infs__resp_command(infs__resp *r, const char *route, redisReply **reply, int argc, const char *const *argv,
                       const size_t *argvlen, const char *fn);

/* The node for key route's slot (the map's, or the last one used). */
size_t infs__resp_node(const infs__resp *r, const char *route);

/* Values fetched by infs__resp_get_values: val[i] (len[i] bytes) is key
 * i's, or NULL when the server holds none. */
typedef struct infs__values {
	unsigned char **val;
	size_t *len;
	uint32_t *crc;          /* infs__store_value_crc of each, taken as it arrived */
	size_t n;
	bool *own;              /* val[i] was allocated on its own; the others lie in the
	                           connections' arena, valid until the next fetch */
} infs__values;

/* GETs keys[0..n) (all of route's slot) into *out (remote_fetch.c); an
 * error as infs__resp_pipeline's, with nothing left to free. */
int infs__resp_get_values(infs__values *out, infs__resp *r, const char *route, const char *const *keys, size_t n,
                          const char *fn);
void infs__values_free(infs__values *v);
/* Gives the arena back (at close), or only when it is very large (after a
 * fetch). */
void infs__resp_arena_free(infs__resp *r);
void infs__resp_arena_trim(infs__resp *r);

/* Redis Cluster (remote_cluster.c). The slot of a key: CRC16 of its hash
 * tag (the bytes between the first { and the next }, when not empty), or
 * of the whole key, modulo 16384. */
unsigned infs__cluster_slot(const char *key, size_t len);

/* The node at host:port, added to r's list when new; -1 when out of
 * memory. */
long infs__cluster_node(infs__resp *r, const char *host, size_t host_len, int port);

/* A redirection in an error reply: "MOVED slot host:port" or "ASK slot
 * host:port" sets *kind ('M' or 'A'), *slot and *node (added to r's list);
 * "TRYAGAIN ..." and "CLUSTERDOWN ..." set *kind 'T' (wait, then again).
 * false for any other reply. The host may be empty (the node that
 * answered, node_from). */
bool infs__cluster_redirect(infs__resp *r, const redisReply *rep, size_t node_from, char *kind, unsigned *slot,
                            size_t *node);

/* Sets one slot's node (allocating the map at the first redirection). */
int infs__cluster_learn(infs__resp *r, unsigned slot, size_t node);

/* Asks node i for CLUSTER SLOTS and replaces the map with its answer;
 * INFS_OK or an error (the map is left as it was). */
int infs__cluster_refresh(infs__resp *r, size_t i, const char *fn);

/* Connects node i (again, after an error) and authenticates; defined in
 * remote_client.c. */
int infs__node_connect(infs__resp *r, size_t i, const char *fn);

/* Key names. The namespace is spelled with every byte outside
 * [A-Za-z0-9._-] as %XX, so that no name can reach another one's keys
 * (braces, colons, glob characters, newlines, anything), inside the hash
 * tag {prefix:ns} that keeps a namespace on one cluster slot. Each writes
 * a NUL-terminated key into buf (INFS__REMOTE_KEY_MAX bytes). */
#define INFS__REMOTE_KEY_MAX (2 * INFS__REMOTE_PREFIX_MAX + 3 * 255 + 48)
bool infs__remote_prefix_ok(const char *prefix);
size_t infs__remote_key_meta(char *buf, const char *prefix);
size_t infs__remote_key_next_id(char *buf, const char *prefix);
size_t infs__remote_key_ids(char *buf, const char *prefix, const char *ns);
size_t infs__remote_key_fact(char *buf, const char *prefix, const char *ns, uint64_t id);

/* The namespaces a handle has brought in (a set of names). */
typedef struct infs__seen {
	char **slots;
	size_t cap, n;
} infs__seen;

bool infs__seen_has(const infs__seen *set, const char *name);
int infs__seen_add(infs__seen *set, const char *name);
void infs__seen_free(infs__seen *set);

#endif

/* The remote tier's private parts: the server's address and connection
 * (remote_client.c), the key names (remote_keys.c), the set of namespaces
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

/* One connection to one server, used under the tier's lock. */
typedef struct infs__resp {
	char host[INFS__REMOTE_HOST_MAX + 1];
	int port;
	char *user, *password;
	unsigned timeout_ms;
	char where[INFS__REMOTE_HOST_MAX + 16]; /* "host:port", for messages */
	redisContext *c;                        /* NULL until connected, and after an error */
} infs__resp;

/* Parses "redis://[user[:password]@]host[:port][/]", "host:port" or
 * "host" (port 6379) into r; user and password, when not NULL, replace
 * the URL's. */
int infs__resp_init(infs__resp *r, const char *url, const char *user, const char *password, unsigned timeout_ms);
void infs__resp_free(infs__resp *r);

/* Connects (again, after an error) and authenticates; INFS_EIO naming the
 * server and what to check. */
int infs__resp_connect(infs__resp *r, const char *fn);

/* Sends n commands in one round trip (cmds[i] has argc[i] arguments) and
 * reads their n replies into replies[] (freed with freeReplyObject). A
 * failed connection or an error reply is INFS_EIO naming the server, the
 * call fn and the next step; no reply is left to free then. */
int infs__resp_pipeline(infs__resp *r, redisReply **replies, size_t n, const int *argc, const char *const *const *argv,
                        const size_t *const *argvlen, const char *fn);

/* One command (infs__resp_pipeline of one). */
int infs__resp_command(infs__resp *r, redisReply **reply, int argc, const char *const *argv, const size_t *argvlen,
                       const char *fn);

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

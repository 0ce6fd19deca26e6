/* A real Redis (or Valkey) server for the remote tier's tests: started on
 * a free loopback port in its own temporary directory, with its AOF
 * fsynced before every reply, and stopped (or killed) by the test. A
 * machine without redis-server skips the test (exit 77). */
#ifndef INFS_TEST_REDIS_SERVER_H
#define INFS_TEST_REDIS_SERVER_H

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct test_redis {
	pid_t pid;
	int port;
	char dir[512];
	char url[64];
	const char *extra[16]; /* more "--name value" arguments, NULL-terminated */
} test_redis;

static inline const char *test_redis_binary(void)
{
	static const char *const names[] = { "/usr/bin/redis-server", "/usr/local/bin/redis-server",
		                             "/usr/bin/valkey-server", "/usr/local/bin/valkey-server" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (access(names[i], X_OK) == 0)
			return names[i];
	return NULL;
}

/* Exits 77 (skipped) when there is no server to run. */
static inline void test_redis_require(void)
{
	if (!test_redis_binary()) {
		fprintf(stderr, "redis-server is not installed (scripts/setup.sh installs it): skipped\n");
		exit(77);
	}
}

/* A loopback port that was free a moment ago: bound to port 0, read back,
 * released. */
static inline int test_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int port = -1;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Whether something answers on the port (a TCP connect succeeds). */
static inline int test_port_open(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static inline void test_sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

/* Whether the server on the port answers PING: PONG, or a refusal for
 * want of a user (NOAUTH), but not LOADING. */
static inline int test_redis_ready(int port)
{
	struct timeval tv = { 1, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
	int ok = 0;
	if (c && !c->err && redisSetTimeout(c, tv) == REDIS_OK) {
		redisReply *r = redisCommand(c, "PING");
		ok = r && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
		           (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "LOADING", 7) != 0));
		if (r)
			freeReplyObject(r);
	}
	if (c)
		redisFree(c);
	return ok;
}

/* Starts the server on r->port (r->dir and r->port set) and waits up to
 * 10 s for it to accept connections; 0 on success. */
static inline int test_redis_spawn(test_redis *r)
{
	char port[16];
	snprintf(port, sizeof port, "%d", r->port);
	const char *argv[40] = { test_redis_binary(), "--port", port, "--bind", "127.0.0.1", "--dir", r->dir,
		                 "--appendonly", "yes", "--appendfsync", "always", "--save", "",
		                 "--daemonize", "no", "--logfile", "server.log", "--protected-mode", "yes" };
	int n = 19;
	for (int i = 0; i < 16 && r->extra[i]; i++)
		argv[n++] = r->extra[i];
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		/* The server dies with the test, even one that crashes. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	r->pid = pid;
	for (int i = 0; i < 1000; i++) {
		if (test_port_open(r->port) && test_redis_ready(r->port))
			return 0;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			r->pid = 0;
			return -1;
		}
		test_sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	r->pid = 0;
	return -1;
}

/* A fresh server in a fresh directory under $TMPDIR, on a free port (tried
 * again on another port if one was taken meanwhile). Exits on failure. */
static inline void test_redis_start(test_redis *r, const char *name)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(r->dir, sizeof r->dir, "%s/infs-redis-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(r->dir)) {
		perror("mkdtemp");
		exit(1);
	}
	for (int attempt = 0; attempt < 5; attempt++) {
		r->port = test_free_port();
		if (r->port > 0 && test_redis_spawn(r) == 0) {
			snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", r->port);
			return;
		}
	}
	fprintf(stderr, "could not start %s (see %s/server.log)\n", test_redis_binary(), r->dir);
	exit(1);
}

/* kill -9, and wait for the process. */
static inline void test_redis_kill(test_redis *r)
{
	if (r->pid > 0) {
		kill(r->pid, SIGKILL);
		waitpid(r->pid, NULL, 0);
	}
	r->pid = 0;
}

/* Starts it again on the same port and directory (its AOF). */
static inline int test_redis_restart(test_redis *r)
{
	for (int attempt = 0; attempt < 50; attempt++) {
		if (test_redis_spawn(r) == 0)
			return 0;
		test_sleep_ms(20);
	}
	return -1;
}

static inline int test_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Stops the server and removes its directory. */
static inline void test_redis_stop(test_redis *r)
{
	if (r->pid > 0) {
		kill(r->pid, SIGTERM);
		int st;
		for (int i = 0; i < 300 && r->pid; i++) {
			if (waitpid(r->pid, &st, WNOHANG) != 0)
				r->pid = 0;
			else
				test_sleep_ms(10);
		}
		test_redis_kill(r);
	}
	if (r->dir[0])
		nftw(r->dir, test_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	r->dir[0] = '\0';
}

#endif

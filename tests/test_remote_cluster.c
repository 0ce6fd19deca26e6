/* The remote tier on a real Redis Cluster that the test starts: three
 * primaries and three replicas on free loopback ports, joined with
 * redis-cli --cluster create. Facts of many users (so every primary holds
 * some) are put through a store whose only seed is one node and read back
 * through others: the client follows MOVED (the nodes count the MOVED they
 * answered), ASK while a slot is half migrated, and a primary killed with
 * kill -9: its replica is promoted, every acknowledged fact (WAIT for one
 * replica) is still answered, and new puts succeed. Skipped (77) without
 * redis-server and redis-cli. */
#include <hiredis/hiredis.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <time.h>

#include "redis_server.h"
#include "remote/remote_impl.h"
#include "test_store_util.h"

enum { N_NODES = 6, N_USERS = 24, PER_USER = 3 };

static test_redis nodes[N_NODES];
static infs_geometry geo;
static char seeds_one[64];
static uint64_t ids[N_USERS][PER_USER];

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void stop_all(void)
{
	for (int i = 0; i < N_NODES; i++)
		test_redis_stop(&nodes[i]);
}

static const char *cli_binary(void)
{
	static const char *const names[] = { "/usr/bin/redis-cli", "/usr/local/bin/redis-cli", "/usr/bin/valkey-cli",
		                             "/usr/local/bin/valkey-cli" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (access(names[i], X_OK) == 0)
			return names[i];
	return NULL;
}

static redisReply *cmd(int port, const char *fmt, ...)
{
	struct timeval tv = { 5, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
	redisReply *r = NULL;
	if (c && !c->err) {
		va_list ap;
		va_start(ap, fmt);
		r = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	if (c)
		redisFree(c);
	return r;
}

/* Whether the reply of an INFO section (or CLUSTER INFO) holds s. */
static bool info_has(int port, const char *what, const char *s)
{
	redisReply *r = cmd(port, what);
	bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, s);
	freeReplyObject(r);
	return ok;
}

/* The count of one error kind that a node answered (INFO errorstats). */
static long long errorstat(int port, const char *kind)
{
	redisReply *r = cmd(port, "INFO errorstats");
	long long n = 0;
	char key[64];
	snprintf(key, sizeof key, "errorstat_%s:count=", kind);
	const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, key) : NULL;
	if (p)
		n = atoll(p + strlen(key));
	freeReplyObject(r);
	return n;
}

static long long errorstats(const char *kind)
{
	long long n = 0;
	for (int i = 0; i < N_NODES; i++)
		if (nodes[i].pid > 0)
			n += errorstat(nodes[i].port, kind);
	return n;
}

/* The port of the primary that owns slot, as node `ask` sees it; -1 when
 * none. */
static int owner(int ask, unsigned slot)
{
	redisReply *r = cmd(ask, "CLUSTER SLOTS");
	int port = -1;
	for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
		redisReply *e = r->element[k];
		if ((unsigned long long)e->element[0]->integer <= slot && slot <= (unsigned long long)e->element[1]->integer)
			port = (int)e->element[2]->element[1]->integer;
	}
	freeReplyObject(r);
	return port;
}

/* The node id (CLUSTER MYID) of the node on port. */
static void node_id(char *buf, size_t n, int port)
{
	redisReply *r = cmd(port, "CLUSTER MYID");
	snprintf(buf, n, "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "?");
	freeReplyObject(r);
}

static unsigned slot_of_user(int ask, int u)
{
	redisReply *r = cmd(ask, "CLUSTER KEYSLOT {infs:user-%d}:ids", u);
	unsigned s = r && r->type == REDIS_REPLY_INTEGER ? (unsigned)r->integer : 0;
	freeReplyObject(r);
	return s;
}

static int node_index(int port)
{
	for (int i = 0; i < N_NODES; i++)
		if (nodes[i].port == port)
			return i;
	return -1;
}

/* Every node agrees the cluster is whole, and every primary has an
 * online replica (puts wait for one); bounded. */
static bool wait_cluster_ok(double seconds)
{
	double t0 = now_s();
	while (now_s() - t0 < seconds) {
		bool ok = true;
		int primaries = 0;
		for (int i = 0; ok && i < N_NODES; i++) {
			if (nodes[i].pid <= 0)
				continue;
			ok = info_has(nodes[i].port, "CLUSTER INFO", "cluster_state:ok");
			if (ok && info_has(nodes[i].port, "INFO replication", "role:master")) {
				primaries++;
				ok = info_has(nodes[i].port, "INFO replication", "state=online");
			}
		}
		if (ok && primaries == 3)
			return true;
		test_sleep_ms(100);
	}
	return false;
}

static void start_cluster(void)
{
	static const char *const extra[] = { "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		                             "--cluster-node-timeout", "1000", "--cluster-replica-validity-factor",
		                             "0" };
	for (int i = 0; i < N_NODES; i++) {
		memcpy(nodes[i].extra, extra, sizeof extra);
		test_redis_start(&nodes[i], "cluster");
	}
	char addr[N_NODES][32];
	const char *argv[N_NODES + 8] = { cli_binary(), "--cluster", "create" };
	int n = 3;
	for (int i = 0; i < N_NODES; i++) {
		snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", nodes[i].port);
		argv[n++] = addr[i];
	}
	argv[n++] = "--cluster-replicas";
	argv[n++] = "1";
	argv[n++] = "--cluster-yes";
	argv[n] = NULL;
	char log[600];
	snprintf(log, sizeof log, "%s/create.log", nodes[0].dir);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st = -1;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (!wait_cluster_ok(30)) {
		fprintf(stderr, "the cluster did not come up (see %s)\n", log);
		exit(1);
	}
	snprintf(seeds_one, sizeof seeds_one, "127.0.0.1:%d", owner(nodes[0].port, 0));
}

static int open_remote(infs_store **s, const char *file, const char *seeds, bool create, unsigned replicas)
{
	char path[600];
	scratch_path(path, sizeof path, file);
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = create ? INFS_OPEN_CREATE : 0;
	o.geometry = create ? &geo : NULL;
	o.identity = create ? TEST_IDENTITY : NULL;
	o.remote = seeds;
	o.remote_timeout_ms = 5000; /* a loaded machine */
	o.remote_replicas = replicas;
	return infs_store_open(s, path, &o);
}

static uint64_t seed_of(int u, int k)
{
	return 1000 + (uint64_t)u * 10 + (uint64_t)k;
}

static uint64_t put_one(infs_store *s, int u, uint64_t seed)
{
	char ns[32];
	snprintf(ns, sizeof ns, "user-%d", u);
	gen_fact g;
	gen_fact_make(&g, &geo, seed, 0);
	uint64_t id = 0;
	CHECK_OK(infs_fact_put(&id, s, ns, &g.fact));
	gen_fact_free(&g);
	return id;
}

/* Whether store s answers user u's acknowledged facts (and n in all). */
static bool user_intact(infs_store *s, int u, uint64_t n)
{
	char ns[32];
	snprintf(ns, sizeof ns, "user-%d", u);
	uint64_t count = 0;
	if (infs_fact_count(&count, s, ns) != INFS_OK || count != n) {
		fprintf(stderr, "user-%d: %llu facts (%s), want %llu\n", u, (unsigned long long)count, infs_error_last(),
		        (unsigned long long)n);
		return false;
	}
	for (int k = 0; k < PER_USER; k++) {
		infs_fact_record *r = NULL;
		bool ok = infs_fact_get(&r, s, ns, ids[u][k]) == INFS_OK && gen_fact_matches(r, &geo, seed_of(u, k), 0);
		infs_fact_record_free(r);
		if (!ok)
			return false;
	}
	return true;
}

/* Puts through a store whose only seed is one primary, and reads through
 * another: every user's slot that the seed does not own is a MOVED. */
static void test_moved(void)
{
	int seed_port = atoi(strchr(seeds_one, ':') + 1);
	int per_node[N_NODES] = { 0 };
	for (int u = 0; u < N_USERS; u++)
		per_node[node_index(owner(seed_port, slot_of_user(seed_port, u)))]++;
	int holders = 0;
	for (int i = 0; i < N_NODES; i++)
		holders += per_node[i] > 0;
	CHECK(holders == 3);                                /* every primary holds some users */
	CHECK(per_node[node_index(seed_port)] < N_USERS / 2); /* the seed does not own most */

	infs_store *a;
	CHECK_OK(open_remote(&a, "a.infs", seeds_one, true, 1));
	for (int u = 0; u < N_USERS; u++)
		for (int k = 0; k < PER_USER; k++)
			ids[u][k] = put_one(a, u, seed_of(u, k));
	infs_store_close(a);

	long long moved = errorstats("MOVED");
	infs_store *b;
	CHECK_OK(open_remote(&b, "b.infs", seeds_one, false, 0));
	int intact = 0;
	for (int u = 0; u < N_USERS; u++)
		intact += user_intact(b, u, PER_USER);
	CHECK(intact == N_USERS);
	long long followed = errorstats("MOVED") - moved;
	fprintf(stderr, "read %d users through seed %s: %lld MOVED followed\n", intact, seeds_one, followed);
	CHECK(followed >= 1);
	infs_store_close(b);
}

enum { BIG = 150 }; /* facts of a namespace fetched in three batches */

/* A namespace other than user-0 whose keys share user-0's slot. */
static void same_slot_ns(char *ns, size_t n, unsigned slot)
{
	for (int i = 0;; i++) {
		char key[64];
		snprintf(ns, n, "big-%d", i);
		int len = snprintf(key, sizeof key, "{infs:%s}:ids", ns);
		if (infs__cluster_slot(key, (size_t)len) == slot)
			return;
	}
}

/* Whether store s answers namespace ns's BIG facts, each as put. */
static bool big_intact(infs_store *s, const char *ns, const uint64_t *big)
{
	uint64_t count = 0;
	if (infs_fact_count(&count, s, ns) != INFS_OK || count != BIG) {
		fprintf(stderr, "%s: %llu facts (%s), want %d\n", ns, (unsigned long long)count, infs_error_last(), BIG);
		return false;
	}
	for (int k = 0; k < BIG; k++) {
		infs_fact_record *r = NULL;
		bool ok = infs_fact_get(&r, s, ns, big[k]) == INFS_OK && gen_fact_matches(r, &geo, 50000 + (uint64_t)k, 0);
		infs_fact_record_free(r);
		if (!ok)
			return false;
	}
	return true;
}

/* A slot half migrated: one of the user's facts already on the importing
 * node, which the old owner answers with ASK; then the migration finishes
 * and a store that knew the old owner is MOVED to the new one. In the same
 * slot, a namespace of BIG facts with every 16th migrated: its fetch sends
 * a batch before reading the replies of the one before, and an ASK among
 * those replies sends the rest the slow way. */
static void test_ask(void)
{
	int ask = nodes[0].port;
	int u = 0;
	unsigned slot = slot_of_user(ask, u);
	int from = owner(ask, slot), to = -1;
	for (int i = 0; i < N_NODES && to < 0; i++)
		if (nodes[i].port != from && info_has(nodes[i].port, "INFO replication", "role:master"))
			to = nodes[i].port;
	CHECK(from > 0 && to > 0);
	char from_id[64], to_id[64];
	node_id(from_id, sizeof from_id, from);
	node_id(to_id, sizeof to_id, to);

	infs_store *b; /* learns the slots' owners, the old one among them */
	CHECK_OK(open_remote(&b, "b.infs", seeds_one, false, 0));
	for (int v = 0; v < N_USERS; v++)
		CHECK(user_intact(b, v, PER_USER));
	char big_ns[32];
	uint64_t big[BIG];
	same_slot_ns(big_ns, sizeof big_ns, slot);
	for (int k = 0; k < BIG; k++) {
		gen_fact g;
		gen_fact_make(&g, &geo, 50000 + (uint64_t)k, 0);
		CHECK_OK(infs_fact_put(&big[k], b, big_ns, &g.fact));
		gen_fact_free(&g);
	}

	redisReply *r = cmd(to, "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id);
	CHECK(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	r = cmd(from, "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id);
	CHECK(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	r = cmd(from, "MIGRATE 127.0.0.1 %d {infs:user-%d}:f:%llu 0 5000", to, u, (unsigned long long)ids[u][1]);
	CHECK(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	for (int k = 7; k < BIG; k += 16) {
		r = cmd(from, "MIGRATE 127.0.0.1 %d {infs:%s}:f:%llu 0 5000", to, big_ns, (unsigned long long)big[k]);
		CHECK(r && r->type == REDIS_REPLY_STATUS);
		freeReplyObject(r);
	}

	long long asked = errorstat(from, "ASK");
	infs_store *c;
	CHECK_OK(open_remote(&c, "c.infs", seeds_one, false, 0));
	CHECK(user_intact(c, u, PER_USER));
	long long asked_user = errorstat(from, "ASK") - asked;
	CHECK(asked_user > 0);
	CHECK_OK(infs_prefetch(c, big_ns));
	CHECK(big_intact(c, big_ns, big));
	fprintf(stderr, "slot %u half migrated %d -> %d: %lld ASK followed for user-%d, %lld for %s (%d facts)\n", slot,
	        from, to, asked_user, u, errorstat(from, "ASK") - asked - asked_user, big_ns, BIG);
	CHECK(errorstat(from, "ASK") - asked > asked_user);
	infs_store_close(c);

	/* the rest of the slot, then the slot itself, to the new owner */
	r = cmd(from, "CLUSTER GETKEYSINSLOT %u 1000", slot);
	CHECK(r && r->type == REDIS_REPLY_ARRAY);
	for (size_t k = 0; r && k < r->elements; k++) {
		redisReply *m = cmd(from, "MIGRATE 127.0.0.1 %d %s 0 5000", to, r->element[k]->str);
		CHECK(m && m->type == REDIS_REPLY_STATUS);
		freeReplyObject(m);
	}
	freeReplyObject(r);
	for (int i = 0; i < N_NODES; i++) {
		if (!info_has(nodes[i].port, "INFO replication", "role:master"))
			continue;
		r = cmd(nodes[i].port, "CLUSTER SETSLOT %u NODE %s", slot, to_id);
		CHECK(r && r->type == REDIS_REPLY_STATUS);
		freeReplyObject(r);
	}
	CHECK(wait_cluster_ok(20));
	long long moved = errorstat(from, "MOVED");
	char ns[32];
	snprintf(ns, sizeof ns, "user-%d", u);
	CHECK_OK(infs_prefetch(b, ns));
	CHECK(user_intact(b, u, PER_USER));
	CHECK(errorstat(from, "MOVED") > moved);
	infs_store_close(b);
}

/* kill -9 of the primary that owns a user: its replica is promoted, the
 * facts acknowledged before are all answered, and puts go on. */
static void test_failover(void)
{
	int ask = nodes[0].port, seed_port = atoi(strchr(seeds_one, ':') + 1);
	int u = 1;
	unsigned slot = slot_of_user(ask, u);
	while (u < N_USERS - 1 && (owner(ask, slot) == seed_port || slot == slot_of_user(ask, 0)))
		slot = slot_of_user(ask, ++u);
	int victim = owner(ask, slot);
	int vi = node_index(victim);
	CHECK(vi >= 0 && victim != seed_port);
	if (vi < 0 || victim == seed_port)
		return;
	infs_store *a; /* connected to the victim before it dies */
	CHECK_OK(open_remote(&a, "a.infs", seeds_one, false, 1));
	CHECK(user_intact(a, u, PER_USER));

	double t0 = now_s();
	test_redis_kill(&nodes[vi]);
	int survivor = nodes[(vi + 1) % N_NODES].port;
	int promoted = -1;
	while (now_s() - t0 < 20) {
		promoted = owner(survivor, slot);
		if (promoted > 0 && promoted != victim && info_has(survivor, "CLUSTER INFO", "cluster_state:ok"))
			break;
		test_sleep_ms(100);
	}
	fprintf(stderr, "killed %d; slot %u on %d after %.1f s\n", victim, slot, promoted, now_s() - t0);
	CHECK(promoted > 0 && promoted != victim);

	/* every acknowledged fact, through the handle that knew the victim,
	 * and through a new one whose first seed is the dead node */
	char ns[32];
	snprintf(ns, sizeof ns, "user-%d", u);
	CHECK_OK(infs_prefetch(a, ns));
	CHECK(user_intact(a, u, PER_USER));
	char seeds[128];
	snprintf(seeds, sizeof seeds, "redis://127.0.0.1:%d,redis://%s", victim, seeds_one);
	infs_store *e;
	CHECK_OK(open_remote(&e, "e.infs", seeds, false, 0));
	int intact = 0;
	for (int v = 0; v < N_USERS; v++)
		intact += user_intact(e, v, PER_USER);
	CHECK(intact == N_USERS);

	/* new puts: on the promoted primary at once; waiting for a replica
	 * once the old primary is back as its replica */
	uint64_t id = put_one(e, u, 5000);
	CHECK(id > 0);
	infs_store_close(e);
	CHECK(test_redis_restart(&nodes[vi]) == 0);
	CHECK(wait_cluster_ok(20));
	uint64_t id2 = put_one(a, u, 5001);
	CHECK(id2 > id);
	CHECK_OK(infs_prefetch(a, ns));
	uint64_t n = 0;
	CHECK_OK(infs_fact_count(&n, a, ns));
	CHECK(n == PER_USER + 2);
	infs_store_close(a);
}

int main(void)
{
	test_redis_require();
	if (!cli_binary()) {
		fprintf(stderr, "redis-cli is not installed (scripts/setup.sh installs it): skipped\n");
		return 77;
	}
	atexit(stop_all);
	double t0 = now_s();
	geo = small_geometry(INFS_DTYPE_F16);
	scratch_init("remote-cluster");
	start_cluster();
	fprintf(stderr, "cluster up in %.1f s\n", now_s() - t0);
	test_moved();
	test_ask();
	test_failover();
	stop_all();
	scratch_cleanup();
	fprintf(stderr, "%.1f s in all\n", now_s() - t0);
	if (check_failures)
		fprintf(stderr, "%d checks failed\n", check_failures);
	return check_failures ? 1 : 0;
}

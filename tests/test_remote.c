/* The remote tier against a real Redis server that the test starts: facts
 * shared by two stores, a lost file rebuilt from the server, hostile
 * namespace names, damaged and foreign values refused, deletes and drops
 * reaching the server, a server that is down or slow, ACL users, WAIT. */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

#include "redis_server.h"
#include "test_store_util.h"

static test_redis srv;
static infs_geometry geo;
static char path_a[600], path_b[600];

static int open_remote(infs_store **s, const char *path, const char *url, bool create, unsigned timeout_ms)
{
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = create ? INFS_OPEN_CREATE : 0;
	o.geometry = create ? &geo : NULL;
	o.identity = create ? TEST_IDENTITY : NULL;
	o.remote = url;
	o.remote_timeout_ms = timeout_ms;
	return infs_store_open(s, path, &o);
}

static uint64_t put_seed(infs_store *s, const char *ns, uint64_t seed)
{
	gen_fact g;
	gen_fact_make(&g, &geo, seed, 0);
	uint64_t id = 0;
	CHECK_OK(infs_fact_put(&id, s, ns, &g.fact));
	gen_fact_free(&g);
	return id;
}

static int fact_is(infs_store *s, const char *ns, uint64_t id, uint64_t seed)
{
	infs_fact_record *r = NULL;
	int ok = infs_fact_get(&r, s, ns, id) == INFS_OK && gen_fact_matches(r, &geo, seed, 0);
	infs_fact_record_free(r);
	return ok;
}

static uint64_t count_of(infs_store *s, const char *ns)
{
	uint64_t n = UINT64_MAX;
	CHECK_OK(infs_fact_count(&n, s, ns));
	return n;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static redisContext *raw(void)
{
	redisContext *c = redisConnect("127.0.0.1", srv.port);
	CHECK(c && !c->err);
	return c;
}

/* Two stores on two files share one server: facts put through one are
 * answered by the other; ids are unique across both. */
static void test_shared(void)
{
	infs_store *a, *b;
	CHECK_OK(open_remote(&a, path_a, srv.url, true, 0));
	uint64_t id1 = put_seed(a, "maya", 1), id2 = put_seed(a, "maya", 2);
	CHECK(count_of(a, "maya") == 2); /* a's first use of maya */
	CHECK_OK(open_remote(&b, path_b, srv.url, true, 0));
	CHECK(count_of(b, "maya") == 2);
	CHECK(fact_is(b, "maya", id1, 1) && fact_is(b, "maya", id2, 2));
	uint64_t id3 = put_seed(b, "maya", 3);
	CHECK(id3 > id2);
	/* a used maya already: it sees b's fact after infs_prefetch */
	CHECK(count_of(a, "maya") == 2);
	CHECK_OK(infs_prefetch(a, "maya"));
	CHECK(count_of(a, "maya") == 3 && fact_is(a, "maya", id3, 3));
	/* retrieval answers from the facts brought in */
	float q[6] = { 0 };
	gen_fact g;
	gen_fact_make(&g, &geo, 3, 0);
	memcpy(q, g.fact.embedding, sizeof q);
	gen_fact_free(&g);
	infs_store_close(a);
	unlink(path_b);
	infs_store_close(b);
	CHECK_OK(open_remote(&b, path_b, srv.url, false, 0));
	infs_hit hits[3];
	size_t n_hits = 0;
	CHECK_OK(infs_retrieve(hits, &n_hits, b, "maya", q, 1, 3, NULL));
	CHECK(n_hits == 3 && hits[0].id == id3);
	infs_store_close(b);
}

/* The file is a cache: removed, it is made again from the server, which
 * answers the same facts. */
static void test_lost_file(void)
{
	infs_store *a;
	CHECK_OK(open_remote(&a, path_a, srv.url, false, 0));
	uint64_t ids[5];
	for (int i = 0; i < 5; i++)
		ids[i] = put_seed(a, "lost", 100 + (uint64_t)i);
	infs_store_close(a);
	CHECK(unlink(path_a) == 0);
	CHECK_OK(open_remote(&a, path_a, srv.url, false, 0)); /* no geometry: the server's */
	CHECK(count_of(a, "lost") == 5);
	for (int i = 0; i < 5; i++)
		CHECK(fact_is(a, "lost", ids[i], 100 + (uint64_t)i));
	infs_geometry g2;
	CHECK_OK(infs_store_geometry(&g2, a));
	CHECK(g2.n_layers == geo.n_layers && g2.embed_dim == geo.embed_dim);
	CHECK(strcmp(infs_store_identity(a), TEST_IDENTITY) == 0);
	infs_store_close(a);
}

/* Names that would break a naive key scheme: every one reads only its
 * own facts, from a store that never saw them. */
static void test_hostile_names(void)
{
	char longname[256];
	memset(longname, 'z', 255);
	longname[255] = '\0';
	longname[100] = '}';
	const char *names[] = { "u", "u}", "{u}", "u:ids", "u}:ids", "*", "u*", "%75", "u:f:1", "[a-z]?",
		                "x}y{z", "caf\xc3\xa9", longname, "{infs:u}", " ", "u\\" };
	enum { N = sizeof names / sizeof *names };
	uint64_t ids[N];
	infs_store *a, *b;
	CHECK_OK(open_remote(&a, path_a, srv.url, false, 0));
	for (int i = 0; i < N; i++)
		ids[i] = put_seed(a, names[i], 200 + (uint64_t)i);
	/* control characters are refused at the door, before the server */
	uint64_t id;
	gen_fact g;
	gen_fact_make(&g, &geo, 1, 0);
	CHECK_ERR(infs_fact_put(&id, a, "u\nv", &g.fact), INFS_EINVAL);
	CHECK_ERR(infs_fact_put(&id, a, "u\rv", &g.fact), INFS_EINVAL);
	gen_fact_free(&g);
	infs_store_close(a);
	unlink(path_b);
	CHECK_OK(open_remote(&b, path_b, srv.url, false, 0));
	for (int i = 0; i < N; i++) {
		uint64_t *list = NULL;
		size_t n = 0;
		CHECK_OK(infs_fact_list(&list, &n, b, names[i]));
		CHECK(n == 1 && list && list[0] == ids[i]);
		infs_free(list);
		CHECK(fact_is(b, names[i], ids[i], 200 + (uint64_t)i));
		/* another name's fact is not found through this one */
		CHECK_ERR(infs_fact_get(&(infs_fact_record *){ NULL }, b, names[i], ids[(i + 1) % N]), INFS_ENOTFOUND);
	}
	/* the server holds one tagged id set per name, none shared */
	redisContext *c = raw();
	redisReply *r = redisCommand(c, "KEYS %s", "{infs:*}:ids");
	CHECK(r && r->type == REDIS_REPLY_ARRAY);
	size_t sets = 0;
	for (size_t k = 0; r && k < r->elements; k++)
		sets += strchr(r->element[k]->str + 1, '{') == NULL && strchr(r->element[k]->str, '}') ==
		        strrchr(r->element[k]->str, '}');
	CHECK(r && sets == r->elements && r->elements >= N);
	freeReplyObject(r);
	redisFree(c);
	infs_store_close(b);
}

/* A value damaged on the server, or moved from another namespace, is
 * refused: nothing of the namespace enters the file. */
static void test_damaged_and_foreign(void)
{
	infs_store *a, *b;
	CHECK_OK(open_remote(&a, path_a, srv.url, false, 0));
	uint64_t good = put_seed(a, "dmg", 300);
	uint64_t bad = put_seed(a, "dmg", 301);
	uint64_t other = put_seed(a, "victim", 302);
	infs_store_close(a);
	redisContext *c = raw();
	char key[128];
	snprintf(key, sizeof key, "{infs:dmg}:f:%llu", (unsigned long long)bad);
	redisReply *r = redisCommand(c, "SETRANGE %s 60 X", key);
	CHECK(r && r->type == REDIS_REPLY_INTEGER);
	freeReplyObject(r);
	unlink(path_b);
	CHECK_OK(open_remote(&b, path_b, srv.url, false, 0));
	uint64_t n = 7;
	CHECK_ERR(infs_fact_count(&n, b, "dmg"), INFS_ECORRUPT);
	CHECK(strstr(infs_error_last(), "checksum") && strstr(infs_error_last(), "refused"));
	CHECK_ERR(infs_prefetch(b, "dmg"), INFS_ECORRUPT);
	infs_store_close(b);
	(void)good;

	/* victim's record copied under another namespace's key and id set */
	r = redisCommand(c, "GET {infs:victim}:f:%llu", (unsigned long long)other);
	CHECK(r && r->type == REDIS_REPLY_STRING);
	redisReply *w = redisCommand(c, "SET {infs:thief}:f:%llu %b", (unsigned long long)other, r->str, r->len);
	freeReplyObject(w);
	freeReplyObject(r);
	w = redisCommand(c, "SADD {infs:thief}:ids %llu", (unsigned long long)other);
	freeReplyObject(w);
	/* and a value that is no record at all */
	w = redisCommand(c, "SET {infs:junk}:f:5 hello");
	freeReplyObject(w);
	w = redisCommand(c, "SADD {infs:junk}:ids 5");
	freeReplyObject(w);
	unlink(path_b);
	CHECK_OK(open_remote(&b, path_b, srv.url, false, 0));
	CHECK_ERR(infs_prefetch(b, "thief"), INFS_ECORRUPT);
	CHECK(strstr(infs_error_last(), "another namespace"));
	CHECK_ERR(infs_prefetch(b, "junk"), INFS_ECORRUPT);
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&st, b));
	CHECK(st.n_facts == 0);
	CHECK(count_of(b, "victim") == 1 && fact_is(b, "victim", other, 302));
	infs_store_close(b);
	w = redisCommand(c, "DEL {infs:thief}:ids {infs:junk}:ids {infs:dmg}:ids");
	freeReplyObject(w);
	redisFree(c);
}

/* Deletes and drops reach the server. */
static void test_delete_drop(void)
{
	infs_store *a, *b;
	CHECK_OK(open_remote(&a, path_a, srv.url, false, 0));
	uint64_t x = put_seed(a, "del", 400), y = put_seed(a, "del", 401);
	put_seed(a, "gone", 402);
	put_seed(a, "gone", 403);
	CHECK_OK(infs_fact_delete(a, "del", x));
	CHECK_OK(infs_namespace_drop(a, "gone"));
	unlink(path_b);
	CHECK_OK(open_remote(&b, path_b, srv.url, false, 0));
	CHECK(count_of(b, "del") == 1 && fact_is(b, "del", y, 401));
	CHECK(count_of(b, "gone") == 0);
	/* a drop from a store that never cached the namespace */
	put_seed(a, "far", 404);
	CHECK_OK(infs_namespace_drop(b, "far"));
	redisContext *c = raw();
	redisReply *r = redisCommand(c, "EXISTS {infs:gone}:ids {infs:far}:ids");
	CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
	freeReplyObject(r);
	r = redisCommand(c, "KEYS {infs:gone}*");
	CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 0);
	freeReplyObject(r);
	redisFree(c);
	/* b's drop of far reaches a at its next prefetch */
	CHECK_OK(infs_prefetch(a, "far"));
	CHECK(count_of(a, "far") == 0);
	infs_store_close(a);
	infs_store_close(b);
}

/* Another identity under the same prefix is refused; another prefix is
 * another store. A file with facts is not pushed to an empty prefix. */
static void test_binding(void)
{
	infs_store *s;
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_CREATE;
	o.geometry = &geo;
	o.identity = "another-model/v2";
	o.remote = srv.url;
	char p[600];
	scratch_path(p, sizeof p, "other.infs");
	CHECK_ERR(infs_store_open(&s, p, &o), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "another-model/v2") && strstr(infs_error_last(), TEST_IDENTITY));
	o.remote_prefix = "tenant2";
	unlink(p);
	CHECK_OK(infs_store_open(&s, p, &o));
	uint64_t n = 9;
	CHECK_OK(infs_fact_count(&n, s, "maya"));
	CHECK(n == 0); /* prefix infs's maya is not tenant2's */
	infs_store_close(s);
	o.remote_prefix = "bad{prefix}";
	CHECK_ERR(infs_store_open(&s, p, &o), INFS_EINVAL);
	o.remote_prefix = NULL;
	o.identity = TEST_IDENTITY;
	o.flags = INFS_OPEN_READONLY;
	o.geometry = NULL;
	CHECK_ERR(infs_store_open(&s, path_a, &o), INFS_EINVAL);
	/* a file holding facts, opened over a prefix with no store */
	char q[600];
	scratch_path(q, sizeof q, "local.infs");
	CHECK_OK(open_store(&s, q, &geo, INFS_OPEN_CREATE, INFS_SYNC_FULL));
	put_seed(s, "mine", 1);
	infs_store_close(s);
	o.flags = 0;
	o.remote_prefix = "empty";
	CHECK_ERR(infs_store_open(&s, q, &o), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "cache"));
	/* version 2 of the options still opens a store, without a remote */
	infs_store_options v2;
	CHECK_OK(infs_store_options_init(&v2, 2));
	CHECK_OK(infs_store_open(&s, q, &v2));
	infs_store_close(s);
	o.remote = "http://127.0.0.1:1";
	CHECK_ERR(infs_store_open(&s, q, &o), INFS_EINVAL);
	o.remote = "127.0.0.1:99999";
	CHECK_ERR(infs_store_open(&s, q, &o), INFS_EINVAL);
	/* a list of seeds: the first that answers serves */
	o.remote = "127.0.0.1:1,,127.0.0.1:2";
	CHECK_ERR(infs_store_open(&s, q, &o), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "empty seed"));
	o.remote = "127.0.0.1:1,redis://127.0.0.1:1";
	CHECK_ERR(infs_store_open(&s, q, &o), INFS_EINVAL);
	char seeds[128];
	snprintf(seeds, sizeof seeds, "127.0.0.1:1,redis://127.0.0.1:2/");
	o.remote = seeds;
	CHECK_ERR(infs_store_open(&s, path_a, &o), INFS_EIO);
	CHECK(strstr(infs_error_last(), "2 seeds") && strstr(infs_error_last(), "127.0.0.1:2"));
	snprintf(seeds, sizeof seeds, "127.0.0.1:1,%s", srv.url);
	o.flags = 0;
	o.remote_prefix = NULL;
	CHECK_OK(infs_store_open(&s, path_a, &o));
	CHECK(count_of(s, "maya") == 3);
	infs_store_close(s);
}

/* A server that is down or does not answer: INFS_EIO within the timeout,
 * naming the server; the file holds nothing of what failed. */
static void test_down_and_slow(void)
{
	infs_store *a;
	CHECK_OK(open_remote(&a, path_a, srv.url, false, 300));
	put_seed(a, "slow", 500);
	put_seed(a, "slow", 501);
	uint64_t id = 0, before = count_of(a, "slow");
	/* stopped: it accepts connections but never answers */
	kill(srv.pid, SIGSTOP);
	gen_fact g;
	gen_fact_make(&g, &geo, 502, 0);
	double t0 = now_s();
	CHECK_ERR(infs_fact_put(&id, a, "slow", &g.fact), INFS_EIO);
	double took = now_s() - t0;
	CHECK(took < 3.0); /* 300 ms, and a loaded machine */
	char where[64];
	snprintf(where, sizeof where, "127.0.0.1:%d", srv.port);
	CHECK(strstr(infs_error_last(), where) && strstr(infs_error_last(), "300 ms"));
	CHECK(count_of(a, "slow") == before);
	/* a namespace that was never brought in stays out of the file */
	infs_store *b;
	unlink(path_b);
	t0 = now_s();
	CHECK_ERR(open_remote(&b, path_b, srv.url, false, 300), INFS_EIO);
	CHECK(now_s() - t0 < 3.0);
	CHECK(access(path_b, F_OK) != 0);
	kill(srv.pid, SIGCONT);
	CHECK_OK(open_remote(&b, path_b, srv.url, false, 300));
	kill(srv.pid, SIGSTOP);
	uint64_t n = 0;
	CHECK_ERR(infs_fact_count(&n, b, "slow"), INFS_EIO);
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&st, b));
	CHECK(st.n_facts == 0);
	kill(srv.pid, SIGCONT);
	CHECK(count_of(b, "slow") == 2);
	infs_store_close(b);

	/* down: connection refused, at once */
	test_redis_kill(&srv);
	t0 = now_s();
	CHECK_ERR(infs_fact_put(&id, a, "slow", &g.fact), INFS_EIO);
	CHECK(now_s() - t0 < 3.0 && strstr(infs_error_last(), where));
	uint64_t *live = NULL;
	size_t n_live = 0;
	CHECK_OK(infs_fact_list(&live, &n_live, a, "slow"));
	CHECK(n_live == before);
	if (n_live)
		CHECK_ERR(infs_fact_delete(a, "slow", live[0]), INFS_EIO);
	infs_free(live);
	CHECK(count_of(a, "slow") == before);
	unlink(path_b);
	CHECK_ERR(open_remote(&b, path_b, srv.url, false, 300), INFS_EIO);
	CHECK(access(path_b, F_OK) != 0);
	/* back up: the same handle carries on */
	CHECK(test_redis_restart(&srv) == 0);
	CHECK_OK(infs_fact_put(&id, a, "slow", &g.fact));
	CHECK(count_of(a, "slow") == before + 1);
	gen_fact_free(&g);
	infs_store_close(a);
}

/* WAIT: a write asked to reach a replica fails without one and succeeds
 * with one. */
static void test_replicas(void)
{
	infs_store *a;
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.remote = srv.url;
	o.remote_timeout_ms = 200;
	o.remote_replicas = 1;
	CHECK_OK(infs_store_open(&a, path_a, &o));
	gen_fact g;
	gen_fact_make(&g, &geo, 600, 0);
	uint64_t id;
	CHECK_ERR(infs_fact_put(&id, a, "rep", &g.fact), INFS_EIO);
	CHECK(strstr(infs_error_last(), "0 of 1 replicas"));
	fprintf(stderr, "(expected) %s\n", infs_error_last());
	CHECK(count_of(a, "rep") == 0);
	test_redis rep = { 0 };
	char primary[64];
	snprintf(primary, sizeof primary, "127.0.0.1 %d", srv.port);
	rep.extra[0] = "--replicaof";
	rep.extra[1] = primary;
	test_redis_start(&rep, "replica");
	/* wait (bounded) until the replica is in sync */
	redisContext *c = raw();
	for (int i = 0; i < 750; i++) {
		redisReply *r = redisCommand(c, "INFO replication");
		int up = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "connected_slaves:1") &&
		         strstr(r->str, "state=online");
		freeReplyObject(r);
		if (up)
			break;
		test_sleep_ms(20);
	}
	redisFree(c);
	/* a loaded machine: WAIT gets half of a generous timeout */
	infs_store_close(a);
	o.remote_timeout_ms = 6000;
	CHECK_OK(infs_store_open(&a, path_a, &o));
	CHECK_OK(infs_fact_put(&id, a, "rep", &g.fact));
	gen_fact_free(&g);
	infs_store_close(a);
	/* the replica answers the fact */
	char p[600];
	scratch_path(p, sizeof p, "replica.infs");
	infs_store *r;
	CHECK_OK(open_remote(&r, p, rep.url, false, 0));
	CHECK(fact_is(r, "rep", id, 600));
	infs_store_close(r);
	test_redis_stop(&rep);
}

/* An ACL user: the right password opens, a wrong one is refused. */
static void test_acl(void)
{
	test_redis acl = { 0 };
	const char *args[] = { "--user", "maya", "on", ">s3cret", "~*", "&*", "+@all", "--user", "default", "off" };
	memcpy(acl.extra, args, sizeof args);
	test_redis_start(&acl, "acl");
	char p[600], url[128];
	scratch_path(p, sizeof p, "acl.infs");
	infs_store *s;
	CHECK_ERR(open_remote(&s, p, acl.url, true, 0), INFS_EIO); /* no user: default is off */
	snprintf(url, sizeof url, "redis://maya:wrong@127.0.0.1:%d", acl.port);
	CHECK_ERR(open_remote(&s, p, url, true, 0), INFS_EIO);
	CHECK(strstr(infs_error_last(), "maya"));
	snprintf(url, sizeof url, "redis://maya:s3cret@127.0.0.1:%d", acl.port);
	CHECK_OK(open_remote(&s, p, url, true, 0));
	put_seed(s, "acl", 1);
	infs_store_close(s);
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	snprintf(url, sizeof url, "127.0.0.1:%d", acl.port);
	o.remote = url;
	o.remote_user = "maya";
	o.remote_password = "s3cret";
	unlink(p);
	CHECK_OK(infs_store_open(&s, p, &o));
	CHECK(count_of(s, "acl") == 1);
	infs_store_close(s);
	test_redis_stop(&acl);
}

int main(void)
{
	test_redis_require();
	geo = small_geometry(INFS_DTYPE_F16);
	scratch_init("remote");
	scratch_path(path_a, sizeof path_a, "a.infs");
	scratch_path(path_b, sizeof path_b, "b.infs");
	test_redis_start(&srv, "remote");
	test_shared();
	test_lost_file();
	test_hostile_names();
	test_damaged_and_foreign();
	test_delete_drop();
	test_binding();
	test_down_and_slow();
	test_replicas();
	test_acl();
	test_redis_stop(&srv);
	scratch_cleanup();
	if (check_failures)
		fprintf(stderr, "%d checks failed\n", check_failures);
	return check_failures ? 1 : 0;
}

/* The remote tier: the store's facts on a Redis or Valkey server, one
 * value per fact (the store's own record, checksums and all), one set of
 * ids per namespace, both under the namespace's hash tag; the file caches
 * what this handle used. docs/scale-out.md describes the keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/options.h"
#include "store/store.h"
#include "remote/remote.h"
#include "remote/remote_impl.h"

struct infs__remote {
	pthread_mutex_t mu; /* the connection, and every write's order (store.h: writer) */
	pthread_mutex_t seen_mu;
	infs__seen seen;    /* namespaces brought in by this handle */
	infs__resp resp;
	char prefix[INFS__REMOTE_PREFIX_MAX + 1];
	unsigned replicas;
	infs_store *store;
	infs_geometry geom; /* the server's, for a file created from it */
	char *identity;
};

#define ARGS(...) ((const char *const[]){ __VA_ARGS__ })

void infs__remote_free(infs__remote *r)
{
	if (!r)
		return;
	infs__resp_free(&r->resp);
	infs__seen_free(&r->seen);
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->seen_mu);
	free(r->identity);
	free(r);
}

/* The server's header value under the prefix, or *out NULL when none. */
static int get_meta(unsigned char **out, size_t *len, infs__remote *r, const char *fn)
{
	char key[INFS__REMOTE_KEY_MAX];
	infs__remote_key_meta(key, r->prefix);
	redisReply *rep;
	int rc = infs__resp_command(&r->resp, key, &rep, 2, ARGS("GET", key), NULL, fn);
	if (rc)
		return rc;
	*out = NULL;
	*len = 0;
	if (rep->type == REDIS_REPLY_STRING) {
		*out = malloc(rep->len ? rep->len : 1);
		if (!*out)
			rc = infs__error(INFS_ENOMEM, "%s: out of memory", fn);
		else
			memcpy(*out, rep->str, rep->len);
		*len = rep->len;
	}
	freeReplyObject(rep);
	return rc;
}

int infs__remote_prepare(infs__remote **out, infs_store_options *local, const char *path,
                         const infs_store_options *opts)
{
	static const char fn[] = "infs_store_open";
	*out = NULL;
	infs_store_options init = INFS_STORE_OPTIONS_INIT;
	*local = init;
	int rc = INFS__TAKE(*local, opts, infs__sizes_store_options, fn, "options");
	if (rc || !local->remote)
		return rc;
	local->version = INFS_STORE_OPTIONS_VERSION;
	const char *prefix = local->remote_prefix ? local->remote_prefix : "infs";
	if (!infs__remote_prefix_ok(prefix))
		return infs__error(INFS_EINVAL, "%s: remote_prefix \"%s\" must be 1..%d bytes of [A-Za-z0-9._-]", fn,
		                   prefix, INFS__REMOTE_PREFIX_MAX);
	if (local->flags & INFS_OPEN_READONLY)
		return infs__error(INFS_EINVAL, "%s: a store with a remote tier caches namespaces in its file, so it "
		                   "cannot be opened read-only (drop INFS_OPEN_READONLY)", fn);
	infs__remote *r = calloc(1, sizeof *r);
	if (!r)
		return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->seen_mu, NULL);
	strcpy(r->prefix, prefix);
	r->replicas = local->remote_replicas;
	if ((rc = infs__resp_init(&r->resp, local->remote, local->remote_user, local->remote_password,
	                          local->remote_timeout_ms)) ||
	    (rc = infs__resp_connect(&r->resp, fn))) {
		infs__remote_free(r);
		return rc;
	}
	/* A lost file is created again from the server's header. */
	if (access(path, F_OK) != 0 && (!local->geometry || !local->identity)) {
		unsigned char *meta;
		size_t len;
		if ((rc = get_meta(&meta, &len, r, fn))) {
			infs__remote_free(r);
			return rc;
		}
		if (meta) {
			rc = infs__header_value_decode(&r->geom, &r->identity, meta, len);
			free(meta);
			if (rc) {
				rc = infs__error_wrap(rc, "%s: the store header under prefix \"%s\" on %s", fn, r->prefix,
				                      r->resp.where);
				infs__remote_free(r);
				return rc;
			}
			local->geometry = &r->geom;
			local->identity = r->identity;
			local->flags |= INFS_OPEN_CREATE;
		}
	}
	*out = r;
	return INFS_OK;
}

/* store.h's hooks. writer brackets the ones that run under the store's
 * write lock, so they use the connection under r->mu already. */
static void hook_writer(void *data, bool begin)
{
	infs__remote *r = data;
	if (begin)
		pthread_mutex_lock(&r->mu);
	else
		pthread_mutex_unlock(&r->mu);
}

static int hook_take_id(void *data, uint64_t floor, uint64_t *id)
{
	infs__remote *r = data;
	static const char script[] = "local c = redis.call('INCR', KEYS[1]) local f = tonumber(ARGV[1]) "
	                             "if c < f then c = f redis.call('SET', KEYS[1], c) end return c";
	char key[INFS__REMOTE_KEY_MAX], fl[24];
	infs__remote_key_next_id(key, r->prefix);
	snprintf(fl, sizeof fl, "%llu", (unsigned long long)floor);
	redisReply *rep;
	int rc = infs__resp_command(&r->resp, key, &rep, 5, ARGS("EVAL", script, "1", key, fl), NULL, "infs_fact_put");
	if (rc)
		return rc;
	if (rep->type != REDIS_REPLY_INTEGER || rep->integer < 1)
		rc = infs__error(INFS_EIO, "infs_fact_put: remote tier %s: the id counter %s is not a number", r->resp.where,
		                 key);
	else
		*id = (uint64_t)rep->integer;
	freeReplyObject(rep);
	return rc;
}

/* How long WAIT waits for replicas: half the timeout, so that its answer
 * comes back within the other half. */
static unsigned wait_ms(const infs__remote *r)
{
	return r->resp.timeout_ms / 2 ? r->resp.timeout_ms / 2 : 1;
}

/* Sends the commands of a write between MULTI and EXEC, then WAIT when
 * replicas were asked for; INFS_OK once the server (and those replicas)
 * acknowledged it. */
static int transact(infs__remote *r, const char *route, size_t n, const int *argc, const char *const *const *argv,
                    const size_t *const *argvlen, const char *fn)
{
	enum { MAX = 6 };
	int ac[MAX + 3];
	const char *const *av[MAX + 3];
	const size_t *al[MAX + 3];
	char nrep[16], tmo[16];
	snprintf(nrep, sizeof nrep, "%u", r->replicas);
	snprintf(tmo, sizeof tmo, "%u", wait_ms(r));
	const char *const multi[] = { "MULTI" }, *const exec[] = { "EXEC" }, *const wait[] = { "WAIT", nrep, tmo };
	size_t k = 0;
	ac[k] = 1, av[k] = multi, al[k++] = NULL;
	for (size_t i = 0; i < n && i < MAX; i++)
		ac[k] = argc[i], av[k] = argv[i], al[k++] = argvlen ? argvlen[i] : NULL;
	ac[k] = 1, av[k] = exec, al[k++] = NULL;
	if (r->replicas)
		ac[k] = 3, av[k] = wait, al[k++] = NULL;
	redisReply *rep[MAX + 3];
	int rc = infs__resp_pipeline(&r->resp, route, rep, k, ac, av, al, fn);
	if (rc)
		return rc;
	redisReply *ex = rep[n + 1];
	if (ex->type != REDIS_REPLY_ARRAY || ex->elements != n)
		rc = infs__error(INFS_EIO, "%s: remote tier %s did not apply the write (EXEC answered %d); nothing was "
		                 "acknowledged", fn, r->resp.where, ex->type);
	else if (r->replicas && rep[n + 2]->integer < (long long)r->replicas)
		rc = infs__error(INFS_EIO, "%s: remote tier %s: %lld of %u replicas acknowledged within %u ms; the write "
		                 "is not acknowledged (check the replicas, or lower remote_replicas)", fn, r->resp.where,
		                 rep[n + 2]->integer, r->replicas, wait_ms(r));
	for (size_t i = 0; i < k; i++)
		freeReplyObject(rep[i]);
	return rc;
}

/* Deletes fact id of ns from the server; the caller has set fn. */
static int delete_fact(infs__remote *r, const char *ns, uint64_t id, const char *fn)
{
	char fkey[INFS__REMOTE_KEY_MAX], ikey[INFS__REMOTE_KEY_MAX], sid[24];
	infs__remote_key_fact(fkey, r->prefix, ns, id);
	infs__remote_key_ids(ikey, r->prefix, ns);
	snprintf(sid, sizeof sid, "%llu", (unsigned long long)id);
	const char *const del[] = { "DEL", fkey }, *const srem[] = { "SREM", ikey, sid };
	int ac[] = { 2, 3 };
	const char *const *av[] = { del, srem };
	return transact(r, fkey, 2, ac, av, NULL, fn);
}

static int hook_put_value(void *data, const char *ns, uint64_t id, const struct iovec *rec, int n)
{
	infs__remote *r = data;
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += rec[i].iov_len;
	char *value = malloc(len);
	if (!value)
		return infs__error(INFS_ENOMEM, "infs_fact_put: out of memory for a %zu-byte value", len);
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		if (rec[i].iov_len) /* an empty part (no metadata) may have no base */
			memcpy(value + at, rec[i].iov_base, rec[i].iov_len);
		at += rec[i].iov_len;
	}
	char fkey[INFS__REMOTE_KEY_MAX], ikey[INFS__REMOTE_KEY_MAX], sid[24];
	size_t fl = infs__remote_key_fact(fkey, r->prefix, ns, id), il = infs__remote_key_ids(ikey, r->prefix, ns);
	size_t sl = (size_t)snprintf(sid, sizeof sid, "%llu", (unsigned long long)id);
	const char *const set[] = { "SET", fkey, value }, *const sadd[] = { "SADD", ikey, sid };
	const size_t set_len[] = { 3, fl, len }, sadd_len[] = { 4, il, sl };
	int ac[] = { 3, 3 };
	const char *const *av[] = { set, sadd };
	const size_t *al[] = { set_len, sadd_len };
	int rc = transact(r, fkey, 2, ac, av, al, "infs_fact_put");
	free(value);
	if (rc == INFS_EIO && infs__resp_connected(&r->resp) && r->replicas) { /* the primary has it, too few replicas: take it back */
		char msg[1024];
		snprintf(msg, sizeof msg, "%s", infs_error_last());
		int undo = delete_fact(r, ns, id, "infs_fact_put");
		(void)undo;
		rc = infs__error(INFS_EIO, "%s", msg);
	}
	return rc;
}

static void hook_undo_put(void *data, const char *ns, uint64_t id)
{
	int rc = delete_fact(data, ns, id, "infs_fact_put");
	(void)rc; /* best effort: the put already failed */
}

/* Parses the members of a set of ids. */
static int parse_ids(uint64_t **out, size_t *n, const redisReply *rep, const char *ikey, infs__remote *r,
                     const char *fn)
{
	*out = NULL;
	*n = 0;
	if (rep->type != REDIS_REPLY_ARRAY)
		return infs__error(INFS_ECORRUPT, "%s: remote tier %s: %s is not a set", fn, r->resp.where, ikey);
	uint64_t *ids = rep->elements ? malloc(rep->elements * sizeof *ids) : NULL;
	if (rep->elements && !ids)
		return infs__error(INFS_ENOMEM, "%s: out of memory for %zu ids", fn, rep->elements);
	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *e = rep->element[i];
		char *end = NULL;
		unsigned long long v = e->type == REDIS_REPLY_STRING ? strtoull(e->str, &end, 10) : 0;
		if (!end || *end || v == 0) {
			free(ids);
			return infs__error(INFS_ECORRUPT, "%s: remote tier %s: %s holds a member that is not a fact id; "
			                   "refused", fn, r->resp.where, ikey);
		}
		ids[i] = v;
	}
	*out = ids;
	*n = rep->elements;
	return INFS_OK;
}

/* Drops namespace ns on the server: its facts and its set of ids, in one
 * transaction that a concurrent put makes run again. */
static int drop_ns(infs__remote *r, const char *ns)
{
	static const char fn[] = "infs_namespace_drop";
	char ikey[INFS__REMOTE_KEY_MAX];
	infs__remote_key_ids(ikey, r->prefix, ns);
	for (int attempt = 0; attempt < 16; attempt++) {
		redisReply *rep[2];
		int ac[] = { 2, 2 };
		const char *const watch[] = { "WATCH", ikey }, *const members[] = { "SMEMBERS", ikey };
		const char *const *av[] = { watch, members };
		int rc = infs__resp_pipeline(&r->resp, ikey, rep, 2, ac, av, NULL, fn);
		if (rc)
			return rc;
		uint64_t *ids;
		size_t n;
		rc = parse_ids(&ids, &n, rep[1], ikey, r, fn);
		freeReplyObject(rep[0]);
		freeReplyObject(rep[1]);
		if (rc)
			return rc;
		/* MULTI, DEL of the set and every fact, EXEC, one round trip. */
		char (*keys)[INFS__REMOTE_KEY_MAX] = malloc((n + 1) * sizeof *keys);
		const char **del = malloc((n + 2) * sizeof *del);
		if (!keys || !del) {
			free(keys);
			free(del);
			free(ids);
			return infs__error(INFS_ENOMEM, "%s: out of memory", fn);
		}
		del[0] = "DEL";
		del[1] = ikey;
		for (size_t i = 0; i < n; i++) {
			infs__remote_key_fact(keys[i], r->prefix, ns, ids[i]);
			del[i + 2] = keys[i];
		}
		const char *const multi[] = { "MULTI" }, *const exec[] = { "EXEC" };
		int ac2[] = { 1, (int)(n + 2), 1 };
		const char *const *av2[] = { multi, del, exec };
		redisReply *rep2[3];
		rc = infs__resp_pipeline(&r->resp, ikey, rep2, 3, ac2, av2, NULL, fn);
		free(keys);
		free(del);
		free(ids);
		if (rc)
			return rc;
		bool done = rep2[2]->type == REDIS_REPLY_ARRAY;
		for (int i = 0; i < 3; i++)
			freeReplyObject(rep2[i]);
		if (done && r->replicas) {
			char nrep[16], tmo[16];
			snprintf(nrep, sizeof nrep, "%u", r->replicas);
			snprintf(tmo, sizeof tmo, "%u", wait_ms(r));
			redisReply *w;
			if ((rc = infs__resp_command(&r->resp, ikey, &w, 3, ARGS("WAIT", nrep, tmo), NULL, fn)))
				return rc;
			long long got = w->integer;
			freeReplyObject(w);
			if (got < (long long)r->replicas)
				return infs__error(INFS_EIO, "%s: remote tier %s: %lld of %u replicas acknowledged the drop of "
				                   "\"%s\" within %u ms", fn, r->resp.where, got, r->replicas, ns,
				                   r->resp.timeout_ms);
		}
		if (done)
			return INFS_OK;
	}
	return infs__error(INFS_EBUSY, "%s: remote tier %s: namespace \"%s\" kept changing during the drop; call again",
	                   fn, r->resp.where, ns);
}

static int hook_erase(void *data, const char *ns, uint64_t id)
{
	infs__remote *r = data;
	return id ? delete_fact(r, ns, id, "infs_fact_delete") : drop_ns(r, ns);
}

/* Brings namespace ns as the server holds it into the store: its set of
 * ids, then the values the file lacks, read straight into one buffer. */
static int fetch_ns(infs__remote *r, const char *ns)
{
	static const char fn[] = "infs_prefetch";
	char ikey[INFS__REMOTE_KEY_MAX];
	infs__remote_key_ids(ikey, r->prefix, ns);
	redisReply *rep;
	int rc = infs__resp_command(&r->resp, ikey, &rep, 2, ARGS("SMEMBERS", ikey), NULL, fn);
	if (rc)
		return rc;
	uint64_t *ids, *miss = NULL;
	size_t n, n_miss = 0;
	rc = parse_ids(&ids, &n, rep, ikey, r, fn);
	freeReplyObject(rep);
	if (!rc)
		rc = infs__store_missing(&miss, &n_miss, r->store, ns, ids, n);
	char (*keys)[INFS__REMOTE_KEY_MAX] = n_miss ? malloc(n_miss * sizeof *keys) : NULL;
	const char **key = n_miss ? malloc(n_miss * sizeof *key) : NULL;
	const unsigned char **vals = n_miss ? calloc(n_miss, sizeof *vals) : NULL;
	size_t *lens = n_miss ? calloc(n_miss, sizeof *lens) : NULL;
	uint32_t *crcs = n_miss ? calloc(n_miss, sizeof *crcs) : NULL;
	uint64_t *want = n_miss ? calloc(n_miss, sizeof *want) : NULL;
	if (!rc && n_miss && (!keys || !key || !vals || !lens || !crcs || !want))
		rc = infs__error(INFS_ENOMEM, "%s: out of memory for %zu values", fn, n_miss);
	for (size_t i = 0; !rc && i < n_miss; i++) {
		infs__remote_key_fact(keys[i], r->prefix, ns, miss[i]);
		key[i] = keys[i];
	}
	infs__values got = { 0 };
	if (!rc && n_miss)
		rc = infs__resp_get_values(&got, &r->resp, ikey, key, n_miss, fn);
	size_t n_vals = 0;
	for (size_t i = 0; !rc && i < n_miss; i++)
		if (got.val[i]) { /* none: deleted since SMEMBERS, and the set no longer has it either */
			vals[n_vals] = got.val[i];
			lens[n_vals] = got.len[i];
			crcs[n_vals] = got.crc[i];
			want[n_vals++] = miss[i];
		}
	if (!rc)
		rc = infs__store_install(r->store, ns, ids, n, vals, lens, want, n_vals, r->resp.where, crcs);
	infs__values_free(&got);
	infs__resp_arena_trim(&r->resp);
	free(keys);
	free(key);
	free(vals);
	free(lens);
	free(crcs);
	free(want);
	free(miss);
	free(ids);
	return rc;
}

static int hook_use(void *data, const char *ns, bool refresh)
{
	infs__remote *r = data;
	pthread_mutex_lock(&r->seen_mu);
	bool seen = infs__seen_has(&r->seen, ns);
	pthread_mutex_unlock(&r->seen_mu);
	if (seen && !refresh)
		return INFS_OK;
	pthread_mutex_lock(&r->mu);
	int rc = fetch_ns(r, ns);
	pthread_mutex_unlock(&r->mu);
	if (!rc) {
		pthread_mutex_lock(&r->seen_mu);
		rc = infs__seen_add(&r->seen, ns);
		pthread_mutex_unlock(&r->seen_mu);
	}
	return rc;
}

static void hook_destroy(void *data)
{
	infs__remote_free(data);
}

int infs__remote_attach(infs__remote *r, infs_store *s)
{
	static const char fn[] = "infs_store_open";
	r->store = s;
	unsigned char *ours = NULL, *theirs = NULL;
	size_t ours_len, theirs_len;
	int rc = infs__store_header_value(&ours, &ours_len, s);
	char key[INFS__REMOTE_KEY_MAX];
	infs__remote_key_meta(key, r->prefix);
	/* The first store under a prefix binds it to its geometry and identity. */
	redisReply *rep = NULL;
	if (!rc) {
		infs_store_stats st = { .version = 1 };
		infs_store_stats_get(&st, s);
		rc = get_meta(&theirs, &theirs_len, r, fn);
		if (!rc && !theirs && st.n_facts + st.n_segments > 0)
			rc = infs__error(INFS_EINVAL,
			                 "%s: %s holds %llu records, but %s holds no store under prefix \"%s\": a file with a "
			                 "remote tier is a cache of the server (open an empty or new file, or pick the "
			                 "prefix that holds these facts)", fn, infs__store_path(s),
			                 (unsigned long long)(st.n_facts + st.n_segments), r->resp.where, r->prefix);
		else if (!rc && !theirs) {
			const char *const argv[] = { "SET", key, (const char *)ours, "NX" };
			const size_t argvlen[] = { 3, strlen(key), ours_len, 2 };
			rc = infs__resp_command(&r->resp, key, &rep, 4, argv, argvlen, fn);
			if (rep)
				freeReplyObject(rep);
			if (!rc)
				rc = get_meta(&theirs, &theirs_len, r, fn);
		}
	}
	if (!rc && (!theirs || theirs_len != ours_len || memcmp(theirs, ours, ours_len) != 0)) {
		infs_geometry g;
		char *id = NULL;
		int drc = theirs ? infs__header_value_decode(&g, &id, theirs, theirs_len) : INFS_ECORRUPT;
		rc = infs__error(INFS_EINVAL,
		                 "%s: the store under prefix \"%s\" on %s was made for %s%s%s, not for this file's \"%s\" "
		                 "and geometry (pick another remote_prefix, or open the file that matches it)", fn,
		                 r->prefix, r->resp.where, drc ? "something this library cannot read" : "\"",
		                 drc ? "" : id, drc ? "" : "\" or another geometry", infs_store_identity(s));
		free(id);
	}
	free(ours);
	free(theirs);
	if (rc) {
		infs__remote_free(r);
		return rc;
	}
	struct infs__store_ext *x = infs__store_ext(s, INFS_EXT_REMOTE);
	x->destroy = hook_destroy;
	x->writer = hook_writer;
	x->take_id = hook_take_id;
	x->put_value = hook_put_value;
	x->undo_put = hook_undo_put;
	x->erase = hook_erase;
	x->use = hook_use;
	x->data = r;
	return INFS_OK;
}

/* The remote tier's fetch throughput against redis-benchmark on the same
 * server in the same run: users' facts (SmolLM2-135M and Llama-3-8B
 * geometry values) put once, then each user brought whole into a store's
 * file by infs_prefetch, timed, eleven times; after each fetch one run of
 * redis-benchmark GETs of values of the same size, over as many distinct
 * keys as the user has facts, one connection pipelined as deep as the fetch
 * sends. Medians, and the median of the per-rep ratios. Then the time to
 * first token of a user whose facts are only on the server against one
 * whose facts are local (remote_ttft.c). It starts its own redis-server on
 * a free loopback port and stops it.
 * usage: bench_remote [OUT.json]   (default: print the JSON only) */
#include <stdbool.h>
#include <time.h>

#include "redis_server.h"
#include "inferscale/inferscale.h"
#include "remote_ttft.h"

typedef struct shape {
	const char *name;
	uint32_t layers, kv_heads, head_dim;
	infs_dtype dtype;
	uint32_t tokens; /* per fact */
	uint32_t facts;  /* per user */
} shape;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The first three fields of /proc/loadavg, or "?": the machine is shared. */
static void load_average(char *buf, size_t n)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double a = 0, b = 0, c = 0;
	if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
		snprintf(buf, n, "%.2f %.2f %.2f", a, b, c);
	else
		snprintf(buf, n, "?");
	if (f)
		fclose(f);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The GET rate of one redis-benchmark run over keys distinct values of size
 * bytes (as many as a user's facts), or -1. */
static double redis_benchmark_once(int port, size_t size, unsigned keys, unsigned n, unsigned depth)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd,
	         "redis-benchmark -h 127.0.0.1 -p %d -c 1 -P %u -r %u -n %u -d %zu -t set,get --csv 2>/dev/null", port,
	         depth, keys, n, size);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	char line[1024];
	double rps = -1;
	while (fgets(line, sizeof line, p))
		if (!strncmp(line, "\"GET\",\"", 7))
			rps = strtod(line + 7, NULL);
	pclose(p);
	return rps;
}

/* The same, the first of three tries that gives a rate: with a megabyte
 * pipelined 64 deep, redis-benchmark now and then ends with "All clients
 * disconnected" and no rate. */
static double redis_benchmark_get(int port, size_t size, unsigned keys, unsigned n, unsigned depth)
{
	double rps = -1;
	for (int tries = 0; tries < 3 && rps <= 0; tries++)
		rps = redis_benchmark_once(port, size, keys, n, depth);
	return rps;
}

/* The GETs a fetch has in flight at most: two batches of up to 64 values
 * and 16 MiB each (remote_fetch.c), no more than the user's facts; the
 * pipeline depth redis-benchmark is given. */
static unsigned fetch_depth(size_t value, unsigned facts)
{
	size_t batch = ((size_t)16 << 20) / value;
	batch = batch < 1 ? 1 : batch > 64 ? 64 : batch;
	return 2 * batch < facts ? (unsigned)(2 * batch) : facts;
}

int main(int argc, char **argv)
{
	if (!test_redis_binary() || system("command -v redis-benchmark > /dev/null") != 0) {
		fprintf(stderr, "bench_remote: redis-server and redis-benchmark are needed (scripts/setup.sh)\n");
		return 77;
	}
	const shape shapes[] = {
		{ "SmolLM2-135M f16, 1 token", 30, 3, 64, INFS_DTYPE_F16, 1, 200 },
		{ "SmolLM2-135M f16, 16 tokens", 30, 3, 64, INFS_DTYPE_F16, 16, 50 },
		{ "Llama-3-8B bf16, 16 tokens", 32, 8, 128, INFS_DTYPE_BF16, 16, 20 },
		{ "Llama-3-8B fp8, 16 tokens", 32, 8, 128, INFS_DTYPE_FP8_E4M3, 16, 20 },
	};
	enum { N_SHAPES = sizeof shapes / sizeof *shapes, REPS = 11 };
	test_redis srv = { 0 };
	/* Throughput, not durability, is measured: no AOF here. */
	srv.extra[0] = "--appendonly";
	srv.extra[1] = "no";
	test_redis_start(&srv, "bench");
	char dir[600];
	snprintf(dir, sizeof dir, "%s", srv.dir);

	char load_before[64], load_after[64];
	load_average(load_before, sizeof load_before);
	char json[8192];
	size_t at = (size_t)snprintf(json, sizeof json, "{\n  \"server\": \"redis-server on loopback, started by "
	                             "bench_remote\",\n  \"command\": \"build/benchmarks/bench_remote "
	                             "benchmarks/results/remote-cpu.json\",\n  \"reps\": %d,\n  \"statistic\": \"median of the reps; ratio: median of the per-rep ratios (one fetch, then one redis-benchmark run), with their min and max\",\n  \"rows\": [\n", REPS);
	int rc = 0;
	for (int si = 0; si < N_SHAPES && !rc; si++) {
		const shape *sh = &shapes[si];
		infs_geometry g;
		infs_geometry_init(&g, INFS_GEOMETRY_VERSION);
		g.n_layers = sh->layers, g.n_kv_heads = sh->kv_heads, g.head_dim = sh->head_dim,
		g.rotary_dim = sh->head_dim;
		g.kv_dtype = sh->dtype;
		g.embed_dim = 384;
		char prefix[32], url[64], path[700];
		snprintf(prefix, sizeof prefix, "bench%d", si);
		snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
		infs_store_options o = INFS_STORE_OPTIONS_INIT;
		o.flags = INFS_OPEN_CREATE;
		o.geometry = &g;
		o.identity = sh->name;
		o.sync = INFS_SYNC_OFF;
		o.remote = url;
		o.remote_prefix = prefix;
		o.remote_timeout_ms = 10000;
		snprintf(path, sizeof path, "%s/put%d.infs", dir, si);
		infs_store *s = NULL;
		if (infs_store_open(&s, path, &o)) {
			fprintf(stderr, "bench_remote: %s\n", infs_error_last());
			return 1;
		}
		size_t kv = infs_geometry_kv_token_bytes(&g) * sh->tokens;
		unsigned char *k = malloc(kv), *v = malloc(kv);
		int32_t *tok = calloc(sh->tokens, sizeof *tok);
		float emb[384];
		uint64_t st = 1 + (uint64_t)si;
		for (size_t i = 0; i < kv; i++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			k[i] = (unsigned char)(st >> 56) & 0x3f; /* finite values in every dtype */
			v[i] = (unsigned char)(st >> 48) & 0x3f;
		}
		for (int i = 0; i < 384; i++)
			emb[i] = (float)i / 384.0f;
		infs_fact f = INFS_FACT_INIT;
		f.n_tokens = sh->tokens, f.tokens = tok, f.embedding = emb, f.k = k, f.v = v;
		for (int u = 0; u <= REPS && !rc; u++) {
			char user[16];
			snprintf(user, sizeof user, "user%d", u);
			for (uint32_t i = 0; i < sh->facts && !rc; i++) {
				uint64_t id;
				rc = infs_fact_put(&id, s, user, &f);
			}
		}
		infs_store_close(s);
		if (rc) {
			fprintf(stderr, "bench_remote: %s\n", infs_error_last());
			return 1;
		}
		/* Each rep: a serving node's cache at steady size. A store file of
		 * its own takes one user (its handle's arena filled, as on a node
		 * that has fetched before), then the user timed; the file is
		 * removed after, so the next rep writes into page-cache pages freed
		 * a moment before, as a node that evicts users to take new ones
		 * does (a file that only grows would time this VM's first touch of
		 * memory: "growing_file" below). One redis-benchmark run follows
		 * each fetch; the ratio is taken per rep, so that a moment of load
		 * on the shared machine moves both of its sides. */
		size_t value = 0; /* the server's value: our record, head and body */
		double ours[REPS], theirs[REPS], ratio[REPS];
		snprintf(path, sizeof path, "%s/fetch%d.infs", dir, si);
		o.flags = 0;
		o.geometry = NULL;
		o.identity = NULL;
		for (int r = 0; r < REPS && !rc; r++) {
			char user[16];
			snprintf(user, sizeof user, "user%d", REPS);
			s = NULL;
			if ((rc = infs_store_open(&s, path, &o)) || (rc = infs_prefetch(s, user)))
				break;
			snprintf(user, sizeof user, "user%d", r);
			infs_store_stats before = { .version = 1 }, after = { .version = 1 };
			infs_store_stats_get(&before, s);
			double t0 = now_s();
			rc = infs_prefetch(s, user);
			double t = now_s() - t0;
			infs_store_stats_get(&after, s);
			if (!rc && after.n_facts - before.n_facts != sh->facts)
				rc = INFS_ECORRUPT;
			/* the same record bytes as the server's value */
			value = (after.live_bytes - before.live_bytes) / sh->facts;
			infs_store_close(s);
			s = NULL;
			unlink(path);
			if (rc)
				break;
			ours[r] = (double)value * sh->facts / t / 1e6;
			/* as many distinct values as the user has, each read about 8
			 * times (a key never set answers nil: e^-8 of them) */
			theirs[r] = redis_benchmark_get(srv.port, value, sh->facts, sh->facts * 8,
			                                fetch_depth(value, sh->facts)) * (double)value / 1e6;
			ratio[r] = ours[r] / theirs[r];
			if (theirs[r] <= 0)
				rc = INFS_EIO;
		}
		if (s)
			infs_store_close(s);
		unlink(path);
		if (rc) {
			fprintf(stderr, "bench_remote: %s\n", infs_error_last());
			return 1;
		}
		qsort(ours, REPS, sizeof *ours, cmp_double);
		qsort(theirs, REPS, sizeof *theirs, cmp_double);
		qsort(ratio, REPS, sizeof *ratio, cmp_double);
		fprintf(stderr,
		        "%-30s value %8zu B x %3u facts: ours %8.1f MB/s, redis-benchmark GET %8.1f MB/s, ratio %.2f "
		        "(%.2f-%.2f)\n",
		        sh->name, value, sh->facts, ours[REPS / 2], theirs[REPS / 2], ratio[REPS / 2], ratio[0],
		        ratio[REPS - 1]);
		at += (size_t)snprintf(json + at, sizeof json - at,
		                       "    {\"geometry\": \"%s\", \"value_bytes\": %zu, \"facts\": %u, \"ours_mb_per_s\": "
		                       "%.1f, \"redis_benchmark_mb_per_s\": %.1f, \"ratio\": %.3f, \"ratio_min\": %.3f, "
		                       "\"ratio_max\": %.3f, \"pipeline\": %u}%s\n",
		                       sh->name, value, sh->facts, ours[REPS / 2], theirs[REPS / 2], ratio[REPS / 2],
		                       ratio[0], ratio[REPS - 1], fetch_depth(value, sh->facts), si + 1 < N_SHAPES ? "," : "");
		free(k);
		free(v);
		free(tok);
	}
	char ttft[1024], url[64];
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
	rc = remote_ttft(ttft, sizeof ttft, url, dir, INFS_SOURCE_ROOT "/examples/memory/facts.jsonl", 1);
	if (rc && rc != INFS_ENOTFOUND) {
		test_redis_stop(&srv);
		return 1;
	}
	load_average(load_after, sizeof load_after);
	at += (size_t)snprintf(json + at, sizeof json - at,
	                       "  ],\n  \"ttft\": [\n%s%s%s  ],\n  \"load_average\": {\"before\": \"%s\", \"after\": "
	                       "\"%s\"}\n}\n", rc ? "" : "    ", rc ? "" : ttft, rc ? "" : "\n", load_before, load_after);
	test_redis_stop(&srv);
	if (argc > 1) {
		FILE *out = fopen(argv[1], "w");
		if (!out || fputs(json, out) < 0 || fclose(out) != 0) {
			fprintf(stderr, "bench_remote: cannot write %s\n", argv[1]);
			return 1;
		}
	}
	fputs(json, stdout);
	return 0;
}

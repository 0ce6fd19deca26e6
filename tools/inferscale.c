/* inferscale — the command-line tool of the main job:
 *   encode  facts from JSONL into a store (KV and embeddings)
 *   ask     a question for a namespace, by injection or full recompute
 *   bench   TTFT and divergence of injection against full recompute
 *   verify  re-check every checksum of a store
 * Errors are one line on stderr and exit status 1 (2 for usage). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inferscale/inferscale.h"
#include "jsonl.h"

/* The engine's context in tokens: prompt and answer. */
#define CLI_N_CTX 8192u
/* The model's and the embedder's limit. */
#define CLI_THREADS_MAX 1024u

static const char usage[] =
	"usage: inferscale <command> [options]\n"
	"\n"
	"commands:\n"
	"  encode FACTS.jsonl   encode facts (one JSON object a line: \"text\", \"namespace\",\n"
	"                       optional \"speaker\", \"date\", other string members and a\n"
	"                       \"metadata\" object kept as metadata) into the store\n"
	"  ask QUESTION         answer a question for --namespace; prints the answer, the\n"
	"                       facts used and the time to first token (or questions\n"
	"                       from --questions; --compare: both ways side by side)\n"
	"  bench [QUESTION]     TTFT of injection vs full recompute for each k of --k, and\n"
	"                       their divergence; questions from --questions JSONL\n"
	"  verify STORE         re-check every checksum of a store; exit 1 when a record is\n"
	"                       damaged or acknowledged records were lost\n"
	"\n"
	"options:\n"
	"  --store PATH         the fact store (required; encode creates it)\n"
	"  --namespace NS       namespace (default: each line's \"namespace\")\n"
	"  --model PATH         GGUF or HF directory (default $INFS_CACHE/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)\n"
	"  --embedder DIR       sentence-transformers directory (default $INFS_CACHE/minilm)\n"
	"  --kv-dtype T         f16 (default), bf16 or f32: KV in a new store\n"
	"  --threads N          threads of the model and the embedder, 0..1024 (default 0: all cores)\n"
	"  -k N                 facts retrieved, 1..4096 (ask; default 10)\n"
	"  --k LIST             k values of bench, comma-separated, each 1..4096, at most 32\n"
	"                       (default 10,20,50)\n"
	"  --full-recompute     ask: prefill the whole prompt instead of injecting\n"
	"  --compare            ask: answer by injection and by full recompute\n"
	"  --max-tokens N       answer budget, 1..8192 (ask: 64; bench: 1, only the first token)\n"
	"  --temperature T      sampling temperature, >= 0 (default 0: greedy)\n"
	"  --top-p P            nucleus sampling, in (0, 1] (default 1)\n"
	"  --seed S             sampler seed, 0..2^64-1 (default 0)\n"
	"  --questions FILE     questions, JSONL with \"question\" and \"namespace\"\n"
	"  --json FILE          bench: also write the results as JSON (- for stdout)\n"
	"  --quiet              no progress bar\n";

typedef struct args {
	const char *cmd, *positional, *store, *ns, *model, *embedder, *questions, *json;
	infs_dtype kv_dtype;
	uint32_t threads, k, max_tokens;
	int full, compare, quiet, max_tokens_set;
	float temperature, top_p;
	uint64_t seed;
	uint32_t ks[32];
	size_t n_ks;
	char model_buf[1024], embedder_buf[1024];
} args;

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("inferscale: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 1;
}

static int lib_fail(const char *what)
{
	return fail("%s: %s", what, infs_error_last());
}

static int parse_u32(uint32_t *out, const char *s, const char *opt)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > UINT32_MAX || s[0] == '-')
		return fail("%s: \"%s\" is not a count", opt, s);
	*out = (uint32_t)v;
	return 0;
}

/* A count in lo..hi. */
static int parse_range(uint32_t *out, const char *s, const char *opt, uint32_t lo, uint32_t hi)
{
	int rc = parse_u32(out, s, opt);
	if (!rc && (*out < lo || *out > hi))
		rc = fail("%s: %s is not in %u..%u", opt, s, lo, hi);
	return rc;
}

/* A comma-separated list of k values, each 1..INFS_RETRIEVE_K_MAX: no empty
 * item, at most n_max of them. */
static int parse_ks(uint32_t *ks, size_t *n, size_t n_max, const char *s, const char *opt)
{
	*n = 0;
	for (const char *p = s;; p++) {
		size_t len = strcspn(p, ",");
		char item[32];
		if (!len || len >= sizeof item)
			return fail("%s: \"%s\" is not a comma-separated list of counts", opt, s);
		if (*n == n_max)
			return fail("%s: at most %zu values", opt, n_max);
		memcpy(item, p, len);
		item[len] = '\0';
		if (parse_range(&ks[(*n)++], item, opt, 1, INFS_RETRIEVE_K_MAX))
			return 1;
		p += len;
		if (!*p)
			return 0;
	}
}

static int parse_float(float *out, const char *s, const char *opt)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return fail("%s: \"%s\" is not a number", opt, s);
	*out = (float)v;
	return 0;
}

static int parse_args(args *a, int argc, char **argv)
{
	memset(a, 0, sizeof *a);
	a->kv_dtype = INFS_DTYPE_F16;
	a->top_p = 1.0f;
	const char *cache = getenv("INFS_CACHE");
	const char *home = getenv("HOME") ? getenv("HOME") : ".";
	if (cache && *cache) {
		snprintf(a->model_buf, sizeof a->model_buf, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
		snprintf(a->embedder_buf, sizeof a->embedder_buf, "%s/minilm", cache);
	} else {
		snprintf(a->model_buf, sizeof a->model_buf, "%s/.cache/inferscale/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", home);
		snprintf(a->embedder_buf, sizeof a->embedder_buf, "%s/.cache/inferscale/minilm", home);
	}
	a->model = a->model_buf;
	a->embedder = a->embedder_buf;
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : -1;
	}
	a->cmd = argv[1];
	if (strcmp(a->cmd, "encode") && strcmp(a->cmd, "ask") && strcmp(a->cmd, "bench"))
		return fail("unknown command \"%s\" (encode, ask, bench, verify; --help for more)", a->cmd) + 1;
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i];
		int has = i + 1 < argc;
		const char *v = has ? argv[i + 1] : NULL;
		int rc = 0;
#define TAKE()                                                              \
	do {                                                                \
		if (!has)                                                   \
			return fail("%s needs a value", o) + 1;             \
		i++;                                                        \
	} while (0)
		if (!strcmp(o, "--store")) {
			TAKE();
			a->store = v;
		} else if (!strcmp(o, "--namespace")) {
			TAKE();
			a->ns = v;
		} else if (!strcmp(o, "--model")) {
			TAKE();
			a->model = v;
		} else if (!strcmp(o, "--embedder")) {
			TAKE();
			a->embedder = v;
		} else if (!strcmp(o, "--questions")) {
			TAKE();
			a->questions = v;
		} else if (!strcmp(o, "--json")) {
			TAKE();
			a->json = v;
		} else if (!strcmp(o, "--kv-dtype")) {
			TAKE();
			if (!strcmp(v, "f16"))
				a->kv_dtype = INFS_DTYPE_F16;
			else if (!strcmp(v, "bf16"))
				a->kv_dtype = INFS_DTYPE_BF16;
			else if (!strcmp(v, "f32"))
				a->kv_dtype = INFS_DTYPE_F32;
			else
				return fail("--kv-dtype: \"%s\" is not f16, bf16 or f32", v) + 1;
		} else if (!strcmp(o, "--threads")) {
			TAKE();
			rc = parse_range(&a->threads, v, o, 0, CLI_THREADS_MAX);
		} else if (!strcmp(o, "-k")) {
			TAKE();
			rc = parse_range(&a->k, v, o, 1, INFS_RETRIEVE_K_MAX);
		} else if (!strcmp(o, "--k")) {
			TAKE();
			rc = parse_ks(a->ks, &a->n_ks, sizeof a->ks / sizeof a->ks[0], v, o);
		} else if (!strcmp(o, "--max-tokens")) {
			TAKE();
			rc = parse_range(&a->max_tokens, v, o, 1, CLI_N_CTX);
			a->max_tokens_set = 1;
		} else if (!strcmp(o, "--temperature")) {
			TAKE();
			rc = parse_float(&a->temperature, v, o);
			if (!rc && a->temperature < 0)
				rc = fail("--temperature must be at least 0");
		} else if (!strcmp(o, "--top-p")) {
			TAKE();
			rc = parse_float(&a->top_p, v, o);
			if (!rc && !(a->top_p > 0 && a->top_p <= 1))
				rc = fail("--top-p must be in (0, 1]");
		} else if (!strcmp(o, "--seed")) {
			TAKE();
			char *end;
			errno = 0;
			a->seed = strtoull(v, &end, 10);
			if (errno || end == v || *end || v[strspn(v, " \t")] == '-')
				rc = fail("--seed: \"%s\" is not a number", v);
		} else if (!strcmp(o, "--full-recompute")) {
			a->full = 1;
		} else if (!strcmp(o, "--compare")) {
			a->compare = 1;
		} else if (!strcmp(o, "--quiet")) {
			a->quiet = 1;
		} else if (o[0] == '-' && o[1]) {
			return fail("unknown option %s (--help for the list)", o) + 1;
		} else if (a->positional) {
			return fail("one %s argument only (\"%s\" is extra; quote the question)",
			            !strcmp(a->cmd, "encode") ? "file" : "question", o) + 1;
		} else {
			a->positional = o;
		}
#undef TAKE
		if (rc)
			return 2;
	}
	if (!a->store)
		return fail("%s needs --store PATH", a->cmd) + 1;
	if (!strcmp(a->cmd, "encode") && !a->positional)
		return fail("encode needs a FACTS.jsonl file") + 1;
	if (!strcmp(a->cmd, "ask") && !a->questions && (!a->positional || !a->ns))
		return fail("ask needs --namespace NS and a question, or --questions FILE") + 1;
	if (a->positional && a->questions && strcmp(a->cmd, "encode"))
		return fail("a question and --questions: give one of them") + 1;
	if (!strcmp(a->cmd, "bench") && !a->positional && !a->questions)
		return fail("bench needs a question or --questions FILE") + 1;
	if (!strcmp(a->cmd, "bench") && a->positional && !a->ns)
		return fail("bench with a question needs --namespace NS") + 1;
	if (!a->n_ks) {
		a->ks[0] = 10;
		a->ks[1] = 20;
		a->ks[2] = 50;
		a->n_ks = 3;
	}
	if (!a->k)
		a->k = 10;
	if (!a->max_tokens_set)
		a->max_tokens = !strcmp(a->cmd, "bench") ? 1 : 64;
	return 0;
}

/* The lines of a JSONL file, parsed: doc[i] lies in text[i]. */
typedef struct lines {
	char **text;
	jsonl *doc;
	size_t n;
} lines;

static void lines_free(lines *l)
{
	for (size_t i = 0; i < l->n; i++) {
		jsonl_free(&l->doc[i]);
		free(l->text[i]);
	}
	free(l->doc);
	free(l->text);
}

/* Line i's object. */
static const jsonl_value *line_at(const lines *l, size_t i)
{
	return l->doc[i].v;
}

/* Whether a string of v, at any depth, holds a NUL (the reader keeps them;
 * everything after it would read the text cut): *where names it. */
static int find_nul(const jsonl_value *v, const char *name, char *where, size_t n)
{
	if (v->type == JSONL_STRING && strlen(v->str) != v->len) {
		snprintf(where, n, "%s", name);
		return 1;
	}
	if (v->type != JSONL_ARRAY && v->type != JSONL_OBJECT)
		return 0;
	const jsonl_value *m = v + 1;
	for (size_t i = 0; i < v->len; i++, m = jsonl_next(m)) {
		char sub[256];
		if (v->type == JSONL_OBJECT)
			snprintf(sub, sizeof sub, "%s%s%s", name, *name ? "." : "", m->key);
		else
			snprintf(sub, sizeof sub, "%s[%zu]", name, i);
		if (find_nul(m, sub, where, n))
			return 1;
	}
	return 0;
}

static int read_jsonl(lines *out, const char *path)
{
	memset(out, 0, sizeof *out);
	FILE *f = fopen(path, "rb");
	if (!f)
		return fail("%s: %s", path, strerror(errno));
	size_t cap_v = 0;
	int rc = 0;
	for (size_t no = 1; !rc; no++) {
		char *line = NULL;
		size_t cap = 0;
		ssize_t len = getline(&line, &cap, f);
		if (len < 0) {
			free(line);
			break;
		}
		if (strspn(line, " \t\r\n") == (size_t)len) {
			free(line);
			continue;
		}
		if (out->n == cap_v) {
			cap_v = cap_v ? 2 * cap_v : 64;
			char **t = realloc(out->text, cap_v * sizeof *t);
			if (t)
				out->text = t;
			jsonl *d = t ? realloc(out->doc, cap_v * sizeof *d) : NULL;
			if (d)
				out->doc = d;
			if (!d) {
				free(line);
				rc = fail("out of memory reading %s", path);
				break;
			}
		}
		/* Kept with its document, whose strings it holds. */
		jsonl *doc = &out->doc[out->n];
		memset(doc, 0, sizeof *doc);
		out->text[out->n++] = line;
		char where[256];
		if (jsonl_parse(doc, line, (size_t)len))
			rc = fail("%s:%zu: JSON line %zu column %zu: %s", path, no, doc->line, doc->col, doc->err);
		else if (doc->v->type != JSONL_OBJECT)
			rc = fail("%s:%zu: not a JSON object", path, no);
		else if (find_nul(doc->v, "", where, sizeof where))
			rc = fail("%s:%zu: \"%s\" holds a NUL character", path, no, where);
	}
	if (!rc && ferror(f))
		rc = fail("%s: %s", path, strerror(errno));
	fclose(f);
	if (rc) {
		lines_free(out);
		memset(out, 0, sizeof *out); /* the caller frees it again */
	}
	return rc;
}

/* A growing string. */
typedef struct str {
	char *p;
	size_t n, cap;
} str;

static void str_put(str *s, const char *t, size_t n)
{
	if (s->n + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 128;
		while (cap < s->n + n + 1)
			cap *= 2;
		char *p = realloc(s->p, cap);
		if (!p) {
			fputs("inferscale: out of memory\n", stderr);
			exit(1);
		}
		s->p = p;
		s->cap = cap;
	}
	memcpy(s->p + s->n, t, n);
	s->n += n;
	s->p[s->n] = '\0';
}

static void str_puts(str *s, const char *t)
{
	str_put(s, t, strlen(t));
}

static void str_json(str *s, const char *t)
{
	str_puts(s, "\"");
	for (const unsigned char *c = (const unsigned char *)t; *c; c++) {
		char buf[8];
		if (*c == '"' || *c == '\\') {
			buf[0] = '\\';
			buf[1] = (char)*c;
			str_put(s, buf, 2);
		} else if (*c < 0x20) {
			snprintf(buf, sizeof buf, "\\u%04x", *c);
			str_puts(s, buf);
		} else {
			str_put(s, (const char *)c, 1);
		}
	}
	str_puts(s, "\"");
}

/* A fact line's metadata: its string members other than text and
 * namespace, and the string members of its "metadata" object. */
static void line_metadata(str *s, const jsonl_value *o)
{
	str_puts(s, "{");
	int first = 1;
	const jsonl_value *m = jsonl_get(o, "metadata");
	for (int pass = 0; pass < 2; pass++) {
		const jsonl_value *src = pass ? m : o;
		if (!src || src->type != JSONL_OBJECT)
			continue;
		const jsonl_value *v = src + 1;
		for (size_t i = 0; i < src->len; i++, v = jsonl_next(v)) {
			if (v->type != JSONL_STRING)
				continue;
			if (!pass && (!strcmp(v->key, "text") || !strcmp(v->key, "namespace")))
				continue;
			if (!first)
				str_puts(s, ",");
			first = 0;
			str_json(s, v->key);
			str_puts(s, ":");
			str_json(s, v->str);
		}
	}
	str_puts(s, "}");
}

typedef struct runtime {
	infs_model *model;
	infs_embedder *embedder;
	infs_store *store;
	infs_engine *engine;
} runtime;

static void runtime_free(runtime *r)
{
	infs_engine_free(r->engine);
	infs_store_close(r->store);
	infs_embedder_free(r->embedder);
	infs_model_free(r->model);
}

static int runtime_open(runtime *r, const args *a, int create)
{
	memset(r, 0, sizeof *r);
	/* An existing store is opened first: a wrong path fails before the
	 * models load. */
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	if (!create) {
		so.flags = INFS_OPEN_READONLY;
		if (infs_store_open(&r->store, a->store, &so))
			return lib_fail(a->store);
	}
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.n_threads = a->threads;
	if (infs_model_load(&r->model, a->model, &mo))
		return lib_fail(a->model);
	infs_embedder_options eo = INFS_EMBEDDER_OPTIONS_INIT;
	eo.n_threads = a->threads;
	if (infs_embedder_load(&r->embedder, a->embedder, &eo))
		return lib_fail(a->embedder);
	infs_geometry g;
	char *identity = NULL;
	struct stat st;
	int rc = INFS_OK;
	if (create && stat(a->store, &st) != 0) {
		if (infs_model_geometry(&g, r->model, a->kv_dtype) ||
		    infs_model_identity(&identity, r->model, a->kv_dtype))
			return lib_fail(a->model);
		g.embed_dim = infs_embedder_dim(r->embedder);
		so.flags = INFS_OPEN_CREATE;
		so.geometry = &g;
		so.identity = identity;
		so.sync = INFS_SYNC_NORMAL;
	} else if (create) {
		so.sync = INFS_SYNC_NORMAL;
	}
	if (create)
		rc = infs_store_open(&r->store, a->store, &so);
	infs_free(identity);
	if (rc)
		return lib_fail(a->store);
	infs_geometry sg;
	if (infs_store_geometry(&sg, r->store))
		return lib_fail(a->store);
	if (sg.embed_dim != infs_embedder_dim(r->embedder))
		return fail("%s: the store keeps %u-float embeddings, the embedder %s gives %u", a->store,
		            sg.embed_dim, a->embedder, infs_embedder_dim(r->embedder));
	infs_engine_options en = INFS_ENGINE_OPTIONS_INIT;
	en.n_ctx = CLI_N_CTX;
	en.kv_dtype = sg.kv_dtype;
	if (infs_engine_create(&r->engine, r->model, &en))
		return lib_fail("engine");
	if (infs_engine_prepare(r->engine, r->store))
		return lib_fail(a->store);
	return 0;
}

typedef struct progress {
	size_t base, total;
	int show;
} progress;

static int show_progress(void *user, size_t done, size_t total)
{
	const progress *p = user;
	(void)total;
	if (p->show) {
		size_t d = p->base + done, w = 30, fill = p->total ? d * w / p->total : w;
		fprintf(stderr, "\rencoding [");
		for (size_t i = 0; i < w; i++)
			fputc(i < fill ? '#' : ' ', stderr);
		fprintf(stderr, "] %zu/%zu", d, p->total);
		fflush(stderr);
	}
	return 0;
}

static int cmd_encode(const args *a)
{
	lines L;
	if (read_jsonl(&L, a->positional))
		return 1;
	for (size_t i = 0; i < L.n; i++) {
		const jsonl_value *t = jsonl_get(line_at(&L, i), "text");
		const jsonl_value *n = jsonl_get(line_at(&L, i), "namespace");
		if (!t || t->type != JSONL_STRING || !t->len) {
			lines_free(&L);
			return fail("%s: fact %zu has no \"text\"", a->positional, i + 1);
		}
		if (!a->ns && (!n || n->type != JSONL_STRING)) {
			lines_free(&L);
			return fail("%s: fact %zu has no \"namespace\" (or give --namespace)", a->positional, i + 1);
		}
		/* Refused here, before any namespace is written, rather than by
		 * the library after the earlier namespaces were. */
		const char *ns = a->ns ? a->ns : n->str;
		if (!strncmp(ns, INFS_RESERVED_PREFIX, sizeof INFS_RESERVED_PREFIX - 1)) {
			fail("%s: fact %zu: namespace \"%s\" is reserved (names starting with \"" INFS_RESERVED_PREFIX
			     "\" belong to the library)", a->positional, i + 1, ns);
			lines_free(&L);
			return 1;
		}
	}
	runtime r;
	if (runtime_open(&r, a, 1)) {
		runtime_free(&r);
		lines_free(&L);
		return 1;
	}
	const int32_t *hdr;
	uint32_t nh;
	int rc = 0;
	if (infs_engine_header(&hdr, &nh, r.engine))
		rc = lib_fail("engine");
	infs_fact_input *in = calloc(L.n ? L.n : 1, sizeof *in);
	char **rendered = calloc(L.n ? L.n : 1, sizeof *rendered);
	str *meta = calloc(L.n ? L.n : 1, sizeof *meta);
	uint64_t *ids = calloc(L.n ? L.n : 1, sizeof *ids);
	char *done = calloc(L.n ? L.n : 1, 1);
	if (!in || !rendered || !meta || !ids || !done)
		rc = fail("out of memory");
	for (size_t i = 0; !rc && i < L.n; i++) {
		const jsonl_value *o = line_at(&L, i);
		line_metadata(&meta[i], o);
		const char *text = jsonl_get(o, "text")->str;
		if (infs_fact_render(&rendered[i], text, meta[i].p)) {
			rc = fail("%s: fact %zu: %s", a->positional, i + 1, infs_error_last());
			break;
		}
		infs_fact_input f = INFS_FACT_INPUT_INIT;
		f.text = rendered[i];
		f.embed_text = text;
		f.metadata = meta[i].p;
		f.source_id = (uint64_t)jsonl_num(jsonl_get(o, "source_id"), 0);
		f.timestamp = (int64_t)jsonl_num(jsonl_get(o, "timestamp"), 0);
		in[i] = f;
	}
	/* One call per namespace, in order of first appearance. */
	progress pg = { 0, L.n, !a->quiet && isatty(2) };
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = hdr;
	eo.n_context = nh;
	eo.embedder = r.embedder;
	eo.progress = show_progress;
	eo.progress_user = &pg;
	infs_fact_input *batch = calloc(L.n ? L.n : 1, sizeof *batch);
	size_t *which = calloc(L.n ? L.n : 1, sizeof *which);
	uint64_t *bids = calloc(L.n ? L.n : 1, sizeof *bids);
	if (!rc && (!batch || !which || !bids))
		rc = fail("out of memory");
	size_t n_ns = 0;
	for (size_t i = 0; !rc && i < L.n; i++) {
		if (done[i])
			continue;
		const char *ns = a->ns ? a->ns : jsonl_get(line_at(&L, i), "namespace")->str;
		size_t nb = 0;
		for (size_t j = i; j < L.n; j++) {
			const char *nj = a->ns ? a->ns : jsonl_get(line_at(&L, j), "namespace")->str;
			if (!done[j] && !strcmp(nj, ns)) {
				done[j] = 1;
				which[nb] = j;
				batch[nb++] = in[j];
			}
		}
		if (infs_fact_encode(bids, r.store, ns, r.model, batch, nb, &eo)) {
			if (pg.show)
				fputc('\n', stderr);
			rc = fail("encoding namespace \"%s\": %s", ns, infs_error_last());
			break;
		}
		for (size_t b = 0; b < nb; b++)
			ids[which[b]] = bids[b];
		pg.base += nb;
		n_ns++;
	}
	if (pg.show && !rc)
		fputc('\n', stderr);
	if (!rc && infs_store_sync(r.store))
		rc = lib_fail(a->store);
	if (!rc)
		printf("encoded %zu facts into %zu namespace%s of %s\n", L.n, n_ns, n_ns == 1 ? "" : "s", a->store);
	for (size_t i = 0; i < L.n; i++) {
		if (rendered)
			infs_free(rendered[i]);
		if (meta)
			free(meta[i].p);
	}
	free(in);
	free(rendered);
	free(meta);
	free(ids);
	free(done);
	free(batch);
	free(which);
	free(bids);
	runtime_free(&r);
	lines_free(&L);
	return rc;
}

static void ask_options(infs_ask_options *o, const args *a, uint32_t k, int full)
{
	infs_ask_options init = INFS_ASK_OPTIONS_INIT;
	*o = init;
	o->k = k;
	o->full_recompute = full;
	o->generate.max_tokens = a->max_tokens;
	o->generate.temperature = a->temperature;
	o->generate.top_p = a->top_p;
	o->generate.seed = a->seed;
}

/* The questions of --questions (or the one positional question) and their
 * namespaces. */
typedef struct questions {
	lines L;
	const char **q, **ns;
	size_t n;
} questions;

static void questions_free(questions *Q)
{
	free(Q->q);
	free(Q->ns);
	lines_free(&Q->L);
}

static int questions_load(questions *Q, const args *a)
{
	memset(Q, 0, sizeof *Q);
	if (a->questions && read_jsonl(&Q->L, a->questions))
		return 1;
	Q->n = a->questions ? Q->L.n : 1;
	Q->q = calloc(Q->n ? Q->n : 1, sizeof *Q->q);
	Q->ns = calloc(Q->n ? Q->n : 1, sizeof *Q->ns);
	if (!Q->q || !Q->ns)
		return fail("out of memory");
	for (size_t i = 0; i < Q->n; i++) {
		if (!a->questions) {
			Q->q[i] = a->positional;
			Q->ns[i] = a->ns;
			continue;
		}
		Q->q[i] = jsonl_str(jsonl_get(line_at(&Q->L, i), "question"), NULL);
		Q->ns[i] = a->ns ? a->ns : jsonl_str(jsonl_get(line_at(&Q->L, i), "namespace"), NULL);
		if (!Q->q[i] || !Q->ns[i])
			return fail("%s: line %zu lacks \"question\" or \"namespace\"", a->questions, i + 1);
	}
	return 0;
}

static void print_timing(const infs_answer *x, int full)
{
	printf("TTFT %7.1f ms = embed %.1f + retrieve %.2f + %s %.1f + prefill %.1f (%u of %u prompt tokens prefilled)",
	       x->ttft_ms, x->embed_ms, x->retrieve_ms, full ? "read tokens" : "inject", x->inject_ms,
	       x->prefill_ms, x->n_prefilled, x->n_prompt);
}

static int cmd_ask(const args *a)
{
	questions Q;
	runtime r;
	int rc = questions_load(&Q, a);
	if (!rc)
		rc = runtime_open(&r, a, 0);
	else
		memset(&r, 0, sizeof r);
	int modes = a->compare ? 2 : 1;
	double sum[2] = { 0, 0 };
	for (size_t q = 0; !rc && q < Q.n; q++) {
		if (Q.n > 1 || a->compare)
			printf("%sQ: %s\n", q ? "\n" : "", Q.q[q]);
		for (int mode = 0; !rc && mode < modes; mode++) {
			int full = a->compare ? mode : a->full;
			infs_ask_options o;
			ask_options(&o, a, a->k, full);
			infs_answer *x = NULL;
			if (infs_engine_ask(&x, r.engine, r.store, r.embedder, Q.ns[q], Q.q[q], &o)) {
				rc = lib_fail("ask");
				break;
			}
			sum[mode] += x->ttft_ms;
			if (a->compare) {
				printf("  %-15s %s\n  %15s ", full ? "full recompute:" : "injection:", x->text, "");
				print_timing(x, full);
				printf("\n");
				infs_answer_free(x);
				continue;
			}
			printf("%s\n\nfacts used (best first):\n", x->text);
			for (size_t i = 0; i < x->n_facts; i++) {
				infs_fact_record *rec = NULL;
				if (infs_fact_get(&rec, r.store, Q.ns[q], x->fact_ids[i])) {
					rc = lib_fail("reading a fact");
					break;
				}
				size_t len = strlen(rec->text);
				while (len && rec->text[len - 1] == '\n')
					len--;
				printf("  %2zu. %.3f  %.*s\n", i + 1, (double)x->scores[i], (int)len, rec->text);
				infs_fact_record_free(rec);
			}
			printf("\n%s: ", full ? "full recompute" : "injection");
			print_timing(x, full);
			printf("; %u tokens decoded in %.1f ms\n", x->n_tokens, x->decode_ms);
			infs_answer_free(x);
		}
	}
	if (!rc && a->compare && Q.n)
		printf("\nmean TTFT over %zu questions (k %u): injection %.1f ms, full recompute %.1f ms (%.1fx)\n", Q.n,
		       a->k, sum[0] / (double)Q.n, sum[1] / (double)Q.n, sum[0] > 0 ? sum[1] / sum[0] : 0);
	runtime_free(&r);
	questions_free(&Q);
	return rc;
}

/* KL(p || q) of the softmax distributions of logits lp and lq, in nats. */
static double kl_logits(const float *lp, const float *lq, uint32_t n)
{
	double mp = lp[0], mq = lq[0], zp = 0, zq = 0;
	for (uint32_t i = 1; i < n; i++) {
		mp = lp[i] > mp ? lp[i] : mp;
		mq = lq[i] > mq ? lq[i] : mq;
	}
	for (uint32_t i = 0; i < n; i++) {
		zp += exp(lp[i] - mp);
		zq += exp(lq[i] - mq);
	}
	double lzp = mp + log(zp), lzq = mq + log(zq), kl = 0;
	for (uint32_t i = 0; i < n; i++) {
		double a = lp[i] - lzp, b = lq[i] - lzq;
		kl += exp(a) * (a - b);
	}
	return kl > 0 ? kl : 0;
}

static uint32_t argmax(const float *x, uint32_t n)
{
	uint32_t b = 0;
	for (uint32_t i = 1; i < n; i++)
		b = x[i] > x[b] ? i : b;
	return b;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static double median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void cpu_name(char *out, size_t n)
{
	snprintf(out, n, "unknown CPU");
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
			char *s = strchr(line, ':') + 1;
			while (*s == ' ')
				s++;
			s[strcspn(s, "\n")] = '\0';
			snprintf(out, n, "%s", s);
			break;
		}
	if (f)
		fclose(f);
}

static int cmd_bench(const args *a)
{
	questions Q;
	if (questions_load(&Q, a)) {
		questions_free(&Q);
		return 1;
	}
	size_t nq = Q.n;
	const char **qs = Q.q, **nss = Q.ns;
	runtime r;
	int rc = runtime_open(&r, a, 0);
	/* A warm-up question first, at the largest k: it pages in the weights,
	 * starts the threads, and fails before anything is printed when the
	 * prompt does not fit. */
	if (!rc && nq) {
		uint32_t k_max = 0;
		for (size_t ki = 0; ki < a->n_ks; ki++)
			k_max = a->ks[ki] > k_max ? a->ks[ki] : k_max;
		infs_ask_options o;
		ask_options(&o, a, k_max, 0);
		o.generate.max_tokens = 1;
		infs_answer *w = NULL;
		if (infs_engine_ask(&w, r.engine, r.store, r.embedder, nss[0], qs[0], &o))
			rc = lib_fail("bench");
		infs_answer_free(w);
	}
	FILE *jf = NULL;
	if (!rc && a->json)
		jf = strcmp(a->json, "-") ? fopen(a->json, "w") : stdout;
	if (!rc && a->json && !jf)
		rc = fail("%s: %s", a->json, strerror(errno));
	char cpu[256];
	cpu_name(cpu, sizeof cpu);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double *ti = calloc(nq ? nq : 1, sizeof *ti), *tf = calloc(nq ? nq : 1, sizeof *tf);
	if (!rc && (!ti || !tf))
		rc = fail("out of memory");
	if (jf)
		fprintf(jf, "{\"hardware\": {\"cpu\": \"%s\", \"cores\": %ld}, \"max_tokens\": %u, \"questions\": %zu, \"results\": [",
		        cpu, ncpu, a->max_tokens, nq);
	if (!rc) {
		printf("%s, %ld cores; %zu question%s; answers of up to %u token%s\n\n", cpu, ncpu, nq,
		       nq == 1 ? "" : "s", a->max_tokens, a->max_tokens == 1 ? "" : "s");
		printf("%5s %7s | %9s %8s %8s %8s %8s | %9s %8s | %7s | %8s %6s %6s\n", "k", "prompt",
		       "inj TTFT", "embed", "retr", "inject", "prefill", "full TTFT", "prefill", "speedup",
		       "KL", "top1", "answer");
	}
	for (size_t ki = 0; !rc && ki < a->n_ks; ki++) {
		uint32_t k = a->ks[ki];
		double s_emb = 0, s_ret = 0, s_inj = 0, s_pre = 0, s_fpre = 0, s_kl = 0, s_prompt = 0, s_facts = 0;
		size_t top1 = 0, same = 0;
		for (size_t q = 0; !rc && q < nq; q++) {
			infs_answer *x = NULL, *y = NULL;
			infs_ask_options o;
			ask_options(&o, a, k, 0);
			if (infs_engine_ask(&x, r.engine, r.store, r.embedder, nss[q], qs[q], &o)) {
				rc = lib_fail("bench");
				break;
			}
			/* The same facts in the same order, all prefilled. */
			ask_options(&o, a, k, 1);
			o.fact_ids = x->fact_ids;
			o.n_fact_ids = x->n_facts;
			if (infs_engine_ask(&y, r.engine, r.store, r.embedder, nss[q], qs[q], &o)) {
				infs_answer_free(x);
				rc = lib_fail("bench");
				break;
			}
			/* Full recompute's TTFT counts the same embedding and retrieval. */
			double full_ttft = x->embed_ms + x->retrieve_ms + y->inject_ms + y->prefill_ms;
			double kl = kl_logits(y->first_logits, x->first_logits, x->n_vocab);
			int t1 = argmax(y->first_logits, y->n_vocab) == argmax(x->first_logits, x->n_vocab);
			int eq = !strcmp(x->text, y->text);
			ti[q] = x->ttft_ms;
			tf[q] = full_ttft;
			s_emb += x->embed_ms;
			s_ret += x->retrieve_ms;
			s_inj += x->inject_ms;
			s_pre += x->prefill_ms;
			s_fpre += y->prefill_ms;
			s_kl += kl;
			s_prompt += x->n_prompt;
			s_facts += (double)x->n_facts;
			top1 += (size_t)t1;
			same += (size_t)eq;
			if (jf) {
				/* Questions by their line number, not their text: the JSON
				 * may be published where the data set's text may not. */
				str s = { 0 };
				str_json(&s, nss[q]);
				fprintf(jf, "%s\n  {\"k\": %u, \"namespace\": %s, \"question\": %zu", ki || q ? "," : "",
				        k, s.p, q + 1);
				free(s.p);
				fprintf(jf, ", \"facts\": %zu, \"prompt_tokens\": %u, \"prefilled_tokens\": %u, "
				            "\"injection_ms\": {\"ttft\": %.3f, \"embed\": %.3f, \"retrieve\": %.3f, \"inject\": %.3f, \"prefill\": %.3f}, "
				            "\"full_ms\": {\"ttft\": %.3f, \"read_tokens\": %.3f, \"prefill\": %.3f}, "
				            "\"kl\": %.6g, \"top1_agree\": %s, \"answer_agree\": %s}",
				        x->n_facts, x->n_prompt, x->n_prefilled, x->ttft_ms, x->embed_ms, x->retrieve_ms,
				        x->inject_ms, x->prefill_ms, full_ttft, y->inject_ms, y->prefill_ms, kl,
				        t1 ? "true" : "false", eq ? "true" : "false");
			}
			infs_answer_free(x);
			infs_answer_free(y);
		}
		if (rc)
			break;
		double n = (double)nq, mi = median(ti, nq), mf = median(tf, nq);
		printf("%5u %7.0f | %9.1f %8.1f %8.2f %8.1f %8.1f | %9.1f %8.1f | %6.1fx | %8.4f %5.0f%% %5.0f%%\n", k,
		       s_prompt / n, mi, s_emb / n, s_ret / n, s_inj / n, s_pre / n, mf, s_fpre / n, mi > 0 ? mf / mi : 0,
		       s_kl / n, 100.0 * (double)top1 / n, 100.0 * (double)same / n);
		if (s_facts < k * n)
			printf("      (k %u: %.1f facts on average: the namespaces are smaller)\n", k, s_facts / n);
	}
	if (!rc)
		printf("\nTTFT: medians in ms; components and KL (full || injection, first token, nats) are means;\n"
		       "top1 / answer: share of questions whose first token / whole answer is the same.\n");
	if (jf) {
		fprintf(jf, "\n]}\n");
		if (jf != stdout)
			fclose(jf);
	}
	free(ti);
	free(tf);
	runtime_free(&r);
	questions_free(&Q);
	return rc;
}

/* inferscale verify STORE: opens the store read-only (which checks every
 * record) and re-checks the checksums of the header and the log; exit 1 when
 * anything is damaged or lost. */
static int cmd_verify(int argc, char **argv)
{
	if (argc != 3)
		return fail("usage: inferscale verify STORE") + 1;
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_READONLY;
	infs_store *s;
	if (infs_store_open(&s, argv[2], &o))
		return lib_fail(argv[2]);
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	int rc = infs_store_stats_get(&st, s) ? lib_fail("stats") : 0;
	if (!rc && (st.lost_records || st.dropped_tail_bytes))
		rc = fail("%s", infs_error_last());
	if (!rc && infs_store_verify(s, NULL, NULL))
		rc = lib_fail(argv[2]);
	if (!rc)
		printf("%s: sound: %llu facts, %llu segments in %llu namespaces, %llu bytes\n", argv[2],
		       (unsigned long long)st.n_facts, (unsigned long long)st.n_segments,
		       (unsigned long long)st.n_namespaces, (unsigned long long)st.file_bytes);
	infs_store_close(s);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "verify"))
		return cmd_verify(argc, argv);
	args a;
	int rc = parse_args(&a, argc, argv);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (!strcmp(a.cmd, "encode"))
		return cmd_encode(&a);
	if (!strcmp(a.cmd, "ask"))
		return cmd_ask(&a);
	return cmd_bench(&a);
}

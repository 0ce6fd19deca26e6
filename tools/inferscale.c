/* inferscale — the command-line tool of the main job:
 *   encode  facts from JSONL into a store (KV and embeddings)
 *   ask     a question for a namespace, by injection or full recompute
 *   bench   TTFT and divergence of injection against full recompute
 *   verify  re-check every checksum of a store
 *   eval    agreement and quality of injection against full recompute on a
 *           LoCoMo-format conversation
 *   plot    a chart (PNG) of a result file
 * Errors are one line on stderr and exit status 1 (2 for usage). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "charts.h"
#include "cli_hints.h"
#include "cli_remote.h"
#include "cli_usage.h"
#include "eval_metrics.h"
#include "fact_lines.h"
#include "inferscale/inferscale.h"
#include "jsonl.h"
#include "locomo_read.h"
#include "locomo_turns.h"
#include "store_report.h"

/* The engine's context in tokens: prompt and answer. */
#define CLI_N_CTX 8192u
/* The model's and the embedder's limit. */
#define CLI_THREADS_MAX 1024u
/* eval --context-turns: at most this many turns before each fact. */
#define CLI_CONTEXT_TURNS_MAX 64u

static const char usage[] =
	"usage: inferscale <command> [options]\n"
	"\n"
	"commands:\n"
	"  encode FACTS.jsonl   encode facts into a store (one JSON object a line)\n"
	"  ask QUESTION         answer a question from injected memory\n"
	"  bench [QUESTION]     TTFT of injection vs full recompute for each k, and their divergence\n"
	"  eval FILE.json       a LoCoMo-format conversation: injection against full recompute\n"
	"  verify STORE         re-check every checksum of a store\n"
	"  plot IN.json OUT.png draw a result file as a chart\n"
	"\n"
	"inferscale COMMAND --help lists the command's options; inferscale --version the version.\n"
	"The default models: scripts/fetch-models.sh, or inferscale fetch-models with the Python package.\n";

/* The commands that parse_args reads, as bits of opt.cmds. */
enum { C_ENCODE = 1, C_ASK = 2, C_BENCH = 4, C_EVAL = 8, C_ALL = 15 };

static const struct command {
	const char *name, *args;
	unsigned bit;
	const char *what;
} commands[] = {
	{ "encode", "FACTS.jsonl", C_ENCODE,
	  "Encodes facts into the store: one JSON object a line with \"text\" and \"namespace\";\n"
	  "\"speaker\", \"date\", other string members and the string members of a \"metadata\"\n"
	  "object are kept as the fact's metadata. Each fact's KV is that of its rendered text,\n"
	  "encoded after the engine's header; its embedding is that of the bare text.\n" },
	{ "ask", "QUESTION", C_ASK,
	  "Answers a question for --namespace (or the questions of --questions): prints the\n"
	  "answer, the facts used and the time to first token by part; --compare answers both\n"
	  "ways side by side; --json writes every answer, its facts and timings as JSON.\n" },
	{ "bench", "[QUESTION]", C_BENCH,
	  "For each k of --k and each question: injection, then full recompute of the same\n"
	  "prompt. Prints the mean TTFT of each way and of each of its parts (so the parts add\n"
	  "up to the TTFT), and their divergence (mean KL of the first token, first-token and\n"
	  "answer agreement).\n" },
	{ "eval", "FILE.json", C_EVAL,
	  "Encodes a LoCoMo-format conversation's observation facts into a temporary store,\n"
	  "answers its questions of categories 1-4 by injection and by full recompute (greedy,\n"
	  "up to 32 tokens) and prints agreement, F1, evidence recall and TTFT as JSON\n"
	  "(docs/eval.md).\n" },
};

static const struct opt {
	const char *name, *value;
	unsigned cmds;
	const char *help;
} opts[] = {
	{ "--store", "PATH", C_ENCODE | C_ASK | C_BENCH, "the fact store (required; encode creates it)" },
	{ "--namespace", "NS", C_ENCODE | C_ASK | C_BENCH, "namespace (encode: default each line's \"namespace\")" },
	{ "--questions", "FILE", C_ASK | C_BENCH, "questions, JSONL with \"question\" and \"namespace\"" },
	{ "--model", "PATH", C_ALL, "GGUF or HF directory (default $INFS_CACHE/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)" },
	{ "--embedder", "DIR", C_ALL, "sentence-transformers directory (default $INFS_CACHE/minilm)" },
	{ "--kv-dtype", "T", C_ENCODE | C_EVAL, "f16 (default), bf16, f32 or fp8 (e4m3, scaled; injected into a bf16 cache): KV in a new store" },
	{ "--reference-kv-dtype", "T", C_EVAL, "also encode the facts in dtype T (f16, bf16, f32, fp8) and compare injection\n"
	                                       "from them with injection from --kv-dtype's: the same facts, the same cache" },
	{ "--threads", "N", C_ALL, "threads of the model and the embedder, 0..1024 (default 0: all cores)" },
	{ "--device", "N", C_ALL, "run the model, the embedder, retrieval and the engine on CUDA device N\n"
	                          "(default: the host)" },
	{ "-k", "N", C_ASK | C_BENCH | C_EVAL, "facts retrieved, 1..4096 (default 10); bench: a comma-separated\n"
	                                       "list of at most 32 (default 10,20,50)" },
	{ "--k", "N", C_ASK | C_BENCH | C_EVAL, "the same as -k" },
	{ "--full-recompute", NULL, C_ASK, "prefill the whole prompt instead of injecting" },
	{ "--compare", NULL, C_ASK, "answer by injection and by full recompute" },
	{ "--max-tokens", "N", C_ASK | C_BENCH, "answer budget, 1..8192 (ask: 64; bench: 1, only the first token)" },
	{ "--temperature", "T", C_ASK | C_BENCH, "sampling temperature, >= 0 (default 0: greedy)" },
	{ "--top-p", "P", C_ASK | C_BENCH, "nucleus sampling, in (0, 1] (default 1)" },
	{ "--seed", "S", C_ASK | C_BENCH | C_EVAL, "sampler seed, 0..2^64-1 (default 0); eval: the seed of --limit" },
	{ "--limit", "N", C_EVAL, "a fixed sample of N questions, chosen by --seed" },
	{ "--recovery", "MODE", C_ASK | C_BENCH | C_EVAL,
	  "how injected answers recover: none (plain injection, default), deviation\n"
	  "(selective recompute), query (the same, selection also by the question's\n"
	  "attention), prefix (each fact's first tokens recomputed), or prefix joined to\n"
	  "one of the others by +" },
	{ "--recompute", "R", C_ASK | C_BENCH | C_EVAL,
	  "deviation, query: share of the injected fact tokens recomputed through every\n"
	  "layer, 0..1 (default 0.15)" },
	{ "--check-layer", "C", C_ASK | C_BENCH | C_EVAL,
	  "deviation, query: layer through which every one is recomputed and where the\n"
	  "share is chosen (default 2)" },
	{ "--prefix", "M", C_ASK | C_BENCH | C_EVAL, "prefix: tokens recomputed at each fact's start (default 2)" },
	{ "--query-weight", "W", C_ASK | C_BENCH | C_EVAL,
	  "query: the question's attention's weight in the selection, 0..1 (default 0.5)" },
	{ "--calibration", "T:S", C_ASK | C_BENCH | C_EVAL,
	  "attention calibration for injected facts: the question's and the answer's scores\n"
	  "of fact positions divided by T, their weights multiplied by S (auto: 1 / sqrt(facts\n"
	  "injected); off: 1:1, the engine's default); eval: a comma-separated list\n"
	  "of at most 32, each measured" },
	{ "--context-turns", "W", C_EVAL,
	  "encode each fact after the W conversation turns up to and including its\n"
	  "(first) evidence turn, each \"speaker: text\", 0..64 (default 0: none);\n"
	  "only the stored KV changes, not the prompt" },
	{ "--sweep", NULL, C_EVAL, "every mode of --recovery (default deviation, query, prefix+deviation,\n"
	                           "prefix+query) at --recompute 0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5 and 1:\n"
	                           "a JSON array" },
	{ "--json", "FILE", C_ASK | C_BENCH | C_EVAL, "also write the results as JSON (- for stdout); eval: write\n"
	                                              "them there instead of stdout" },
	{ "--plot", "FILE.png", C_BENCH | C_EVAL, "also draw the results as a chart (as plot does); eval: with --sweep" },
	{ "--quiet", NULL, C_ENCODE | C_BENCH | C_EVAL, "no progress" },
};

static const struct opt *find_opt(const char *name)
{
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
		if (!strcmp(opts[i].name, name))
			return &opts[i];
	return NULL;
}

/* inferscale CMD --help: what the command does and its options. */
static void command_help(const struct command *c)
{
	printf("usage: inferscale %s [options] %s\n\n%s\noptions:\n", c->name, c->args, c->what);
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		const struct opt *o = &opts[i];
		if (!(o->cmds & c->bit))
			continue;
		char head[40];
		snprintf(head, sizeof head, "%s%s%s", o->name, o->value ? " " : "", o->value ? o->value : "");
		printf("  %-22s ", head);
		for (const char *h = o->help; *h; h++) {
			putchar(*h);
			if (*h == '\n')
				printf("  %-22s ", "");
		}
		putchar('\n');
	}
}

typedef struct args {
	const char *cmd, *positional, *store, *ns, *model, *embedder, *questions, *json, *recovery, *plot;
	infs_dtype kv_dtype, ref_dtype;
	int ref;                             /* --reference-kv-dtype given */
	uint32_t threads, k, max_tokens, limit, check_layer, prefix, context_turns;
	float recompute, query_weight;
	int select, prefix_mode, query_mode; /* parts of --recovery; select: deviation or query */
	int device;
	int full, compare, quiet, sweep, max_tokens_set, recompute_set, check_set, prefix_set, query_weight_set;
	char mode[32];                       /* --recovery, parts in a fixed order */
	float temperature, top_p;
	uint64_t seed;
	uint32_t ks[32];
	size_t n_ks;
	float cal_t[32], cal_s[32];          /* --calibration */
	size_t n_cal;
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

/* The names of the KV dtypes the tool takes; fp8 is e4m3. */
static const struct {
	const char *name;
	infs_dtype dtype;
} kv_dtypes[] = { { "f16", INFS_DTYPE_F16 }, { "bf16", INFS_DTYPE_BF16 }, { "f32", INFS_DTYPE_F32 },
	          { "fp8", INFS_DTYPE_FP8_E4M3 }, { "fp8_e4m3", INFS_DTYPE_FP8_E4M3 } };

static int parse_dtype(infs_dtype *out, const char *s, const char *opt)
{
	for (size_t i = 0; i < sizeof kv_dtypes / sizeof kv_dtypes[0]; i++)
		if (!strcmp(s, kv_dtypes[i].name)) {
			*out = kv_dtypes[i].dtype;
			return 0;
		}
	return fail("%s: \"%s\" is not f16, bf16, f32 or fp8", opt, s);
}

static const char *dtype_name(infs_dtype t)
{
	for (size_t i = 0; i < sizeof kv_dtypes / sizeof kv_dtypes[0]; i++)
		if (kv_dtypes[i].dtype == t)
			return kv_dtypes[i].name;
	return "?";
}

/* --calibration: T:S pairs (or off, 1:1), comma-separated, each in
 * (0, 1000]; one only unless many. */
static int parse_calibration(args *a, const char *v, int many)
{
	a->n_cal = 0;
	for (const char *p = v; *p;) {
		size_t len = strcspn(p, ",");
		char item[64];
		if (len >= sizeof item || a->n_cal == (many ? sizeof a->cal_t / sizeof a->cal_t[0] : 1))
			return fail("--calibration: \"%s\" is more than %s T:S pair%s", v, many ? "32" : "one",
			            many ? "s" : "");
		memcpy(item, p, len);
		item[len] = '\0';
		char *colon = strchr(item, ':'), *e1 = NULL, *e2 = NULL;
		double t = 1, sc = 1;
		if (strcmp(item, "off")) {
			if (colon)
				*colon = '\0';
			t = strtod(item, &e1);
			int autos = colon && !strcmp(colon + 1, "auto"); /* 1 / sqrt(facts injected) */
			sc = colon && !autos ? strtod(colon + 1, &e2) : 0;
			if (!colon || e1 == item || *e1 || (!autos && (e2 == colon + 1 || *e2 || !(sc > 0 && sc <= 1000))) ||
			    !(t > 0 && t <= 1000))
				return fail("--calibration: \"%.*s\" is not T:S with T in (0, 1000] and S in (0, 1000] or auto "
				            "(or off)", (int)len, p);
		}
		a->cal_t[a->n_cal] = (float)t;
		a->cal_s[a->n_cal++] = (float)sc;
		p += len;
		if (*p && !*++p)
			return fail("--calibration: \"%s\" ends with a comma", v);
	}
	return a->n_cal ? 0 : fail("--calibration needs T:S (or off)");
}

/* --recovery: none, or parts prefix, deviation, query joined by +, each
 * once, deviation and query not both (query selects by deviation too). */
static int parse_recovery(args *a, const char *v)
{
	a->select = a->prefix_mode = a->query_mode = 0;
	int dev = 0;
	for (const char *p = v; strcmp(v, "none");) {
		size_t len = strcspn(p, "+");
		int *part = len == 6 && !strncmp(p, "prefix", 6) ? &a->prefix_mode
		          : len == 9 && !strncmp(p, "deviation", 9) ? &dev
		          : len == 5 && !strncmp(p, "query", 5) ? &a->query_mode : NULL;
		if (!part || *part || (part == &dev && a->query_mode) || (part == &a->query_mode && dev))
			return fail("--recovery: \"%s\" is not a recovery mode (none, deviation, query, prefix, "
			            "prefix+deviation, prefix+query)", v);
		*part = 1;
		p += len;
		if (!*p++)
			break;
	}
	a->select = dev || a->query_mode;
	snprintf(a->mode, sizeof a->mode, "%s%s%s", a->prefix_mode ? "prefix" : "",
	         a->prefix_mode && a->select ? "+" : "", a->query_mode ? "query" : dev ? "deviation" : "");
	if (!a->mode[0])
		strcpy(a->mode, "none");
	return 0;
}

static int parse_args(args *a, int argc, char **argv)
{
	memset(a, 0, sizeof *a);
	strcpy(a->mode, "none");
	a->kv_dtype = INFS_DTYPE_F16;
	a->top_p = 1.0f;
	a->device = -1;
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
	int eval = !strcmp(a->cmd, "eval"), bench = !strcmp(a->cmd, "bench");
	const struct command *cmd = NULL;
	for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
		if (!strcmp(commands[c].name, a->cmd))
			cmd = &commands[c];
	if (!cmd)
		return fail("unknown command \"%s\" (encode, ask, bench, verify, eval, plot; --help for more)", a->cmd) + 1;
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i];
		int has = i + 1 < argc;
		const char *v = has ? argv[i + 1] : NULL;
		int rc = 0;
		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			command_help(cmd);
			return -1;
		}
		if (o[0] == '-' && o[1]) {
			const struct opt *d = find_opt(o);
			if (!d)
				return fail("unknown option %s (inferscale %s --help lists the options)", o, a->cmd) + 1;
			if (!(d->cmds & cmd->bit))
				return fail("%s: %s does not apply (inferscale %s --help lists its options)", a->cmd, o,
				            a->cmd) + 1;
		}
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
		} else if (!strcmp(o, "--plot")) {
			TAKE();
			a->plot = v;
		} else if (!strcmp(o, "--kv-dtype")) {
			TAKE();
			rc = parse_dtype(&a->kv_dtype, v, o);
		} else if (!strcmp(o, "--reference-kv-dtype")) {
			TAKE();
			rc = parse_dtype(&a->ref_dtype, v, o);
			a->ref = 1;
		} else if (!strcmp(o, "--device")) {
			TAKE();
			uint32_t d = 0;
			rc = parse_range(&d, v, o, 0, 1023);
			a->device = (int)d;
		} else if (!strcmp(o, "--threads")) {
			TAKE();
			rc = parse_range(&a->threads, v, o, 0, CLI_THREADS_MAX);
		} else if (!strcmp(o, "-k") || !strcmp(o, "--k")) {
			TAKE();
			rc = bench ? parse_ks(a->ks, &a->n_ks, sizeof a->ks / sizeof a->ks[0], v, o)
			           : parse_range(&a->k, v, o, 1, INFS_RETRIEVE_K_MAX);
		} else if (!strcmp(o, "--limit")) {
			TAKE();
			rc = parse_range(&a->limit, v, o, 1, UINT32_MAX);
		} else if (!strcmp(o, "--recovery")) {
			TAKE();
			a->recovery = v;
			rc = parse_recovery(a, v);
		} else if (!strcmp(o, "--recompute")) {
			TAKE();
			char *end = NULL;
			double r = strtod(v, &end);
			if (!*v || *end || !(r >= 0 && r <= 1))
				rc = fail("--recompute: \"%s\" is not a share in 0..1", v);
			a->recompute = (float)r;
			a->recompute_set = 1;
		} else if (!strcmp(o, "--check-layer")) {
			TAKE();
			rc = parse_range(&a->check_layer, v, o, 0, 1023);
			a->check_set = 1;
		} else if (!strcmp(o, "--prefix")) {
			TAKE();
			rc = parse_range(&a->prefix, v, o, 0, CLI_N_CTX);
			a->prefix_set = 1;
		} else if (!strcmp(o, "--query-weight")) {
			TAKE();
			rc = parse_float(&a->query_weight, v, o);
			if (!rc && !(a->query_weight >= 0 && a->query_weight <= 1))
				rc = fail("--query-weight: \"%s\" is not a weight in 0..1", v);
			a->query_weight_set = 1;
		} else if (!strcmp(o, "--calibration")) {
			TAKE();
			rc = parse_calibration(a, v, eval);
		} else if (!strcmp(o, "--context-turns")) {
			TAKE();
			rc = parse_range(&a->context_turns, v, o, 0, CLI_CONTEXT_TURNS_MAX);
		} else if (!strcmp(o, "--sweep")) {
			a->sweep = 1;
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
		} else if (a->positional) {
			return fail("one %s argument only (\"%s\" is extra; quote the question)",
			            !strcmp(a->cmd, "encode") || eval ? "file" : "question", o) + 1;
		} else {
			a->positional = o;
		}
#undef TAKE
		if (rc)
			return 2;
	}
	if (eval && !a->positional)
		return fail("eval needs a LoCoMo-format conversation FILE.json") + 1;
	if (a->plot && eval && !a->sweep)
		return fail("eval: --plot draws a sweep: give --sweep") + 1;
	if ((a->recompute_set || a->check_set) && !a->select)
		return fail("%s needs --recovery deviation or query", a->recompute_set ? "--recompute" : "--check-layer") + 1;
	if (a->prefix_set && !a->prefix_mode)
		return fail("--prefix needs --recovery prefix") + 1;
	if (a->query_weight_set && !a->query_mode)
		return fail("--query-weight needs --recovery query") + 1;
	if (a->sweep && a->ref)
		return fail("--reference-kv-dtype compares one run: not with --sweep") + 1;
	if (a->sweep && a->recompute_set)
		return fail("--sweep sets --recompute itself") + 1;
	if (a->sweep && a->recovery && !a->select)
		return fail("--sweep varies --recompute: --recovery %s has none", a->mode) + 1;
	if (!a->store && !eval)
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
		a->max_tokens = !strcmp(a->cmd, "bench") ? 1 : eval ? 32 : 64;
	return 0;
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

/* A new store at path for the facts of model and embedder, their KV in
 * kv_dtype. */
static int store_create(infs_store **out, const char *path, const runtime *r, infs_dtype kv_dtype, int device)
{
	infs_geometry g;
	char *identity = NULL;
	if (infs_model_geometry(&g, r->model, kv_dtype) || infs_model_identity(&identity, r->model, kv_dtype))
		return lib_fail("model");
	g.embed_dim = infs_embedder_dim(r->embedder);
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.device = device;
	so.flags = INFS_OPEN_CREATE;
	so.geometry = &g;
	so.identity = identity;
	so.sync = INFS_SYNC_NORMAL;
	cli_remote_apply(&so);
	int rc = infs_store_open(out, path, &so);
	infs_free(identity);
	return rc ? lib_fail(path) : 0;
}

static int runtime_open(runtime *r, const args *a, int create)
{
	memset(r, 0, sizeof *r);
	/* An existing store is opened first: a wrong path fails before the
	 * models load. */
	infs_store_options so = INFS_STORE_OPTIONS_INIT;
	so.device = a->device;
	if ((!create && cli_need_store(a->store)) || cli_need_model(a->model, "model", "--model PATH") ||
	    cli_need_model(a->embedder, "embedder", "--embedder DIR"))
		return 1;
	if (!create) {
		so.flags = INFS_OPEN_READONLY;
		cli_remote_apply(&so);
		if (infs_store_open(&r->store, a->store, &so))
			return lib_fail(a->store);
		store_report_open(r->store, stderr);
	}
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.n_threads = a->threads;
	mo.device = a->device;
	mo.device_max_tokens = CLI_N_CTX;
	if (infs_model_load(&r->model, a->model, &mo))
		return lib_fail("model"); /* the library's message names the path */
	infs_embedder_options eo = INFS_EMBEDDER_OPTIONS_INIT;
	eo.n_threads = a->threads;
	eo.device = a->device;
	if (infs_embedder_load(&r->embedder, a->embedder, &eo))
		return lib_fail("embedder");
	struct stat st;
	if (create && stat(a->store, &st) != 0) {
		if (store_create(&r->store, a->store, r, a->kv_dtype, a->device))
			return 1;
	} else if (create) {
		so.sync = INFS_SYNC_NORMAL;
		cli_remote_apply(&so);
		if (infs_store_open(&r->store, a->store, &so))
			return lib_fail(a->store);
		store_report_open(r->store, stderr);
	}
	infs_geometry sg;
	if (infs_store_geometry(&sg, r->store))
		return lib_fail(a->store);
	if (sg.embed_dim != infs_embedder_dim(r->embedder))
		return fail("%s: the store keeps %u-float embeddings, the embedder %s gives %u", a->store,
		            sg.embed_dim, a->embedder, infs_embedder_dim(r->embedder));
	infs_engine_options en = INFS_ENGINE_OPTIONS_INIT;
	en.n_ctx = CLI_N_CTX;
	/* fp8 is a store dtype only: its facts are dequantized into bf16 */
	en.kv_dtype = sg.kv_dtype == INFS_DTYPE_FP8_E4M3 ? INFS_DTYPE_BF16 : sg.kv_dtype;
	en.device = a->device;
	if (infs_engine_create(&r->engine, r->model, &en))
		return lib_fail("engine");
	if (infs_engine_prepare(r->engine, r->store))
		return lib_fail(a->store);
	return 0;
}

typedef struct progress {
	size_t base, total;
	int show;       /* 0: quiet; 1: a bar on a terminal; 2: a line every few seconds */
	double t0, last; /* seconds */
} progress;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Progress of encoding with its rate and time left: a bar redrawn on a
 * terminal, else (a log, a pipe) a line every 5 seconds and at the end. */
static int show_progress(void *user, size_t done, size_t total)
{
	progress *p = user;
	(void)total;
	if (!p->show)
		return 0;
	const size_t d = p->base + done;
	const double t = now_s(), el = t - p->t0, rate = el > 0 ? (double)d / el : 0;
	const double eta = rate > 0 ? (double)(p->total - d) / rate : 0;
	if (p->show == 1) {
		size_t w = 30, fill = p->total ? d * w / p->total : w;
		fprintf(stderr, "\rencoding [");
		for (size_t i = 0; i < w; i++)
			fputc(i < fill ? '#' : ' ', stderr);
		fprintf(stderr, "] %zu/%zu, %.1f facts/s, %.0f s left ", d, p->total, rate, eta);
	} else if (t - p->last >= 5 || d == p->total) {
		fprintf(stderr, "encoding: %zu/%zu facts, %.1f facts/s, %.0f s left\n", d, p->total, rate, eta);
		p->last = t;
	}
	fflush(stderr);
	return 0;
}

/* Deletes the facts ids[0..n) (namespace ns[i] each; 0: none) that an
 * encode stored before it failed, so that it leaves the store as it found
 * it; *left counts those that stay. */
static void take_back(infs_store *store, const uint64_t *ids, const char *const *ns, size_t n, size_t *left)
{
	*left = 0;
	for (size_t i = 0; i < n; i++)
		*left += ids[i] && infs_fact_delete(store, ns[i], ids[i]) != 0;
	infs_store_sync(store);
}

static int cmd_encode(const args *a)
{
	/* Every line is read and checked before anything is written. */
	fact_lines F;
	char why[1024];
	if (fact_lines_read(&F, a->positional, a->ns, stderr, why, sizeof why)) {
		fact_lines_free(&F);
		return fail("%s", why);
	}
	runtime r;
	if (runtime_open(&r, a, 1)) {
		runtime_free(&r);
		fact_lines_free(&F);
		return 1;
	}
	const int32_t *hdr;
	uint32_t nh;
	int rc = 0;
	if (infs_engine_header(&hdr, &nh, r.engine))
		rc = lib_fail("engine");
	const size_t n = F.n ? F.n : 1;
	infs_fact_input *batch = calloc(n, sizeof *batch);
	uint64_t *ids = calloc(n, sizeof *ids);         /* in the order written */
	const char **ids_ns = calloc(n, sizeof *ids_ns); /* their namespaces */
	char *done = calloc(n, 1);
	if (!rc && (!batch || !ids || !ids_ns || !done))
		rc = fail("out of memory");
	/* What only the model can tell (a fact too long for the context), for
	 * every fact before any is written. */
	for (size_t i = 0; !rc && i < F.n; i++)
		if (infs_engine_fact_check(NULL, r.engine, F.f[i].text, F.f[i].meta))
			rc = fail("%s:%zu: %s", a->positional, F.f[i].line, infs_error_last());
	/* One call per namespace, in order of first appearance. */
	progress pg = { 0, F.n, a->quiet ? 0 : isatty(2) ? 1 : 2, now_s(), now_s() };
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = hdr;
	eo.n_context = nh;
	eo.embedder = r.embedder;
	eo.progress = show_progress;
	eo.progress_user = &pg;
	size_t n_ns = 0, written = 0;
	for (size_t i = 0; !rc && i < F.n; i++) {
		if (done[i])
			continue;
		const char *ns = F.f[i].ns;
		size_t nb = 0;
		for (size_t j = i; j < F.n; j++) {
			if (done[j] || strcmp(F.f[j].ns, ns))
				continue;
			done[j] = 1;
			infs_fact_input f = INFS_FACT_INPUT_INIT;
			f.text = F.f[j].rendered;
			f.embed_text = F.f[j].text;
			f.metadata = F.f[j].meta;
			f.source_id = F.f[j].source_id;
			f.timestamp = F.f[j].timestamp;
			ids_ns[written + nb] = ns;
			batch[nb++] = f;
		}
		if (infs_fact_encode(ids + written, r.store, ns, r.model, batch, nb, &eo)) {
			if (pg.show == 1)
				fputc('\n', stderr);
			/* Those stored before the failure are taken back out. */
			snprintf(why, sizeof why, "%s", infs_error_last());
			size_t left;
			take_back(r.store, ids, ids_ns, written + nb, &left);
			if (left)
				rc = fail("encoding namespace \"%s\": %s; %zu facts of %s stay in %s (deleting them failed: %s)", ns,
				          why, left, a->positional, a->store, infs_error_last());
			else
				rc = fail("encoding namespace \"%s\": %s; nothing of %s was written", ns, why, a->positional);
			break;
		}
		written += nb;
		pg.base += nb;
		n_ns++;
	}
	if (pg.show == 1 && !rc)
		fputc('\n', stderr);
	if (!rc && infs_store_sync(r.store))
		rc = lib_fail(a->store);
	if (!rc)
		printf("encoded %zu facts into %zu namespace%s of %s\n", written, n_ns, n_ns == 1 ? "" : "s", a->store);
	free(batch);
	free(ids);
	free(ids_ns);
	free(done);
	runtime_free(&r);
	fact_lines_free(&F);
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
	if (full)
		return;
	if (a->recovery) { /* the mode asked for replaces the engine's default */
		o->recompute_ratio = 0;
		o->check_layer = 0;
		o->prefix_tokens = 0;
		o->query_weight = 0;
	}
	if (a->n_cal) {
		o->fact_temperature = a->cal_t[0];
		o->fact_scale = a->cal_s[0];
	}
	if (a->select) {
		o->recompute_ratio = a->recompute_set ? a->recompute : 0.15f;
		o->check_layer = a->check_set ? a->check_layer : 2;
	}
	if (a->prefix_mode)
		o->prefix_tokens = a->prefix_set ? a->prefix : 2;
	if (a->query_mode)
		o->query_weight = a->query_weight_set ? a->query_weight : 0.5f;
}

/* The questions of --questions (or the one positional question) and their
 * namespaces. */
typedef struct questions {
	jsonl_lines L;
	const char **q, **ns;
	size_t n;
} questions;

static void questions_free(questions *Q)
{
	free(Q->q);
	free(Q->ns);
	jsonl_lines_free(&Q->L);
}

static int questions_load(questions *Q, const args *a)
{
	memset(Q, 0, sizeof *Q);
	char why[512];
	if (a->questions && jsonl_lines_read(&Q->L, a->questions, why, sizeof why))
		return fail("%s", why);
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
		Q->q[i] = jsonl_str(jsonl_get(Q->L.doc[i].v, "question"), NULL);
		Q->ns[i] = a->ns ? a->ns : jsonl_str(jsonl_get(Q->L.doc[i].v, "namespace"), NULL);
		if (!Q->q[i] || !Q->ns[i])
			return fail("%s:%zu: no \"question\" or \"namespace\"", a->questions, Q->L.no[i]);
	}
	return 0;
}

static void print_timing(FILE *out, const infs_answer *x, int full)
{
	fprintf(out, "TTFT %7.1f ms = embed %.1f + retrieve %.2f + %s %.1f + prefill %.1f (%u of %u prompt tokens prefilled)",
	       x->ttft_ms, x->embed_ms, x->retrieve_ms, full ? "read tokens" : "inject", x->inject_ms,
	       x->prefill_ms, x->n_prefilled, x->n_prompt);
}

/* One answer as a JSON object of ask --json. */
static void answer_json(str *j, const infs_answer *x, const char *question, const char *ns, int full)
{
	char buf[512];
	str_puts(j, j->n > 2 ? ",\n {\"question\": " : " {\"question\": ");
	str_json(j, question);
	str_puts(j, ", \"namespace\": ");
	str_json(j, ns);
	str_puts(j, full ? ", \"mode\": \"full_recompute\", \"answer\": " : ", \"mode\": \"injection\", \"answer\": ");
	str_json(j, x->text);
	snprintf(buf, sizeof buf, ", \"n_tokens\": %u, \"n_prompt\": %u, \"n_prefilled\": %u, \"facts\": [", x->n_tokens,
	         x->n_prompt, x->n_prefilled);
	str_puts(j, buf);
	for (size_t i = 0; i < x->n_facts; i++) {
		snprintf(buf, sizeof buf, "%s{\"id\": %llu, \"score\": %.6f}", i ? ", " : "",
		         (unsigned long long)x->fact_ids[i], (double)x->scores[i]);
		str_puts(j, buf);
	}
	snprintf(buf, sizeof buf, "], \"ttft_ms\": %.3f, \"embed_ms\": %.3f, \"retrieve_ms\": %.3f, \"inject_ms\": %.3f, "
	         "\"prefill_ms\": %.3f, \"decode_ms\": %.3f}", x->ttft_ms, x->embed_ms, x->retrieve_ms, x->inject_ms,
	         x->prefill_ms, x->decode_ms);
	str_puts(j, buf);
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
	/* --json is opened before anything is answered: a path that cannot be
	 * written fails first. */
	FILE *jf = NULL;
	if (!rc && a->json && !(jf = strcmp(a->json, "-") ? fopen(a->json, "w") : stdout))
		rc = fail("%s: %s", a->json, strerror(errno));
	/* With --json - the JSON has stdout to itself and the text goes to stderr. */
	FILE *out = a->json && !strcmp(a->json, "-") ? stderr : stdout;
	str j = { 0 };
	str_puts(&j, "[\n");
	int modes = a->compare ? 2 : 1;
	double sum[2] = { 0, 0 };
	if (!rc)
		cli_warn_empty(r.store, Q.ns, Q.n);
	/* Several questions: a first one untimed, so that the mean holds no
	 * cold start (first touches of the weights, thread start-up). */
	if (!rc && Q.n > 1) {
		infs_ask_options o;
		ask_options(&o, a, a->k, a->full);
		o.generate.max_tokens = 1;
		infs_answer *x = NULL;
		if (infs_engine_ask(&x, r.engine, r.store, r.embedder, Q.ns[0], Q.q[0], &o))
			rc = lib_fail("ask");
		infs_answer_free(x);
	}
	for (size_t q = 0; !rc && q < Q.n; q++) {
		if (Q.n > 1 || a->compare)
			fprintf(out, "%sQ: %s\n", q ? "\n" : "", Q.q[q]);
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
			cli_warn_left_out(x, CLI_N_CTX);
			if (jf)
				answer_json(&j, x, Q.q[q], Q.ns[q], full);
			if (a->compare) {
				fprintf(out, "  %-15s %s\n  %15s ", full ? "full recompute:" : "injection:", x->text, "");
				print_timing(out, x, full);
				fprintf(out, "\n");
				infs_answer_free(x);
				continue;
			}
			fprintf(out, "%s\n\nfacts used (best first):\n", x->text);
			for (size_t i = 0; i < x->n_facts; i++) {
				infs_fact_record *rec = NULL;
				if (infs_fact_get(&rec, r.store, Q.ns[q], x->fact_ids[i])) {
					rc = lib_fail("reading a fact");
					break;
				}
				size_t len = strlen(rec->text);
				while (len && rec->text[len - 1] == '\n')
					len--;
				fprintf(out, "  %2zu. %.3f  %.*s\n", i + 1, (double)x->scores[i], (int)len, rec->text);
				infs_fact_record_free(rec);
			}
			fprintf(out, "\n%s: ", full ? "full recompute" : "injection");
			print_timing(out, x, full);
			fprintf(out, "; %u tokens decoded in %.1f ms\n", x->n_tokens, x->decode_ms);
			infs_answer_free(x);
		}
	}
	if (!rc && a->compare && Q.n)
		fprintf(out, "\nmean TTFT over %zu questions (k %u): injection %.1f ms, full recompute %.1f ms (%.1fx)\n", Q.n,
		       a->k, sum[0] / (double)Q.n, sum[1] / (double)Q.n, sum[0] > 0 ? sum[1] / sum[0] : 0);
	if (!rc && jf) {
		str_puts(&j, "\n]\n");
		if (fputs(j.p, jf) == EOF || (jf != stdout && fclose(jf)))
			rc = fail("%s: %s", a->json, strerror(errno));
		jf = NULL;
	}
	if (jf && jf != stdout)
		fclose(jf);
	free(j.p);
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
	/* The chart is drawn at the end: its file must be writable now. */
	FILE *pf = !rc && a->plot ? fopen(a->plot, "wb") : NULL;
	if (!rc && a->plot && !pf)
		rc = fail("%s: %s", a->plot, strerror(errno));
	if (pf)
		fclose(pf);
	/* Every statistic is a mean over the questions at one k, parts and totals
	 * alike, so the parts add up to the TTFT in the table, the JSON's
	 * "summary" and the chart. */
	chart_bench_k chart[sizeof a->ks / sizeof a->ks[0]];
	double prompt[sizeof a->ks / sizeof a->ks[0]], facts[sizeof a->ks / sizeof a->ks[0]];
	double read[sizeof a->ks / sizeof a->ks[0]], fprefill[sizeof a->ks / sizeof a->ks[0]];
	char cpu[256];
	cpu_name(cpu, sizeof cpu);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (jf)
		fprintf(jf, "{\"hardware\": {\"cpu\": \"%s\", \"cores\": %ld}, \"max_tokens\": %u, \"questions\": %zu, "
		            "\"statistic\": \"mean\", \"results\": [",
		        cpu, ncpu, a->max_tokens, nq);
	if (!rc) {
		printf("%s, %ld cores; %zu question%s; answers of up to %u token%s\n\n", cpu, ncpu, nq,
		       nq == 1 ? "" : "s", a->max_tokens, a->max_tokens == 1 ? "" : "s");
		printf("%5s %7s | %-45s | %-27s | %7s | %s\n", "", "mean", "injection, mean ms",
		       "full recompute, mean ms", "", "mean KL, shares");
		printf("%5s %7s | %9s %8s %8s %8s %8s | %9s %8s %8s | %7s | %8s %6s %6s\n", "k", "prompt", "TTFT",
		       "embed", "retr", "inject", "prefill", "TTFT", "read", "prefill", "speedup", "KL", "top1", "answer");
	}
	for (size_t ki = 0; !rc && ki < a->n_ks; ki++) {
		uint32_t k = a->ks[ki];
		double s_emb = 0, s_ret = 0, s_inj = 0, s_pre = 0, s_read = 0, s_fpre = 0, s_kl = 0, s_prompt = 0,
		       s_facts = 0;
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
			s_emb += x->embed_ms;
			s_ret += x->retrieve_ms;
			s_inj += x->inject_ms;
			s_pre += x->prefill_ms;
			s_read += y->inject_ms;
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
		double n = (double)nq;
		chart_bench_k *c = &chart[ki];
		*c = (chart_bench_k){ k, s_emb / n, s_ret / n, s_inj / n, s_pre / n, (s_emb + s_ret + s_read + s_fpre) / n,
		                      (double)top1 / n, (double)same / n, s_kl / n };
		prompt[ki] = s_prompt / n;
		facts[ki] = s_facts / n;
		read[ki] = s_read / n;
		fprefill[ki] = s_fpre / n;
		double ti = c->embed_ms + c->retrieve_ms + c->inject_ms + c->prefill_ms;
		printf("%5u %7.0f | %9.1f %8.1f %8.2f %8.1f %8.1f | %9.1f %8.2f %8.1f | %6.1fx | %8.4f %5.0f%% %5.0f%%\n",
		       k, prompt[ki], ti, c->embed_ms, c->retrieve_ms, c->inject_ms, c->prefill_ms, c->full_ms, read[ki],
		       fprefill[ki], ti > 0 ? c->full_ms / ti : 0, c->kl, 100 * c->top1, 100 * c->answer);
		if (s_facts < k * n)
			printf("      (k %u: %.1f facts on average: the namespaces are smaller)\n", k, facts[ki]);
	}
	if (!rc)
		printf("\nMeans over the questions at each k, in ms: TTFT = embed + retr + inject + prefill for\n"
		       "injection, embed + retr + read (the facts' tokens from the store) + prefill for full\n"
		       "recompute; speedup = full TTFT / inj TTFT; KL(full || injection) of the first token, nats;\n"
		       "top1 / answer: share of questions whose first token / whole answer is the same.\n");
	if (jf) {
		/* The table's rows: the same means as the text. */
		fprintf(jf, "\n], \"summary\": [");
		for (size_t ki = 0; !rc && ki < a->n_ks; ki++) {
			const chart_bench_k *c = &chart[ki];
			double ti = c->embed_ms + c->retrieve_ms + c->inject_ms + c->prefill_ms;
			fprintf(jf, "%s\n  {\"k\": %u, \"facts\": %.3f, \"prompt_tokens\": %.3f, "
			            "\"injection_ms\": {\"ttft\": %.3f, \"embed\": %.3f, \"retrieve\": %.3f, \"inject\": %.3f, \"prefill\": %.3f}, "
			            "\"full_ms\": {\"ttft\": %.3f, \"read_tokens\": %.3f, \"prefill\": %.3f}, "
			            "\"speedup\": %.3f, \"kl\": %.6g, \"top1_agree\": %.6g, \"answer_agree\": %.6g}",
			        ki ? "," : "", a->ks[ki], facts[ki], prompt[ki], ti, c->embed_ms, c->retrieve_ms, c->inject_ms,
			        c->prefill_ms, c->full_ms, read[ki], fprefill[ki], ti > 0 ? c->full_ms / ti : 0, c->kl,
			        c->top1, c->answer);
		}
		fprintf(jf, "\n]}\n");
		if (jf != stdout)
			fclose(jf);
	}
	char why[512];
	if (!rc && a->plot && chart_bench(a->plot, chart, a->n_ks, nq, a->max_tokens, why, sizeof why))
		rc = fail("--plot: %s", why);
	runtime_free(&r);
	questions_free(&Q);
	return rc;
}

/* --- eval: a LoCoMo-format conversation (docs/eval.md). --- */

/* The namespace of the temporary store. */
#define EVAL_NS "eval"

/* One observation fact: its text, its metadata (speaker, date and evidence
 * turns, as scripts/locomo-jsonl.py writes them), its evidence turns
 * joined by ';', its rendering, its encoding context (--context-turns: the
 * turns' text and its tokens; NULL without) and its ids in the store and in
 * the reference store (--reference-kv-dtype). */
typedef struct conv_fact {
	const char *text;
	str meta, evidence;
	char *rendered, *context;
	int32_t *context_tokens;
	uint32_t n_context;
	uint64_t id, ref_id;
} conv_fact;

typedef struct conv {
	char *text;    /* the file, which holds lc's strings */
	locomo_doc lc; /* its facts and questions (tools/locomo_read.h) */
	conv_fact *facts;
	size_t n_facts;
	size_t n_no_context;     /* --context-turns: facts whose evidence names no turn */
	uint64_t context_tokens; /* --context-turns: of all facts together */
	double encode_ms;        /* the facts' encoding into the main store */
} conv;

static void conv_free(conv *c)
{
	for (size_t i = 0; i < c->n_facts; i++) {
		free(c->facts[i].meta.p);
		free(c->facts[i].evidence.p);
		infs_free(c->facts[i].rendered);
		free(c->facts[i].context);
		free(c->facts[i].context_tokens);
	}
	free(c->facts);
	locomo_free(&c->lc);
	free(c->text);
}

static int read_whole(char **out, size_t *n, const char *path)
{
	*out = NULL;
	*n = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return fail("%s: %s", path, strerror(errno));
	size_t cap = 0;
	int rc = 0;
	for (;;) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 1 << 16;
			char *p = realloc(*out, cap);
			if (!p) {
				rc = fail("out of memory reading %s", path);
				break;
			}
			*out = p;
		}
		size_t got = fread(*out + *n, 1, cap - *n, f);
		*n += got;
		if (got)
			continue;
		if (ferror(f))
			rc = fail("%s: %s", path, strerror(errno));
		break;
	}
	fclose(f);
	return rc;
}

/* Reads the conversation at path (tools/locomo_read.h): its facts, each
 * with its metadata (speaker, date and evidence turns, as
 * scripts/locomo-jsonl.py writes them) and rendering, and its questions. */
static int conv_read(conv *c, const char *path)
{
	memset(c, 0, sizeof *c);
	size_t len;
	char why[1024];
	if (read_whole(&c->text, &len, path))
		return 1;
	if (locomo_read(&c->lc, c->text, len, path, why, sizeof why))
		return fail("%s", why);
	if (!(c->facts = calloc(c->lc.n_facts, sizeof *c->facts)))
		return fail("out of memory");
	for (size_t i = 0; i < c->lc.n_facts; i++) {
		const locomo_fact *l = &c->lc.facts[i];
		conv_fact *f = &c->facts[c->n_facts++];
		f->text = l->text;
		str_puts(&f->evidence, l->evidence);
		str_puts(&f->meta, "{\"speaker\":");
		str_json(&f->meta, l->speaker);
		str_puts(&f->meta, ",\"date\":");
		str_json(&f->meta, l->date);
		str_puts(&f->meta, ",\"evidence\":");
		str_json(&f->meta, l->evidence);
		str_puts(&f->meta, "}");
		if (infs_fact_render(&f->rendered, f->text, f->meta.p))
			return fail("%s: \"%s\".\"%s\"[%zu]: %s", path, l->session, l->speaker, l->index, infs_error_last());
	}
	return 0;
}

/* --context-turns w: each fact's context, the w turns up to and including
 * its first evidence turn (tools/locomo_turns.h); none for a fact whose
 * evidence names no turn. Read before any model loads, so that malformed
 * turns fail early. */
static int conv_contexts(conv *c, const char *path, unsigned w)
{
	locomo_turns t;
	char why[256];
	if (locomo_turns_read(&t, c->lc.doc.v, why, sizeof why))
		return fail("%s: --context-turns: %s", path, why);
	int rc = 0;
	for (size_t i = 0; !rc && i < c->n_facts; i++) {
		conv_fact *f = &c->facts[i];
		size_t n_turns;
		if (locomo_context(&f->context, &n_turns, &t, f->evidence.p, w))
			rc = fail("out of memory");
		c->n_no_context += !rc && !f->context;
	}
	locomo_turns_free(&t);
	return rc;
}

/* The contexts' tokens, by the model's tokenizer, as the fact texts are
 * tokenized (no BOS, special tokens as plain text). */
static int conv_context_tokens(conv *c, const infs_model *m)
{
	const infs_tokenizer *tok = infs_model_tokenizer(m);
	if (!tok)
		return lib_fail("--context-turns: the model's tokenizer");
	for (size_t i = 0; i < c->n_facts; i++) {
		conv_fact *f = &c->facts[i];
		size_t len = f->context ? strlen(f->context) : 0, n = 0;
		if (!len)
			continue;
		if (infs_tokenize(tok, f->context, len, 0, NULL, 0, &n))
			return lib_fail("--context-turns: tokenizing");
		if (n > UINT32_MAX || !(f->context_tokens = malloc((n ? n : 1) * sizeof *f->context_tokens)))
			return fail("out of memory");
		if (infs_tokenize(tok, f->context, len, 0, f->context_tokens, n, &n))
			return lib_fail("--context-turns: tokenizing");
		f->n_context = (uint32_t)n;
		c->context_tokens += n;
	}
	return 0;
}

/* The temporary store's directory, removed at exit. */
static char eval_dir[4096];

static void eval_cleanup(void)
{
	if (!eval_dir[0])
		return;
	DIR *d = opendir(eval_dir);
	const struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[sizeof eval_dir + 256];
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof p, "%s/%s", eval_dir, e->d_name);
			unlink(p);
		}
	}
	if (d)
		closedir(d);
	rmdir(eval_dir);
	eval_dir[0] = '\0';
}

/* Encodes the conversation's facts into store (r's or the reference
 * store), after the engine's header, keeping their ids (id or ref_id). */
static int eval_encode(conv *c, const runtime *r, infs_store *store, int ref, const args *a)
{
	const int32_t *hdr;
	uint32_t nh;
	if (infs_engine_header(&hdr, &nh, r->engine))
		return lib_fail("engine");
	infs_fact_input *in = calloc(c->n_facts, sizeof *in);
	uint64_t *ids = calloc(c->n_facts, sizeof *ids);
	int rc = !in || !ids ? fail("out of memory") : 0;
	for (size_t i = 0; !rc && i < c->n_facts; i++) {
		infs_fact_input f = INFS_FACT_INPUT_INIT;
		f.text = c->facts[i].rendered;
		f.embed_text = c->facts[i].text;
		f.metadata = c->facts[i].meta.p;
		f.context = c->facts[i].context_tokens;
		f.n_context = c->facts[i].n_context;
		in[i] = f;
	}
	progress pg = { 0, c->n_facts, a->quiet ? 0 : isatty(2) ? 1 : 2, now_s(), now_s() };
	infs_encode_options eo = INFS_ENCODE_OPTIONS_INIT;
	eo.context = hdr;
	eo.n_context = nh;
	eo.embedder = r->embedder;
	eo.progress = show_progress;
	eo.progress_user = &pg;
	double t0 = now_s();
	if (!rc && infs_fact_encode(ids, store, EVAL_NS, r->model, in, c->n_facts, &eo))
		rc = fail("%s: encoding the facts%s: %s", a->positional, ref ? " (reference)" : "", infs_error_last());
	if (!ref)
		c->encode_ms = 1e3 * (now_s() - t0);
	if (pg.show == 1)
		fputc('\n', stderr);
	for (size_t i = 0; !rc && i < c->n_facts; i++)
		*(ref ? &c->facts[i].ref_id : &c->facts[i].id) = ids[i];
	free(in);
	free(ids);
	return rc;
}

/* One recovery setting that eval measures (a sweep has several), and its
 * sums over questions, reported as means. */
typedef struct eval_point {
	char mode[32];
	float ratio, weight, temp, scale;
	uint32_t check, prefix;
	size_t top1, same, ev_found, ev_total;
	double kl, f1_inject, f1_full, f1_vs_full, ttft_inject, ttft_full, recomputed;
	size_t floor_top1, floor_same; /* full recompute in two steps against full recompute */
	double floor_kl;
	size_t ref_top1, ref_same; /* against injection from the reference store */
	double ref_kl;
	str detail;
} eval_point;

static void point_options(infs_ask_options *o, const args *a, const eval_point *p)
{
	ask_options(o, a, a->k, 0);
	o->recompute_ratio = p->ratio;
	o->check_layer = p->check;
	o->prefix_tokens = p->prefix;
	o->query_weight = p->weight;
	o->fact_temperature = p->temp;
	o->fact_scale = p->scale;
}

/* The point of --recovery MODE (a's other flags, or their defaults; no
 * mode: the engine's default) at ratio (< 0: --recompute's) with
 * calibration cal of --calibration (none given: the engine's). */
static void point_make(eval_point *p, const args *a, const char *mode, float ratio, size_t cal)
{
	args b = *a;
	if (mode) {
		parse_recovery(&b, mode);
		b.recovery = mode;
	}
	infs_ask_options o;
	ask_options(&o, &b, b.k, 0);
	memset(p, 0, sizeof *p);
	p->ratio = ratio < 0 ? o.recompute_ratio : ratio;
	p->check = o.check_layer;
	p->prefix = o.prefix_tokens;
	p->weight = o.query_weight;
	p->temp = a->n_cal ? a->cal_t[cal] : o.fact_temperature;
	p->scale = a->n_cal ? a->cal_s[cal] : o.fact_scale;
	if (b.recovery) /* the name asked for, also where the ratio is 0 */
		snprintf(p->mode, sizeof p->mode, "%s", b.mode);
	else /* the engine's default, named by what it does */
		snprintf(p->mode, sizeof p->mode, "%s%s%s", p->prefix ? "prefix" : "",
		         p->prefix && p->ratio > 0 ? "+" : "", p->ratio <= 0 ? "" : p->weight > 0 ? "query" : "deviation");
	if (!p->mode[0])
		strcpy(p->mode, "none");
}

/* Adds answer x (TTFT ttft_x, recomputed share frac) of question q against
 * full recompute y (TTFT ttft_y), and against ref (the same facts injected
 * from the reference store; NULL without one), to p's sums. */
static int eval_score(eval_point *p, const conv *c, size_t qi, const infs_answer *x, double ttft_x, double frac,
                      const infs_answer *y, double ttft_y, const infs_answer *ref, const infs_answer *floor2)
{
	const jsonl_value *q = c->lc.qs[qi];
	const jsonl_value *ans = jsonl_get(q, "answer"), *ev = jsonl_get(q, "evidence");
	char num[64];
	/* A number answer as its text: integers without a fraction. */
	if (ans->type == JSONL_NUMBER)
		snprintf(num, sizeof num, fabs(ans->num) < 1e15 && ans->num == floor(ans->num) ? "%.0f" : "%.15g",
		         ans->num);
	const char *gold = ans->type == JSONL_STRING ? ans->str : num;
	size_t n_gold = ev ? ev->len : 0;
	const char **golds = calloc(n_gold ? n_gold : 1, sizeof *golds);
	const char **have = calloc(x->n_facts ? x->n_facts : 1, sizeof *have);
	double f1i = 0, f1f = 0, f1x = 0;
	int rc = !golds || !have || eval_f1(&f1i, x->text, gold) || eval_f1(&f1f, y->text, gold) ||
	         eval_f1(&f1x, x->text, y->text);
	if (rc)
		rc = fail("out of memory");
	if (!rc) {
		for (size_t i = 0; i < n_gold; i++)
			golds[i] = ev[1 + i].str;
		for (size_t i = 0; i < x->n_facts; i++) {
			have[i] = "";
			for (size_t j = 0; j < c->n_facts; j++)
				if (c->facts[j].id == x->fact_ids[i] && c->facts[j].evidence.p)
					have[i] = c->facts[j].evidence.p;
		}
		size_t total, found = eval_evidence_found(&total, golds, n_gold, have, x->n_facts);
		int top1 = argmax(y->first_logits, y->n_vocab) == argmax(x->first_logits, x->n_vocab);
		int same = !strcmp(x->text, y->text);
		double kl = kl_logits(y->first_logits, x->first_logits, x->n_vocab);
		p->ev_found += found;
		p->ev_total += total;
		p->top1 += (size_t)top1;
		p->same += (size_t)same;
		p->kl += kl;
		p->f1_inject += f1i;
		p->f1_full += f1f;
		p->f1_vs_full += f1x;
		/* The floor: full recompute against itself in two steps. */
		int ftop1 = argmax(y->first_logits, y->n_vocab) == argmax(floor2->first_logits, floor2->n_vocab);
		int fsame = !strcmp(floor2->text, y->text);
		double fkl = kl_logits(y->first_logits, floor2->first_logits, y->n_vocab);
		p->floor_top1 += (size_t)ftop1;
		p->floor_same += (size_t)fsame;
		p->floor_kl += fkl;
		p->ttft_inject += ttft_x;
		p->recomputed += frac;
		p->ttft_full += ttft_y;
		/* By place in "qa", not by text: the JSON may be published where
		 * the data set's text may not. */
		char buf[512];
		snprintf(buf, sizeof buf,
		         "%s\n  {\"qa\": %zu, \"facts\": %zu, \"first_token_agree\": %s, \"answer_agree\": %s, "
		         "\"kl_first_token\": %.6g, \"f1_inject\": %.6f, \"f1_full\": %.6f, \"evidence_found\": %zu, "
		         "\"evidence_total\": %zu, \"ttft_inject_ms\": %.3f, \"ttft_full_ms\": %.3f, "
		         "\"answer_f1_vs_full\": %.6f, \"floor_first_token_agree\": %s, \"floor_kl_first_token\": %.6g",
		         p->detail.n ? "," : "", c->lc.qa_index[qi], x->n_facts, top1 ? "true" : "false",
		         same ? "true" : "false", kl, f1i, f1f, found, total, ttft_x, ttft_y, f1x,
		         ftop1 ? "true" : "false", fkl);
		str_puts(&p->detail, buf);
		if (ref) {
			/* KL(reference || x), as KL(full || x) above. */
			int rtop1 = argmax(ref->first_logits, ref->n_vocab) == argmax(x->first_logits, x->n_vocab);
			int rsame = !strcmp(x->text, ref->text);
			double rkl = kl_logits(ref->first_logits, x->first_logits, x->n_vocab);
			p->ref_top1 += (size_t)rtop1;
			p->ref_same += (size_t)rsame;
			p->ref_kl += rkl;
			snprintf(buf, sizeof buf, ", \"first_token_agree_vs_reference\": %s, \"answer_agree_vs_reference\": %s, "
			         "\"kl_first_token_vs_reference\": %.6g", rtop1 ? "true" : "false", rsame ? "true" : "false", rkl);
			str_puts(&p->detail, buf);
		}
		str_puts(&p->detail, "}");
	}
	free(golds);
	free(have);
	return rc;
}

/* Question qi of c answered at every point (pts[0..np)), by full
 * recompute of the same facts, and by full recompute in two steps (the
 * floor: header and facts prefilled, injected-style in place, then the
 * question, as injection's numerics have it), added to the points' sums.
 * Equal answers are answered once: ratio 0 with the same prefix and
 * calibration (the check layer and query weight then do nothing), and, in
 * a sweep, ratio 1, which is full recompute exactly. With ref_store
 * (one point, not a sweep) the facts injection used are also injected from
 * there, by the same engine: the prompts differ only in the store's dtype. */
static int eval_question(eval_point *pts, size_t np, const conv *c, size_t qi, runtime *r, infs_store *ref_store,
                         const args *a)
{
	const char *question = jsonl_get(c->lc.qs[qi], "question")->str;
	infs_answer **got = calloc(np, sizeof *got), *first = NULL, *full = NULL, *ref = NULL, *floor2 = NULL;
	uint8_t *own = calloc(np, 1);
	uint64_t *ref_ids = NULL;
	int rc = !got || !own ? fail("out of memory") : 0;
	/* The engine answers from the store it was last prepared on. */
	if (!rc && ref_store && infs_engine_prepare(r->engine, r->store))
		rc = lib_fail("eval");
	for (size_t i = 0; !rc && i < np; i++) {
		if (a->sweep && pts[i].ratio >= 1.0f)
			continue; /* full recompute's answer, below */
		for (size_t j = 0; j < i && !got[i]; j++)
			if (got[j] && pts[j].ratio == 0 && pts[i].ratio == 0 && pts[j].prefix == pts[i].prefix &&
			    pts[j].temp == pts[i].temp && pts[j].scale == pts[i].scale)
				got[i] = got[j];
		if (got[i])
			continue;
		infs_ask_options o;
		point_options(&o, a, &pts[i]);
		if (infs_engine_ask(&got[i], r->engine, r->store, r->embedder, EVAL_NS, question, &o))
			rc = lib_fail("eval");
		own[i] = 1;
		first = first ? first : got[i];
	}
	/* The same facts in the same order, all prefilled. */
	infs_ask_options o;
	ask_options(&o, a, a->k, 1);
	if (!rc) {
		o.fact_ids = first->fact_ids;
		o.n_fact_ids = first->n_facts;
	}
	if (!rc && infs_engine_ask(&full, r->engine, r->store, r->embedder, EVAL_NS, question, &o))
		rc = lib_fail("eval");
	/* The floor: every fact token recomputed in place over the injected
	 * header (so through every layer), then the question: full recompute's
	 * prompt, prefilled in two steps, uncalibrated. */
	if (!rc) {
		ask_options(&o, a, a->k, 0);
		o.fact_ids = first->fact_ids;
		o.n_fact_ids = first->n_facts;
		o.recompute_ratio = 0;
		o.query_weight = 0;
		o.prefix_tokens = UINT32_MAX;
		o.fact_temperature = o.fact_scale = 1.0f;
		if (infs_engine_ask(&floor2, r->engine, r->store, r->embedder, EVAL_NS, question, &o))
			rc = lib_fail("eval: the floor");
	}
	if (!rc && ref_store) {
		/* The same facts by their ids in the reference store. */
		if (!(ref_ids = calloc(first->n_facts ? first->n_facts : 1, sizeof *ref_ids)))
			rc = fail("out of memory");
		for (size_t i = 0; !rc && i < first->n_facts; i++)
			for (size_t j = 0; j < c->n_facts; j++)
				if (c->facts[j].id == first->fact_ids[i])
					ref_ids[i] = c->facts[j].ref_id;
		point_options(&o, a, &pts[0]);
		o.fact_ids = ref_ids;
		o.n_fact_ids = first->n_facts;
		if (!rc && (infs_engine_prepare(r->engine, ref_store) ||
		            infs_engine_ask(&ref, r->engine, ref_store, NULL, EVAL_NS, question, &o)))
			rc = lib_fail("eval: the reference");
	}
	/* Full recompute's TTFT counts the same embedding and retrieval. */
	double ttft_full = rc ? 0 : first->embed_ms + first->retrieve_ms + full->inject_ms + full->prefill_ms;
	for (size_t i = 0; !rc && i < np; i++) {
		const infs_answer *x = got[i] ? got[i] : full;
		double frac = !got[i] ? 1 : x->n_recomputable ? (double)x->n_recomputed / x->n_recomputable : 0;
		rc = eval_score(&pts[i], c, qi, x, got[i] ? x->ttft_ms : ttft_full, frac, full, ttft_full, ref, floor2);
	}
	for (size_t i = 0; got && i < np; i++)
		if (own[i])
			infs_answer_free(got[i]);
	infs_answer_free(full);
	infs_answer_free(floor2);
	infs_answer_free(ref);
	free(ref_ids);
	free(got);
	free(own);
	return rc;
}

/* The line of --context-turns in the summary on stderr. */
static void context_summary(const conv *c, const args *a)
{
	const size_t with = c->n_facts - c->n_no_context;
	if (a->context_turns)
		fprintf(stderr, "  context: up to %u turn%s ending with each fact's evidence turn, %.1f tokens on average; "
		                "%zu of %zu facts without (no known evidence turn); encoding %.1f s\n",
		        a->context_turns, a->context_turns == 1 ? "" : "s",
		        with ? (double)c->context_tokens / (double)with : 0.0, c->n_no_context, c->n_facts,
		        c->encode_ms / 1e3);
}

/* Point p's means over nq questions as one JSON object, and a summary on
 * stderr (one line in a sweep). */
static void eval_report(FILE *jf, const eval_point *p, size_t nq, const conv *c, const args *a)
{
	const double n = (double)nq;
	char recall[32], recall_h[48];
	/* No gold evidence at all: no recall to report. */
	snprintf(recall, sizeof recall, p->ev_total ? "%.6f" : "null",
	         p->ev_total ? (double)p->ev_found / (double)p->ev_total : 0.0);
	snprintf(recall_h, sizeof recall_h, "%zu of %zu turns", p->ev_found, p->ev_total);
	const size_t with_context = c->n_facts - c->n_no_context;
	fprintf(jf, "{\"mode\": \"%s\", \"recompute_ratio\": %g, \"check_layer\": %u, \"prefix_tokens\": %u, "
	            "\"query_weight\": %g, \"fact_temperature\": %g, \"fact_scale\": %g, \"k\": %u, \"kv_dtype\": \"%s\", \"context_turns\": %u, "
	            "\"facts_without_context\": %zu, \"context_tokens_mean\": %.3f, \"encode_ms\": %.3f, "
	            "\"n_questions\": %zu, "
	            "\"recompute_fraction\": %.6f, "
	            "\"first_token_agreement\": %.6f, \"answer_agreement\": %.6f, \"kl_first_token_mean\": %.6g, "
	            "\"f1_inject\": %.6f, \"f1_full\": %.6f, \"evidence_recall\": %s, "
	            "\"ttft_inject_ms\": %.3f, \"ttft_full_ms\": %.3f, \"answer_f1_vs_full\": %.6f, "
	            "\"floor_first_token_agreement\": %.6f, \"floor_answer_agreement\": %.6f, "
	            "\"floor_kl_first_token_mean\": %.6g, ",
	        p->mode, (double)p->ratio, p->check, p->prefix, (double)p->weight, (double)p->temp, (double)p->scale, a->k,
	        dtype_name(a->kv_dtype),
	        a->context_turns, c->n_no_context,
	        a->context_turns && with_context ? (double)c->context_tokens / (double)with_context : 0.0, c->encode_ms, nq,
	        p->recomputed / n, (double)p->top1 / n, (double)p->same / n, p->kl / n, p->f1_inject / n,
	        p->f1_full / n, recall, p->ttft_inject / n, p->ttft_full / n, p->f1_vs_full / n,
	        (double)p->floor_top1 / n, (double)p->floor_same / n, p->floor_kl / n);
	if (a->ref)
		fprintf(jf, "\"reference_kv_dtype\": \"%s\", \"first_token_agreement_vs_reference\": %.6f, "
		            "\"answer_agreement_vs_reference\": %.6f, \"kl_first_token_vs_reference_mean\": %.6g, ",
		        dtype_name(a->ref_dtype), (double)p->ref_top1 / n, (double)p->ref_same / n, p->ref_kl / n);
	fprintf(jf, "\"questions\": [%s\n]}", p->detail.p ? p->detail.p : "");
	if (a->sweep || a->n_cal > 1) {
		fprintf(stderr, "%-16s r %.2f T %.2f S %.2f: recomputed %.3f, first token %5.1f%% (floor %5.1f%%), "
		                "answer %5.1f%% (F1 vs full %.3f), KL %.4f (floor %.4f), F1 %.3f / %.3f, TTFT %.1f / %.1f ms\n",
		        p->mode, (double)p->ratio, (double)p->temp, (double)p->scale, p->recomputed / n,
		        100.0 * (double)p->top1 / n, 100.0 * (double)p->floor_top1 / n, 100.0 * (double)p->same / n,
		        p->f1_vs_full / n, p->kl / n, p->floor_kl / n, p->f1_inject / n, p->f1_full / n, p->ttft_inject / n,
		        p->ttft_full / n);
		return;
	}
	fprintf(stderr,
	        "%s: %zu of %zu questions (categories 1-4), %zu facts, k %u, recovery %s, calibration %g:%g\n"
	        "  agreement with full recompute: first token %.1f%%, answer %.1f%% (token F1 %.3f); first-token KL %.4f nats\n"
	        "  the floor (full recompute in two steps against one): first token %.1f%%, answer %.1f%%; KL %.4f\n"
	        "  F1: injection %.3f, full recompute %.3f; evidence recall %s\n"
	        "  mean TTFT: injection %.1f ms, full recompute %.1f ms\n",
	        a->positional, nq, c->lc.n_qs, c->n_facts, a->k, p->mode, (double)p->temp, (double)p->scale,
	        100.0 * (double)p->top1 / n, 100.0 * (double)p->same / n, p->f1_vs_full / n, p->kl / n,
	        100.0 * (double)p->floor_top1 / n, 100.0 * (double)p->floor_same / n, p->floor_kl / n,
	        p->f1_inject / n, p->f1_full / n, recall_h, p->ttft_inject / n, p->ttft_full / n);
	context_summary(c, a);
	if (a->ref)
		fprintf(stderr, "  %s KV against %s: first token %.1f%%, answer %.1f%%; first-token KL %.4g nats\n",
		        dtype_name(a->kv_dtype), dtype_name(a->ref_dtype), 100.0 * (double)p->ref_top1 / n,
		        100.0 * (double)p->ref_same / n, p->ref_kl / n);
}

/* The sweep's chart (tools/charts.h) of points pts[0..np), means over nq
 * questions. */
static int eval_plot(const char *png, const eval_point *pts, size_t np, size_t nq)
{
	chart_sweep_run *runs = calloc(np ? np : 1, sizeof *runs);
	if (!runs)
		return fail("--plot: out of memory");
	const double n = nq ? (double)nq : 1.0;
	for (size_t i = 0; i < np; i++) {
		const eval_point *p = &pts[i];
		runs[i] = (chart_sweep_run){ p->mode, (int)p->check, p->recomputed / n, (double)p->top1 / n,
			                     (double)p->same / n, p->kl / n, p->f1_inject / n, p->f1_full / n,
			                     p->ttft_inject / n, p->ttft_full / n };
	}
	char why[256];
	int rc = chart_sweep(png, runs, np, why, sizeof why) ? fail("--plot: %s", why) : 0;
	free(runs);
	return rc;
}

/* The ratios of --sweep, and its modes without --recovery. */
static const float sweep_ratios[] = { 0, 0.05f, 0.1f, 0.15f, 0.2f, 0.3f, 0.5f, 1 };
static const char *const sweep_modes[] = { "deviation", "query", "prefix+deviation", "prefix+query" };

static int cmd_eval(const args *a)
{
	conv c;
	runtime r;
	memset(&r, 0, sizeof r);
	int rc = conv_read(&c, a->positional);
	if (!rc && a->context_turns)
		rc = conv_contexts(&c, a->positional, a->context_turns);
	/* A chart that cannot be written fails before the long part. */
	FILE *pf = !rc && a->plot ? fopen(a->plot, "wb") : NULL;
	if (!rc && a->plot && !pf)
		rc = fail("%s: %s", a->plot, strerror(errno));
	if (pf)
		fclose(pf);
	size_t n = c.lc.n_qs, *pick = rc ? NULL : calloc(n, sizeof *pick);
	const size_t n_ratios = sizeof sweep_ratios / sizeof sweep_ratios[0];
	const size_t n_modes = !a->sweep ? 1 : a->recovery ? 1 : sizeof sweep_modes / sizeof sweep_modes[0];
	const size_t n_cal = a->n_cal ? a->n_cal : 1, multi = a->sweep || n_cal > 1;
	const size_t np = (a->sweep ? n_modes * n_ratios : 1) * n_cal;
	eval_point *pts = calloc(np, sizeof *pts);
	if (!rc && (!pick || !pts))
		rc = fail("out of memory");
	for (size_t i = 0; !rc && i < np; i++) {
		const size_t m = i / n_cal; /* each setting at every calibration */
		point_make(&pts[i], a, a->sweep && !a->recovery ? sweep_modes[m / n_ratios] : NULL,
		           a->sweep ? sweep_ratios[m % n_ratios] : -1, i % n_cal);
	}
	if (!rc && a->limit && a->limit < n) {
		eval_sample(pick, n, a->limit, a->seed);
		n = a->limit;
	} else if (!rc) {
		for (size_t i = 0; i < n; i++)
			pick[i] = i;
	}
	FILE *jf = stdout;
	if (!rc && a->json && strcmp(a->json, "-") && !(jf = fopen(a->json, "w")))
		rc = fail("%s: %s", a->json, strerror(errno));
	const char *tmp = getenv("TMPDIR");
	snprintf(eval_dir, sizeof eval_dir, "%s/inferscale-eval-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!rc && !mkdtemp(eval_dir)) {
		rc = fail("%s: %s", eval_dir, strerror(errno));
		eval_dir[0] = '\0';
	}
	if (rc)
		eval_dir[0] = '\0';
	else
		atexit(eval_cleanup); /* also when the process exits from deeper down */
	char store[sizeof eval_dir + 16];
	snprintf(store, sizeof store, "%s/eval.infs", eval_dir);
	args b = *a;
	b.store = store;
	if (!rc)
		rc = runtime_open(&r, &b, 1);
	if (!rc)
		rc = conv_context_tokens(&c, r.model);
	if (!rc)
		rc = eval_encode(&c, &r, r.store, 0, a);
	/* The reference store, beside the other: its facts, header and footer
	 * in --reference-kv-dtype, injected into the same engine's cache. */
	char ref_path[sizeof eval_dir + 16];
	snprintf(ref_path, sizeof ref_path, "%s/reference.infs", eval_dir);
	infs_store *ref = NULL;
	if (!rc && a->ref)
		rc = store_create(&ref, ref_path, &r, a->ref_dtype, a->device);
	if (!rc && a->ref && infs_engine_prepare(r.engine, ref))
		rc = lib_fail(ref_path);
	if (!rc && a->ref)
		rc = eval_encode(&c, &r, ref, 1, a);
	int show = !a->quiet && isatty(2);
	for (size_t i = 0; !rc && i < n; i++) {
		if (show)
			fprintf(stderr, "\ranswering %zu/%zu", i + 1, n);
		rc = eval_question(pts, np, &c, pick[i], &r, ref, a);
	}
	if (show && n)
		fputc('\n', stderr);
	if (!rc && multi)
		fprintf(stderr, "%s: %zu of %zu questions (categories 1-4), %zu facts, k %u; injection / full recompute\n",
		        a->positional, n, c.lc.n_qs, c.n_facts, a->k);
	if (!rc && multi)
		context_summary(&c, a);
	for (size_t i = 0; !rc && i < np; i++) {
		fputs(!multi ? "" : i ? ",\n" : "[\n", jf);
		eval_report(jf, &pts[i], n, &c, a);
	}
	if (!rc)
		fputs(multi ? "\n]\n" : "\n", jf);
	if (jf && jf != stdout && fclose(jf) && !rc)
		rc = fail("%s: %s", a->json, strerror(errno));
	if (!rc && a->plot)
		rc = eval_plot(a->plot, pts, np, n);
	for (size_t i = 0; pts && i < np; i++)
		free(pts[i].detail.p);
	free(pts);
	free(pick);
	infs_store_close(ref);
	runtime_free(&r);
	eval_cleanup();
	conv_free(&c);
	return rc;
}

/* inferscale verify STORE: opens the store read-only (which checks every
 * record) and re-checks the checksums of the header and the log; exit 1 when
 * anything is damaged or lost. */
static int cmd_verify(int argc, char **argv)
{
	if (argc != 3)
		return fail("usage: inferscale verify STORE") + 1;
	if (cli_need_store(argv[2]))
		return 1;
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
	char why[2048];
	if (!rc && store_report_torn(s, argv[2], stderr, why, sizeof why))
		rc = fail("%s", why);
	if (!rc)
		printf("%s: sound: %llu facts, %llu segments in %llu namespaces, %llu bytes\n", argv[2],
		       (unsigned long long)st.n_facts, (unsigned long long)st.n_segments,
		       (unsigned long long)st.n_namespaces, (unsigned long long)st.file_bytes);
	infs_store_close(s);
	return rc;
}

/* inferscale plot IN.json OUT.png: a result file drawn as a chart. */
static int cmd_plot(int argc, char **argv)
{
	if (argc != 4)
		return fail("usage: inferscale plot IN.json OUT.png") + 1;
	const char *kind;
	char why[512];
	if (chart_file(argv[3], argv[2], &kind, why, sizeof why))
		return fail("%s", why);
	printf("%s: %s chart of %s\n", argv[3], kind, argv[2]);
	return 0;
}

int main(int argc, char **argv)
{
	/* Whole lines as they come, also into a pipe or a log. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (cli_remote_take(&argc, argv))
		return 2;
	const int usage_rc = cli_usage(argc, argv);
	if (usage_rc >= 0)
		return usage_rc;
	if (argc >= 2 && !strcmp(argv[1], "verify"))
		return cmd_verify(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "plot"))
		return cmd_plot(argc, argv);
	args a;
	int rc = parse_args(&a, argc, argv);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (!strcmp(a.cmd, "encode"))
		return cmd_encode(&a);
	if (!strcmp(a.cmd, "ask"))
		return cmd_ask(&a);
	if (!strcmp(a.cmd, "eval"))
		return cmd_eval(&a);
	return cmd_bench(&a);
}

/* The tool's options: each read and checked by its own function as it
 * comes, so that the first bad one in the command line is the one named. */
#include "cli_options.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fail.h"

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

/* A number: 0 when it is in [lo, hi] (lo itself excluded when lo_open),
 * -1 when it is outside (the caller says why), 1 after a message when it
 * is not a number. */
static int parse_float(float *out, const char *s, const char *opt, double lo, int lo_open, double hi)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return fail("%s: \"%s\" is not a number", opt, s);
	*out = (float)v;
	return *out > lo && *out <= hi ? 0 : *out == lo && !lo_open ? 0 : -1;
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

/* The dtypes of a model's device copy: bf16 or fp8 (e4m3, a scale per row). */
static int parse_weights(infs_dtype *out, const char *s, const char *opt)
{
	if (!strcmp(s, "bf16") || !strcmp(s, "fp8")) {
		*out = s[0] == 'b' ? INFS_DTYPE_BF16 : INFS_DTYPE_FP8_E4M3;
		return 0;
	}
	return fail("%s: \"%s\" is not bf16 or fp8", opt, s);
}

const char *cli_dtype_name(infs_dtype t)
{
	for (size_t i = 0; i < sizeof kv_dtypes / sizeof kv_dtypes[0]; i++)
		if (kv_dtypes[i].dtype == t)
			return kv_dtypes[i].name;
	return "?";
}

/* --calibration: T:S pairs (or off, 1:1), comma-separated, each in
 * (0, 1000]; one only unless many. */
static int parse_calibration(cli_args *a, const char *v, int many)
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
int cli_parse_recovery(cli_args *a, const char *v)
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

/* The options' readers: v is the value (NULL for a flag), o the option as
 * given; 0, or 1 after a message. */
typedef int (*opt_set)(cli_args *a, const char *v, const char *o, const cli_command *c);

static int set_kv_dtype(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)c;
	return parse_dtype(&a->kv_dtype, v, o);
}

static int set_ref_dtype(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)c;
	a->ref = 1;
	return parse_dtype(&a->ref_dtype, v, o);
}

static int set_weights(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)c;
	return parse_weights(&a->weights, v, o);
}

static int set_ref_weights(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)c;
	a->ref_w = 1;
	return parse_weights(&a->ref_weights, v, o);
}

static int set_device(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)c;
	uint32_t d = 0;
	int rc = parse_range(&d, v, o, 0, 1023);
	a->device = (int)d;
	return rc;
}

static int set_k(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	return c->k_list ? parse_ks(a->ks, &a->n_ks, sizeof a->ks / sizeof a->ks[0], v, o)
	                : parse_range(&a->k, v, o, 1, INFS_RETRIEVE_K_MAX);
}

static int set_temperature(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)c;
	int rc = parse_float(&a->temperature, v, o, 0, 0, INFINITY);
	return rc < 0 ? fail("--temperature must be at least 0") : rc;
}

static int set_top_p(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)c;
	int rc = parse_float(&a->top_p, v, o, 0, 1, 1);
	return rc < 0 ? fail("--top-p must be in (0, 1]") : rc;
}

static int set_seed(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)o, (void)c;
	char *end;
	errno = 0;
	a->seed = strtoull(v, &end, 10);
	if (errno || end == v || *end || v[strspn(v, " \t")] == '-')
		return fail("--seed: \"%s\" is not a number", v);
	return 0;
}

static int set_recovery(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)o, (void)c;
	a->recovery = v;
	return cli_parse_recovery(a, v);
}

static int set_recompute(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)o, (void)c;
	char *end = NULL;
	double r = strtod(v, &end);
	a->recompute = (float)r;
	a->recompute_set = 1;
	if (!*v || *end || !(r >= 0 && r <= 1))
		return fail("--recompute: \"%s\" is not a share in 0..1", v);
	return 0;
}

static int set_query_weight(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)c;
	a->query_weight_set = 1;
	int rc = parse_float(&a->query_weight, v, o, 0, 0, 1);
	return rc < 0 ? fail("--query-weight: \"%s\" is not a weight in 0..1", v) : rc;
}

static int set_calibration(cli_args *a, const char *v, const char *o, const cli_command *c)
{
	(void)o;
	return parse_calibration(a, v, c->cal_list);
}

/* How an option's value is kept. */
#define STRING(f) NULL, offsetof(cli_args, f), 0, 0, 0
#define FLAG(f) NULL, offsetof(cli_args, f), 0, 0, 0
#define COUNT(f, lo, hi) NULL, offsetof(cli_args, f), lo, hi, 0
#define COUNT_GIVEN(f, lo, hi, g) NULL, offsetof(cli_args, f), lo, hi, offsetof(cli_args, g)
#define BY(fn) fn, 0, 0, 0, 0

/* Every option of the tool, in the order the commands' help lists them. */
static const struct opt {
	const char *name, *value; /* value NULL: a flag */
	opt_set set;              /* NULL: the value is stored at field, by kind */
	size_t field;             /* a const char *, an int set to 1 for a flag, or a
	                           * uint32_t count in lo..hi when hi > 0 */
	uint32_t lo, hi;
	size_t given;             /* a count's int set to 1 when it is given; 0: none */
	const char *help;
} opts[] = {
	{ "--store", "PATH", STRING(store), "the fact store (required; encode creates it)" },
	{ "--namespace", "NS", STRING(ns), "namespace (encode: default each line's \"namespace\")" },
	{ "--questions", "FILE", STRING(questions), "questions, JSONL with \"question\" and \"namespace\"" },
	{ "--model", "PATH", STRING(model), "GGUF or HF directory (default $INFS_CACHE/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)" },
	{ "--embedder", "DIR", STRING(embedder), "sentence-transformers directory (default $INFS_CACHE/minilm)" },
	{ "--kv-dtype", "T", BY(set_kv_dtype), "f16 (default), bf16, f32 or fp8 (e4m3, scaled; injected into a bf16 cache): KV in a new store" },
	{ "--reference-kv-dtype", "T", BY(set_ref_dtype), "also encode the facts in dtype T (f16, bf16, f32, fp8) and compare injection\n"
	                                                  "from them with injection from --kv-dtype's: the same facts, the same cache" },
	{ "--threads", "N", COUNT(threads, 0, CLI_THREADS_MAX), "threads of the model and the embedder, 0..1024 (default 0: all cores)" },
	{ "--int8-activations", NULL, FLAG(int8),
	  "the model's products of few tokens (questions, decoding) over its Q4_0 / Q4_1 /\n"
	  "Q8_0 matrices on 8-bit activations, as llama.cpp runs them: faster, logits\n"
	  "an NMSE of about 1e-3 from the f32 path's (docs/model-runtime.md)" },
	{ "--device", "N", BY(set_device), "run the model, the embedder, retrieval and the engine on CUDA device N\n"
	                                   "(default: the host)" },
	{ "--device-weights", "T", BY(set_weights), "the model's matrices on the device: bf16 (default) or fp8 (e4m3,\n"
	                                            "a scale per row, half the bytes; needs --device)" },
	{ "--reference-device-weights", "T", BY(set_ref_weights),
	  "also answer by full recompute with the model's device weights in T\n"
	  "(bf16, fp8), on the same device, and compare (docs/eval.md)" },
	{ "-k", "N", BY(set_k), "facts retrieved, 1..4096 (default 10); bench: a comma-separated\n"
	                        "list of at most 32 (default 10,20,50)" },
	{ "--k", "N", BY(set_k), "the same as -k" },
	{ "--full-recompute", NULL, FLAG(full), "prefill the whole prompt instead of injecting" },
	{ "--compare", NULL, FLAG(compare), "answer by injection and by full recompute" },
	{ "--max-tokens", "N", COUNT_GIVEN(max_tokens, 1, CLI_N_CTX, max_tokens_set), "answer budget, 1..8192 (ask: 64; bench: 1, only the first token)" },
	{ "--temperature", "T", BY(set_temperature), "sampling temperature, >= 0 (default 0: greedy)" },
	{ "--top-p", "P", BY(set_top_p), "nucleus sampling, in (0, 1] (default 1)" },
	{ "--seed", "S", BY(set_seed), "sampler seed, 0..2^64-1 (default 0); eval: the seed of --limit" },
	{ "--limit", "N", COUNT(limit, 1, UINT32_MAX), "a fixed sample of N questions, chosen by --seed" },
	{ "--recovery", "MODE", BY(set_recovery),
	  "how injected answers recover: none (plain injection, default), deviation\n"
	  "(selective recompute), query (the same, selection also by the question's\n"
	  "attention), prefix (each fact's first tokens recomputed), or prefix joined to\n"
	  "one of the others by +" },
	{ "--recompute", "R", BY(set_recompute),
	  "deviation, query: share of the injected fact tokens recomputed through every\n"
	  "layer, 0..1 (default 0.15)" },
	{ "--check-layer", "C", COUNT_GIVEN(check_layer, 0, 1023, check_set),
	  "deviation, query: layer through which every one is recomputed and where the\n"
	  "share is chosen (default 2)" },
	{ "--prefix", "M", COUNT_GIVEN(prefix, 0, CLI_N_CTX, prefix_set), "prefix: tokens recomputed at each fact's start (default 2)" },
	{ "--query-weight", "W", BY(set_query_weight),
	  "query: the question's attention's weight in the selection, 0..1 (default 0.5)" },
	{ "--calibration", "T:S", BY(set_calibration),
	  "attention calibration for injected facts: the question's and the answer's scores\n"
	  "of fact positions divided by T, their weights multiplied by S (auto: 1 / sqrt(facts\n"
	  "injected); off: 1:1, the engine's default); eval: a comma-separated list\n"
	  "of at most 32, each measured" },
	{ "--context-turns", "W", COUNT(context_turns, 0, CLI_CONTEXT_TURNS_MAX),
	  "encode each fact after the W conversation turns up to and including its\n"
	  "(first) evidence turn, each \"speaker: text\", 0..64 (default 0: none);\n"
	  "only the stored KV changes, not the prompt" },
	{ "--sweep", NULL, FLAG(sweep), "every mode of --recovery (default deviation, query, prefix+deviation,\n"
	                                "prefix+query) at --recompute 0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5 and 1:\n"
	                                "a JSON array" },
	{ "--json", "FILE", STRING(json), "also write the results as JSON (- for stdout); eval: write\n"
	                                  "them there instead of stdout" },
	{ "--plot", "FILE.png", STRING(plot), "also draw the results as a chart (as plot does); eval: with --sweep" },
	{ "--quiet", NULL, FLAG(quiet), "no progress" },
};

static const struct opt *find_opt(const char *name)
{
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
		if (!strcmp(opts[i].name, name))
			return &opts[i];
	return NULL;
}

static int takes(const cli_command *c, const char *name)
{
	for (const char *const *o = c->opts; *o; o++)
		if (!strcmp(*o, name))
			return 1;
	return 0;
}

/* inferscale CMD --help: what the command does and its options. */
static void command_help(const cli_command *c)
{
	printf("usage: inferscale %s [options] %s\n\n%s\noptions:\n", c->name, c->args, c->what);
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		const struct opt *o = &opts[i];
		if (!takes(c, o->name))
			continue;
		char head[48];
		snprintf(head, sizeof head, "%s%s%s", o->name, o->value ? " " : "", o->value ? o->value : "");
		if (strlen(head) > 22) /* the description on the next line */
			printf("  %s\n  %-22s ", head, "");
		else
			printf("  %-22s ", head);
		for (const char *h = o->help; *h; h++) {
			putchar(*h);
			if (*h == '\n')
				printf("  %-22s ", "");
		}
		putchar('\n');
	}
}

/* Keeps option d's value v (NULL for a flag), given as o: 0, or 1 after a
 * message. */
static int keep(cli_args *a, const struct opt *d, const char *v, const char *o, const cli_command *c)
{
	void *field = (char *)a + d->field;
	if (d->set)
		return d->set(a, v, o, c);
	if (!d->hi && v)
		*(const char **)field = v;
	else if (!d->hi)
		*(int *)field = 1;
	else if (parse_range(field, v, o, d->lo, d->hi))
		return 1;
	else if (d->given)
		*(int *)(void *)((char *)a + d->given) = 1;
	return 0;
}

/* The default models: under $INFS_CACHE, else ~/.cache/inferscale. */
static void defaults(cli_args *a)
{
	memset(a, 0, sizeof *a);
	strcpy(a->mode, "none");
	a->kv_dtype = INFS_DTYPE_F16;
	a->top_p = 1.0f;
	a->device = -1;
	a->weights = a->ref_weights = INFS_DTYPE_BF16;
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
}

int cli_parse(cli_args *a, const cli_command *c, int argc, char **argv)
{
	defaults(a);
	a->cmd = c->name;
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i];
		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			command_help(c);
			return -1;
		}
		if (o[0] != '-' || !o[1]) {
			if (a->positional)
				return fail("one %s argument only (\"%s\" is extra; quote the question)", c->positional, o) + 1;
			a->positional = o;
			continue;
		}
		const struct opt *d = find_opt(o);
		if (!d)
			return fail("unknown option %s (inferscale %s --help lists the options)", o, c->name) + 1;
		if (!takes(c, o))
			return fail("%s: %s does not apply (inferscale %s --help lists its options)", c->name, o, c->name) + 1;
		const char *v = NULL;
		if (d->value) {
			if (i + 1 >= argc)
				return fail("%s needs a value", o) + 1;
			v = argv[++i];
		}
		if (keep(a, d, v, o, c))
			return 2;
	}
	/* The host keeps its own weights: fp8 is only the device copy's. */
	if (a->weights == INFS_DTYPE_FP8_E4M3 && a->device < 0)
		return fail("--device-weights fp8 needs --device N (the host runs its own weights)") + 1;
	int rc = c->check(a);
	if (rc)
		return rc;
	if (!a->n_ks) {
		a->ks[0] = 10;
		a->ks[1] = 20;
		a->ks[2] = 50;
		a->n_ks = 3;
	}
	if (!a->k)
		a->k = 10;
	if (!a->max_tokens_set)
		a->max_tokens = c->max_tokens;
	return 0;
}

int cli_check_recovery(const cli_args *a)
{
	if ((a->recompute_set || a->check_set) && !a->select)
		return fail("%s needs --recovery deviation or query", a->recompute_set ? "--recompute" : "--check-layer") + 1;
	if (a->prefix_set && !a->prefix_mode)
		return fail("--prefix needs --recovery prefix") + 1;
	if (a->query_weight_set && !a->query_mode)
		return fail("--query-weight needs --recovery query") + 1;
	return 0;
}

int cli_check_asking(const cli_args *a)
{
	int rc = cli_check_recovery(a);
	if (rc)
		return rc;
	if (!a->store)
		return fail("%s needs --store PATH", a->cmd) + 1;
	if (a->positional && a->questions)
		return fail("a question and --questions: give one of them") + 1;
	return 0;
}

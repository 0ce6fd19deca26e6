/* The tool's option parser: one table of every option the tool knows, each
 * with how its value is read and checked, and the commands that declare
 * which of them they take. An option another command takes is refused as
 * not applying to this one; one no command takes, as unknown. */
#ifndef CLI_OPTIONS_H
#define CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "inferscale/inferscale.h"

/* The engine's context in tokens: prompt and answer. */
#define CLI_N_CTX 8192u
/* The model's and the embedder's limit. */
#define CLI_THREADS_MAX 1024u
/* eval --context-turns: at most this many turns before each fact. */
#define CLI_CONTEXT_TURNS_MAX 64u
/* bench -k and eval --calibration: at most this many values. */
#define CLI_LIST_MAX 32u

/* What the options set, with their defaults after cli_parse. */
typedef struct cli_args {
	const char *cmd, *positional, *store, *ns, *model, *embedder, *questions, *json, *recovery, *plot;
	infs_dtype kv_dtype, ref_dtype;
	int ref;                             /* --reference-kv-dtype given */
	uint32_t threads, k, max_tokens, limit, check_layer, prefix, context_turns;
	float recompute, query_weight;
	int select, prefix_mode, query_mode; /* parts of --recovery; select: deviation or query */
	int device;
	int int8;                            /* --int8-activations */
	infs_dtype weights, ref_weights;     /* --device-weights, eval --reference-device-weights */
	int ref_w;                           /* --reference-device-weights given */
	int full, compare, quiet, sweep, max_tokens_set, recompute_set, check_set, prefix_set, query_weight_set;
	char mode[32];                       /* --recovery, parts in a fixed order */
	float temperature, top_p;
	uint64_t seed;
	uint32_t ks[CLI_LIST_MAX];
	size_t n_ks;
	float cal_t[CLI_LIST_MAX], cal_s[CLI_LIST_MAX]; /* --calibration */
	size_t n_cal;
	char model_buf[1024], embedder_buf[1024];
} cli_args;

/* A command that reads its options through cli_parse. */
typedef struct cli_command {
	const char *name, *args; /* its name; its positional argument in the usage line */
	const char *what;        /* its help's description */
	const char *const *opts; /* the names of the options it takes, NULL-terminated */
	const char *positional;  /* what its positional argument is: "file" or "question" */
	int k_list, cal_list;    /* -k, --calibration: a comma-separated list */
	uint32_t max_tokens;     /* --max-tokens's default */
	/* The checks of the options together, after all are read: 0, or an
	 * exit status after a message. */
	int (*check)(const cli_args *a);
	int (*run)(const cli_args *a);
} cli_command;

/* Reads argv[2..argc) for command c into a: 0 to run, -1 after printing
 * the command's help (exit 0), or the exit status after a one-line message
 * (2: usage). */
int cli_parse(cli_args *a, const cli_command *c, int argc, char **argv);

/* The checks of --recovery's companions (--recompute, --check-layer,
 * --prefix, --query-weight): 0, or 2 after a message. */
int cli_check_recovery(const cli_args *a);
/* Those, then --store and a question not both positional and in
 * --questions (ask, bench): 0, or 2 after a message. */
int cli_check_asking(const cli_args *a);

/* The options several commands declare: where the models are and what
 * they run on; how injected answers recover; how answers are sampled. */
#define CLI_OPTS_MODELS "--model", "--embedder", "--threads", "--int8-activations", "--device", "--device-weights"
#define CLI_OPTS_RECOVERY "--recovery", "--recompute", "--check-layer", "--prefix", "--query-weight", "--calibration"
#define CLI_OPTS_SAMPLING "--max-tokens", "--temperature", "--top-p", "--seed"

/* --recovery's value v into a's parts and mode: 0, or 1 after a message. */
int cli_parse_recovery(cli_args *a, const char *v);

/* The name of a KV dtype the tool takes ("?" for another). */
const char *cli_dtype_name(infs_dtype t);

#endif

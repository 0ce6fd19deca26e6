/* inferscale — the command-line tool of the main job:
 *   encode  facts from JSONL into a store (KV and embeddings)
 *   ask     a question for a namespace, by injection or full recompute
 *   bench   TTFT and divergence of injection against full recompute
 *   verify  re-check every checksum of a store
 *   eval    agreement and quality of injection against full recompute on a
 *           LoCoMo-format conversation
 *   plot    a chart (PNG) of a result file
 * One file per command (cmd_*.c); this one finds the command. Errors are
 * one line on stderr and exit status 1 (2 for usage). */
#include <stdio.h>
#include <string.h>

#include "cli_commands.h"
#include "cli_remote.h"
#include "cli_fail.h"
#include "cli_usage.h"

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

/* The commands that read their options through cli_options.h. */
static const cli_command *const commands[] = { &cmd_encode, &cmd_ask, &cmd_bench, &cmd_eval };

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
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
		if (strcmp(commands[c]->name, argv[1]))
			continue;
		cli_args a;
		int rc = cli_parse(&a, commands[c], argc, argv);
		if (rc)
			return rc < 0 ? 0 : rc;
		return commands[c]->run(&a);
	}
	return fail("unknown command \"%s\" (encode, ask, bench, verify, eval, plot; --help for more)", argv[1]) + 1;
}

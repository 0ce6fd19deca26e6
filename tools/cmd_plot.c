/* inferscale plot IN.json OUT.png: a result file drawn as a chart. */
#include <stdio.h>

#include "charts.h"
#include "cli_commands.h"
#include "cli_fail.h"

int cmd_plot(int argc, char **argv)
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


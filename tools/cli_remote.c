/* --remote URL, for every command that opens a store. */
#include <stdio.h>
#include <string.h>

#include "cli_remote.h"

const char *cli_remote_url;

int cli_remote_take(int *argc, char **argv)
{
	int out = 1;
	for (int i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--")) { /* the rest is not options */
			while (i < *argc)
				argv[out++] = argv[i++];
			break;
		}
		if (!strncmp(argv[i], "--remote=", 9)) {
			cli_remote_url = argv[i] + 9;
		} else if (!strcmp(argv[i], "--remote")) {
			if (i + 1 >= *argc || !argv[i + 1][0]) {
				fprintf(stderr, "inferscale: --remote needs a URL, redis://[user[:password]@]host[:port]\n");
				return 2;
			}
			cli_remote_url = argv[++i];
		} else {
			argv[out++] = argv[i];
		}
	}
	argv[out] = NULL;
	*argc = out;
	if (cli_remote_url && !cli_remote_url[0]) {
		fprintf(stderr, "inferscale: --remote needs a URL, redis://[user[:password]@]host[:port]\n");
		return 2;
	}
	return 0;
}

void cli_remote_apply(infs_store_options *so)
{
	if (!cli_remote_url)
		return;
	so->remote = cli_remote_url;
	so->flags &= ~(unsigned)INFS_OPEN_READONLY;
}

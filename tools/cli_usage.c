/* inferscale --version, and inferscale verify|plot --help. */
#include <stdio.h>
#include <string.h>

#include "cli_usage.h"
#include "inferscale/inferscale.h"

static const struct {
	const char *name, *usage;
} own[] = {
	{ "verify", "usage: inferscale verify STORE\n\n"
	            "Opens STORE read-only, which checks every record, and re-checks the checksums of\n"
	            "its header and log. Exit status 1 when anything is damaged or lost.\n" },
	{ "plot", "usage: inferscale plot IN.json OUT.png\n\n"
	          "Draws a result file as a PNG chart: bench --json output, an eval --sweep, or the\n"
	          "GPU engine benchmark's results.\n" },
};

static int is_help(const char *s)
{
	return !strcmp(s, "--help") || !strcmp(s, "-h");
}

int cli_usage(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
		static const struct {
			unsigned bit;
			const char *name;
		} features[] = { { INFS_FEATURE_CUDA, "cuda" }, { INFS_FEATURE_FAISS, "faiss" }, { INFS_FEATURE_BLAS, "blas" } };
		printf("inferscale %s (built with:", infs_version_string());
		int any = 0;
		for (size_t i = 0; i < sizeof features / sizeof features[0]; i++)
			if (infs_features() & features[i].bit)
				any = printf(" %s", features[i].name);
		printf("%s)\n", any ? "" : " no optional backend");
		return 0;
	}
	for (size_t c = 0; argc >= 3 && c < sizeof own / sizeof own[0]; c++) {
		if (strcmp(argv[1], own[c].name))
			continue;
		for (int i = 2; i < argc; i++)
			if (is_help(argv[i])) {
				fputs(own[c].usage, stdout);
				return 0;
			}
	}
	return -1;
}

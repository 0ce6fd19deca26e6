/* libFuzzer target for inferscale plot's reader and layout (tools/charts.c
 * over tools/plot.c): any text is drawn (into nothing: chart_json with no
 * PNG) or refused with one line naming the file, in bounded time (a hang is
 * a finding: -timeout) and without a sanitizer report. */
#include "charts.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size ? size : 1), err[1024] = "";
	require(text != NULL);
	memcpy(text, data, size);
	const char *kind = NULL;
	int rc = chart_json(NULL, text, size, "r.json", &kind, err, sizeof err);
	require(rc == 0 || rc == -1);
	if (rc)
		require(err[0] && !strchr(err, '\n'));
	else
		require(kind != NULL);
	free(text);
	return 0;
}

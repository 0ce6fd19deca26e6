/* inferscale verify STORE: opens the store read-only (which checks every
 * record) and re-checks the checksums of the header and the log; exit 1 when
 * anything is damaged or lost. */
#include <stdio.h>

#include "cli_commands.h"
#include "cli_fail.h"
#include "cli_hints.h"
#include "inferscale/inferscale.h"
#include "store_report.h"

int cmd_verify(int argc, char **argv)
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

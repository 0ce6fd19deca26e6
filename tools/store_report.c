#include "store_report.h"

#include <string.h>

/* version 4: the set-aside counts */
static int stats(infs_store_stats *st, infs_store *s)
{
	memset(st, 0, sizeof *st);
	st->version = INFS_STORE_STATS_VERSION;
	return infs_store_stats_get(st, s);
}

void store_report_open(infs_store *s, FILE *err)
{
	/* Copied first: the stats call may set it again. */
	char msg[1024];
	snprintf(msg, sizeof msg, "%s", infs_error_last());
	infs_store_stats st;
	if (!stats(&st, s) && (st.lost_records || st.dropped_tail_bytes))
		fprintf(err, "inferscale: warning: %s\n", msg);
}

int store_report_torn(infs_store *s, const char *path, FILE *err, char *why, size_t n_why)
{
	infs_store_stats st;
	if (stats(&st, s) || !st.torn_bytes)
		return 0;
	if (st.torn_records) {
		snprintf(why, n_why, "%s: earlier opens set aside %llu bytes holding %llu whole record%s in %s.torn "
		         "(and any %s.torn.N): acknowledged facts may be lost there; inspect them, then remove the files",
		         path, (unsigned long long)st.torn_bytes, (unsigned long long)st.torn_records,
		         st.torn_records == 1 ? "" : "s", path, path);
		return -1;
	}
	fprintf(err, "inferscale: warning: %s: earlier opens set aside %llu bytes in %s.torn (and any %s.torn.N), "
	        "no whole record among them: a write cut short\n", path, (unsigned long long)st.torn_bytes, path, path);
	return 0;
}

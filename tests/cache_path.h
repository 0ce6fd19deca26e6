/* For the tests (the library does not use it): where the real
 * models live, $INFS_CACHE or ~/.cache/inferscale, as
 * scripts/fetch-models.sh puts them. */
#ifndef INFS_CACHE_PATH_H
#define INFS_CACHE_PATH_H

#include <stdio.h>
#include <stdlib.h>

/* Writes the full path of rel (e.g. "smollm2/x.gguf") into buf. */
static const char *cache_path(char *buf, size_t size, const char *rel)
{
	const char *dir = getenv("INFS_CACHE");
	if (dir && *dir)
		snprintf(buf, size, "%s/%s", dir, rel);
	else
		snprintf(buf, size, "%s/.cache/inferscale/%s", getenv("HOME") ? getenv("HOME") : ".", rel);
	return buf;
}

#endif

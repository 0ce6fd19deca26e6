/* Get-or-create over a list of entries found by name, for the device copy's
 * two lists of namespaces: their embeddings' rows (infs__dev_ns,
 * device_rows.c) and their fact KV in the tiers (infs__kv_ns,
 * device_tiers.c). An entry has members name (owned) and next; the list's
 * head is owner->head, and find(owner, name) looks an entry up. */
#ifndef INFS_NAMED_LIST_H
#define INFS_NAMED_LIST_H

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Defines `type *get(owner_type *o, const char *name, const char *fn)`: the
 * entry named name, or a new zeroed one pushed at the head; NULL with the
 * message set when out of memory. Prefix it with static for a file's own. */
#define INFS__NAMED_GET(get, find, type, owner_type, head)                             \
	type *get(owner_type *o, const char *name, const char *fn)                     \
	{                                                                              \
		type *p = find(o, name);                                               \
		if (p)                                                                 \
			return p;                                                      \
		if (!(p = calloc(1, sizeof *p)) || !(p->name = strdup(name))) {        \
			free(p);                                                       \
			infs__error(INFS_ENOMEM, "%s: out of memory", fn);             \
			return NULL;                                                   \
		}                                                                      \
		p->next = o->head;                                                     \
		o->head = p;                                                           \
		return p;                                                              \
	}

#endif

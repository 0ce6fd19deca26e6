/* A set of namespace names: open addressing, linear probing, load <= 1/2. */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "remote/remote_impl.h"

static size_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (size_t)h;
}

bool infs__seen_has(const infs__seen *set, const char *name)
{
	if (!set->cap)
		return false;
	for (size_t i = hash(name) & (set->cap - 1);; i = (i + 1) & (set->cap - 1)) {
		if (!set->slots[i])
			return false;
		if (strcmp(set->slots[i], name) == 0)
			return true;
	}
}

static void place(char **slots, size_t cap, char *name)
{
	size_t i = hash(name) & (cap - 1);
	while (slots[i])
		i = (i + 1) & (cap - 1);
	slots[i] = name;
}

int infs__seen_add(infs__seen *set, const char *name)
{
	if (infs__seen_has(set, name))
		return INFS_OK;
	if ((set->n + 1) * 2 > set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 64;
		char **slots = calloc(cap, sizeof *slots);
		if (!slots)
			return infs__error(INFS_ENOMEM, "out of memory for the remote tier's namespaces");
		for (size_t i = 0; i < set->cap; i++)
			if (set->slots[i])
				place(slots, cap, set->slots[i]);
		free(set->slots);
		set->slots = slots;
		set->cap = cap;
	}
	char *copy = strdup(name);
	if (!copy)
		return infs__error(INFS_ENOMEM, "out of memory for the remote tier's namespaces");
	place(set->slots, set->cap, copy);
	set->n++;
	return INFS_OK;
}

void infs__seen_free(infs__seen *set)
{
	for (size_t i = 0; i < set->cap; i++)
		free(set->slots[i]);
	free(set->slots);
	set->slots = NULL;
	set->cap = set->n = 0;
}

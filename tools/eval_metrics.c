/* The metrics of `inferscale eval`; see eval_metrics.h. */
#include "eval_metrics.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* s normalised as SQuAD does, as a list of words: *out holds them NUL
 * separated, *n_out their count. */
static int normalise(char **out, size_t *n_out, const char *s)
{
	size_t len = strlen(s);
	char *t = malloc(len + 1), *w = t;
	if (!t)
		return -1;
	/* Lowercase and without punctuation; words then lie between blanks. */
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if (*c < 0x80 && ispunct(*c))
			continue;
		else
			*w++ = (char)(*c < 0x80 ? tolower(*c) : *c);
	*w = '\0';
	char *dst = t;
	size_t n = 0;
	for (char *p = t; *p;) {
		p += strspn(p, " \t\r\n\v\f");
		size_t wl = strcspn(p, " \t\r\n\v\f");
		if (!wl)
			break;
		int article = (wl == 1 && p[0] == 'a') || (wl == 2 && !strncmp(p, "an", 2)) ||
		              (wl == 3 && !strncmp(p, "the", 3));
		/* The word moves down in place; its NUL may land on the blank
		 * after it, so that blank is stepped over first. */
		char *next = p + wl + (p[wl] != '\0');
		if (!article) {
			memmove(dst, p, wl);
			dst[wl] = '\0';
			dst += wl + 1;
			n++;
		}
		p = next;
	}
	*out = t;
	*n_out = n;
	return 0;
}

int eval_f1(double *out, const char *pred, const char *gold)
{
	char *p, *g;
	size_t np, ng;
	if (normalise(&p, &np, pred))
		return -1;
	if (normalise(&g, &ng, gold)) {
		free(p);
		return -1;
	}
	char *used = calloc(ng ? ng : 1, 1);
	if (!used) {
		free(p);
		free(g);
		return -1;
	}
	/* Common words as multisets: each gold word matches one predicted word. */
	size_t same = 0;
	const char *pw = p;
	for (size_t i = 0; i < np; i++, pw += strlen(pw) + 1) {
		const char *gw = g;
		for (size_t j = 0; j < ng; j++, gw += strlen(gw) + 1)
			if (!used[j] && !strcmp(pw, gw)) {
				used[j] = 1;
				same++;
				break;
			}
	}
	if (!np || !ng)
		*out = np == ng;
	else if (!same)
		*out = 0;
	else {
		double prec = (double)same / (double)np, rec = (double)same / (double)ng;
		*out = 2 * prec * rec / (prec + rec);
	}
	free(used);
	free(p);
	free(g);
	return 0;
}

static const char id_seps[] = ";, \t\r\n";

/* Whether the id s[0..len) is one of the ids of have[0..n). */
static int has_id(const char *s, size_t len, const char *const *have, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (const char *p = have[i]; *p;) {
			p += strspn(p, id_seps);
			size_t l = strcspn(p, id_seps);
			if (l == len && !memcmp(p, s, len))
				return 1;
			p += l;
		}
	return 0;
}

size_t eval_evidence_found(size_t *total, const char *const *gold, size_t n_gold, const char *const *have,
                           size_t n_have)
{
	size_t found = 0;
	*total = 0;
	for (size_t i = 0; i < n_gold; i++)
		for (const char *p = gold[i]; *p;) {
			p += strspn(p, id_seps);
			size_t l = strcspn(p, id_seps);
			if (!l)
				break;
			++*total;
			found += (size_t)has_id(p, l, have, n_have);
			p += l;
		}
	return found;
}

/* splitmix64: a small, fixed generator, so that a seed means the same
 * sample everywhere. */
static uint64_t next_u64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void eval_sample(size_t *out, size_t n, size_t k, uint64_t seed)
{
	/* Selection sampling: index i is taken with probability
	 * (still needed) / (still left), so exactly k are, in order. */
	uint64_t state = seed;
	size_t taken = 0;
	for (size_t i = 0; i < n && taken < k; i++) {
		double u = (double)(next_u64(&state) >> 11) * 0x1.0p-53;
		if (u * (double)(n - i) < (double)(k - taken))
			out[taken++] = i;
	}
}

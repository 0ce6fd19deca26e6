/* The selection of accuracy recovery (infs__recompute_select), shared by
 * the host and the device recompute: against a brute-force reference on
 * random scores (the n_keep highest, ties by lower position then row,
 * returned in row order), forced rows kept whatever their score, the
 * question's weight mixing normalised deviation and mass, exact ties, and
 * the edges (keep none, keep all). */
#include <math.h>
#include <string.h>

#include "check.h"
#include "test_util.h"
#include "model/recompute_select.h"

enum { N = 97 };

/* Whether row a ranks above row b for the reference. */
static int above(const double *s, const int32_t *pos, uint32_t a, uint32_t b)
{
	if (s[a] != s[b])
		return s[a] > s[b];
	if (pos[a] != pos[b])
		return pos[a] < pos[b];
	return a < b;
}

/* Row i is kept when fewer than n_keep rows rank above it. */
static void reference(uint32_t *keep, const double *s, const int32_t *pos, uint32_t n, uint32_t n_keep)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t rank = 0;
		for (uint32_t j = 0; j < n; j++)
			rank += j != i && above(s, pos, j, i);
		if (rank < n_keep)
			keep[k++] = i;
	}
	CHECK(k == n_keep);
}

int main(void)
{
	uint64_t rng = 3;
	float dev[N];
	double mass[N], s[N];
	int32_t pos[N];
	uint8_t forced[N];
	uint32_t got[N], want[N];
	for (int round = 0; round < 20; round++) {
		const float w = round % 4 == 0 ? 0.0f : (float)(round % 4) / 4.0f;
		double dmax = 0, mmax = 0;
		for (uint32_t i = 0; i < N; i++) {
			/* few distinct values: ties happen */
			dev[i] = (float)(rng_next(&rng) % (round % 2 ? 7 : 100000)) / 7.0f;
			mass[i] = (double)(rng_next(&rng) % 1000) / 250.0;
			pos[i] = (int32_t)(1000 - 3 * i + (rng_next(&rng) % 2)); /* decreasing: position ties break rows */
			forced[i] = rng_next(&rng) % 11 == 0;
			dmax = dev[i] > dmax ? dev[i] : dmax;
			mmax = mass[i] > mmax ? mass[i] : mmax;
		}
		uint32_t n_forced = 0;
		for (uint32_t i = 0; i < N; i++) {
			const double d = dmax > 0 ? dev[i] / dmax : 0, q = mmax > 0 ? mass[i] / mmax : 0;
			s[i] = w > 0 ? (float)((1.0 - w) * d + w * q) : dev[i];
			if (forced[i])
				s[i] = INFINITY;
			n_forced += forced[i];
		}
		const uint32_t keeps[] = { n_forced, n_forced + 5, N / 3, N };
		for (size_t k = 0; k < sizeof keeps / sizeof *keeps; k++) {
			const uint32_t n_keep = keeps[k] > N ? N : keeps[k] < n_forced ? n_forced : keeps[k];
			CHECK_OK(infs__recompute_select(got, dev, w > 0 ? mass : NULL, pos, forced, N, n_keep, w));
			reference(want, s, pos, N, n_keep);
			CHECK(!memcmp(got, want, n_keep * sizeof *got));
			for (uint32_t i = 0; i < N; i++) {
				int kept = 0;
				for (uint32_t j = 0; j < n_keep; j++)
					kept |= got[j] == i;
				CHECK(!forced[i] || kept);
			}
			for (uint32_t j = 1; j < n_keep; j++)
				CHECK(got[j - 1] < got[j]);
		}
	}
	/* Exact ties: the lower position wins, whatever the row. */
	const float flat[4] = { 1, 1, 1, 1 };
	const int32_t p4[4] = { 40, 10, 30, 20 };
	CHECK_OK(infs__recompute_select(got, flat, NULL, p4, NULL, 4, 2, 0));
	CHECK(got[0] == 1 && got[1] == 3);
	/* The weight: mass alone at w = 1, deviation alone at w = 0. */
	const float d4[4] = { 4, 3, 2, 1 };
	const double m4[4] = { 1, 2, 3, 4 };
	CHECK_OK(infs__recompute_select(got, d4, m4, p4, NULL, 4, 1, 1.0f));
	CHECK(got[0] == 3);
	CHECK_OK(infs__recompute_select(got, d4, m4, p4, NULL, 4, 1, 0.0f));
	CHECK(got[0] == 0);
	CHECK_OK(infs__recompute_select(got, d4, m4, p4, NULL, 4, 0, 0.5f));
	CHECK_DONE();
}

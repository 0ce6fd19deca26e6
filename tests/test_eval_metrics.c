/* The metrics of `inferscale eval` (tools/eval_metrics.c) against values
 * computed by hand: SQuAD F1, evidence recall and the seeded sample. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "eval_metrics.h"

static double f1(const char *pred, const char *gold)
{
	double v = -1;
	CHECK(!eval_f1(&v, pred, gold));
	return v;
}

static int near(double a, double b)
{
	return fabs(a - b) < 1e-12;
}

static void test_f1(void)
{
	/* Articles, case and punctuation do not count. */
	CHECK(near(f1("The cat sat.", "a cat SAT"), 1.0));
	CHECK(near(f1("Don't!", "dont"), 1.0));
	CHECK(near(f1("an apple, the pear", "Apple pear"), 1.0));
	/* Only whole words are articles: "theatre" stays. */
	CHECK(near(f1("theatre", "the theatre"), 1.0));
	CHECK(near(f1("a", "an"), 1.0)); /* both empty once normalised */
	/* 1 common word, 2 predicted, 1 gold: P 1/2, R 1, F1 2/3. */
	CHECK(near(f1("Paris, France", "paris"), 2.0 / 3.0));
	/* Numbers are words like any other (a number answer as its text). */
	CHECK(near(f1("in 2022", "2022"), 2.0 / 3.0));
	CHECK(near(f1("7 May 2023", "7 may, 2023"), 1.0));
	/* Multisets: "dog" twice predicted, once in gold: common 2 of 3 each. */
	CHECK(near(f1("dog dog cat", "dog cat cat"), 2.0 / 3.0));
	/* 1 common of 4 predicted and 2 gold: P 1/4, R 1/2, F1 1/3. */
	CHECK(near(f1("she went to Boston", "Boston yesterday"), 1.0 / 3.0));
	CHECK(near(f1("no overlap", "something else"), 0.0));
	/* Empty answers: both empty 1, one empty 0. */
	CHECK(near(f1("", ""), 1.0));
	CHECK(near(f1("", "cat"), 0.0));
	CHECK(near(f1("the.", "cat"), 0.0));
	CHECK(near(f1("cat", " \t"), 0.0));
}

static void test_evidence(void)
{
	size_t total = 99;
	const char *gold[] = { "D1:3", "D8:6; D9:17" };
	const char *have[] = { "D1:3;D1:4", "D9:17" };
	CHECK(eval_evidence_found(&total, gold, 2, have, 2) == 2 && total == 3);
	const char *gold2[] = { "D1:30" };
	const char *have2[] = { "D1:3", "D1:300" };
	CHECK(eval_evidence_found(&total, gold2, 1, have2, 2) == 0 && total == 1);
	CHECK(eval_evidence_found(&total, gold2, 1, have2, 0) == 0 && total == 1);
	CHECK(eval_evidence_found(&total, gold, 0, have, 2) == 0 && total == 0);
	const char *blank[] = { " ; " };
	CHECK(eval_evidence_found(&total, blank, 1, have, 2) == 0 && total == 0);
}

static void test_sample(void)
{
	size_t a[10], b[10];
	eval_sample(a, 100, 10, 1);
	eval_sample(b, 100, 10, 1);
	CHECK(!memcmp(a, b, sizeof a));
	for (size_t i = 0; i < 10; i++)
		CHECK(a[i] < 100 && (!i || a[i] > a[i - 1])); /* increasing: no repeats */
	eval_sample(b, 100, 10, 2);
	CHECK(memcmp(a, b, sizeof a)); /* another seed, another sample */
	/* All of them when k = n. */
	eval_sample(a, 7, 7, 5);
	for (size_t i = 0; i < 7; i++)
		CHECK(a[i] == i);
	/* Unbiased: over 3000 seeds each of 10 indices is taken about 3000 *
	 * 3 / 10 = 900 times (a deterministic count; the binomial's standard
	 * deviation is 25). */
	size_t count[10] = { 0 };
	for (uint64_t s = 0; s < 3000; s++) {
		size_t c[3];
		eval_sample(c, 10, 3, s);
		for (size_t i = 0; i < 3; i++)
			count[c[i]]++;
	}
	for (size_t i = 0; i < 10; i++)
		CHECK(count[i] > 800 && count[i] < 1000);
}

int main(void)
{
	test_f1();
	test_evidence();
	test_sample();
	CHECK_DONE();
}

/* Unicode properties, case mapping, NFD, NFC and UTF-8 against values from the
 * Unicode Character Database (as Python's unicodedata reports them). */
#include <string.h>

#include "check.h"
#include "text/unicode.h"

static int nfd_is(const uint32_t *in, size_t n, const uint32_t *want, size_t n_want)
{
	uint32_t out[32];
	size_t need = infs__uc_nfd(in, n, NULL, 0);
	size_t got = infs__uc_nfd(in, n, out, 32);
	return need == n_want && got == n_want && memcmp(out, want, n_want * sizeof *out) == 0;
}

int main(void)
{
	CHECK(strcmp(infs__uc_version, "14.0.0") >= 0);
	CHECK(infs__uc_category('A') == INFS_UC_LU && infs__uc_category('z') == INFS_UC_LL);
	CHECK(infs__uc_category('7') == INFS_UC_ND && infs__uc_category(0x00bd) == INFS_UC_NO);
	CHECK(infs__uc_category(0x2167) == INFS_UC_NL); /* Roman numeral eight */
	CHECK(infs__uc_category(' ') == INFS_UC_ZS && infs__uc_category('\n') == INFS_UC_CC);
	CHECK(infs__uc_category(0x200d) == INFS_UC_CF); /* zero width joiner */
	CHECK(infs__uc_category(0x0301) == INFS_UC_MN && infs__uc_category(0x093e) == INFS_UC_MC);
	CHECK(infs__uc_category(0x4e2d) == INFS_UC_LO && infs__uc_category(0x0627) == INFS_UC_LO);
	CHECK(infs__uc_category(0x1f600) == INFS_UC_SO && infs__uc_category('$') == INFS_UC_SC);
	CHECK(infs__uc_category(0x1f3fb) == INFS_UC_SK); /* skin tone modifier */
	CHECK(infs__uc_category(0xd800) == INFS_UC_CS && infs__uc_category(0xe000) == INFS_UC_CO);
	CHECK(infs__uc_category(0x0378) == INFS_UC_CN && infs__uc_category(0x10ffff) == INFS_UC_CN);
	CHECK(infs__uc_category(0x110000) == INFS_UC_CN && infs__uc_category(0xffffffffu) == INFS_UC_CN);
	CHECK(infs__uc_category(0x01c5) == INFS_UC_LT && infs__uc_category(0x02b0) == INFS_UC_LM);
	CHECK(strcmp(infs__uc_category_name(INFS_UC_PD), "Pd") == 0);
	CHECK(infs__uc_is_punct('-') && infs__uc_is_punct(0x3001) && !infs__uc_is_punct('$'));
	CHECK(infs__uc_is_letter(0x00e9) && !infs__uc_is_letter(0x0301) && infs__uc_is_mark(0x0301));
	CHECK(infs__uc_is_number(0x0967) && !infs__uc_is_number('a'));

	CHECK(infs__uc_is_space(' ') && infs__uc_is_space('\t') && infs__uc_is_space(0x0b) &&
	      infs__uc_is_space(0x85) && infs__uc_is_space(0xa0) && infs__uc_is_space(0x3000) &&
	      infs__uc_is_space(0x2029));
	CHECK(!infs__uc_is_space(0x1c) && !infs__uc_is_space(0x200b) && !infs__uc_is_space(0x180e));
	CHECK(infs__uc_is_cjk(0x4e2d) && infs__uc_is_cjk(0x20000) && !infs__uc_is_cjk(0x3042) &&
	      !infs__uc_is_cjk(0xac00));

	uint32_t lo[3];
	CHECK(infs__uc_lower('A', lo) == 1 && lo[0] == 'a');
	CHECK(infs__uc_lower(0x00c9, lo) == 1 && lo[0] == 0x00e9);
	CHECK(infs__uc_lower(0x0130, lo) == 2 && lo[0] == 'i' && lo[1] == 0x0307);
	CHECK(infs__uc_lower(0x03a3, lo) == 1 && lo[0] == 0x03c3);
	CHECK(infs__uc_lower(0x0410, lo) == 1 && lo[0] == 0x0430);
	CHECK(infs__uc_lower(0x2160, lo) == 1 && lo[0] == 0x2170);
	CHECK(infs__uc_lower(0x10400, lo) == 1 && lo[0] == 0x10428);
	CHECK(infs__uc_lower('a', lo) == 1 && lo[0] == 'a' && infs__uc_lower(0x4e2d, lo) == 1 && lo[0] == 0x4e2d);

	CHECK(infs__uc_ccc(0x0301) == 230 && infs__uc_ccc(0x0323) == 220 && infs__uc_ccc('a') == 0);
	CHECK(infs__uc_ccc(0x094d) == 9);
	uint32_t d[INFS_UC_MAX_DECOMP];
	CHECK(infs__uc_decompose(0x00e9, d) == 2 && d[0] == 'e' && d[1] == 0x0301);
	CHECK(infs__uc_decompose(0x1e69, d) == 3 && d[0] == 's' && d[1] == 0x0323 && d[2] == 0x0307);
	CHECK(infs__uc_decompose(0xd55c, d) == 3 && d[0] == 0x1112 && d[1] == 0x1161 && d[2] == 0x11ab);
	CHECK(infs__uc_decompose(0xac00, d) == 2 && d[0] == 0x1100 && d[1] == 0x1161);
	CHECK(infs__uc_decompose(0x212b, d) == 2 && d[0] == 'A' && d[1] == 0x030a); /* Angstrom sign */
	CHECK(infs__uc_decompose('x', d) == 1 && d[0] == 'x');
	CHECK(infs__uc_decompose(0xfb01, d) == 1 && d[0] == 0xfb01); /* compatibility only */

	const uint32_t in1[] = { 'a', 0x0301, 0x0323, 'b' }, want1[] = { 'a', 0x0323, 0x0301, 'b' };
	CHECK(nfd_is(in1, 4, want1, 4));
	const uint32_t in2[] = { 0x00e9, 0x0323 }, want2[] = { 'e', 0x0323, 0x0301 };
	CHECK(nfd_is(in2, 2, want2, 3));
	const uint32_t in3[] = { 0x1e69, 'q' }, want3[] = { 's', 0x0323, 0x0307, 'q' };
	CHECK(nfd_is(in3, 2, want3, 4));
	uint32_t small[2];
	CHECK(infs__uc_nfd(in3, 2, small, 2) == 4 && small[0] == 's' && small[1] == 0x0323);

	/* NFC = NFD then canonical composition. */
	uint32_t c1[] = { 'e', 0x0301, 'a', 0x0323, 0x0302, 0x1100, 0x1161, 0x11a8, 0x0301, 'x' };
	CHECK(infs__uc_compose(c1, 10) == 5 && c1[0] == 0x00e9 && c1[1] == 0x1ead && c1[2] == 0xac01 &&
	      c1[3] == 0x0301 && c1[4] == 'x');
	uint32_t c2[] = { 'a', 0x0301, 0x0301 }; /* the second acute is blocked by the first */
	CHECK(infs__uc_compose(c2, 3) == 2 && c2[0] == 0x00e1 && c2[1] == 0x0301);
	uint32_t c3[] = { 0x0301, 'e', 0x0301 };  /* a leading mark stays */
	CHECK(infs__uc_compose(c3, 3) == 2 && c3[0] == 0x0301 && c3[1] == 0x00e9);
	uint32_t c4[] = { 0x0915, 0x093c };       /* a composition exclusion: stays decomposed */
	CHECK(infs__uc_compose(c4, 2) == 2);
	uint32_t c5[4];
	const uint32_t ang = 0x212b; /* Angstrom sign: NFC is U+00C5 */
	size_t nc = infs__uc_nfd(&ang, 1, c5, 4);
	CHECK(infs__uc_compose(c5, nc) == 1 && c5[0] == 0x00c5);
	CHECK(infs__uc_compose(c5, 0) == 0);

	uint32_t cp;
	const uint8_t ok[] = { 0xf0, 0x9f, 0x98, 0x80 };
	CHECK(infs__utf8_decode(ok, 4, &cp) == 4 && cp == 0x1f600);
	CHECK(infs__utf8_decode((const uint8_t *)"\xc3\xa9", 2, &cp) == 2 && cp == 0xe9);
	CHECK(infs__utf8_decode((const uint8_t *)"\xe4\xb8\xad", 3, &cp) == 3 && cp == 0x4e2d);
	CHECK(infs__utf8_decode(ok, 3, &cp) == -3 && cp == 0xfffd);             /* truncated */
	CHECK(infs__utf8_decode((const uint8_t *)"\xff", 1, &cp) == -1);
	CHECK(infs__utf8_decode((const uint8_t *)"\x80", 1, &cp) == -1);
	CHECK(infs__utf8_decode((const uint8_t *)"\xc0\xaf", 2, &cp) == -1);    /* overlong */
	CHECK(infs__utf8_decode((const uint8_t *)"\xe0\x80\x80", 3, &cp) == -1); /* overlong */
	CHECK(infs__utf8_decode((const uint8_t *)"\xed\xa0\x80", 3, &cp) == -1); /* surrogate */
	CHECK(infs__utf8_decode((const uint8_t *)"\xf4\x90\x80\x80", 4, &cp) == -1);
	CHECK(infs__utf8_decode((const uint8_t *)"\xe4\xb8x", 3, &cp) == -2);
	uint8_t buf[4];
	const uint32_t cps[] = { 0, 0x7f, 0x80, 0x7ff, 0x800, 0xffff, 0x10000, 0x10ffff };
	for (size_t i = 0; i < sizeof cps / sizeof *cps; i++) {
		size_t n = infs__utf8_encode(cps[i], buf);
		CHECK(infs__utf8_decode(buf, n, &cp) == (int)n && cp == cps[i]);
	}
	CHECK_DONE();
}

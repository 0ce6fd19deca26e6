#include "text/unicode.h"

/* The generated tables (unicode_tables.c). */
extern const uint32_t infs__uc_cat_first[];
extern const uint8_t infs__uc_cat_value[];
extern const size_t infs__uc_cat_n;
extern const uint8_t infs__uc_cat_latin1[256];
extern const uint32_t infs__uc_ccc_first[];
extern const uint8_t infs__uc_ccc_value[];
extern const size_t infs__uc_ccc_n;
extern const uint32_t infs__uc_decomp_cp[];
extern const uint32_t infs__uc_decomp_at[];
extern const size_t infs__uc_decomp_n;
extern const uint32_t infs__uc_decomp_pool[];
extern const uint64_t infs__uc_comp_pair[];
extern const uint32_t infs__uc_comp_result[];
extern const size_t infs__uc_comp_n;
extern const uint32_t infs__uc_lower_from[];
extern const uint32_t infs__uc_lower_to[];
extern const size_t infs__uc_lower_n;
extern const uint32_t infs__uc_lower_multi[][4];
extern const size_t infs__uc_lower_multi_n;

/* Index of the last run starting at or before cp (first[0] is 0). */
static size_t run_of(const uint32_t *first, size_t n, uint32_t cp)
{
	size_t lo = 0, hi = n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (first[mid] <= cp)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Index of cp in a sorted array, or n. */
static size_t find(const uint32_t *v, size_t n, uint32_t cp)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo] == cp ? lo : n;
}

infs__uc_cat infs__uc_category(uint32_t cp)
{
	if (cp < 256)
		return (infs__uc_cat)infs__uc_cat_latin1[cp];
	if (cp > 0x10ffff)
		return INFS_UC_CN;
	return (infs__uc_cat)infs__uc_cat_value[run_of(infs__uc_cat_first, infs__uc_cat_n, cp)];
}

const char *infs__uc_category_name(infs__uc_cat cat)
{
	static const char names[][3] = {
		"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
		"Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co",
	};
	return (unsigned)cat < sizeof names / sizeof *names ? names[cat] : "??";
}

int infs__uc_is_letter(uint32_t cp)
{
	infs__uc_cat c = infs__uc_category(cp);
	return c >= INFS_UC_LU && c <= INFS_UC_LO;
}

int infs__uc_is_number(uint32_t cp)
{
	infs__uc_cat c = infs__uc_category(cp);
	return c >= INFS_UC_ND && c <= INFS_UC_NO;
}

int infs__uc_is_mark(uint32_t cp)
{
	infs__uc_cat c = infs__uc_category(cp);
	return c >= INFS_UC_MN && c <= INFS_UC_ME;
}

int infs__uc_is_punct(uint32_t cp)
{
	infs__uc_cat c = infs__uc_category(cp);
	return c >= INFS_UC_PC && c <= INFS_UC_PO;
}

int infs__uc_is_space(uint32_t cp)
{
	/* White_Space is a short, stable list (PropList.txt). */
	return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
	       (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
	       cp == 0x205f || cp == 0x3000;
}

int infs__uc_is_cjk(uint32_t cp)
{
	return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) ||
	       (cp >= 0x20000 && cp <= 0x2a6df) || (cp >= 0x2a700 && cp <= 0x2b73f) ||
	       (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b820 && cp <= 0x2ceaf) ||
	       (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
}

size_t infs__uc_lower(uint32_t cp, uint32_t out[3])
{
	size_t i = find(infs__uc_lower_from, infs__uc_lower_n, cp);
	if (i < infs__uc_lower_n) {
		out[0] = infs__uc_lower_to[i];
		return 1;
	}
	for (i = 0; i < infs__uc_lower_multi_n; i++)
		if (infs__uc_lower_multi[i][0] == cp) {
			size_t n = 0;
			while (n < 3 && infs__uc_lower_multi[i][n + 1])
				out[n] = infs__uc_lower_multi[i][n + 1], n++;
			return n;
		}
	out[0] = cp;
	return 1;
}

uint8_t infs__uc_ccc(uint32_t cp)
{
	if (cp > 0x10ffff)
		return 0;
	return infs__uc_ccc_value[run_of(infs__uc_ccc_first, infs__uc_ccc_n, cp)];
}

/* Hangul syllables decompose arithmetically (Unicode 3.12). */
enum { S_BASE = 0xac00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11a7, V_COUNT = 21, T_COUNT = 28,
       S_COUNT = 19 * 21 * 28 };

size_t infs__uc_decompose(uint32_t cp, uint32_t out[INFS_UC_MAX_DECOMP])
{
	if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
		uint32_t s = cp - S_BASE;
		out[0] = L_BASE + s / (V_COUNT * T_COUNT);
		out[1] = V_BASE + s % (V_COUNT * T_COUNT) / T_COUNT;
		if (s % T_COUNT == 0)
			return 2;
		out[2] = T_BASE + s % T_COUNT;
		return 3;
	}
	size_t i = find(infs__uc_decomp_cp, infs__uc_decomp_n, cp);
	if (i == infs__uc_decomp_n) {
		out[0] = cp;
		return 1;
	}
	uint32_t at = infs__uc_decomp_at[i] >> 3, len = infs__uc_decomp_at[i] & 7;
	for (uint32_t k = 0; k < len; k++)
		out[k] = infs__uc_decomp_pool[at + k];
	return len;
}

size_t infs__uc_nfd(const uint32_t *in, size_t n, uint32_t *out, size_t cap)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t d[INFS_UC_MAX_DECOMP];
		size_t k = infs__uc_decompose(in[i], d);
		for (size_t j = 0; j < k; j++, len++) {
			if (len >= cap)
				continue;
			/* Canonical ordering: a mark moves before the marks of
			 * higher class that precede it (a stable insertion sort
			 * within each run of non-starters). */
			uint8_t c = infs__uc_ccc(d[j]);
			size_t at = len;
			while (c && at > 0 && infs__uc_ccc(out[at - 1]) > c) {
				out[at] = out[at - 1];
				at--;
			}
			out[at] = d[j];
		}
	}
	return len;
}

/* The primary composite of a and b, or 0. */
static uint32_t compose_pair(uint32_t a, uint32_t b)
{
	if (a >= L_BASE && a < L_BASE + 19 && b >= V_BASE && b < V_BASE + V_COUNT)
		return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
	if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE &&
	    b < T_BASE + T_COUNT)
		return a + (b - T_BASE);
	if (a > 0x10ffff || b > 0x10ffff)
		return 0;
	uint64_t key = (uint64_t)a << 21 | b;
	size_t lo = 0, hi = infs__uc_comp_n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (infs__uc_comp_pair[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < infs__uc_comp_n && infs__uc_comp_pair[lo] == key ? infs__uc_comp_result[lo] : 0;
}

size_t infs__uc_compose(uint32_t *s, size_t n)
{
	if (n == 0)
		return 0;
	/* UAX #15: a character combines with the last starter unless a
	 * character of class 0 or of a class >= its own stands between them.
	 * A leading non-starter has no starter (class 256 blocks all). */
	size_t starter = 0, out = 1;
	int last = infs__uc_ccc(s[0]) ? 256 : 0;
	int have_starter = last == 0;
	for (size_t i = 1; i < n; i++) {
		uint32_t ch = s[i];
		int cls = infs__uc_ccc(ch);
		uint32_t c = have_starter ? compose_pair(s[starter], ch) : 0;
		if (c && (last < cls || last == 0)) {
			s[starter] = c;
			continue;
		}
		if (cls == 0) {
			starter = out;
			have_starter = 1;
		}
		last = cls;
		s[out++] = ch;
	}
	return out;
}

int infs__utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t b = s[0];
	*cp = 0xfffd;
	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	int need;
	uint8_t lo = 0x80, hi = 0xbf; /* the allowed range of the second byte */
	if (b >= 0xc2 && b <= 0xdf)
		need = 1;
	else if (b >= 0xe0 && b <= 0xef) {
		need = 2;
		if (b == 0xe0)
			lo = 0xa0;
		else if (b == 0xed)
			hi = 0x9f;
	} else if (b >= 0xf0 && b <= 0xf4) {
		need = 3;
		if (b == 0xf0)
			lo = 0x90;
		else if (b == 0xf4)
			hi = 0x8f;
	} else
		return -1;
	uint32_t v = b & (0x3f >> need);
	for (int i = 1; i <= need; i++) {
		if ((size_t)i >= n || s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
			return -i;
		v = v << 6 | (s[i] & 0x3f);
	}
	*cp = v;
	return need + 1;
}

size_t infs__utf8_encode(uint32_t cp, uint8_t out[4])
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xc0 | cp >> 6);
		out[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xe0 | cp >> 12);
		out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (uint8_t)(0xf0 | cp >> 18);
	out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

/* The WordPiece tokenizer's rules on a small hand-made vocabulary: greedy
 * longest match, ## continuations, [UNK] for whole words, the word length
 * limit, normalisation switches, CJK, punctuation, special tokens, truncation
 * and vocabulary parsing. (Parity with the reference tokenizer on the real
 * vocabulary is test_embed_model's job.) */
#include <stdarg.h>
#include <string.h>

#include "check.h"
#include "embed/wordpiece.h"

static const char vocab[] =
	"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"       /* 0-4 */
	"hello\nworld\n,\n!\n.\n"                    /* 5-9 */
	"un\nuna\n##ffable\n##aff\n##able\n"         /* 10-14 */
	"cafe\ncafé\n中\n文\na\n"                     /* 15-19 */
	"b\ndup\ndup\n##b\nxy\r\n"                   /* 20-24: "dup" twice, CRLF */
	"$\n";                                       /* 25 */

static infs__wordpiece_config config(int lower, int strip, int cjk, uint32_t max_chars)
{
	infs__wordpiece_config c = {lower, strip, cjk, max_chars,
	                            {"[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"}};
	return c;
}

/* text must tokenize to [CLS], the n ids that follow, [SEP]. */
static int expect(const infs__wordpiece *wp, const char *text, uint32_t max_len, int n, ...)
{
	int32_t ids[64];
	uint32_t got = 0;
	if (infs__wordpiece_encode(wp, text, strlen(text), max_len, ids, &got) != INFS_OK)
		return 0;
	int ok = got == (uint32_t)n + 2 && ids[0] == 2 && ids[got - 1] == 3;
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		int32_t want = va_arg(ap, int32_t);
		if (ok && ids[i + 1] != want)
			ok = 0;
	}
	va_end(ap);
	if (!ok) {
		fprintf(stderr, "\"%s\" gave", text);
		for (uint32_t i = 0; i < got; i++)
			fprintf(stderr, " %d", ids[i]);
		fprintf(stderr, "\n");
	}
	return ok;
}

int main(void)
{
	infs__wordpiece *wp = NULL;
	infs__wordpiece_config c = config(1, 1, 1, 100);
	CHECK_OK(infs__wordpiece_create(&wp, vocab, sizeof vocab - 1, &c));
	if (!wp)
		CHECK_DONE();
	CHECK(infs__wordpiece_vocab_size(wp) == 26);
	CHECK(infs__wordpiece_id(wp, "dup", 3) == 22);   /* a repeated token keeps its last line */
	CHECK(infs__wordpiece_id(wp, "xy", 2) == 24);    /* CR is not part of the token */
	CHECK(infs__wordpiece_id(wp, "nope", 4) == -1);
	CHECK(infs__wordpiece_special(wp, INFS_WP_MASK) == 4);

	CHECK(expect(wp, "Hello, World!", 64, 4, 5, 7, 6, 8));
	CHECK(expect(wp, "", 64, 0));
	CHECK(expect(wp, " \t\r\n\xe3\x80\x80 ", 64, 0));         /* whitespace only */
	CHECK(expect(wp, "unaffable", 64, 2, 11, 12));           /* longest first: una ##ffable */
	CHECK(expect(wp, "unaffablex hello", 64, 2, 1, 5));      /* no ##x: the whole word is [UNK] */
	CHECK(expect(wp, "ab", 64, 2, 19, 23));                  /* a ##b */
	CHECK(expect(wp, "CAFÉ Café", 64, 2, 15, 15));           /* lower-cased, accent stripped */
	CHECK(expect(wp, "Cafe\xcc\x81", 64, 1, 15));            /* a decomposed accent too */
	CHECK(expect(wp, "he\x07llo wor\xe2\x80\x8bld", 64, 2, 5, 6)); /* Cc and Cf removed */
	CHECK(expect(wp, "hel\xfflo", 64, 1, 5));                /* invalid UTF-8 dropped */
	CHECK(expect(wp, "a.b$a", 64, 5, 19, 9, 20, 25, 19));    /* punctuation, ASCII $ included */
	CHECK(expect(wp, "中文", 64, 2, 17, 18));                 /* CJK ideographs are words */
	CHECK(expect(wp, "a中b", 64, 3, 19, 17, 20));
	CHECK(expect(wp, "a[MASK]b [SEP]", 64, 4, 19, 4, 20, 3)); /* special tokens in the text */
	CHECK(expect(wp, "[mask]", 64, 3, 1, 1, 1));              /* only verbatim */
	CHECK(expect(wp, "hello world hello", 4, 2, 5, 6));       /* truncated to 4 ids */
	CHECK(expect(wp, "hello world hello", 2, 0));
	CHECK(expect(wp, "hello unaffable", 3, 1, 5));
	CHECK(expect(wp, "hello unaffable", 4, 2, 5, 11));        /* cut inside a word */
	CHECK(expect(wp, "hello unaffablex", 4, 2, 5, 1));        /* the cut word fails whole */

	/* Long texts are normalised in pieces cut at whitespace: a word across
	 * the 4 KiB mark stays whole, and a NUL (removed, not a separator) does
	 * not split a word. */
	{
		static char text[10000];
		memset(text, ' ', sizeof text - 1);
		memcpy(text + 4090, "unaffable", 9);
		CHECK(expect(wp, text, 64, 2, 11, 12));
		int32_t ids[8];
		uint32_t got = 0;
		char nul[] = "un\0affable hello";
		CHECK_OK(infs__wordpiece_encode(wp, nul, sizeof nul - 1, 8, ids, &got));
		CHECK(got == 5 && ids[1] == 11 && ids[2] == 12 && ids[3] == 5);
	}

	/* Arbitrary bytes (mostly invalid UTF-8, specials, CJK and accents mixed
	 * in): ids stay in the vocabulary and within max_len. */
	static const char *const parts[] = {"\xe4\xb8\xad", "[MASK]", "\xcc\x81", "e", " ", "\xf0\x9f",
	                                    "\xff", "un", "##", "!", "\xc3\xa9", "[SEP"};
	uint64_t rng = 88172645463325252ull;
	for (int iter = 0; iter < 2000; iter++) {
		char buf[256];
		size_t n = 0;
		while (n < 200) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			if (rng % 3 == 0) {
				buf[n++] = (char)(rng >> 32);
			} else {
				const char *p = parts[(rng >> 8) % (sizeof parts / sizeof parts[0])];
				size_t pl = strlen(p);
				memcpy(buf + n, p, pl);
				n += pl;
			}
		}
		uint32_t max_len = 2 + (uint32_t)(rng % 60), got = 0;
		int32_t ids[64];
		CHECK_OK(infs__wordpiece_encode(wp, buf, n, max_len, ids, &got));
		int ok = got >= 2 && got <= max_len && ids[0] == 2 && ids[got - 1] == 3;
		for (uint32_t i = 0; i < got; i++)
			ok &= ids[i] >= 0 && ids[i] < 26;
		CHECK(ok);
		if (!ok)
			break;
	}
	infs__wordpiece_free(wp);

	/* Switches: no lower-casing, no accent stripping, no CJK isolation, a
	 * short word limit. */
	c = config(0, 0, 0, 4);
	CHECK_OK(infs__wordpiece_create(&wp, vocab, sizeof vocab - 1, &c));
	if (wp) {
		CHECK(expect(wp, "Hello café", 64, 2, 1, 16));
		CHECK(expect(wp, "中文", 64, 1, 1));               /* one word, no ##文 */
		CHECK(expect(wp, "hello", 64, 1, 1));              /* 5 chars > 4 */
		CHECK(expect(wp, "café", 64, 1, 16));               /* 4 chars, not 5 bytes */
	}
	infs__wordpiece_free(wp);
	c = config(1, 0, 1, 100);
	CHECK_OK(infs__wordpiece_create(&wp, vocab, sizeof vocab - 1, &c));
	if (wp)
		CHECK(expect(wp, "CAFÉ", 64, 1, 16));               /* lower-cased, accent kept */
	infs__wordpiece_free(wp);

	/* Vocabulary errors. */
	wp = NULL;
	c = config(1, 1, 1, 100);
	CHECK_ERR(infs__wordpiece_create(&wp, "", 0, &c), INFS_EFORMAT);
	CHECK_ERR(infs__wordpiece_create(&wp, "a\nb\n", 4, &c), INFS_EFORMAT); /* no [UNK] */
	c.special[INFS_WP_MASK] = "<mask>";
	CHECK_ERR(infs__wordpiece_create(&wp, vocab, sizeof vocab - 1, &c), INFS_EFORMAT);
	CHECK(wp == NULL);
	infs__wordpiece_free(NULL);
	CHECK_DONE();
}

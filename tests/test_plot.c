/* The command-line tool's chart renderer (tools/plot.c): the PNG it writes
 * read back chunk by chunk (signature, IHDR, CRCs, the zlib stream inflated
 * to the image's scanlines), the font, nice ticks, and charts whose bars
 * and lines land where plot_x and plot_y say, in their series' colours. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "plot.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads path back as a PNG of im's size and checks every byte of it. */
static void check_png(const char *path, const plot_image *im)
{
	FILE *f = fopen(path, "rb");
	CHECK(f);
	if (!f)
		return;
	uint8_t *b = malloc(1 << 22);
	size_t n = fread(b, 1, 1 << 22, f);
	fclose(f);
	CHECK(n > 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8));
	uint8_t *idat = malloc(n);
	size_t n_idat = 0, at = 8;
	int seen_ihdr = 0, seen_iend = 0;
	while (at + 12 <= n && !seen_iend) {
		uint32_t len = be32(b + at);
		CHECK(len <= n - at - 12);
		if (len > n - at - 12)
			break;
		const uint8_t *type = b + at + 4, *data = b + at + 8;
		uLong crc = crc32(crc32(0, NULL, 0), type, 4 + len);
		CHECK(crc == be32(data + len));
		if (!memcmp(type, "IHDR", 4)) {
			CHECK(at == 8 && len == 13);
			CHECK(be32(data) == (uint32_t)im->w && be32(data + 4) == (uint32_t)im->h);
			CHECK(data[8] == 8 && data[9] == 2 && !data[10] && !data[11] && !data[12]);
			seen_ihdr = 1;
		} else if (!memcmp(type, "IDAT", 4)) {
			memcpy(idat + n_idat, data, len);
			n_idat += len;
		} else {
			CHECK(!memcmp(type, "IEND", 4) && len == 0);
			seen_iend = 1;
		}
		at += 12 + len;
	}
	CHECK(seen_ihdr && seen_iend && at == n);
	/* The scanlines: filter byte 0, then the pixels as they are in memory. */
	size_t row = (size_t)im->w * 3, want_n = (size_t)im->h * (row + 1);
	uint8_t *raw = malloc(want_n + 1);
	uLongf raw_n = want_n + 1;
	CHECK(uncompress(raw, &raw_n, idat, n_idat) == Z_OK && raw_n == want_n);
	for (int y = 0; y < im->h && raw_n == want_n; y++) {
		CHECK(raw[(size_t)y * (row + 1)] == 0);
		CHECK(!memcmp(raw + (size_t)y * (row + 1) + 1, im->rgb + (size_t)y * row, row));
	}
	free(raw);
	free(idat);
	free(b);
}

static void test_png(void)
{
	plot_image im;
	CHECK(plot_image_init(&im, 0, 5, 0) == -1 && plot_image_init(&im, 5, PLOT_SIDE_MAX + 1, 0) == -1);
	CHECK(!plot_image_init(&im, 37, 23, 0xffffff));
	CHECK(plot_pixel(&im, 0, 0) == 0xffffff && plot_pixel(&im, 36, 22) == 0xffffff && plot_pixel(&im, 37, 0) == 0);
	plot_rect(&im, 30, 20, 5, 3, 0x123456); /* corners in any order */
	plot_rect(&im, -10, -10, 2, 1, 0xabcdef); /* clipped */
	plot_line(&im, 0, 22, 36, 22, 1, 0, 0xff0000);
	CHECK(plot_pixel(&im, 5, 3) == 0x123456 && plot_pixel(&im, 30, 20) == 0x123456);
	CHECK(plot_pixel(&im, 4, 3) == 0xffffff && plot_pixel(&im, 31, 20) == 0xffffff);
	CHECK(plot_pixel(&im, 0, 0) == 0xabcdef && plot_pixel(&im, 2, 1) == 0xabcdef && plot_pixel(&im, 3, 1) == 0xffffff);
	CHECK(plot_pixel(&im, 0, 22) == 0xff0000 && plot_pixel(&im, 36, 22) == 0xff0000);
	char path[] = "/tmp/infs-plot-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	CHECK(!plot_write_png(&im, path));
	check_png(path, &im);
	CHECK(plot_write_png(&im, "/nonexistent-dir/x.png") == -1);
	plot_image_free(&im);
	unlink(path);
}

/* Each printable character draws its own shape, within its box; space and
 * bytes outside 32..126 as documented. */
static void test_font(void)
{
	enum { S = 2, W = 5 * S, H = 9 * S };
	static uint8_t shapes[95][W * H];
	CHECK(plot_text_width("", S) == 0 && plot_text_width("ab", S) == 2 * 6 * S - S);
	for (int ch = 32; ch <= 126; ch++) {
		plot_image im;
		char s[2] = { (char)ch, 0 };
		CHECK(!plot_image_init(&im, W + 4, H + 4, 0));
		plot_text(&im, 2, 2, s, S, 0, 0xffffff);
		size_t inked = 0, outside = 0;
		for (int y = 0; y < im.h; y++)
			for (int x = 0; x < im.w; x++) {
				int on = plot_pixel(&im, x, y) == 0xffffff, in = x >= 2 && x < 2 + W && y >= 2 && y < 2 + H;
				inked += (size_t)on;
				outside += (size_t)(on && !in);
				if (in)
					shapes[ch - 32][(y - 2) * W + x - 2] = (uint8_t)on;
			}
		CHECK(ch == ' ' ? inked == 0 : inked > 0);
		CHECK(outside == 0);
		for (int o = 32; o < ch; o++)
			if (!memcmp(shapes[o - 32], shapes[ch - 32], sizeof shapes[0]))
				fprintf(stderr, "glyphs %c and %c are the same\n", o, ch), check_failures++;
		plot_image_free(&im);
	}
	/* Vertical text: the same ink turned, so "-" stands upright. */
	plot_image im;
	CHECK(!plot_image_init(&im, 20, 20, 0));
	plot_text(&im, 0, 0, "-", 1, 1, 0xffffff);
	size_t inked = 0;
	for (int y = 0; y < 20; y++)
		for (int x = 0; x < 20; x++)
			inked += plot_pixel(&im, x, y) == 0xffffff;
	CHECK(inked == 5 && plot_pixel(&im, 3, 0) == 0xffffff && plot_pixel(&im, 3, 4) == 0xffffff);
	plot_text(&im, 10, 0, "\x01", 1, 0, 0xff0000); /* drawn as '?' */
	CHECK(plot_pixel(&im, 11, 0) == 0xff0000 && plot_pixel(&im, 12, 6) == 0xff0000);
	plot_image_free(&im);
}

static void test_nice(void)
{
	CHECK(plot_nice_step(9.3, 5) == 2);
	CHECK(fabs(plot_nice_step(0.3, 5) - 0.05) < 1e-12);
	CHECK(plot_nice_step(16464, 5) == 5000);
	CHECK(plot_nice_step(1, 5) == 0.2);
	CHECK(plot_nice_step(0, 5) == 1 && plot_nice_step(NAN, 5) == 1);
}

/* A line's pixel: Bresenham's steps stay within one pixel of the ideal. */
static int near(const plot_image *im, int x, int y, uint32_t color)
{
	for (int dy = -1; dy <= 1; dy++)
		for (int dx = -1; dx <= 1; dx++)
			if (plot_pixel(im, x + dx, y + dy) == color)
				return 1;
	return 0;
}

static void test_chart(void)
{
	static const char *const cats[] = { "10", "20", "50" };
	static const double part1[] = { 4, 5, 6 }, part2[] = { 6, 5, NAN }, full[] = { 3, 8, 9 };
	static const double share[] = { 0.5, 0.75, 1 }, kl[] = { 0.4, 0.2, 0.1 };
	plot_chart c;
	plot_chart_init(&c, "TTFT", "k", "ms", "KL");
	c.categories = cats;
	c.n_categories = 3;
	plot_series *s = plot_add(&c, PLOT_BAR, "part 1", 0x0000c0, NULL, part1, 3);
	CHECK(s && s->axis == 0 && s->stack == 0 && !s->marker);
	plot_add(&c, PLOT_BAR, "part 2", 0x00c000, NULL, part2, 3);
	plot_add(&c, PLOT_BAR, "full", 0xc00000, NULL, full, 3)->stack = 1;
	plot_add(&c, PLOT_LINE, "share", 0xc000c0, NULL, share, 3)->marker = PLOT_MARK_SQUARE;
	s = plot_add(&c, PLOT_LINE, "KL", 0x00c0c0, NULL, kl, 3);
	s->axis = 1;
	s->dashed = 1;
	plot_image im;
	CHECK(!plot_image_init(&im, 600, 400, 0xffffff));
	const char *why = NULL;
	CHECK(!plot_draw(&im, &c, 0, 0, 600, 400, &why));
	/* The y axes: 0..10 (the piles of parts 1 and 2), 0..0.4 (KL). */
	CHECK(c.y_lo[0] == 0 && c.y_hi[0] == 10 && c.y_lo[1] == 0 && fabs(c.y_hi[1] - 0.4) < 1e-12);
	CHECK(c.x_lo == -0.5 && c.x_hi == 2.5);
	CHECK(c.area_x0 > 0 && c.area_x1 < 599 && c.area_y0 > 0 && c.area_y1 < 399);
	/* Stacks 0 and 1 stand side by side, 0.4 of a category each, parts
	 * piled: part 1 from 0 to 4 at k 10, part 2 from 4 to 10; full to 3. */
	double cat = (c.area_x1 - c.area_x0) / 3.0;
	int left = (int)lround(plot_x(&c, 0) - 0.2 * cat), right = (int)lround(plot_x(&c, 0) + 0.2 * cat);
	CHECK(plot_pixel(&im, left, plot_y(&c, 0, 2)) == 0x0000c0);
	CHECK(plot_pixel(&im, left, plot_y(&c, 0, 7)) == 0x00c000);
	CHECK(plot_pixel(&im, right, plot_y(&c, 0, 1.5)) == 0xc00000);
	CHECK(plot_pixel(&im, right, plot_y(&c, 0, 4.5)) != 0xc00000);
	/* No part 2 at k 50 (NaN): above part 1 is background or grid. */
	int left2 = (int)lround(plot_x(&c, 2) - 0.2 * cat);
	CHECK(plot_pixel(&im, left2, plot_y(&c, 0, 4.5)) == 0x0000c0);
	CHECK(plot_pixel(&im, left2, plot_y(&c, 0, 7)) != 0x00c000);
	/* The share's marker at k 20; the line half-way to k 50; KL on its axis. */
	CHECK(plot_pixel(&im, plot_x(&c, 1), plot_y(&c, 0, 0.75)) == 0xc000c0);
	CHECK(near(&im, plot_x(&c, 1.5), plot_y(&c, 0, 0.875), 0xc000c0));
	CHECK(plot_pixel(&im, plot_x(&c, 1), plot_y(&c, 1, 0.2)) == 0x00c0c0);
	/* The legend names every series: its swatches are in the image, below
	 * the plot area. */
	uint32_t want[] = { 0x0000c0, 0x00c000, 0xc00000, 0xc000c0, 0x00c0c0 };
	for (size_t i = 0; i < 5; i++) {
		int found = 0;
		for (int y = c.area_y1 + 1; y < im.h && !found; y++)
			for (int x = 0; x < im.w && !found; x++)
				found = plot_pixel(&im, x, y) == want[i];
		CHECK(found);
	}
	char path[] = "/tmp/infs-plot-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	CHECK(!plot_write_png(&im, path));
	check_png(path, &im);
	if (getenv("PLOT_KEEP"))
		plot_write_png(&im, getenv("PLOT_KEEP"));
	unlink(path);

	/* A numeric x axis: nice ticks over the data. */
	static const double xs[] = { 0, 0.15, 0.3 };
	plot_chart_init(&c, NULL, NULL, NULL, NULL);
	plot_add(&c, PLOT_LINE, NULL, 0x000000, xs, share, 3);
	CHECK(!plot_draw(&im, &c, 0, 0, 600, 400, &why));
	CHECK(c.x_lo == 0 && fabs(c.x_hi - 0.3) < 1e-12 && c.y_hi[0] == 1);
	CHECK(near(&im, plot_x(&c, 0.075), plot_y(&c, 0, 0.625), 0x000000));

	/* Totals above the piles, with room for them under the top. */
	static const double pile[] = { 3, 30 };
	plot_chart_init(&c, NULL, NULL, NULL, NULL);
	c.categories = cats;
	c.n_categories = 2;
	c.bar_totals = 1;
	plot_add(&c, PLOT_BAR, NULL, 0x0000c0, NULL, pile, 2);
	plot_rect(&im, 0, 0, im.w - 1, im.h - 1, 0xffffff);
	CHECK(!plot_draw(&im, &c, 0, 0, 600, 400, &why));
	CHECK(c.y_hi[0] >= 33);
	for (int k = 0; k < 2; k++) {
		size_t ink = 0;
		int top = plot_y(&c, 0, pile[k]);
		for (int y = top - 2 * 7 * 2; y < top; y++)
			for (int x = plot_x(&c, k) - 60; x <= plot_x(&c, k) + 60; x++)
				ink += plot_pixel(&im, x, y) == 0x202020;
		CHECK(ink > 20);
	}

	/* Misuse. */
	plot_add(&c, PLOT_BAR, "bar", 0, NULL, share, 3);
	CHECK(plot_draw(&im, &c, 0, 0, 600, 400, &why) == -1 && strstr(why, "categories"));
	plot_chart_init(&c, NULL, NULL, NULL, NULL);
	c.categories = cats;
	c.n_categories = 2;
	plot_add(&c, PLOT_LINE, NULL, 0, NULL, share, 3);
	CHECK(plot_draw(&im, &c, 0, 0, 600, 400, &why) == -1 && strstr(why, "more points"));
	c.n_categories = 3;
	CHECK(plot_draw(&im, &c, 0, 0, 60, 40, &why) == -1 && strstr(why, "too small"));
	for (size_t i = c.n_series; i < PLOT_SERIES_MAX; i++)
		CHECK(plot_add(&c, PLOT_LINE, NULL, 0, NULL, NULL, 0));
	CHECK(!plot_add(&c, PLOT_LINE, NULL, 0, NULL, NULL, 0));
	plot_image_free(&im);
}

/* Values at the ends of the doubles: their range overflows, and their
 * pixels lie far outside any image. Drawing ends (SIGALRM would stop a
 * loop over countless ticks or pixels) and the frame is drawn. */
static void test_extremes(void)
{
	static const double x[] = { 1e308, -1e308, 0.5 }, y[] = { -1e308, 1e308, DBL_MAX };
	static const double big[] = { DBL_MAX, DBL_MAX, 1 }, cats_y[] = { 1e308, -1e308, 3 };
	static const char *const cats[] = { "a", "b", "c" };
	plot_image im;
	CHECK(!plot_image_init(&im, 600, 400, 0xffffff));
	alarm(20);
	for (int i = 0; i < 4; i++) {
		plot_chart c;
		const char *why = NULL;
		plot_chart_init(&c, "t", "x", "y", "y2");
		if (i == 0) {
			plot_add(&c, PLOT_LINE, "xy", 0xc00000, x, y, 3)->marker = PLOT_MARK_CIRCLE;
		} else if (i == 1) {
			plot_add(&c, PLOT_LINE, "x", 0xc00000, x, x, 3)->axis = 1;
		} else {
			/* Bars piled past DBL_MAX; totals labelled. */
			c.categories = cats;
			c.n_categories = 3;
			c.bar_totals = 1;
			plot_add(&c, PLOT_BAR, "a", 0x00c000, NULL, i == 2 ? big : cats_y, 3);
			plot_add(&c, PLOT_BAR, "b", 0x0000c0, NULL, big, 3);
			plot_add(&c, PLOT_LINE, "l", 0xc00000, NULL, y, 3)->axis = 1;
		}
		CHECK(!plot_draw(&im, &c, 0, 0, 600, 400, &why));
		CHECK(isfinite(c.x_lo) && isfinite(c.x_hi) && isfinite(c.y_lo[0]) && isfinite(c.y_hi[0]));
		CHECK(c.x_hi > c.x_lo && c.y_hi[0] > c.y_lo[0] && c.y_hi[1] > c.y_lo[1]);
		CHECK(plot_x(&c, 1e308) > -100000 && plot_x(&c, -1e308) < 100000 && plot_y(&c, 0, NAN) == plot_y(&c, 0, NAN));
		CHECK(plot_pixel(&im, c.area_x0, c.area_y0) != 0xffffff);
	}
	alarm(0);
	plot_image_free(&im);
}

int main(void)
{
	test_png();
	test_font();
	test_nice();
	test_chart();
	test_extremes();
	if (check_failures)
		fprintf(stderr, "%d check(s) failed\n", check_failures);
	return check_failures ? 1 : 0;
}

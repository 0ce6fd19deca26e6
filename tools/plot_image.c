/* Images and drawing: filled rectangles and lines, clipped to the image. */
#include "plot.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int plot_image_init(plot_image *im, int w, int h, uint32_t bg)
{
	memset(im, 0, sizeof *im);
	if (w < 1 || h < 1 || w > PLOT_SIDE_MAX || h > PLOT_SIDE_MAX)
		return -1;
	im->rgb = malloc((size_t)w * (size_t)h * 3);
	if (!im->rgb)
		return -1;
	im->w = w;
	im->h = h;
	plot_rect(im, 0, 0, w - 1, h - 1, bg);
	return 0;
}

void plot_image_free(plot_image *im)
{
	free(im->rgb);
	memset(im, 0, sizeof *im);
}

uint32_t plot_pixel(const plot_image *im, int x, int y)
{
	if (x < 0 || y < 0 || x >= im->w || y >= im->h)
		return 0;
	const uint8_t *p = im->rgb + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

void plot_rect(plot_image *im, int x0, int y0, int x1, int y1, uint32_t color)
{
	if (x0 > x1) {
		int t = x0;
		x0 = x1;
		x1 = t;
	}
	if (y0 > y1) {
		int t = y0;
		y0 = y1;
		y1 = t;
	}
	x0 = x0 < 0 ? 0 : x0;
	y0 = y0 < 0 ? 0 : y0;
	x1 = x1 >= im->w ? im->w - 1 : x1;
	y1 = y1 >= im->h ? im->h - 1 : y1;
	for (int y = y0; y <= y1; y++)
		for (int x = x0; x <= x1; x++) {
			uint8_t *p = im->rgb + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
			p[0] = (uint8_t)(color >> 16);
			p[1] = (uint8_t)(color >> 8);
			p[2] = (uint8_t)color;
		}
}

/* Cuts the segment (x0, y0)-(x1, y1) to the box [lo, hi_x] x [lo, hi_y]
 * (Liang and Barsky): 0 when none of it is inside. */
static int clip(double *x0, double *y0, double *x1, double *y1, double lo, double hi_x, double hi_y)
{
	double t0 = 0, t1 = 1, dx = *x1 - *x0, dy = *y1 - *y0;
	const double p[4] = { -dx, dx, -dy, dy }, q[4] = { *x0 - lo, hi_x - *x0, *y0 - lo, hi_y - *y0 };
	for (int i = 0; i < 4; i++) {
		if (p[i] == 0) {
			if (q[i] < 0)
				return 0;
			continue;
		}
		double r = q[i] / p[i];
		if (p[i] < 0 && r > t0)
			t0 = r;
		else if (p[i] > 0 && r < t1)
			t1 = r;
	}
	if (t0 > t1)
		return 0;
	double ax = *x0 + t0 * dx, ay = *y0 + t0 * dy;
	*x1 = *x0 + t1 * dx;
	*y1 = *y0 + t1 * dy;
	*x0 = ax;
	*y0 = ay;
	return 1;
}

/* Bresenham's walk, a width x width brush at each step. A line that leaves
 * the image is cut to it first (its dashes keep their phase), so that its
 * length in steps never exceeds the image's. */
void plot_line(plot_image *im, int x0, int y0, int x1, int y1, int width, int dashed, uint32_t color)
{
	int first = 0;
	const int lo_b = -width, hi_x = im->w - 1 + width, hi_y = im->h - 1 + width;
	if (x0 < lo_b || y0 < lo_b || x1 < lo_b || y1 < lo_b || x0 > hi_x || x1 > hi_x || y0 > hi_y || y1 > hi_y) {
		double ax = x0, ay = y0, bx = x1, by = y1;
		if (!clip(&ax, &ay, &bx, &by, lo_b, hi_x, hi_y))
			return;
		double skipped = fmax(fabs(ax - x0), fabs(ay - y0));
		first = (int)fmod(skipped, 12);
		x0 = (int)lround(ax);
		y0 = (int)lround(ay);
		x1 = (int)lround(bx);
		y1 = (int)lround(by);
	}
	int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
	int err = dx + dy, lo = -(width - 1) / 2, hi = width / 2;
	for (int step = first;; step++) {
		if (!dashed || step % 12 < 8)
			plot_rect(im, x0 + lo, y0 + lo, x0 + hi, y0 + hi, color);
		if (x0 == x1 && y0 == y1)
			break;
		int e2 = 2 * err;
		if (e2 >= dy) {
			err += dy;
			x0 += sx;
		}
		if (e2 <= dx) {
			err += dx;
			y0 += sy;
		}
	}
}

/* Charts: axes with "nice" ticks, a legend, line and stacked bar series and
 * an optional second y axis, laid out in a box of an image. */
#include "plot.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT 2                    /* the scale of all chart text */
#define TEXT_H (PLOT_GLYPH_H * TEXT) /* its height in pixels */
#define CHAR_W ((PLOT_GLYPH_W + 1) * TEXT)
#define PAD 10
#define TICK 5
#define MARK_R 4
#define SWATCH_W 28
#define LEGEND_ROW 22
#define INK 0x202020u
#define FRAME 0x606060u
#define GRID 0xe4e4e4u

double plot_nice_step(double span, int target)
{
	double rough = span / (target > 0 ? target : 1);
	if (!(rough > 0) || !isfinite(rough))
		return 1;
	double mag = pow(10, floor(log10(rough))), r = rough / mag;
	return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
}

/* Ticks on an axis at most; a range that would need more (its ends too
 * far apart for the doubles between them) is not drawn as such. */
#define TICKS_MAX 1000

/* Widens [lo, hi] to whole nice steps; an empty range is widened around its
 * value first. A range beyond doubles (sums of huge values, or ends whose
 * difference overflows) becomes 0..1 rather than NaN pixels or a loop over
 * countless ticks. */
static double nice_range(double *lo, double *hi)
{
	if (!(*hi > *lo)) {
		double d = fabs(*lo) / 2 + 0.5;
		*lo -= d;
		*hi += d;
	}
	double step = plot_nice_step(*hi - *lo, 5);
	*lo = floor(*lo / step + 1e-9) * step;
	*hi = ceil(*hi / step - 1e-9) * step;
	if (!isfinite(*lo) || !isfinite(*hi) || !(*hi > *lo) || !isfinite(*hi - *lo) || (*hi - *lo) / step > TICKS_MAX) {
		*lo = 0;
		*hi = 1;
		step = 0.2;
	}
	return step;
}

/* A tick's label with the decimals its step needs. */
static void tick_label(char *out, size_t n, double v, double step)
{
	int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
	if (fabs(v) < step * 1e-6)
		v = 0; /* not "-0" */
	snprintf(out, n, "%.*f", decimals > 9 ? 9 : decimals, v);
}

void plot_chart_init(plot_chart *c, const char *title, const char *x_title, const char *y_title, const char *y2_title)
{
	memset(c, 0, sizeof *c);
	c->title = title;
	c->x_title = x_title;
	c->y_title = y_title;
	c->y2_title = y2_title;
}

plot_series *plot_add(plot_chart *c, plot_kind kind, const char *name, uint32_t color, const double *x, const double *y,
                      size_t n)
{
	if (c->n_series == PLOT_SERIES_MAX)
		return NULL;
	plot_series *s = &c->series[c->n_series++];
	memset(s, 0, sizeof *s);
	s->kind = kind;
	s->name = name;
	s->color = color;
	s->x = x;
	s->y = y;
	s->n = n;
	return s;
}

/* Pixels are at most this far from the origin: a value far outside the
 * axes lands there, so that no pixel arithmetic can overflow an int. */
#define PIXEL_FAR (1 << 20)

static int pixel(double v)
{
	return !(v > -PIXEL_FAR) ? -PIXEL_FAR : v > PIXEL_FAR ? PIXEL_FAR : (int)lround(v); /* NaN too */
}

int plot_x(const plot_chart *c, double x)
{
	return pixel(c->area_x0 + (x - c->x_lo) / (c->x_hi - c->x_lo) * (c->area_x1 - c->area_x0));
}

int plot_y(const plot_chart *c, int axis, double y)
{
	axis = axis ? 1 : 0;
	return pixel(c->area_y1 - (y - c->y_lo[axis]) / (c->y_hi[axis] - c->y_lo[axis]) * (c->area_y1 - c->area_y0));
}

static double point_x(const plot_chart *c, const plot_series *s, size_t i)
{
	return c->categories || !s->x ? (double)i : s->x[i];
}

/* The bar slots: one per distinct (axis, stack), in order of appearance. */
static size_t bar_slots(const plot_chart *c, int *slot)
{
	size_t n = 0;
	for (size_t i = 0; i < c->n_series; i++) {
		const plot_series *s = &c->series[i];
		slot[i] = -1;
		if (s->kind != PLOT_BAR)
			continue;
		for (size_t j = 0; j < i && slot[i] < 0; j++)
			if (slot[j] >= 0 && c->series[j].axis == s->axis && c->series[j].stack == s->stack)
				slot[i] = slot[j];
		if (slot[i] < 0)
			slot[i] = (int)n++;
	}
	return n;
}

/* Piles up the bars of each category: widens the y ranges (im NULL) or
 * draws them. */
static void bars(plot_image *im, plot_chart *c, const int *slot, size_t n_slots, double *lo, double *hi)
{
	double cat_w = (double)(c->area_x1 - c->area_x0) / (c->x_hi - c->x_lo);
	double group = 0.8 * cat_w, slot_w = n_slots ? group / (double)n_slots : 0;
	int gap = slot_w > 8 ? 2 : 0;
	for (size_t k = 0; k < c->n_categories; k++) {
		double base[PLOT_SERIES_MAX] = { 0 };
		int any[PLOT_SERIES_MAX] = { 0 }, drawn[PLOT_SERIES_MAX];
		for (size_t i = 0; i < c->n_series; i++) {
			const plot_series *s = &c->series[i];
			int a = s->axis ? 1 : 0;
			if (slot[i] < 0 || k >= s->n || !isfinite(s->y[k]))
				continue;
			if (im && !any[slot[i]])
				drawn[slot[i]] = plot_y(c, a, 0);
			any[slot[i]] = 1;
			double top = base[slot[i]] + s->y[k];
			if (!im) {
				lo[a] = top < lo[a] ? top : lo[a];
				hi[a] = top > hi[a] ? top : hi[a];
			} else {
				double left = plot_x(c, (double)k) - group / 2 + slot_w * slot[i];
				int x0 = (int)lround(left) + gap / 2, x1 = (int)lround(left + slot_w) - 1 - gap / 2;
				/* From the row past the pile drawn so far (the axis, or the
				 * parts below) to its top; a part too small to see still
				 * gets a row of its own. */
				int yb = drawn[slot[i]], yt = plot_y(c, a, top), dir = s->y[k] >= 0 ? -1 : 1;
				if (s->y[k] != 0 && (yt - yb) * dir <= 0)
					yt = yb + dir;
				if (yt != yb)
					plot_rect(im, x0, yb + dir, x1, yt, s->color);
				drawn[slot[i]] = yt;
			}
			base[slot[i]] = top;
		}
		for (size_t j = 0; j < n_slots && im && c->bar_totals; j++) {
			if (!any[j])
				continue;
			char label[32];
			double v = base[j];
			snprintf(label, sizeof label, fabs(v) >= 100 ? "%.0f" : fabs(v) >= 10 ? "%.1f" : "%.2f", v);
			int mid = (int)lround(plot_x(c, (double)k) - group / 2 + slot_w * ((double)j + 0.5));
			int tw = plot_text_width(label, TEXT);
			/* above a pile, below one that goes down; none wider than its
			 * bar, which would run into the next one's */
			int y = v >= 0 ? drawn[j] - TEXT_H - 3 : drawn[j] + 3;
			if (tw <= slot_w - gap)
				plot_text(im, mid - tw / 2, y, label, TEXT, 0, INK);
		}
	}
}

static void marker(plot_image *im, int x, int y, plot_marker m, uint32_t color)
{
	for (int dy = -MARK_R - 1; dy <= MARK_R + 1; dy++)
		for (int dx = -MARK_R - 1; dx <= MARK_R + 1; dx++) {
			int in = m == PLOT_MARK_CIRCLE ? dx * dx + dy * dy <= MARK_R * MARK_R + MARK_R
			       : m == PLOT_MARK_SQUARE ? abs(dx) <= MARK_R && abs(dy) <= MARK_R
			       : m == PLOT_MARK_DIAMOND ? abs(dx) + abs(dy) <= MARK_R + 1
			       : m == PLOT_MARK_TRIANGLE ? dy >= -MARK_R && dy <= MARK_R && 2 * abs(dx) <= dy + MARK_R + 1
			       : 0;
			if (in)
				plot_rect(im, x + dx, y + dy, x + dx, y + dy, color);
		}
}

static void line_series(plot_image *im, const plot_chart *c, const plot_series *s)
{
	int have = 0, px = 0, py = 0;
	for (size_t i = 0; i < s->n; i++) {
		double x = point_x(c, s, i);
		if (!isfinite(x) || !isfinite(s->y[i])) {
			have = 0;
			continue;
		}
		int X = plot_x(c, x), Y = plot_y(c, s->axis, s->y[i]);
		if (have && !s->no_line)
			plot_line(im, px, py, X, Y, 2, s->dashed, s->color);
		have = 1;
		px = X;
		py = Y;
	}
	for (size_t i = 0; i < s->n && s->marker; i++)
		if (isfinite(point_x(c, s, i)) && isfinite(s->y[i]))
			marker(im, plot_x(c, point_x(c, s, i)), plot_y(c, s->axis, s->y[i]), s->marker, s->color);
}

/* The legend's entries in rows of at most width pixels: draws them from
 * (x, y) when im is set; returns the number of rows. */
static int legend(plot_image *im, const plot_chart *c, int x, int y, int width)
{
	int rows = 0, at = width;
	for (size_t i = 0; i < c->n_series; i++) {
		const plot_series *s = &c->series[i];
		if (!s->name)
			continue;
		int w = SWATCH_W + 6 + plot_text_width(s->name, TEXT);
		if (at > 0 && at + w > width) {
			rows++;
			at = 0;
		}
		int ex = x + at, ey = y + (rows - 1) * LEGEND_ROW, mid = ey + TEXT_H / 2;
		at += w + 20;
		if (!im)
			continue;
		if (s->kind == PLOT_BAR) {
			plot_rect(im, ex + 7, ey, ex + 7 + TEXT_H - 1, ey + TEXT_H - 1, s->color);
		} else {
			if (!s->no_line)
				plot_line(im, ex, mid, ex + SWATCH_W - 1, mid, 2, s->dashed, s->color);
			marker(im, ex + SWATCH_W / 2, mid, s->marker, s->color);
		}
		plot_text(im, ex + SWATCH_W + 6, ey, s->name, TEXT, 0, INK);
	}
	return rows;
}

/* The intervals between ticks from lo to hi. */
static long n_ticks(double lo, double hi, double step)
{
	return lround((hi - lo) / step);
}

/* The widest label of an axis's ticks. */
static int ticks_width(double lo, double hi, double step)
{
	int w = 0;
	char s[64];
	for (long i = 0; i <= n_ticks(lo, hi, step); i++) {
		tick_label(s, sizeof s, lo + step * (double)i, step);
		int t = plot_text_width(s, TEXT);
		w = t > w ? t : w;
	}
	return w;
}

int plot_draw(plot_image *im, plot_chart *c, int x, int y, int w, int h, const char **why)
{
	int slot[PLOT_SERIES_MAX], axis2 = 0;
	size_t n_slots = bar_slots(c, slot);
	double lo[2] = { 0, 0 }, hi[2] = { 0, 0 }, xlo = INFINITY, xhi = -INFINITY;
	for (size_t i = 0; i < c->n_series; i++) {
		const plot_series *s = &c->series[i];
		int a = s->axis ? 1 : 0;
		axis2 |= a;
		if (s->kind == PLOT_BAR && !c->categories) {
			*why = "plot: bars need categories";
			return -1;
		}
		if (c->categories && s->n > c->n_categories) {
			*why = "plot: a series has more points than there are categories";
			return -1;
		}
		for (size_t j = 0; j < s->n; j++) {
			double px = point_x(c, s, j), py = s->y[j];
			if (!isfinite(px) || !isfinite(py))
				continue;
			xlo = px < xlo ? px : xlo;
			xhi = px > xhi ? px : xhi;
			if (s->kind == PLOT_LINE) {
				lo[a] = py < lo[a] ? py : lo[a];
				hi[a] = py > hi[a] ? py : hi[a];
			}
		}
	}
	double xstep = 1, ystep[2];
	if (c->categories) {
		xlo = -0.5;
		xhi = (double)c->n_categories - 0.5;
	} else {
		if (xlo > xhi)
			xlo = xhi = 0;
		xstep = nice_range(&xlo, &xhi);
	}
	c->x_lo = xlo;
	c->x_hi = xhi;
	bars(NULL, c, slot, n_slots, lo, hi);
	for (int a = 0; a < 2; a++) {
		/* Room for the totals' labels above the highest pile. */
		hi[a] *= c->bar_totals ? 1.1 : 1;
		hi[a] = c->y_cover[a] > hi[a] ? c->y_cover[a] : hi[a];
		ystep[a] = nice_range(&lo[a], &hi[a]);
		c->y_lo[a] = lo[a];
		c->y_hi[a] = hi[a];
	}

	/* The layout: title above; tick labels and axis titles beside; x tick
	 * labels, the x title and the legend below. */
	int legend_w = w - 2 * PAD, rows = legend(NULL, c, 0, 0, legend_w);
	int top = PAD + (c->title ? TEXT_H + 12 : 0);
	int left = PAD + (c->y_title ? TEXT_H + 10 : 0) + ticks_width(lo[0], hi[0], ystep[0]) + TICK + 4;
	int right = axis2 ? TICK + 4 + ticks_width(lo[1], hi[1], ystep[1]) + (c->y2_title ? 10 + TEXT_H : 0) + PAD
	                  : PAD + 2 * CHAR_W;
	int below_axis = TICK + 4 + TEXT_H + (c->x_title ? 10 + TEXT_H : 0);
	int bottom = below_axis + (rows ? 14 + rows * LEGEND_ROW : 0) + PAD;
	c->area_x0 = x + left;
	c->area_x1 = x + w - 1 - right;
	c->area_y0 = y + top;
	c->area_y1 = y + h - 1 - bottom;
	if (c->area_x1 - c->area_x0 < 40 || c->area_y1 - c->area_y0 < 40) {
		*why = "plot: the chart's box is too small for its labels";
		return -1;
	}
	int ax0 = c->area_x0, ax1 = c->area_x1, ay0 = c->area_y0, ay1 = c->area_y1;
	char label[64];

	for (long i = 0; i <= n_ticks(lo[0], hi[0], ystep[0]); i++) {
		int ty = plot_y(c, 0, lo[0] + ystep[0] * (double)i);
		plot_line(im, ax0, ty, ax1, ty, 1, 0, GRID);
	}
	bars(im, c, slot, n_slots, lo, hi);
	for (size_t i = 0; i < c->n_series; i++)
		if (c->series[i].kind == PLOT_LINE)
			line_series(im, c, &c->series[i]);

	/* The frame, the ticks and their labels. */
	plot_line(im, ax0, ay0, ax1, ay0, 1, 0, FRAME);
	plot_line(im, ax0, ay1, ax1, ay1, 1, 0, FRAME);
	plot_line(im, ax0, ay0, ax0, ay1, 1, 0, FRAME);
	plot_line(im, ax1, ay0, ax1, ay1, 1, 0, FRAME);
	for (int a = 0; a < 1 + axis2; a++)
		for (long i = 0; i <= n_ticks(lo[a], hi[a], ystep[a]); i++) {
			double v = lo[a] + ystep[a] * (double)i;
			int ty = plot_y(c, a, v);
			tick_label(label, sizeof label, v, ystep[a]);
			int tw = plot_text_width(label, TEXT);
			plot_line(im, a ? ax1 : ax0 - TICK, ty, a ? ax1 + TICK : ax0, ty, 1, 0, FRAME);
			plot_text(im, a ? ax1 + TICK + 4 : ax0 - TICK - 4 - tw, ty - TEXT_H / 2, label, TEXT, 0, INK);
		}
	int last_right = INT_MIN / 2;
	size_t n_xt = c->categories ? c->n_categories : (size_t)n_ticks(xlo, xhi, xstep) + 1;
	for (size_t i = 0; i < n_xt; i++) {
		double v = c->categories ? (double)i : xlo + xstep * (double)i;
		if (c->categories)
			snprintf(label, sizeof label, "%s", c->categories[i]);
		else
			tick_label(label, sizeof label, v, xstep);
		int tx = plot_x(c, v), tw = plot_text_width(label, TEXT);
		plot_line(im, tx, ay1, tx, ay1 + TICK, 1, 0, FRAME);
		if (tx - tw / 2 < last_right + CHAR_W)
			continue; /* no room: the label would overlap the one before */
		plot_text(im, tx - tw / 2, ay1 + TICK + 4, label, TEXT, 0, INK);
		last_right = tx - tw / 2 + tw;
	}

	/* Titles and the legend. */
	if (c->title)
		plot_text(im, x + (w - plot_text_width(c->title, TEXT)) / 2, y + PAD, c->title, TEXT, 0, INK);
	if (c->y_title)
		plot_text(im, x + PAD, (ay0 + ay1 - plot_text_width(c->y_title, TEXT)) / 2, c->y_title, TEXT, 1, INK);
	if (axis2 && c->y2_title)
		plot_text(im, x + w - PAD - TEXT_H, (ay0 + ay1 - plot_text_width(c->y2_title, TEXT)) / 2, c->y2_title, TEXT,
		          1, INK);
	if (c->x_title)
		plot_text(im, (ax0 + ax1 - plot_text_width(c->x_title, TEXT)) / 2, ay1 + TICK + 4 + TEXT_H + 10, c->x_title,
		          TEXT, 0, INK);
	legend(im, c, x + PAD, ay1 + below_axis + 14, legend_w);
	return 0;
}

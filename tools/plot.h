/* The command-line tool's chart renderer (plot_image.c, plot_font.c,
 * plot_png.c, plot_chart.c): an RGB image, lines, rectangles
 * and text in a built-in 5x7 bitmap font (ASCII 32..126), charts with axes,
 * "nice" ticks, a legend, line and stacked bar series and an optional second
 * y axis, written as PNG (8-bit RGB, deflated by zlib). No anti-aliasing.
 * Colours are 0xRRGGBB. */
#ifndef PLOT_H
#define PLOT_H

#include <stddef.h>
#include <stdint.h>

/* Images are at most this many pixels wide and high. */
#define PLOT_SIDE_MAX 8192

typedef struct plot_image {
	int w, h;
	uint8_t *rgb; /* h rows of w pixels, 3 bytes each, the top row first */
} plot_image;

/* A w x h image filled with bg: 0, or -1 when a side is not 1..PLOT_SIDE_MAX
 * or memory is short. Free it with plot_image_free. */
int plot_image_init(plot_image *im, int w, int h, uint32_t bg);
void plot_image_free(plot_image *im);
/* The colour at (x, y), or 0 outside the image. */
uint32_t plot_pixel(const plot_image *im, int x, int y);

/* Drawing, clipped to the image. A filled rectangle, corners included in
 * any order; a line width pixels wide (dashed: 8 on, 4 off). */
void plot_rect(plot_image *im, int x0, int y0, int x1, int y1, uint32_t color);
void plot_line(plot_image *im, int x0, int y0, int x1, int y1, int width, int dashed, uint32_t color);

/* The font's cell: 5 columns by 9 rows, 7 above the baseline and 2 for
 * descenders; a character of scale s takes (PLOT_GLYPH_W + 1) * s pixels
 * across (a column of space after it). */
#define PLOT_GLYPH_W 5
#define PLOT_GLYPH_H 9

/* Text scale times the font's size: 7 * scale high, plot_text_width wide.
 * Horizontal text has its top-left corner at (x, y); vertical text reads
 * upwards (turned a quarter counter-clockwise), its box's top-left corner
 * at (x, y). Bytes outside 32..126 are drawn as '?'. */
int plot_text_width(const char *s, int scale);
void plot_text(plot_image *im, int x, int y, const char *s, int scale, int vertical, uint32_t color);

/* Writes im to path as a PNG: 0, or -1 with errno set. */
int plot_write_png(const plot_image *im, const char *path);

/* The step of "nice" ticks (1, 2 or 5 times a power of ten) that cuts span
 * into about target intervals. */
double plot_nice_step(double span, int target);

typedef enum plot_kind { PLOT_LINE, PLOT_BAR } plot_kind;
typedef enum plot_marker { PLOT_MARK_NONE, PLOT_MARK_CIRCLE, PLOT_MARK_SQUARE, PLOT_MARK_DIAMOND, PLOT_MARK_TRIANGLE } plot_marker;

typedef struct plot_series {
	const char *name; /* its legend entry; NULL: none */
	uint32_t color;
	plot_kind kind;
	plot_marker marker; /* LINE: drawn at each point */
	int no_line;        /* LINE: markers only */
	int dashed;         /* LINE */
	int axis;           /* 0: the left y axis; 1: the right one */
	int stack;          /* BAR: the bars of one (axis, stack) pile up in series
	                     * order; different stacks stand side by side */
	const double *x;    /* n x values (NULL: 0..n-1); ignored on categories */
	const double *y;    /* n y values; a NaN is skipped (a gap in a line) */
	size_t n;           /* 0: only a legend entry */
} plot_series;

#define PLOT_SERIES_MAX 64

typedef struct plot_chart {
	const char *title, *x_title, *y_title, *y2_title; /* each may be NULL */
	/* Set: x is categorical, point i of every series at category i (bars
	 * need categories). NULL: x is numeric. */
	const char *const *categories;
	size_t n_categories;
	plot_series series[PLOT_SERIES_MAX];
	size_t n_series;
	int bar_totals;     /* each pile of bars labelled with its total above it,
	                     * where the label is no wider than the bar */
	double y_cover[2];  /* the y axes reach at least these values (0: the data decide) */
	/* Set by plot_draw: the plot area in pixels, edges included, and the
	 * ranges of x and of the two y axes (both y ranges include 0). */
	int area_x0, area_y0, area_x1, area_y1;
	double x_lo, x_hi, y_lo[2], y_hi[2];
} plot_chart;

/* An empty chart with these titles (NULL for none). */
void plot_chart_init(plot_chart *c, const char *title, const char *x_title, const char *y_title, const char *y2_title);
/* Adds a series of n points (x, y as in plot_series; the arrays must live
 * until plot_draw) with defaults for the rest: returns it to be adjusted,
 * or NULL when the chart holds PLOT_SERIES_MAX already. */
plot_series *plot_add(plot_chart *c, plot_kind kind, const char *name, uint32_t color, const double *x, const double *y,
                      size_t n);

/* Draws c into the w x h box of im at (x, y): title, axes, grid, bars,
 * lines, the legend under the x axis. Returns 0, or -1 with *why set when
 * a bar series has no categories, a series has more points than there are
 * categories, or the box is too small. */
int plot_draw(plot_image *im, plot_chart *c, int x, int y, int w, int h, const char **why);
/* Where x, and y on axis (0 or 1), fall in pixels after plot_draw. */
int plot_x(const plot_chart *c, double x);
int plot_y(const plot_chart *c, int axis, double y);

#endif

/* Line charts with cairo. Axes get "nice" ticks (1, 2 or 5 times a power
 * of ten), each series a look of its own (series_style.c), the legend a
 * place where it hides no data (legend.c), and the file is written whole
 * or not at all: a full disk leaves no empty or truncated image behind. */
#include "plot/chart.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cairo-svg.h>
#include <cairo.h>

#include "io/atomic_file.h"
#include "plot/axis.h"
#include "plot/legend.h"
#include "plot/series_style.h"

#define PANEL_W 640.0
#define PANEL_H 420.0
#define LEGEND_ROW 16.0
#define LEGEND_SWATCH 34.0 /* the line sample and the gap before the label */
#define FONT "sans-serif"

void pt_chart_range(const pt_panel *p, int axis_y, double *lo, double *hi) {
  *lo = INFINITY;
  *hi = -INFINITY;
  for (int s = 0; s < p->nseries; s++)
    for (int i = 0; i < p->series[s].n; i++) {
      const double v = axis_y ? p->series[s].y[i] : p->series[s].x[i];
      if (!isfinite(v)) continue;
      if (v < *lo) *lo = v;
      if (v > *hi) *hi = v;
    }
  if (!isfinite(*lo)) *lo = 0, *hi = 1;
  const int from_zero = axis_y ? p->y_from_zero : p->x_from_zero;
  if (from_zero && *lo > 0) *lo = 0;
  /* A flat series gets a span of its own: 1, or a hundredth of the value
   * where 1 would vanish in its rounding (a diverged loss of 1e16). */
  if (*hi - *lo < 1e-12 * fmax(1.0, fabs(*lo))) *hi = *lo + fmax(1.0, fabs(*lo) * 0.01);
  /* A margin of 5% each side, so that no point or marker sits on the
   * frame (a target line at the lowest accuracy would vanish into it);
   * none below an axis that starts at 0 by design. The ticks fall inside
   * at round values; the ends need not be round. */
  const double pad = 0.05 * (*hi - *lo);
  if (!(from_zero && *lo == 0)) *lo -= pad;
  *hi += pad;
}

static void text(cairo_t *cr, double x, double y, const char *s, double align_x, double align_y) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  cairo_move_to(cr, x - e.width * align_x - e.x_bearing, y - e.height * align_y - e.y_bearing);
  cairo_show_text(cr, s);
}

/* A panel's plot area and data range, as drawn and as the legend is
 * placed against. */
static pt_chart_frame frame_of(const pt_panel *p, double ox) {
  pt_chart_frame f = {.L = ox + 70, .R = ox + PANEL_W - 20, .T = 40, .B = PANEL_H - 55};
  pt_chart_range(p, 0, &f.x0, &f.x1);
  pt_chart_range(p, 1, &f.y0, &f.y1);
  return f;
}

/* Where a panel's legend goes and how it is laid out: a column inside the
 * plot area, or below it in as many columns as the panel's width holds. */
typedef struct {
  pt_legend_where where;
  double x, y;       /* top left of the first entry's box */
  double col_w;      /* one entry: swatch and the longest label */
  int cols, rows;
  double height;     /* below the plot: the pixels it adds to the panel */
} legend_plan;

static legend_plan plan_legend(cairo_t *cr, const pt_panel *p, double ox) {
  legend_plan lp = {.where = PT_LEGEND_UPPER_LEFT, .cols = 1};
  if (!p->nseries) return lp;
  cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 11);
  double lw = 0;
  for (int s = 0; s < p->nseries; s++) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, p->series[s].label, &e);
    if (e.x_advance > lw) lw = e.x_advance;
  }
  lp.col_w = lw + LEGEND_SWATCH + 8;
  const pt_chart_frame f = frame_of(p, ox);
  lp.rows = p->nseries;
  lp.where = pt_legend_place(p, &f, lp.col_w, LEGEND_ROW * p->nseries + 6, &lp.x, &lp.y);
  if (lp.where == PT_LEGEND_BELOW) {
    const double avail = PANEL_W - 40;
    lp.cols = (int)(avail / lp.col_w);
    if (lp.cols < 1) lp.cols = 1;
    if (lp.cols > p->nseries) lp.cols = p->nseries;
    lp.rows = (p->nseries + lp.cols - 1) / lp.cols;
    lp.x = ox + 20;
    lp.y = PANEL_H - 4;
    lp.height = LEGEND_ROW * lp.rows + 8;
  }
  return lp;
}

static void mark(cairo_t *cr, pt_mark_shape shape, double x, double y) {
  switch (shape) {
    case PT_MARK_CIRCLE: cairo_arc(cr, x, y, 3.0, 0, 2 * M_PI); break;
    case PT_MARK_SQUARE: cairo_rectangle(cr, x - 2.8, y - 2.8, 5.6, 5.6); break;
    case PT_MARK_TRIANGLE:
      cairo_move_to(cr, x, y - 3.6);
      cairo_line_to(cr, x + 3.4, y + 2.6);
      cairo_line_to(cr, x - 3.4, y + 2.6);
      cairo_close_path(cr);
      break;
    case PT_MARK_NONE: return;
  }
  cairo_fill(cr);
}

static void use_style(cairo_t *cr, const pt_series_style *st) {
  cairo_set_source_rgb(cr, st->rgb[0], st->rgb[1], st->rgb[2]);
  cairo_set_line_width(cr, st->width);
  cairo_set_dash(cr, st->dash, st->ndash, 0);
}

static void draw_panel(cairo_t *cr, const pt_panel *p, double ox, const legend_plan *lp) {
  const pt_chart_frame fr = frame_of(p, ox);
  const double L = fr.L, R = fr.R, T = fr.T, B = fr.B;
  const double x0 = fr.x0, x1 = fr.x1, y0 = fr.y0, y1 = fr.y1;
  const double sx = (R - L) / (x1 - x0), sy = (B - T) / (y1 - y0);
  cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  /* grid and ticks */
  cairo_set_line_width(cr, 1.0);
  cairo_set_font_size(cr, 11);
  char buf[32];
  const double x_step = pt_axis_step(x1 - x0), ys = pt_axis_step(y1 - y0);
  const double xs = p->x_whole && x_step < 1 ? 1 : x_step; /* workers come whole */
  double fx, fy;
  const int nx = pt_axis_ticks(x0, x1, xs, &fx), ny = pt_axis_ticks(y0, y1, ys, &fy);
  for (int k = 0; k < nx; k++) {
    const double v = (fx + k) * xs;
    const double X = L + (v - x0) * sx;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, X, T);
    cairo_line_to(cr, X, B);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    pt_axis_label(buf, sizeof buf, v, xs);
    text(cr, X, B + 6, buf, 0.5, 0.0);
  }
  for (int k = 0; k < ny; k++) {
    const double v = (fy + k) * ys;
    const double Y = B - (v - y0) * sy;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, L, Y);
    cairo_line_to(cr, R, Y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    pt_axis_label(buf, sizeof buf, v, ys);
    text(cr, L - 6, Y, buf, 1.0, 0.5);
  }
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  cairo_rectangle(cr, L, T, R - L, B - T);
  cairo_stroke(cr);
  /* labels */
  cairo_set_font_size(cr, 14);
  text(cr, (L + R) / 2, 14, p->title, 0.5, 0.0);
  cairo_set_font_size(cr, 12);
  text(cr, (L + R) / 2, PANEL_H - 22, p->xlabel, 0.5, 0.0);
  cairo_save(cr);
  cairo_translate(cr, ox + 16, (T + B) / 2);
  cairo_rotate(cr, -M_PI / 2);
  text(cr, 0, 0, p->ylabel, 0.5, 0.5);
  cairo_restore(cr);
  /* series, clipped to the plot area */
  cairo_save(cr);
  cairo_rectangle(cr, L, T, R - L, B - T);
  cairo_clip(cr);
  for (int s = 0, k = 0; s < p->nseries; s++) {
    const pt_series *se = &p->series[s];
    pt_series_style st;
    pt_series_style_of(se->dashed ? 0 : se->style ? se->style - 1 : k++, se->dashed, &st);
    use_style(cr, &st);
    int pen = 0;
    for (int i = 0; i < se->n; i++) {
      if (!isfinite(se->x[i]) || !isfinite(se->y[i])) {
        pen = 0;
        continue;
      }
      const double X = L + (se->x[i] - x0) * sx, Y = B - (se->y[i] - y0) * sy;
      if (pen) cairo_line_to(cr, X, Y);
      else cairo_move_to(cr, X, Y);
      pen = 1;
    }
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    for (int i = 0; i < se->n; i++)
      if (isfinite(se->x[i]) && isfinite(se->y[i])) mark(cr, st.mark, L + (se->x[i] - x0) * sx, B - (se->y[i] - y0) * sy);
  }
  cairo_restore(cr);
  /* the legend, where plan_legend found room: each entry a sample of its
   * line, dash and marker included, so it names exactly one series */
  if (!p->nseries) return;
  cairo_set_font_size(cr, 11);
  if (lp->where != PT_LEGEND_BELOW) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, lp->x, lp->y, lp->col_w, LEGEND_ROW * p->nseries + 6);
    cairo_fill(cr);
  }
  for (int s = 0, k = 0; s < p->nseries; s++) {
    const pt_series *se = &p->series[s];
    pt_series_style st;
    pt_series_style_of(se->dashed ? 0 : se->style ? se->style - 1 : k++, se->dashed, &st);
    const int col = lp->where == PT_LEGEND_BELOW ? s % lp->cols : 0;
    const int row = lp->where == PT_LEGEND_BELOW ? s / lp->cols : s;
    const double X = lp->x + col * lp->col_w + 6, Y = lp->y + 3 + LEGEND_ROW * row + LEGEND_ROW / 2;
    use_style(cr, &st);
    cairo_move_to(cr, X, Y);
    cairo_line_to(cr, X + 24, Y);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    mark(cr, st.mark, X + 12, Y);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text(cr, X + 30, Y, se->label, 0.0, 0.5);
  }
}

static int ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

/* cairo's output, into the atomic file. After the first failure nothing
 * more is written, so the message says what failed first (a full disk). */
typedef struct {
  pt_atomic_file *file;
  int failed;
} sink;

static cairo_status_t to_sink(void *closure, const unsigned char *data, unsigned int length) {
  sink *k = closure;
  if (k->failed) return CAIRO_STATUS_WRITE_ERROR;
  if (pt_atomic_file_write(k->file, data, length) != PT_OK) {
    k->failed = 1;
    return CAIRO_STATUS_WRITE_ERROR;
  }
  return CAIRO_STATUS_SUCCESS;
}

pt_status pt_figure_write(const pt_figure *f, const char *path) {
  const int svg = ends_with(path, ".svg"), png = ends_with(path, ".png");
  if (!svg && !png) return pt_fail(PT_ERR_ARG, "%s: expected a file name ending in .png or .svg", path);
  if (f->npanels < 1 || f->npanels > PT_CHART_MAX_PANELS)
    return pt_fail(PT_ERR_ARG, "%s: a figure of %d panels (expected 1 to %d)", path, f->npanels, PT_CHART_MAX_PANELS);
  /* The legends first, measured on a scratch surface: one that goes below
   * its plot makes the figure taller. */
  legend_plan plans[PT_CHART_MAX_PANELS];
  double extra = 0;
  cairo_surface_t *scratch = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t *m = cairo_create(scratch);
  for (int i = 0; i < f->npanels; i++) {
    plans[i] = plan_legend(m, &f->panels[i], PANEL_W * i);
    if (plans[i].height > extra) extra = plans[i].height;
  }
  cairo_destroy(m);
  cairo_surface_destroy(scratch);
  const double w = PANEL_W * f->npanels, h = PANEL_H + extra;

  pt_atomic_file *file;
  PT_TRY(pt_atomic_file_open(path, &file));
  sink k = {file, 0};
  cairo_surface_t *surf = svg ? cairo_svg_surface_create_for_stream(to_sink, &k, w, h)
                              : cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)w, (int)h);
  if (cairo_surface_status(surf) != CAIRO_STATUS_SUCCESS) {
    pt_status st = pt_fail(PT_ERR_IO, "%s: cannot create the image: %s", path,
                           cairo_status_to_string(cairo_surface_status(surf)));
    cairo_surface_destroy(surf);
    pt_atomic_file_abort(file);
    return st;
  }
  cairo_t *cr = cairo_create(surf);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  for (int i = 0; i < f->npanels; i++) draw_panel(cr, &f->panels[i], PANEL_W * i, &plans[i]);
  cairo_status_t cs = cairo_status(cr);
  cairo_destroy(cr);
  if (png && cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_write_to_png_stream(surf, to_sink, &k);
  cairo_surface_finish(surf); /* the SVG's end is written here */
  if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_status(surf);
  cairo_surface_destroy(surf);
  if (k.failed) { /* the file's own message stands: the path and the errno */
    pt_atomic_file_abort(file);
    return PT_ERR_IO;
  }
  if (cs != CAIRO_STATUS_SUCCESS) {
    pt_atomic_file_abort(file);
    return pt_fail(PT_ERR_IO, "%s: cannot write the image: %s", path, cairo_status_to_string(cs));
  }
  return pt_atomic_file_commit(file);
}

/* Line charts with cairo. Axes get "nice" ticks (1, 2 or 5 times a power
 * of ten), the series a fixed colour order, a legend in the upper left,
 * and a reference series is drawn dashed and grey. */
#include "plot/chart.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cairo-svg.h>
#include <cairo.h>

#define PANEL_W 640.0
#define PANEL_H 420.0

static const double colours[][3] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17}, {0.84, 0.15, 0.16},
                                    {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}};

/* A step of 1, 2 or 5 times a power of ten giving about 5 ticks over span. */
static double nice_step(double span) {
  if (!(span > 0)) return 1.0;
  const double raw = span / 5.0, p = pow(10.0, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * p;
}

static void range(const pt_panel *p, int axis_y, double *lo, double *hi) {
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
  if (axis_y && p->y_from_zero && *lo > 0) *lo = 0;
  if (*hi - *lo < 1e-12) *hi = *lo + 1;
  const double step = nice_step(*hi - *lo);
  *lo = floor(*lo / step) * step;
  *hi = ceil(*hi / step) * step;
}

static void text(cairo_t *cr, double x, double y, const char *s, double align_x, double align_y) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  cairo_move_to(cr, x - e.width * align_x - e.x_bearing, y - e.height * align_y - e.y_bearing);
  cairo_show_text(cr, s);
}

static void tick_label(char *buf, size_t len, double v, double step) {
  if (fabs(v) < step * 1e-9) v = 0;
  const int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
  if (fabs(v) >= 1e5) snprintf(buf, len, "%.3g", v);
  else snprintf(buf, len, "%.*f", decimals, v);
}

static void draw_panel(cairo_t *cr, const pt_panel *p, double ox) {
  const double L = ox + 70, R = ox + PANEL_W - 20, T = 40, B = PANEL_H - 55;
  double x0, x1, y0, y1;
  range(p, 0, &x0, &x1);
  range(p, 1, &y0, &y1);
  const double sx = (R - L) / (x1 - x0), sy = (B - T) / (y1 - y0);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  /* grid and ticks */
  cairo_set_line_width(cr, 1.0);
  cairo_set_font_size(cr, 11);
  char buf[32];
  const double xs = nice_step(x1 - x0), ys = nice_step(y1 - y0);
  for (double v = x0; v <= x1 + xs * 1e-9; v += xs) {
    const double X = L + (v - x0) * sx;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, X, T);
    cairo_line_to(cr, X, B);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    tick_label(buf, sizeof buf, v, xs);
    text(cr, X, B + 6, buf, 0.5, 0.0);
  }
  for (double v = y0; v <= y1 + ys * 1e-9; v += ys) {
    const double Y = B - (v - y0) * sy;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, L, Y);
    cairo_line_to(cr, R, Y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    tick_label(buf, sizeof buf, v, ys);
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
  for (int s = 0, c = 0; s < p->nseries; s++) {
    const pt_series *se = &p->series[s];
    const double *col = se->dashed ? colours[7] : colours[c++ % 7];
    cairo_set_source_rgb(cr, col[0], col[1], col[2]);
    cairo_set_line_width(cr, se->dashed ? 1.5 : 2.0);
    const double dash[] = {6.0, 4.0};
    cairo_set_dash(cr, dash, se->dashed ? 2 : 0, 0);
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
    if (!se->dashed)
      for (int i = 0; i < se->n; i++)
        if (isfinite(se->x[i]) && isfinite(se->y[i])) {
          cairo_arc(cr, L + (se->x[i] - x0) * sx, B - (se->y[i] - y0) * sy, 3.0, 0, 2 * M_PI);
          cairo_fill(cr);
        }
  }
  cairo_restore(cr);
  /* legend, on a veil so that lines under it do not hide it */
  cairo_set_font_size(cr, 11);
  double lw = 0;
  for (int s = 0; s < p->nseries; s++) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, p->series[s].label, &e);
    if (e.x_advance > lw) lw = e.x_advance;
  }
  if (p->nseries) {
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_rectangle(cr, L + 4, T + 4, lw + 34, 16.0 * p->nseries + 6);
    cairo_fill(cr);
  }
  for (int s = 0, c = 0; s < p->nseries; s++) {
    const pt_series *se = &p->series[s];
    const double *col = se->dashed ? colours[7] : colours[c++ % 7];
    const double Y = T + 14 + 16 * s;
    cairo_set_source_rgb(cr, col[0], col[1], col[2]);
    cairo_rectangle(cr, L + 10, Y - 5, 14, 3);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text(cr, L + 30, Y - 3, se->label, 0.0, 0.5);
  }
}

static int ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

pt_status pt_figure_write(const pt_figure *f, const char *path) {
  const int svg = ends_with(path, ".svg"), png = ends_with(path, ".png");
  if (!svg && !png) return pt_fail(PT_ERR_ARG, "%s: expected a file name ending in .png or .svg", path);
  if (f->npanels < 1 || f->npanels > PT_CHART_MAX_PANELS)
    return pt_fail(PT_ERR_ARG, "%s: a figure of %d panels (expected 1 to %d)", path, f->npanels, PT_CHART_MAX_PANELS);
  const double w = PANEL_W * f->npanels, h = PANEL_H;
  cairo_surface_t *surf =
      svg ? cairo_svg_surface_create(path, w, h) : cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)w, (int)h);
  if (cairo_surface_status(surf) != CAIRO_STATUS_SUCCESS) {
    pt_status st = pt_fail(PT_ERR_IO, "%s: cannot create the image: %s", path,
                           cairo_status_to_string(cairo_surface_status(surf)));
    cairo_surface_destroy(surf);
    return st;
  }
  cairo_t *cr = cairo_create(surf);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  for (int i = 0; i < f->npanels; i++) draw_panel(cr, &f->panels[i], PANEL_W * i);
  cairo_status_t cs = cairo_status(cr);
  cairo_destroy(cr);
  if (png && cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_write_to_png(surf, path);
  cairo_surface_finish(surf); /* the SVG is written here */
  if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_status(surf);
  cairo_surface_destroy(surf);
  if (cs != CAIRO_STATUS_SUCCESS) return pt_fail(PT_ERR_IO, "%s: cannot write the image: %s", path, cairo_status_to_string(cs));
  return PT_OK;
}

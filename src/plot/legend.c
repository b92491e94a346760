/* Legend placement: each corner of the plot area is tried against every
 * segment of every series, in pixels, as they will be drawn. */
#include "plot/legend.h"

#include <math.h>

typedef struct {
  double x0, y0, x1, y1;
} box;

static int point_in(const box *b, double x, double y) { return x >= b->x0 && x <= b->x1 && y >= b->y0 && y <= b->y1; }

/* Whether the segment from (ax, ay) to (bx, by) meets the box: Liang and
 * Barsky's clipping, which is exact, where sampling points along the line
 * could step over a corner of the box. */
static int segment_meets(const box *b, double ax, double ay, double bx, double by) {
  const double dx = bx - ax, dy = by - ay;
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {ax - b->x0, b->x1 - ax, ay - b->y0, b->y1 - ay};
  double t0 = 0.0, t1 = 1.0;
  for (int i = 0; i < 4; i++) {
    if (p[i] == 0.0) {
      if (q[i] < 0) return 0; /* parallel to this edge and outside it */
      continue;
    }
    const double t = q[i] / p[i];
    if (p[i] < 0) {
      if (t > t1) return 0;
      if (t > t0) t0 = t;
    } else {
      if (t < t0) return 0;
      if (t < t1) t1 = t;
    }
  }
  return t0 <= t1;
}

/* Whether any of p's data, as drawn in frame f, lies in b: its points
 * (markers) and the lines between consecutive finite ones. */
static int covers_data(const pt_panel *p, const pt_chart_frame *f, const box *b) {
  const double sx = (f->R - f->L) / (f->x1 - f->x0), sy = (f->B - f->T) / (f->y1 - f->y0);
  for (int s = 0; s < p->nseries; s++) {
    const pt_series *se = &p->series[s];
    int pen = 0;
    double px = 0, py = 0;
    for (int i = 0; i < se->n; i++) {
      if (!isfinite(se->x[i]) || !isfinite(se->y[i])) {
        pen = 0;
        continue;
      }
      const double X = f->L + (se->x[i] - f->x0) * sx, Y = f->B - (se->y[i] - f->y0) * sy;
      if (point_in(b, X, Y)) return 1;
      if (pen && segment_meets(b, px, py, X, Y)) return 1;
      px = X, py = Y, pen = 1;
    }
  }
  return 0;
}

pt_legend_where pt_legend_place(const pt_panel *p, const pt_chart_frame *f, double w, double h, double *x,
                                double *y) {
  const double inset = 4.0;
  *x = f->L + inset;
  *y = f->T + inset;
  if (!(f->x1 > f->x0) || !(f->y1 > f->y0) || w + 2 * inset > f->R - f->L || h + 2 * inset > f->B - f->T)
    return PT_LEGEND_BELOW;
  for (int c = PT_LEGEND_UPPER_LEFT; c <= PT_LEGEND_LOWER_LEFT; c++) {
    const int right = c == PT_LEGEND_UPPER_RIGHT || c == PT_LEGEND_LOWER_RIGHT;
    const int lower = c == PT_LEGEND_LOWER_RIGHT || c == PT_LEGEND_LOWER_LEFT;
    const double bx = right ? f->R - inset - w : f->L + inset, by = lower ? f->B - inset - h : f->T + inset;
    const box b = {bx - PT_LEGEND_MARGIN, by - PT_LEGEND_MARGIN, bx + w + PT_LEGEND_MARGIN, by + h + PT_LEGEND_MARGIN};
    if (!covers_data(p, f, &b)) {
      *x = bx;
      *y = by;
      return (pt_legend_where)c;
    }
  }
  return PT_LEGEND_BELOW;
}

/* Where a panel's legend goes: inside the plot area where it hides none of
 * the data, else below the plot, where it hides nothing. A legend drawn
 * over the lines, even on a veil, hides the points a reader looks for. */
#ifndef PT_PLOT_LEGEND_H
#define PT_PLOT_LEGEND_H

#include "plot/chart.h"

/* The plot area in pixels (left, right, top, bottom) and the data range
 * it shows, x0..x1 left to right and y0..y1 bottom to top. */
typedef struct {
  double L, R, T, B;
  double x0, x1, y0, y1;
} pt_chart_frame;

typedef enum {
  PT_LEGEND_UPPER_LEFT,
  PT_LEGEND_UPPER_RIGHT,
  PT_LEGEND_LOWER_RIGHT,
  PT_LEGEND_LOWER_LEFT,
  PT_LEGEND_BELOW
} pt_legend_where;

/* Pixels kept between the legend and any data: a marker's radius and the
 * width of a line, with room to spare. */
#define PT_LEGEND_MARGIN 5.0

/* The first corner of f's plot area, in the order of pt_legend_where, where
 * a legend of w x h pixels would cover none of p's points or the lines
 * between them, with its top left corner in *x, *y; PT_LEGEND_BELOW where
 * every corner would (or the legend does not fit inside at all). */
pt_legend_where pt_legend_place(const pt_panel *p, const pt_chart_frame *f, double w, double h, double *x,
                                double *y);

#endif

/* Line charts as PNG or SVG, drawn with cairo: what ptrain scale's report
 * and ptrain plot draw (speed-up against workers, loss and accuracy
 * against time). A figure is one or more panels side by side. */
#ifndef PT_PLOT_CHART_H
#define PT_PLOT_CHART_H

#include "util/error.h"

#define PT_CHART_MAX_SERIES 16
#define PT_CHART_MAX_PANELS 2

typedef struct {
  char label[96];
  const double *x, *y; /* n points; NaN y values are gaps */
  int n;
  int dashed; /* a reference line (the ideal speed-up) */
  int style;  /* 1 + the look to draw it with (pt_series_style_of); 0: the panel's next */
} pt_series;

typedef struct {
  char title[128], xlabel[64], ylabel[64];
  pt_series series[PT_CHART_MAX_SERIES];
  int nseries;
  int y_from_zero; /* the y axis starts at 0 */
  int x_from_zero; /* the x axis starts at 0 (time since the start) */
  int x_whole;     /* x counts things (workers): ticks at whole numbers */
} pt_panel;

typedef struct {
  pt_panel panels[PT_CHART_MAX_PANELS];
  int npanels;
} pt_figure;

/* The span a panel's axis shows (axis_y: the y axis): its series' finite
 * values with a margin of 5% each side, or from 0 where the panel says so. */
void pt_chart_range(const pt_panel *p, int axis_y, double *lo, double *hi);

/* Writes f to path, as SVG where path ends in ".svg" and PNG where it ends
 * in ".png" (anything else is refused); the series' data are only read. */
pt_status pt_figure_write(const pt_figure *f, const char *path);

#endif

/* How a chart tells its series apart: a colour, and once the colours run
 * out a dash pattern and a marker shape as well, so that no two of a
 * figure's series look the same. Reference lines (the ideal speed-up, a
 * target) are grey and dashed, a look no data series gets. */
#ifndef PT_PLOT_SERIES_STYLE_H
#define PT_PLOT_SERIES_STYLE_H

typedef enum { PT_MARK_CIRCLE, PT_MARK_SQUARE, PT_MARK_TRIANGLE, PT_MARK_NONE } pt_mark_shape;

typedef struct {
  double rgb[3];
  const double *dash; /* on/off lengths in pixels; ndash 0: solid */
  int ndash;
  pt_mark_shape mark;
  double width;
} pt_series_style;

/* Distinct colours before any repeats. */
#define PT_STYLE_NCOLOURS 9

/* The style of the k-th data series (k from 0), or of a reference line. */
void pt_series_style_of(int k, int reference, pt_series_style *out);

#endif

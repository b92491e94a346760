/* Series styles. The colours are the usual ten-colour palette without its
 * grey, which reference lines keep; a figure has up to 16 series (ptrain
 * plot's eight runs, train and test each), so after nine colours the
 * cycle starts again with a dash pattern and another marker: colour alone
 * would show two blue lines that a reader cannot tell apart. */
#include "plot/series_style.h"

static const double colours[PT_STYLE_NCOLOURS][3] = {
    {0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17}, {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74},
    {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.74, 0.74, 0.13}, {0.09, 0.75, 0.81}};

/* Each cycle of colours: a line pattern and a marker of its own. The
 * reference lines' 6-4 dash is none of them. */
static const double dash_long[] = {9.0, 3.0}, dash_dot[] = {2.0, 2.5};
static const struct {
  const double *dash;
  int ndash;
  pt_mark_shape mark;
} cycles[] = {{0, 0, PT_MARK_CIRCLE}, {dash_long, 2, PT_MARK_SQUARE}, {dash_dot, 2, PT_MARK_TRIANGLE}};

static const double reference_dash[] = {6.0, 4.0};

void pt_series_style_of(int k, int reference, pt_series_style *out) {
  if (reference) {
    *out = (pt_series_style){{0.50, 0.50, 0.50}, reference_dash, 2, PT_MARK_NONE, 1.5};
    return;
  }
  if (k < 0) k = 0;
  const int ncycles = (int)(sizeof cycles / sizeof cycles[0]);
  const double *c = colours[k % PT_STYLE_NCOLOURS];
  const int cy = (k / PT_STYLE_NCOLOURS) % ncycles;
  *out = (pt_series_style){{c[0], c[1], c[2]}, cycles[cy].dash, cycles[cy].ndash, cycles[cy].mark, 2.0};
}

#include "plot/axis.h"

#include <math.h>
#include <stdio.h>

double pt_axis_step(double span) {
  if (!(span > 0)) return 1.0;
  const double raw = span / 5.0, p = pow(10.0, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * p;
}

/* Counted from multiples, not summed from lo: a tick at an end that is a
 * multiple of a finer step only would sit between two labels' roundings
 * (0.05 written 0.1), and v += step stands still once v is too large for
 * step to change it. */
int pt_axis_ticks(double lo, double hi, double step, double *first) {
  *first = ceil(lo / step - 1e-9);
  const double n = floor(hi / step + 1e-9) - *first + 1;
  return n > 0 ? (n < 101 ? (int)n : 101) : 0;
}

void pt_axis_label(char *buf, size_t len, double v, double step) {
  if (fabs(v) < step * 1e-9) v = 0;
  const int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
  if (fabs(v) >= 1e5) snprintf(buf, len, "%.3g", v);
  else snprintf(buf, len, "%.*f", decimals, v);
}

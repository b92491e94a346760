/* One rule and one way to say it, for flags and spec values alike: "1e-50"
 * is in --lr's range as a double, and would train at lr 0 as a float. */
#include "util/float_narrow.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

const char *pt_float_narrow(double x, float *out) {
  const float f = (float)x;
  if (x != 0 && !isnormal(f)) return isinf(f) ? "infinite" : f == 0 ? "0" : "a denormal";
  *out = f;
  return NULL;
}

void pt_float_range_text(char *buf, size_t size, double lo, double hi) {
  /* FLT_MIN to 9 digits: %g's 1.17549e-38 is below it, itself refused */
  if (lo == 0) snprintf(buf, size, "0 or a number in [%.9g, %g]", FLT_MIN, hi);
  else snprintf(buf, size, "a number in [%g, %g], 0 or at least %.9g in size", lo, hi, FLT_MIN);
}

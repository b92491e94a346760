/* The largest error of a float array against its reference, relative to
 * the reference's largest magnitude, for the convolution tests. A NaN in
 * either array makes the result NaN, so that every `< tolerance` fails on
 * it (fmax would skip it). */
#ifndef PT_TESTS_OPS_REL_ERR_H
#define PT_TESTS_OPS_REL_ERR_H

#include <math.h>
#include <stddef.h>

static inline double rel_err(const float *a, const float *b, size_t n) {
  double e = 0.0, m = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double d = fabs((double)a[i] - b[i]), r = fabs((double)b[i]);
    if (!(d <= e)) e = d; /* NaN sticks */
    if (!(r <= m)) m = r;
  }
  return e / (m > 1e-30 ? m : 1e-30);
}

#endif

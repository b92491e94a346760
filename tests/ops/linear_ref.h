/* What the linear layer's kernel tests (test_linear_dot.c,
 * test_linear_xt.c, test_linear_outer.c) share: seeded inputs, and one output
 * against a double-precision reference with the tolerance of a float sum.
 * Included once by each. */
#ifndef PT_TESTS_OPS_LINEAR_REF_H
#define PT_TESTS_OPS_LINEAR_REF_H

#include <math.h>
#include <stddef.h>

#include "util/error.h"
#include "util/philox.h"

/* n floats uniform in [lo, hi), 64-byte aligned as the model's arrays are. */
static inline float *random_floats(pt_rng *r, size_t n, float lo, float hi) {
  float *v = pt_alloc_aligned(sizeof(float) * (n ? n : 1));
  assert_non_null(v);
  for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * pt_rng_uniform(r);
  return v;
}

/* bias + x_row . w_row in double; *tol: how far a float sum of in terms
 * may be from it, a few ulp of the terms' magnitude. */
static inline double linear_ref(int in, const float *x_row, const float *w_row, float bias, double *tol) {
  double ref = bias, mag = fabs(ref);
  for (int k = 0; k < in; k++) {
    ref += (double)x_row[k] * w_row[k];
    mag += fabs((double)x_row[k] * w_row[k]);
  }
  *tol = 4.0 * in * 6e-8 * mag / sqrt((double)in) + 1e-7;
  return ref;
}

#endif

/* What the linear layer's kernel tests (test_linear_dot.c,
 * test_linear_xt.c, test_linear_outer.c) share: seeded inputs, and one output
 * against a double-precision reference with the tolerance of a float sum.
 * Included once by each. */
#ifndef PT_TESTS_OPS_LINEAR_REF_H
#define PT_TESTS_OPS_LINEAR_REF_H

#include <math.h>
#include <stddef.h>
#include <string.h>

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

/* A kernel's outputs must have the fused chain's bits (fmaf) everywhere,
 * or, at a level without fused multiply-adds, the unfused chain's (each
 * product rounded) everywhere. For the failure message, the first element
 * differing from each chain: where both exist, neither holds. */
typedef struct {
  long at[2]; /* fused, unfused: the first element differing, or -1 */
  const char *what[2];
  float got[2], want[2];
} chain_bits;

static inline chain_bits chain_bits_start(void) { return (chain_bits){{-1, -1}, {"", ""}, {0, 0}, {0, 0}}; }

static inline void chain_bits_check(chain_bits *c, const char *what, long idx, float got, float fused,
                                    float unfused) {
  const float want[2] = {fused, unfused};
  for (int f = 0; f < 2; f++)
    if (c->at[f] < 0 && memcmp(&got, &want[f], sizeof got))
      c->at[f] = idx, c->what[f] = what, c->got[f] = got, c->want[f] = want[f];
}

static inline int chain_bits_neither(const chain_bits *c) { return c->at[0] >= 0 && c->at[1] >= 0; }

#endif

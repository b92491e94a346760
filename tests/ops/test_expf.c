/* pt_expf, the vectorisable exp of log-softmax: within 2 ulp of the exact
 * value over the whole float range where the result is normal, 0 below it,
 * +inf above it, and NaN for NaN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops/cpu/expf.h"

static double ulps(float got, double want) {
  const float w = (float)want;
  const double ulp = (double)nextafterf(w, INFINITY) - (double)w;
  return fabs((double)got - want) / ulp;
}

static void test_accuracy(void **s) {
  (void)s;
  double worst = 0.0;
  long checked = 0;
  /* Every 997th float of either sign up to 88.7 in magnitude (below -87.3
   * the result is denormal, and 0 by design). */
  for (uint32_t b = 0; b < 0x42B16666u; b += 997) {
    union {
      uint32_t u;
      float f;
    } v = {.u = b};
    for (int sign = -1; sign <= 1; sign += 2) {
      const float x = sign * v.f;
      if (x < -87.3f) continue;
      const double u = ulps(pt_expf(x), exp((double)x));
      if (u > worst) worst = u;
      checked++;
    }
  }
  /* Near 0, where r is tiny: a few points in each binade down to 2^-40. */
  for (float m = 1e-12f; m < 1e-3f; m *= 1.37f)
    for (int sign = -1; sign <= 1; sign += 2) {
      const float x = sign * m;
      const double u = ulps(pt_expf(x), exp((double)x));
      if (u > worst) worst = u;
    }
  print_message("worst %.2f ulp over %ld points\n", worst, checked);
  assert_true(checked > 1000000); /* about 2.2 million */
  assert_true(worst <= 2.0);
  assert_true(pt_expf(0.0f) == 1.0f);
}

static void test_edges(void **s) {
  (void)s;
  assert_true(pt_expf(-88.0f) == 0.0f);
  assert_true(pt_expf(-1e30f) == 0.0f);
  assert_true(pt_expf(-INFINITY) == 0.0f);
  assert_true(isinf(pt_expf(89.0f)) && pt_expf(89.0f) > 0);
  assert_true(isinf(pt_expf(INFINITY)));
  assert_true(isnan(pt_expf(NAN)));
  /* The largest finite results, where 2^n needs the extra factor of 2. */
  assert_true(ulps(pt_expf(88.72f), exp((double)88.72f)) <= 2.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accuracy),
      cmocka_unit_test(test_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

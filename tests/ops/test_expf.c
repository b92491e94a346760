/* pt_expf, the vectorisable exp of log-softmax: within 2 ulp of the exact
 * value over the whole float range where the result is normal, 0 below it,
 * +inf above it, and NaN for NaN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
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

/* f gives every lane of in the bits pt_expf gives it (NaN for NaN). */
static void same_bits(const char *name, pt_v16 (*f)(pt_v16), const float in[16]) {
  float got[16];
  v16_storeu(got, f(v16_loadu(in)));
  for (int i = 0; i < 16; i++) {
    const float want = pt_expf(in[i]);
    if (!(isnan(want) && isnan(got[i])) && memcmp(&want, &got[i], sizeof want) != 0)
      fail_msg("exp(%.9g): %s %.9g, scalar %.9g", in[i], name, got[i], want);
  }
}

/* same_bits for the floats whose bit patterns run from first to last
 * (last included) step apart, 16 at a time, and for special; returns how
 * many points were swept. */
static long sweep_bits(const char *name, pt_v16 (*f)(pt_v16), uint64_t first, uint64_t last, uint64_t step,
                       const float special[16]) {
  float in[16];
  long checked = 0;
  for (uint64_t b = first; b <= last; b += step * 16) {
    for (int i = 0; i < 16; i++) {
      uint64_t u = b + step * (uint64_t)i;
      if (u > last) u = last;
      union {
        uint32_t u;
        float f;
      } v = {.u = (uint32_t)u};
      in[i] = v.f;
    }
    same_bits(name, f, in);
    checked += 16;
  }
  same_bits(name, f, special);
  print_message("%s: %ld points\n", name, checked);
  return checked;
}

/* pt_expf16 gives every lane the bits pt_expf gives it: every 61st float
 * (both signs, all the way to infinity and NaN), 16 at a time. */
static void test_vector_bits(void **s) {
  (void)s;
  const float special[16] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72283f, 88.7228f, -87.33654f,
                             -87.3365f, 1e-30f, -1e-30f, 0.5f, -0.5f, 1e30f, -1e30f, 88.0f};
  assert_true(sweep_bits("pt_expf16", pt_expf16, 0, 0xFFFFFFFFu, 61, special) > 70000000);
}

/* pt_expf16_nonpos gives pt_expf's bits wherever it may be used: every
 * float <= 0 (every 7th of them, down to -inf), and NaN. */
static void test_nonpos_bits(void **s) {
  (void)s;
  const float special[16] = {0.0f, -0.0f, -INFINITY, NAN, -NAN, -87.33654f, -87.3365f, -87.34f,
                             -1e-30f, -0.5f, -0.34657359f, -0.34657362f, -1e30f, -103.97f, -126.0f, -1.0f};
  assert_true(sweep_bits("pt_expf16_nonpos", pt_expf16_nonpos, 0x80000000u, 0xFF800000u, 7, special) > 300000000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accuracy),
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_vector_bits),
      cmocka_unit_test(test_nonpos_bits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* A sweep's step is split into phases that add up to it, none negative,
 * even where the two runs' difference of a phase is negative (a busy
 * machine made the short run wait longer than the long one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "scale/scale.h"

static double sum(const double *v) {
  double s = 0;
  for (int k = 0; k < PT_SCALE_NPHASES; k++) s += v[k];
  return s;
}

/* Clean runs: each phase is its own difference per step. */
static void test_differences_per_step(void **st) {
  (void)st;
  /* 10 and 30 steps: data, forward, backward, optimizer, comm, other (s) */
  const double a[PT_SCALE_NPHASES] = {0.010, 0.020, 0.030, 0.004, 0.000, 0.006};
  const double b[PT_SCALE_NPHASES] = {0.030, 0.060, 0.090, 0.012, 0.000, 0.008};
  const double ms_per_step = 1e3 * (sum(b) - sum(a)) / 20;
  double out[PT_SCALE_NPHASES];
  pt_scale_phases(a, b, 20, ms_per_step, out);
  assert_float_equal(out[0], 1.0, 1e-12);
  assert_float_equal(out[1], 2.0, 1e-12);
  assert_float_equal(out[2], 3.0, 1e-12);
  assert_float_equal(out[3], 0.4, 1e-12);
  assert_float_equal(out[4], 0.0, 1e-12);
  assert_float_equal(out[5], 0.1, 1e-12);
  assert_float_equal(sum(out), ms_per_step, 1e-9);
}

/* A phase a hair below zero is none; the others keep their differences. */
static void test_hair_below_zero_is_none(void **st) {
  (void)st;
  const double a[PT_SCALE_NPHASES] = {0.010, 0.020, 0.030, 0.004, 0.0000010, 0.006};
  const double b[PT_SCALE_NPHASES] = {0.030, 0.060, 0.090, 0.012, 0.0000005, 0.008};
  double out[PT_SCALE_NPHASES];
  pt_scale_phases(a, b, 20, 6.5, out);
  assert_float_equal(out[4], 0.0, 0);
  assert_float_equal(out[1], 2.0, 1e-12);
  assert_float_equal(out[5], 0.1, 1e-12);
}

/* The case a busy machine made (a pipeline of 2 stages): the short run's
 * communication and other time exceed the long run's. Dropping them to
 * zero would add up to 2.18 against a 1.98 ms step; the longer run's
 * shares add up to the step. */
static void test_negative_difference_takes_the_long_runs_shares(void **st) {
  (void)st;
  const double a[PT_SCALE_NPHASES] = {0.004, 0.012, 0.026, 0.002, 0.030, 0.020};
  const double b[PT_SCALE_NPHASES] = {0.006, 0.025, 0.052, 0.004, 0.028, 0.019};
  const double ms_per_step = 1e3 * (sum(b) - sum(a)) / 20;
  double out[PT_SCALE_NPHASES];
  pt_scale_phases(a, b, 20, ms_per_step, out);
  for (int k = 0; k < PT_SCALE_NPHASES; k++) assert_true(out[k] >= 0);
  assert_float_equal(sum(out), ms_per_step, 1e-9);
  /* in the long run's proportions: communication is 28/134 of it */
  assert_float_equal(out[4], ms_per_step * 0.028 / sum(b), 1e-12);
  assert_float_equal(out[2] / out[1], 52.0 / 25.0, 1e-12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_differences_per_step),
      cmocka_unit_test(test_hair_below_zero_is_none),
      cmocka_unit_test(test_negative_difference_takes_the_long_runs_shares),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

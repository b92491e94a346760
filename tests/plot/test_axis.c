/* An axis's ticks stand at multiples of its step, and each is labelled
 * with the value it stands at, whatever finer multiple the axis's ends
 * were rounded to. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "plot/axis.h"

/* The labels of the axis [lo, hi] joined by spaces. */
static void labels(double lo, double hi, char *out, size_t len) {
  const double step = pt_axis_step(hi - lo);
  double first;
  const int n = pt_axis_ticks(lo, hi, step, &first);
  size_t used = 0;
  out[0] = 0;
  for (int k = 0; k < n && used < len; k++) {
    char one[32];
    pt_axis_label(one, sizeof one, (first + k) * step, step);
    used += (size_t)snprintf(out + used, len - used, "%s%s", k ? " " : "", one);
  }
}

static void test_ends_on_a_finer_step(void **state) {
  (void)state;
  char got[256];
  /* Seconds 0.07 to 0.42, rounded to 0.05 and 0.45: the ticks are every
   * 0.1, at 0.1 to 0.4, not at 0.05, 0.15, ... (which read 0.1, 0.1 or
   * 0.2, ...). */
  labels(0.05, 0.45, got, sizeof got);
  assert_string_equal(got, "0.1 0.2 0.3 0.4");
  labels(0.0, 1.0, got, sizeof got);
  assert_string_equal(got, "0.0 0.2 0.4 0.6 0.8 1.0");
  labels(-15, 35, got, sizeof got);
  assert_string_equal(got, "-10 0 10 20 30");
  labels(600, 2400, got, sizeof got);
  assert_string_equal(got, "1000 1500 2000");
}

static void test_labels_are_the_positions(void **state) {
  (void)state;
  /* Over many ranges, a label read back is the tick's value to within
   * its rounding, and no two labels of an axis are the same. */
  for (double lo = -3.0; lo < 3.0; lo += 0.0137)
    for (double span = 0.011; span < 500; span *= 1.37) {
      const double hi = lo + span, step = pt_axis_step(span);
      double first;
      const int n = pt_axis_ticks(lo, hi, step, &first);
      assert_true(n >= 1 && n <= 101);
      char prev[32] = "";
      for (int k = 0; k < n; k++) {
        const double v = (first + k) * step;
        assert_true(v >= lo - 1e-9 * span && v <= hi + 1e-9 * span);
        char label[32];
        pt_axis_label(label, sizeof label, v, step);
        assert_true(fabs(strtod(label, NULL) - v) <= step * 1e-6 + 1e-12);
        assert_string_not_equal(label, prev);
        snprintf(prev, sizeof prev, "%s", label);
      }
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ends_on_a_finer_step),
      cmocka_unit_test(test_labels_are_the_positions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

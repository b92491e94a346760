/* The dot-product forward pass of the linear layer (linear_dot.c) against
 * a double-precision reference, on shapes that leave partial tiles in every
 * direction (rows of x not a multiple of 8, an odd number of outputs, inputs
 * not a multiple of 16), with and without a bias; the same bits at 1 and 2
 * threads; and which shapes take it (every level takes up to 8 rows,
 * AVX-512 more). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "linear_ref.h"
#include "ops/cpu/ops.h"

static void check_shape(int n, int in, int out, int bias) {
  pt_rng r;
  pt_rng_init(&r, (uint64_t)n * 1000003u + (uint64_t)in * 1009u + (uint64_t)out, 0);
  float *x = random_floats(&r, (size_t)n * in, -1, 1), *w = random_floats(&r, (size_t)out * in, -0.1f, 0.1f);
  float *b = bias ? random_floats(&r, (size_t)out, -0.5f, 0.5f) : NULL;
  float *y1 = random_floats(&r, (size_t)n * out, 7, 8), *y2 = random_floats(&r, (size_t)n * out, 7, 8);
  assert_int_equal(pt_ops_set_threads(1), 0);
  if (!pt_linear_forward_dot(n, in, out, x, w, b, y1)) {
    free(x), free(w), free(b), free(y1), free(y2);
    /* below AVX-512 it takes at most 8 rows, where it beats the BLAS */
    if (n <= 8) fail_msg("%d x %d -> %d: declined", n, in, out);
    return;
  }
  assert_int_equal(pt_ops_set_threads(2), 0);
  assert_true(pt_linear_forward_dot(n, in, out, x, w, b, y2));
  assert_int_equal(pt_ops_set_threads(1), 0);
  if (memcmp(y1, y2, sizeof(float) * (size_t)n * out))
    fail_msg("%d x %d -> %d: 1 and 2 threads differ", n, in, out);
  for (int s = 0; s < n; s++)
    for (int o = 0; o < out; o++) {
      double tol;
      const double ref = linear_ref(in, x + (size_t)s * in, w + (size_t)o * in, b ? b[o] : 0.0f, &tol);
      const double got = y1[(size_t)s * out + o];
      if (fabs(got - ref) > tol)
        fail_msg("%d x %d -> %d, bias %d: y[%d][%d] = %.9g, expected %.9g", n, in, out, bias, s, o, got, ref);
    }
  free(x), free(w), free(b), free(y1), free(y2);
}

static void test_shapes(void **s) {
  (void)s;
  const int shapes[][3] = {{100, 784, 200}, {1, 256, 32}, {7, 300, 33}, {9, 1024, 35},
                           {16, 257, 64},   {33, 511, 101}, {8, 784, 32}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int bias = 0; bias <= 1; bias++) check_shape(shapes[i][0], shapes[i][1], shapes[i][2], bias);
}

/* Where the BLAS is faster the pass declines. */
static void test_declines(void **s) {
  (void)s;
  float x[4] = {0}, w[4] = {0}, y[4];
  assert_false(pt_linear_forward_dot(1, 100, 100, x, w, NULL, y)); /* few inputs */
  assert_false(pt_linear_forward_dot(1, 784, 10, x, w, NULL, y));  /* few outputs */
  assert_false(pt_linear_forward_dot(1, 9216, 128, x, w, NULL, y)); /* x's rows outgrow the L1 cache */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_declines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The outer-product forward pass of the linear layer (linear_xt.c): each
 * output of its rows is the bias plus a chain of fused multiply-adds over
 * the inputs in order, checked bit for bit against fmaf (at a level
 * without fused multiply-adds, against the chain with each product
 * rounded); the rows past its blocks (of 96, then one of 64 where that
 * many are left) go to the other passes, checked against a double
 * reference; the same bits at 1, 2 and 3 threads; shapes with partial
 * blocks of inputs, partial tiles and groups of outputs; and which shapes
 * it declines. */
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

/* The rows the blocks cover: whole blocks of 96, then one of 64 where at
 * least that many are left. */
static int blocked_rows(int n) { return n / 96 * 96 + (n % 96 >= 64 ? 64 : 0); }

static void forward(int threads, int n, int in, int out, const float *x, const float *w, const float *b, float *y) {
  assert_int_equal(pt_ops_set_threads(threads), 0);
  float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_workspace(n, in, out, threads) + 1));
  assert_non_null(ws);
  pt_linear_forward(n, in, out, x, w, b, y, ws);
  free(ws);
  assert_int_equal(pt_ops_set_threads(1), 0);
}

static void check_shape(int n, int in, int out, int bias) {
  pt_rng r;
  pt_rng_init(&r, (uint64_t)n * 1000003u + (uint64_t)in * 1009u + (uint64_t)out, 1);
  float *x = random_floats(&r, (size_t)n * in, -1, 1), *w = random_floats(&r, (size_t)out * in, -0.1f, 0.1f);
  float *b = bias ? random_floats(&r, (size_t)out, -0.5f, 0.5f) : NULL;
  float *y[3];
  for (int t = 0; t < 3; t++) {
    y[t] = random_floats(&r, (size_t)n * out, 7, 8);
    forward(t + 1, n, in, out, x, w, b, y[t]);
  }
  for (int t = 1; t < 3; t++)
    if (memcmp(y[0], y[t], sizeof(float) * (size_t)n * out))
      fail_msg("%d x %d -> %d: 1 and %d threads differ", n, in, out, t + 1);
  const int blocked = blocked_rows(n);
  /* The blocks' outputs: the chain fused (fmaf), or at a level without
   * fused multiply-adds with each product rounded (stored, so that the
   * compiler cannot contract it), all one way or all the other; the first
   * element differing from each. */
  chain_bits c = chain_bits_start();
  for (int s = 0; s < n; s++)
    for (int o = 0; o < out; o++) {
      const float got = y[0][(size_t)s * out + o];
      if (s < blocked) {
        float acc[2] = {0.0f, 0.0f};
        for (int k = 0; k < in; k++) {
          const float a = w[(size_t)o * in + k], c = x[(size_t)s * in + k];
          volatile float p = a * c;
          acc[0] = fmaf(a, c, acc[0]);
          acc[1] = acc[1] + p;
        }
        chain_bits_check(&c, "y", (long)s * out + o, got, b ? acc[0] + b[o] : acc[0], b ? acc[1] + b[o] : acc[1]);
      } else {
        double tol;
        const double ref = linear_ref(in, x + (size_t)s * in, w + (size_t)o * in, b ? b[o] : 0.0f, &tol);
        if (fabs(got - ref) > tol)
          fail_msg("%d x %d -> %d, bias %d: tail y[%d][%d] = %.9g, expected %.9g", n, in, out, bias, s, o, got, ref);
      }
    }
  if (chain_bits_neither(&c))
    fail_msg("%d x %d -> %d, bias %d: y[%ld][%ld] = %.9g, expected %.9g (fused); y[%ld][%ld] = %.9g, expected %.9g "
             "(unfused)",
             n, in, out, bias, c.at[0] / out, c.at[0] % out, c.got[0], c.want[0], c.at[1] / out, c.at[1] % out,
             c.got[1], c.want[1]);
  free(x), free(w), free(b);
  for (int t = 0; t < 3; t++) free(y[t]);
}

static void test_shapes(void **s) {
  (void)s;
  const int shapes[][3] = {{96, 784, 200}, {100, 784, 200}, {192, 100, 17}, {97, 33, 16},
                           {250, 1000, 37}, {300, 64, 64}, {96, 2100, 21}, {64, 9216, 128},
                           {64, 33, 17},   {170, 50, 20},  {127, 200, 40}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int bias = 0; bias <= 1; bias++) check_shape(shapes[i][0], shapes[i][1], shapes[i][2], bias);
}

/* It does its blocks' rows and leaves the rest alone: 200 rows are two
 * blocks of 96 and 8 left; 170 are one of 96, one of 64 and 10 left. */
static void check_rows_done(int n, int want) {
  enum { N = 200, IN = 40, OUT = 20 };
  static float x[N * IN], w[OUT * IN], y[N * OUT];
  for (size_t i = 0; i < N * IN; i++) x[i] = 1.0f;
  for (size_t i = 0; i < OUT * IN; i++) w[i] = 0.5f;
  for (size_t i = 0; i < N * OUT; i++) y[i] = -1.0f;
  float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_xt_workspace(IN, OUT, 1) + 1));
  assert_non_null(ws);
  const int done = pt_linear_forward_xt(n, IN, OUT, x, w, NULL, y, ws);
  free(ws);
  assert_int_equal(done, want);
  for (int i = 0; i < N * OUT; i++) assert_true(y[i] == (i < want * OUT ? 20.0f : -1.0f));
}

static void test_rows_done(void **s) {
  (void)s;
  check_rows_done(200, 192);
  check_rows_done(170, 160);
  check_rows_done(64, 64);
}

static void test_declines(void **s) {
  (void)s;
  static float x[200 * 64], w[64 * 64], y[200 * 64];
  float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_xt_workspace(64, 64, 1) + 1));
  assert_non_null(ws);
  assert_int_equal(pt_linear_forward_xt(63, 64, 64, x, w, NULL, y, ws), 0);   /* fewer rows than a block */
  assert_int_equal(pt_linear_forward_xt(200, 31, 64, x, w, NULL, y, ws), 0);  /* few inputs */
  assert_int_equal(pt_linear_forward_xt(200, 64, 15, x, w, NULL, y, ws), 0);  /* few outputs */
  assert_int_equal(pt_linear_forward_xt(200, 64, 64, x, w, NULL, y, NULL), 0); /* no workspace */
  free(ws);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_rows_done),
      cmocka_unit_test(test_declines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

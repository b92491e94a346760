/* The linear layer's forward pass for fewer than 16 outputs
 * (linear_narrow.c): each y[t][o] is the bias (or 0) plus the products in
 * the order of the inputs, a chain of fused multiply-adds, or at a level
 * without them the same chain with each product rounded (all of y one way
 * or all the other); the same bits at 1, 2 and 3 threads; nothing written
 * past y; the shapes it declines; and that the layer (pt_linear_forward)
 * takes it, with its bits. Shapes leave partial tiles of samples at every
 * level (NS = 2, 4, 8), inputs not a multiple of 16, and 1 to 15 outputs. */
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

#define GUARD 16 /* floats past y's end that must stay as they were */

static int forward(int threads, int narrow, int n, int in, int out, const float *x, const float *w, const float *b,
                   float *y) {
  assert_int_equal(pt_ops_set_threads(threads), 0);
  float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_workspace(n, in, out, threads) + 1));
  assert_non_null(ws);
  int done = 1;
  if (narrow) done = pt_linear_forward_narrow(n, in, out, x, w, b, y, ws);
  else pt_linear_forward(n, in, out, x, w, b, y, ws);
  free(ws);
  assert_int_equal(pt_ops_set_threads(1), 0);
  return done;
}

static void check_shape(int n, int in, int out, int bias) {
  pt_rng r;
  pt_rng_init(&r, (uint64_t)n * 1000003u + (uint64_t)in * 1009u + (uint64_t)out, 5);
  const size_t ny = (size_t)n * out;
  float *x = random_floats(&r, (size_t)n * in, -1, 1), *w = random_floats(&r, (size_t)out * in, -0.1f, 0.1f);
  float *b = bias ? random_floats(&r, (size_t)out, -0.5f, 0.5f) : NULL;
  float *y[4];
  for (int t = 0; t < 4; t++) {
    y[t] = random_floats(&r, ny + GUARD, 7, 8);
    /* y[0..2]: the pass at 1, 2 and 3 threads; y[3]: the layer at 2 */
    if (!forward(t < 3 ? t + 1 : 2, t < 3, n, in, out, x, w, b, y[t]))
      fail_msg("%d x %d -> %d: declined", n, in, out);
    for (int i = 0; i < GUARD; i++)
      if (!(y[t][ny + i] >= 7 && y[t][ny + i] < 8)) fail_msg("%d x %d -> %d: wrote past y", n, in, out);
  }
  for (int t = 1; t < 4; t++)
    if (memcmp(y[0], y[t], sizeof(float) * ny))
      fail_msg("%d x %d -> %d, bias %d: %s differ", n, in, out, bias,
               t < 3 ? (t == 1 ? "1 and 2 threads" : "1 and 3 threads") : "the pass and the layer");
  /* each chain fused (fmaf) and unfused (the product stored, so that the
   * compiler cannot contract it); the first element differing from each */
  chain_bits c = chain_bits_start();
  for (int s = 0; s < n; s++)
    for (int o = 0; o < out; o++) {
      float acc[2] = {b ? b[o] : 0.0f, b ? b[o] : 0.0f};
      for (int k = 0; k < in; k++) {
        const float xv = x[(size_t)s * in + k], wv = w[(size_t)o * in + k];
        volatile float p = xv * wv;
        acc[0] = fmaf(xv, wv, acc[0]);
        acc[1] = acc[1] + p;
      }
      const float got = y[0][(size_t)s * out + o];
      chain_bits_check(&c, "y", (long)s * out + o, got, acc[0], acc[1]);
      double tol;
      const double ref = linear_ref(in, x + (size_t)s * in, w + (size_t)o * in, b ? b[o] : 0.0f, &tol);
      if (fabs(got - ref) > tol)
        fail_msg("%d x %d -> %d: y[%d][%d] = %.9g, expected %.9g", n, in, out, s, o, got, ref);
    }
  if (chain_bits_neither(&c))
    fail_msg("%d x %d -> %d, bias %d: y[%ld] = %.9g, the fused chain %.9g; y[%ld] = %.9g, the unfused %.9g", n,
             in, out, bias, c.at[0], c.got[0], c.want[0], c.at[1], c.got[1], c.want[1]);
  for (int t = 0; t < 4; t++) free(y[t]);
  free(x), free(w), free(b);
}

static void test_shapes(void **s) {
  (void)s;
  /* fmnist-mlp's lin2, mnist-cnn's fc2, tutorial-cnn's fc3; evaluation's
   * batch; one sample; every remainder of samples; 1 and 15 outputs */
  const int shapes[][3] = {{100, 200, 10}, {64, 128, 10}, {100, 84, 10}, {1000, 200, 10}, {1, 32, 1},
                           {7, 33, 15},    {13, 100, 8},  {9, 161, 3},   {5, 50, 13},     {31, 64, 11},
                           {3, 40, 2},     {66, 47, 9}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int bias = 0; bias <= 1; bias++) check_shape(shapes[i][0], shapes[i][1], shapes[i][2], bias);
}

static void test_declines(void **s) {
  (void)s;
  float x[64] = {0}, w[64 * 16] = {0}, y[64];
  float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_narrow_workspace(64, 1) + 1));
  assert_non_null(ws);
  assert_false(pt_linear_forward_narrow(1, 64, 16, x, w, NULL, y, ws)); /* 16 outputs: the other passes' */
  assert_false(pt_linear_forward_narrow(1, 31, 10, x, w, NULL, y, ws)); /* few inputs */
  assert_false(pt_linear_forward_narrow(1, 64, 0, x, w, NULL, y, ws));  /* no outputs */
  assert_false(pt_linear_forward_narrow(0, 64, 10, x, w, NULL, y, ws)); /* no samples */
  assert_false(pt_linear_forward_narrow(1, 64, 10, x, w, NULL, y, NULL)); /* no workspace */
  assert_true(pt_linear_forward_narrow(1, 64, 10, x, w, NULL, y, ws));
  free(ws);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_declines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

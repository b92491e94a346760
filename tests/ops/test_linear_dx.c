/* The linear layer's input gradient as outer products (linear_dx.c): each
 * dx[s][k] is a chain of fused multiply-adds over the outputs in order,
 * from 0, checked bit for bit against fmaf; the same bits at 1, 2 and 3
 * threads; shapes with samples past the last tile of 4, partial chunks of
 * inputs and partial vectors; what it leaves outside dx untouched; and the
 * shapes it declines. Through pt_linear_backward, so that the layer takes
 * it where it applies. */
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

#define GUARD 16 /* floats past dx's end that must stay as they were */

static void backward(int threads, int n, int in, int out, const float *x, const float *w, const float *dy,
                     float *dw, float *dx) {
  assert_int_equal(pt_ops_set_threads(threads), 0);
  pt_linear_backward(n, in, out, x, w, dy, dw, NULL, dx);
  assert_int_equal(pt_ops_set_threads(1), 0);
}

static void check_shape(int n, int in, int out) {
  pt_rng r;
  pt_rng_init(&r, (uint64_t)n * 1000003u + (uint64_t)in * 1009u + (uint64_t)out, 2);
  const size_t nx = (size_t)n * in, nw = (size_t)out * in;
  float *x = random_floats(&r, nx, -1, 1), *w = random_floats(&r, nw, -0.1f, 0.1f);
  float *dy = random_floats(&r, (size_t)n * out, -1, 1);
  float *dw = random_floats(&r, nw, 0, 0), *dx[3];
  for (int t = 0; t < 3; t++) {
    dx[t] = random_floats(&r, nx + GUARD, 7, 8);
    backward(t + 1, n, in, out, x, w, dy, dw, dx[t]);
    for (int i = 0; i < GUARD; i++)
      if (!(dx[t][nx + i] >= 7 && dx[t][nx + i] < 8)) fail_msg("%d x %d -> %d: wrote past dx", n, out, in);
  }
  for (int t = 1; t < 3; t++)
    if (memcmp(dx[0], dx[t], sizeof(float) * nx)) fail_msg("%d x %d -> %d: 1 and %d threads differ", n, out, in, t + 1);
  for (int s = 0; s < n; s++)
    for (int k = 0; k < in; k++) {
      float acc = 0.0f;
      for (int o = 0; o < out; o++) acc = fmaf(dy[(size_t)s * out + o], w[(size_t)o * in + k], acc);
      const float got = dx[0][(size_t)s * in + k];
      if (memcmp(&got, &acc, sizeof got))
        fail_msg("%d x %d -> %d: dx[%d][%d] = %.9g, expected %.9g", n, out, in, s, k, got, acc);
    }
  free(x), free(w), free(dy), free(dw);
  for (int t = 0; t < 3; t++) free(dx[t]);
}

static void test_shapes(void **s) {
  (void)s;
  static float probe_dy[4 * 16], probe_w[16 * 96], probe_dx[4 * 96];
  if (!pt_linear_backward_dx(4, 96, 16, probe_dy, probe_w, probe_dx)) skip(); /* a build without AVX-512 */
  /* mnist-cnn's fc1; fmnist-mlp's lin1's shape; samples past the last 4;
   * inputs past the last 96, in 1 to 6 vectors, whole and partial */
  const int shapes[][3] = {{64, 9216, 128}, {100, 784, 200}, {7, 100, 20}, {4, 96, 16},  {65, 191, 33},
                           {10, 1000, 17},  {5, 200, 300},   {5, 116, 17}, {6, 156, 18}, {9, 166, 16}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(shapes[i][0], shapes[i][1], shapes[i][2]);
}

static void test_declines(void **s) {
  (void)s;
  static float dy[200 * 64], w[64 * 200], dx[200 * 200];
  assert_int_equal(pt_linear_backward_dx(3, 200, 64, dy, w, dx), 0);  /* fewer samples than a tile */
  assert_int_equal(pt_linear_backward_dx(200, 95, 64, dy, w, dx), 0); /* fewer inputs than a chunk */
  assert_int_equal(pt_linear_backward_dx(200, 200, 15, dy, w, dx), 0); /* few outputs */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_declines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

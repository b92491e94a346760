/* Max-pooling 2x2 stride 2 (vectorised at every level) against a plain
 * loop written here: the maximum, its index (ties to the first in scan
 * order, a NaN wins and the last NaN is kept, as in PyTorch), and the
 * backward scatter. Values come from a handful of levels so that ties are
 * common; widths cover rows shorter than a vector, of exactly one, of more
 * than one, and odd edges. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ops/cpu/ops.h"

static uint32_t lcg = 777;
static uint32_t next(void) { return lcg = lcg * 1664525u + 1013904223u; }

static void reference(int h, int w, const float *x, float *y, int32_t *am) {
  const int oh = h / 2, ow = w / 2;
  for (int oy = 0; oy < oh; oy++)
    for (int ox = 0; ox < ow; ox++) {
      int best = 2 * oy * w + 2 * ox;
      for (int ky = 0; ky < 2; ky++)
        for (int kx = 0; kx < 2; kx++) {
          const int i = (2 * oy + ky) * w + 2 * ox + kx;
          if (x[i] > x[best] || isnan(x[i])) best = i; /* PyTorch: the last NaN */
        }
      y[oy * ow + ox] = x[best];
      am[oy * ow + ox] = best;
    }
}

static void check(int n, int c, int h, int w, int with_nan) {
  const int oh = h / 2, ow = w / 2;
  const size_t planes = (size_t)n * c, in = (size_t)h * w, out = (size_t)oh * ow;
  float *x = malloc(planes * in * sizeof(float)), *y = malloc(planes * out * sizeof(float));
  float *yr = malloc(planes * out * sizeof(float)), *dy = malloc(planes * out * sizeof(float));
  float *dx = malloc(planes * in * sizeof(float)), *dxr = calloc(planes * in, sizeof(float));
  int32_t *am = malloc(planes * out * sizeof(int32_t)), *amr = malloc(planes * out * sizeof(int32_t));
  for (size_t i = 0; i < planes * in; i++) {
    x[i] = (float)(next() >> 29) - 3.0f; /* 8 levels: many ties */
    if (with_nan && next() % 53 == 0) x[i] = NAN;
  }
  for (size_t i = 0; i < planes * out; i++) dy[i] = (float)(next() >> 8) / 16777216.0f + 0.5f;
  memset(dx, 0xff, planes * in * sizeof(float)); /* every element must be written */
  pt_maxpool_forward(n, c, h, w, 2, 2, oh, ow, x, y, am);
  pt_maxpool_backward(n, c, h, w, 2, 2, oh, ow, dy, am, dx);
  for (size_t p = 0; p < planes; p++) {
    reference(h, w, x + p * in, yr + p * out, amr + p * out);
    for (size_t i = 0; i < out; i++) dxr[p * in + (size_t)amr[p * out + i]] = dy[p * out + i];
  }
  assert_memory_equal(am, amr, planes * out * sizeof(int32_t));
  for (size_t i = 0; i < planes * out; i++) {
    if (isnan(yr[i])) assert_true(isnan(y[i]));
    else assert_true(y[i] == yr[i]);
  }
  assert_memory_equal(dx, dxr, planes * in * sizeof(float));
  free(x); free(y); free(yr); free(dy); free(dx); free(dxr); free(am); free(amr);
}

static void test_shapes(void **state) {
  (void)state;
  static const int shapes[][4] = {
      {2, 3, 28, 28}, /* 14 outputs a row: one masked vector */
      {1, 2, 24, 24}, /* mnist-cnn's 12 */
      {1, 2, 64, 32}, /* exactly one vector */
      {2, 2, 9, 70},  /* 35 outputs a row: three vectors; odd height */
      {1, 3, 7, 5},   /* odd width and height: edges dropped */
      {3, 1, 2, 2},   /* a single window */
  };
  for (int t = 0; t < 2; t++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      check(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], t);
}

static void test_two_threads(void **state) {
  (void)state;
  pt_ops_set_threads(2);
  check(4, 16, 28, 28, 1);
  pt_ops_set_threads(1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_two_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

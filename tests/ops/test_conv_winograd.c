/* The Winograd path against the direct kernels on the same inputs.
 *
 * Forward, input and weight gradients. F(2x2, 3x3) reassociates the sums, so the two agree to rounding, not
 * bitwise: the check is an error relative to the largest output. The shapes
 * cover what the tiles and vectors have to get right at the edges: odd
 * output sizes (tiles overhanging the last row and column), tile rows of
 * more than 16 tiles (two vectors a row), channel counts that are not
 * multiples of the register tile, padding 0 to 2, batch 1, and 2 threads.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ops/cpu/conv_direct.h"
#include "ops/cpu/conv_winograd.h"
#include "ops/cpu/ops.h"

#ifdef __AVX512F__ /* the direct and Winograd kernels exist only there */

typedef struct {
  int n, c, h, w, oc, pad, relu;
} shape;

static const shape shapes[] = {
    {2, 32, 26, 26, 64, 0, 1}, /* mnist-cnn's conv2 */
    {1, 9, 11, 13, 12, 1, 1},  /* odd oh and ow, 12 channels: a tile and a half */
    {3, 8, 7, 5, 8, 2, 0},     /* padding 2, 5x3 output tiles of a 9x7 output */
    {1, 17, 40, 37, 20, 0, 1}, /* 18 tiles a row: two vectors, the second mostly empty */
    {2, 8, 5, 70, 10, 1, 0},   /* 35 tiles a row */
    {1, 33, 3, 3, 9, 0, 0},    /* a single output */
};

static uint32_t lcg = 12345;
static float rnd(void) {
  lcg = lcg * 1664525u + 1013904223u;
  return (float)(lcg >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}
static float *rand_array(size_t n) {
  float *a = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) a[i] = rnd();
  return a;
}

/* max |a - b| / max |b| */
static double rel_err(const float *a, const float *b, size_t n) {
  double e = 0.0, m = 0.0;
  for (size_t i = 0; i < n; i++) {
    e = fmax(e, fabs((double)a[i] - b[i]));
    m = fmax(m, fabs((double)b[i]));
  }
  return e / fmax(m, 1e-30);
}

static void check_shape(const shape *s, int threads) {
  pt_conv_geom g = {s->c, s->h, s->w, s->oc, 3, 3, 1, s->pad, 0, 0, s->relu};
  assert_true(pt_conv_init(&g));
  if (!pt_conv_wino_ok(&g)) {
    print_message("winograd path not built (no AVX-512): skipped\n");
    return;
  }
  pt_ops_set_threads(threads);
  const size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->oc * g.oh * g.ow;
  const size_t nw = (size_t)s->oc * s->c * 9;
  float *x = rand_array(nx), *w = rand_array(nw), *b = rand_array((size_t)s->oc), *dy = rand_array(ny);
  float *yd = calloc(ny, sizeof(float)), *yw = calloc(ny, sizeof(float));
  float *dxd = calloc(nx, sizeof(float)), *dxw = calloc(nx, sizeof(float));
  float *dwd = calloc(nw, sizeof(float)), *dww = calloc(nw, sizeof(float));
  float *dbd = calloc((size_t)s->oc, sizeof(float)), *dbw = calloc((size_t)s->oc, sizeof(float));
  float *wsd = calloc(pt_conv_direct_workspace(&g, threads), sizeof(float));
  float *ws = calloc(pt_conv_workspace(&g, threads), sizeof(float));

  pt_conv_direct_forward(&g, s->n, x, w, b, yd, wsd);
  pt_conv_direct_backward(&g, s->n, x, w, yd, dy, dwd, dbd, dxd, wsd);
  pt_conv2d_forward(&g, s->n, x, w, b, yw, ws);
  pt_conv2d_backward(&g, s->n, x, w, yw, dy, dww, dbw, dxw, ws);

  double ey = rel_err(yw, yd, ny), ex = rel_err(dxw, dxd, nx), ew = rel_err(dww, dwd, nw);
  print_message("n %d c %d %dx%d oc %d pad %d relu %d threads %d: y %.2e dx %.2e dw %.2e\n", s->n, s->c, s->h,
                s->w, s->oc, s->pad, s->relu, threads, ey, ex, ew);
  /* fp32 sums of up to 288 products: direct vs Winograd differ by ~1e-7 of the largest value */
  assert_true(ey < 2e-6);
  assert_true(ex < 2e-6);
  double eb = rel_err(dbw, dbd, (size_t)s->oc);
  print_message("  db %.2e\n", eb);
  /* The ReLU's mask could differ where y is within rounding of 0, and dw
   * then by that position's terms; with these data it does not. */
  assert_true(ew < 2e-6);
  assert_true(eb < 2e-6);

  /* the input gradient is overwritten, not accumulated */
  pt_conv_wino_backward_data(&g, s->n, w, yw, dy, dxw, ws);
  assert_true(rel_err(dxw, dxd, nx) < 2e-6);
  free(x); free(w); free(b); free(dy); free(yd); free(yw); free(dxd); free(dxw);
  free(dwd); free(dww); free(dbd); free(dbw); free(wsd); free(ws);
  pt_ops_set_threads(1);
}

static void test_against_direct(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i], 1);
}

static void test_against_direct_2_threads(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i], 2);
}

/* The results do not depend on the thread count: samples are split, never
 * the sums. */
static void test_thread_count_invariant(void **state) {
  (void)state;
  pt_conv_geom g = {16, 12, 12, 24, 3, 3, 1, 1, 0, 0, 1};
  assert_true(pt_conv_init(&g));
  if (!pt_conv_wino_ok(&g)) return;
  const int n = 5;
  const size_t nx = (size_t)n * 16 * 144, ny = (size_t)n * 24 * 144;
  float *x = rand_array(nx), *w = rand_array(24 * 16 * 9), *b = rand_array(24), *dy = rand_array(ny);
  float *y1 = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float));
  float *d1 = malloc(nx * sizeof(float)), *d2 = malloc(nx * sizeof(float));
  float *ws = calloc(pt_conv_wino_workspace(&g, 2), sizeof(float));
  pt_ops_set_threads(1);
  pt_conv_wino_forward(&g, n, x, w, b, y1, ws);
  pt_conv_wino_backward_data(&g, n, w, y1, dy, d1, ws);
  pt_ops_set_threads(2);
  pt_conv_wino_forward(&g, n, x, w, b, y2, ws);
  pt_conv_wino_backward_data(&g, n, w, y2, dy, d2, ws);
  pt_ops_set_threads(1);
  assert_memory_equal(y1, y2, ny * sizeof(float));
  assert_memory_equal(d1, d2, nx * sizeof(float));
  free(x); free(w); free(b); free(dy); free(y1); free(y2); free(d1); free(d2); free(ws);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_direct),
      cmocka_unit_test(test_against_direct_2_threads),
      cmocka_unit_test(test_thread_count_invariant),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void) {
  printf("SKIPPED: built without AVX-512, so convolutions take the im2col path only\n");
  return 77;
}

#endif

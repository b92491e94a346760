/* The Winograd convolutions, F(4x4, 3x3) on 6x6 tiles and F(4x4, 5x5) on
 * 8x8 ones, against a plain-C convolution in double and, where the build
 * has them, the direct kernels, on the same inputs; and both with a 2x2
 * max-pool fused, against the ops apart. Every instruction-set level runs
 * it: the Winograd kernel exists at each.
 *
 * Forward, input and weight gradients. Winograd reassociates the sums, so
 * it agrees with the others to rounding, not bitwise: the check is an
 * error relative to the largest output. The shapes cover what the tiles and vectors have to
 * get right at the edges: odd output sizes (tiles overhanging the last row
 * and column), long tile rows, channel counts that are not multiples of a
 * vector or of the register tile, padding 0 to 4, batch 1, and 2 threads.
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
#include "rel_err.h"

typedef struct {
  int n, c, h, w, oc, pad, relu, k;
} shape;

static const shape shapes[] = {
    {2, 32, 26, 26, 64, 0, 1, 3}, /* mnist-cnn's conv2 */
    {1, 9, 11, 13, 12, 1, 1, 3},  /* 11x13 out: tiles overhang both edges; 12 channels */
    {3, 8, 7, 5, 8, 2, 0, 3},     /* padding 2, 3x2 tiles of a 9x7 output */
    {1, 17, 40, 37, 20, 0, 1, 3}, /* 17 channels: two vectors, the second mostly empty */
    {2, 8, 5, 70, 10, 1, 0, 3},   /* 18 tiles a row */
    {1, 33, 3, 3, 9, 0, 0, 3},    /* a single output */
    {3, 16, 14, 14, 32, 2, 1, 5}, /* tutorial-cnn's conv2.0 */
    {2, 20, 9, 11, 12, 1, 1, 5},  /* odd outputs (7x9), channels past a vector on both sides */
    {1, 8, 5, 5, 40, 0, 0, 5},    /* a single output, 8 channels; 40 outputs: 2.5 vectors */
    {2, 32, 17, 6, 16, 4, 1, 5},  /* padding 4, the input gradient's pass unpadded */
    {1, 16, 23, 19, 48, 3, 0, 5}, /* padding 3, 7x6 tiles of a 25x21 output: 42, not a multiple of 8 */
    {2, 16, 12, 12, 16, 1, 1, 3}, /* 3x3 tiles of 4x4 */
    {1, 48, 32, 32, 96, 1, 1, 3}, /* cifar-convnet's conv2 */
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
/* The reference: stride 1, square kernel, every sum in double and rounded
 * once. Forward y = relu?(conv(x, w) + b); backward through the ReLU's
 * mask of ymask (> 0), dx overwritten, dw and db set (not accumulated). */
static void ref_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y) {
  const int k = g->kh;
  for (int s = 0; s < n; s++)
    for (int o = 0; o < g->oc; o++)
      for (int oy = 0; oy < g->oh; oy++)
        for (int ox = 0; ox < g->ow; ox++) {
          double acc = b[o];
          for (int c = 0; c < g->c; c++)
            for (int ky = 0; ky < k; ky++) {
              const int iy = oy + ky - g->pad;
              if (iy < 0 || iy >= g->h) continue;
              for (int kx = 0; kx < k; kx++) {
                const int ix = ox + kx - g->pad;
                if (ix < 0 || ix >= g->w) continue;
                acc += (double)x[(((size_t)s * g->c + c) * g->h + iy) * g->w + ix] *
                       w[(((size_t)o * g->c + c) * k + ky) * k + kx];
              }
            }
          if (g->relu && acc < 0.0) acc = 0.0;
          y[(((size_t)s * g->oc + o) * g->oh + oy) * g->ow + ox] = (float)acc;
        }
}

static void ref_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *ymask,
                         const float *dy, float *dw, float *db, float *dx) {
  const int k = g->kh;
  const size_t nx = (size_t)n * g->c * g->h * g->w, nw = (size_t)g->oc * g->c * k * k;
  double *gx = calloc(nx, sizeof(double)), *gw = calloc(nw, sizeof(double)), *gb = calloc((size_t)g->oc, sizeof(double));
  for (int s = 0; s < n; s++)
    for (int o = 0; o < g->oc; o++)
      for (int oy = 0; oy < g->oh; oy++)
        for (int ox = 0; ox < g->ow; ox++) {
          const size_t at = (((size_t)s * g->oc + o) * g->oh + oy) * g->ow + ox;
          const double d = g->relu && !(ymask[at] > 0.0f) ? 0.0 : dy[at];
          if (d == 0.0) continue;
          gb[o] += d;
          for (int c = 0; c < g->c; c++)
            for (int ky = 0; ky < k; ky++) {
              const int iy = oy + ky - g->pad;
              if (iy < 0 || iy >= g->h) continue;
              for (int kx = 0; kx < k; kx++) {
                const int ix = ox + kx - g->pad;
                if (ix < 0 || ix >= g->w) continue;
                const size_t xi = (((size_t)s * g->c + c) * g->h + iy) * g->w + ix;
                const size_t wi = (((size_t)o * g->c + c) * k + ky) * k + kx;
                gx[xi] += d * w[wi];
                gw[wi] += d * x[xi];
              }
            }
        }
  for (size_t i = 0; i < nx; i++) dx[i] = (float)gx[i];
  for (size_t i = 0; i < nw; i++) dw[i] = (float)gw[i];
  for (int o = 0; o < g->oc; o++) db[o] = (float)gb[o];
  free(gx);
  free(gw);
  free(gb);
}

/* fp32 sums of up to 800 products. The constants (1/6, 1/24, 4, 5)
 * round, and the transforms add up to terms 100x the data: up to 1.4e-5
 * seen against the direct kernels (the weight gradient, summed over many
 * tiles), bounded here at 3e-5, against them and against the reference. */
#define TOL 3e-5

static void check_errors(const char *what, const shape *s, int threads, const float *y, const float *yr, size_t ny,
                         const float *dx, const float *dxr, size_t nx, const float *dw, const float *dwr, size_t nw,
                         const float *db, const float *dbr) {
  const double ey = rel_err(y, yr, ny), ex = rel_err(dx, dxr, nx), ew = rel_err(dw, dwr, nw);
  const double eb = rel_err(db, dbr, (size_t)s->oc);
  print_message("%s %dx%d: n %d c %d %dx%d oc %d pad %d relu %d threads %d: y %.2e dx %.2e dw %.2e db %.2e\n", what,
                s->k, s->k, s->n, s->c, s->h, s->w, s->oc, s->pad, s->relu, threads, ey, ex, ew, eb);
  assert_true(ey < TOL);
  assert_true(ex < TOL);
  assert_true(ew < TOL);
  assert_true(eb < TOL);
}

static void check_shape(const shape *s, int threads) {
  pt_conv_geom g = {s->c, s->h, s->w, s->oc, s->k, s->k, 1, s->pad, 0, 0, s->relu};
  assert_true(pt_conv_init(&g));
  assert_true(pt_conv_wino_ok(&g)); /* every shape here takes the Winograd path */
  pt_ops_set_threads(threads);
  const size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->oc * g.oh * g.ow;
  const size_t nw = (size_t)s->oc * s->c * s->k * s->k;
  float *x = rand_array(nx), *w = rand_array(nw), *b = rand_array((size_t)s->oc), *dy = rand_array(ny);
  float *yr = calloc(ny, sizeof(float)), *yw = calloc(ny, sizeof(float));
  float *dxr = calloc(nx, sizeof(float)), *dxw = calloc(nx, sizeof(float));
  float *dwr = calloc(nw, sizeof(float)), *dww = calloc(nw, sizeof(float));
  float *dbr = calloc((size_t)s->oc, sizeof(float)), *dbw = calloc((size_t)s->oc, sizeof(float));
  float *ws = calloc(pt_conv_wino_workspace(&g, threads), sizeof(float));

  ref_forward(&g, s->n, x, w, b, yr);
  pt_conv_wino_forward(&g, s->n, x, w, b, yw, NULL, ws);
  /* Every backward pass takes the ReLU's mask from the same y: where two
   * forward outputs straddle 0 within rounding, the masks would differ
   * and so would every gradient by that position's whole term. */
  ref_backward(&g, s->n, x, w, yw, dy, dwr, dbr, dxr);
  pt_conv_wino_backward(&g, s->n, x, w, yw, NULL, dy, dww, dbw, dxw, ws);
  check_errors("winograd", s, threads, yw, yr, ny, dxw, dxr, nx, dww, dwr, nw, dbw, dbr);

  /* the input gradient is overwritten, not accumulated */
  pt_conv_wino_backward(&g, s->n, x, w, yw, NULL, dy, dww, dbw, dxw, ws);
  assert_true(rel_err(dxw, dxr, nx) < TOL);

  /* and the direct kernels, which served these shapes before */
  float *yd = calloc(ny, sizeof(float)), *dxd = calloc(nx, sizeof(float)), *dwd = calloc(nw, sizeof(float));
  float *dbd = calloc((size_t)s->oc, sizeof(float));
  float *wsd = calloc(pt_conv_direct_workspace(&g, threads), sizeof(float));
  pt_conv_direct_forward(&g, s->n, x, w, b, yd, NULL, wsd);
  pt_conv_direct_backward(&g, s->n, x, w, yw, NULL, dy, dwd, dbd, dxd, wsd);
  memset(dww, 0, nw * sizeof(float));
  memset(dbw, 0, (size_t)s->oc * sizeof(float));
  pt_conv_wino_backward(&g, s->n, x, w, yw, NULL, dy, dww, dbw, dxw, ws);
  check_errors("winograd vs direct", s, threads, yw, yd, ny, dxw, dxd, nx, dww, dwd, nw, dbw, dbd);
  free(yd); free(dxd); free(dwd); free(dbd); free(wsd);
  free(x); free(w); free(b); free(dy); free(yr); free(yw); free(dxr); free(dxw);
  free(dwr); free(dww); free(dbr); free(dbw); free(ws);
  pt_ops_set_threads(1);
}

static void test_against_reference(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i], 1);
}

static void test_against_reference_2_threads(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i], 2);
}

/* The forward pass and the input gradient do not depend on the thread
 * count: samples are split, never their sums. */
static void check_invariant(int k) {
  pt_conv_geom g = {16, 12, 12, 32, k, k, 1, k / 2, 0, 0, 1};
  assert_true(pt_conv_init(&g));
  const int n = 5;
  const size_t nx = (size_t)n * 16 * 144, ny = (size_t)n * 32 * 144, nw = (size_t)32 * 16 * k * k;
  float *x = rand_array(nx), *w = rand_array(nw), *b = rand_array(32), *dy = rand_array(ny);
  float *y1 = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float));
  float *d1 = malloc(nx * sizeof(float)), *d2 = malloc(nx * sizeof(float));
  float *dw = calloc(nw, sizeof(float)), *db = calloc(32, sizeof(float));
  float *ws = calloc(pt_conv_wino_workspace(&g, 2), sizeof(float));
  pt_ops_set_threads(1);
  pt_conv_wino_forward(&g, n, x, w, b, y1, NULL, ws);
  pt_conv_wino_backward(&g, n, x, w, y1, NULL, dy, dw, db, d1, ws);
  pt_ops_set_threads(2);
  pt_conv_wino_forward(&g, n, x, w, b, y2, NULL, ws);
  pt_conv_wino_backward(&g, n, x, w, y2, NULL, dy, dw, db, d2, ws);
  pt_ops_set_threads(1);
  assert_memory_equal(y1, y2, ny * sizeof(float));
  assert_memory_equal(d1, d2, nx * sizeof(float));
  free(x); free(w); free(b); free(dy); free(y1); free(y2); free(d1); free(d2); free(dw); free(db); free(ws);
}

static void test_thread_count_invariant(void **state) {
  (void)state;
  check_invariant(3);
  check_invariant(5);
}

/* conv + ReLU + 2x2 max-pool fused (pt_conv2d_pool_*) against the same
 * conv with its ReLU (pt_conv2d_*, which takes the same Winograd or direct
 * path), then pt_maxpool_*: the same numbers in the same order, so equal
 * bit for bit. Random data put about half the ReLU's outputs at 0, so
 * windows whose maximum is 0 (no gradient) are common. */
static const shape pool_shapes[] = {
    {3, 32, 26, 26, 64, 0, 1, 3}, /* mnist-cnn's conv2 */
    {3, 16, 14, 14, 32, 2, 1, 5}, /* tutorial-cnn's conv2.0: 4x4 tiles overhanging by 2, 7x7 pooled */
    {2, 20, 10, 10, 12, 1, 1, 5}, /* channels past a vector on both sides */
    {1, 8, 36, 38, 9, 1, 1, 3},   /* 18x19 pooled: two column blocks; tiles overhang the last column */
    {2, 48, 8, 8, 96, 1, 1, 3},   /* 8x8 out: 2x2 tiles of 4x4, 4x4 pooled */
    /* shapes Winograd declines, on the direct path */
    {3, 1, 28, 28, 16, 2, 1, 5},  /* tutorial-cnn's conv1.0 */
    {2, 1, 28, 28, 32, 0, 1, 3},  /* mnist-cnn's conv1 (not followed by a pool there) */
    {2, 3, 10, 12, 5, 1, 1, 3},   /* channels off the register tile */
    {1, 2, 40, 36, 8, 1, 1, 3},   /* 20x18 pooled: rows past one vector pair */
};

static void check_pool_shape(const shape *s, int threads) {
  pt_conv_geom g = {s->c, s->h, s->w, s->oc, s->k, s->k, 1, s->pad, 0, 0, 1};
  assert_true(pt_conv_init(&g));
  assert_true(pt_conv_pool_ok(&g));
  assert_int_equal(pt_conv_wino_ok(&g), s->c >= 8); /* both paths covered */
  pt_ops_set_threads(threads);
  const int ph = g.oh / 2, pw = g.ow / 2;
  const size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->oc * g.oh * g.ow, np = ny / 4;
  const size_t nw = (size_t)s->oc * s->c * s->k * s->k;
  float *x = rand_array(nx), *w = rand_array(nw), *b = rand_array((size_t)s->oc), *dp = rand_array(np);
  float *y = calloc(ny, sizeof(float)), *dy = calloc(ny, sizeof(float));
  float *p1 = calloc(np, sizeof(float)), *p2 = calloc(np, sizeof(float));
  int32_t *am = calloc(np, sizeof(int32_t)), *code = calloc(np, sizeof(int32_t));
  float *dx1 = calloc(nx, sizeof(float)), *dx2 = calloc(nx, sizeof(float));
  float *dw1 = calloc(nw, sizeof(float)), *dw2 = calloc(nw, sizeof(float));
  float *db1 = calloc((size_t)s->oc, sizeof(float)), *db2 = calloc((size_t)s->oc, sizeof(float));
  float *ws = calloc(pt_conv_workspace(&g, threads), sizeof(float));

  pt_conv2d_forward(&g, s->n, x, w, b, y, ws);
  pt_maxpool_forward(s->n, s->oc, g.oh, g.ow, 2, 2, ph, pw, y, p1, am);
  pt_maxpool_backward(s->n, s->oc, g.oh, g.ow, 2, 2, ph, pw, dp, am, dy);
  pt_conv2d_backward(&g, s->n, x, w, y, dy, dw1, db1, dx1, ws);

  pt_conv2d_pool_forward(&g, s->n, x, w, b, p2, code, ws);
  pt_conv2d_pool_backward(&g, s->n, x, w, code, dp, dw2, db2, dx2, ws);

  size_t zeros = 0;
  for (size_t i = 0; i < np; i++) {
    zeros += p1[i] == 0.0f;
    assert_true(code[i] >= -1 && code[i] <= 3);
    assert_true((code[i] == -1) == (p1[i] == 0.0f)); /* -1 exactly where the ReLU stops the gradient */
  }
  assert_true(zeros > 0 && zeros < np);
  assert_memory_equal(p1, p2, np * sizeof(float));
  assert_memory_equal(dx1, dx2, nx * sizeof(float));
  assert_memory_equal(dw1, dw2, nw * sizeof(float));
  assert_memory_equal(db1, db2, (size_t)s->oc * sizeof(float));
  /* without the input gradient (a first layer), the same weight gradient */
  memset(dw2, 0, nw * sizeof(float));
  memset(db2, 0, (size_t)s->oc * sizeof(float));
  pt_conv2d_pool_backward(&g, s->n, x, w, code, dp, dw2, db2, NULL, ws);
  assert_memory_equal(dw1, dw2, nw * sizeof(float));
  assert_memory_equal(db1, db2, (size_t)s->oc * sizeof(float));
  free(x); free(w); free(b); free(dp); free(y); free(dy); free(p1); free(p2); free(am); free(code);
  free(dx1); free(dx2); free(dw1); free(dw2); free(db1); free(db2); free(ws);
  pt_ops_set_threads(1);
}

static void test_fused_pool(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof pool_shapes / sizeof pool_shapes[0]; i++) {
    check_pool_shape(&pool_shapes[i], 1);
    check_pool_shape(&pool_shapes[i], 2);
  }
}

/* Which convolutions take the fused pool: the Winograd and direct ones
 * with a ReLU and an even output. */
static void test_fused_pool_scope(void **state) {
  (void)state;
  pt_conv_geom even = {16, 14, 14, 32, 5, 5, 1, 2, 0, 0, 1};
  assert_true(pt_conv_init(&even));
  assert_true(pt_conv_pool_ok(&even));
  pt_conv_geom no_relu = even;
  no_relu.relu = 0;
  assert_false(pt_conv_pool_ok(&no_relu));
  pt_conv_geom odd = {16, 13, 14, 32, 5, 5, 1, 2, 0, 0, 1}; /* 13 rows out */
  assert_true(pt_conv_init(&odd));
  assert_false(pt_conv_pool_ok(&odd));
  pt_conv_geom thin = {1, 28, 28, 16, 5, 5, 1, 2, 0, 0, 1}; /* tutorial-cnn's conv1.0: direct */
  assert_true(pt_conv_init(&thin));
  assert_true(pt_conv_pool_ok(&thin));
  pt_conv_geom strided = {4, 12, 12, 8, 3, 3, 2, 1, 0, 0, 1}; /* im2col: no fused pool */
  assert_true(pt_conv_init(&strided));
  assert_false(pt_conv_pool_ok(&strided));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fused_pool),
      cmocka_unit_test(test_fused_pool_scope),
      cmocka_unit_test(test_against_reference),
      cmocka_unit_test(test_against_reference_2_threads),
      cmocka_unit_test(test_thread_count_invariant),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

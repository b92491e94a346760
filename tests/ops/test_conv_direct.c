/* The direct convolution (conv_direct.c) against a plain convolution
 * written here, at whatever instruction-set level the build has: forward
 * (with and without the fused ReLU), the weight, bias and input gradients,
 * and with the 2x2 max-pool fused, against the same kernel unfused and a
 * plain pool.
 *
 * The kernel sums in blocks and, at some levels, with fused multiply-adds,
 * so against the reference (sums in double) the check is an error relative
 * to the largest value; the fused pool does the same arithmetic as the op
 * unfused, so that check is bit for bit. The shapes are the models' layers
 * that take this path (mnist-cnn's conv1 and conv2, tutorial-cnn's conv1.0
 * and conv2.0) and what the register tiles and vectors have to get right at
 * their edges: channel counts off the tile and off a vector, both ways of
 * laying out outputs in vectors (by rows, and flat across row ends), 1x1,
 * even and non-square kernels, batches spanning several groups, and two
 * threads.
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
  int n, c, h, w, oc, kh, kw, pad, relu;
} shape;

static const shape shapes[] = {
    {3, 1, 28, 28, 32, 3, 3, 0, 1},  /* mnist-cnn's conv1: flat, across row ends */
    {2, 32, 26, 26, 64, 3, 3, 0, 1}, /* mnist-cnn's conv2 */
    {3, 1, 28, 28, 16, 5, 5, 2, 1},  /* tutorial-cnn's conv1.0 */
    {2, 16, 14, 14, 32, 5, 5, 2, 1}, /* tutorial-cnn's conv2.0: by rows */
    {2, 3, 10, 12, 5, 3, 3, 1, 0},   /* channels off the tile both ways */
    {2, 3, 16, 16, 7, 5, 5, 2, 1},   /* one vector a row */
    {1, 2, 40, 36, 40, 3, 3, 1, 0},  /* 40 outputs: 2.5 vectors of channels */
    {2, 5, 9, 9, 70, 1, 1, 0, 1},    /* 1x1; 70 channels */
    {1, 4, 7, 8, 9, 2, 2, 1, 0},     /* an even kernel: taps one a row */
    {2, 6, 11, 13, 12, 3, 5, 1, 1},  /* 3x5 */
    {1, 17, 3, 3, 19, 3, 3, 0, 0},   /* a single output */
    {9, 2, 28, 28, 8, 3, 3, 1, 1},   /* several groups a thread */
    {5, 1, 9, 37, 6, 3, 3, 1, 0},    /* one input channel: 3 vectors a row, no ReLU */
    {2, 1, 12, 12, 3, 7, 7, 3, 1},   /* one input channel, 7x7 */
    {2, 1, 12, 12, 2, 9, 9, 4, 0},   /* one input channel, 9x9: taps one a row */
};

static uint32_t lcg = 2024;
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
/* x (n, c, h, w) at (i, ci, iy, ix), 0 outside */
static double at(const pt_conv_geom *g, const float *x, int i, int ci, int iy, int ix) {
  if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) return 0.0;
  return x[(((size_t)i * g->c + ci) * g->h + iy) * g->w + ix];
}

static void ref_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y) {
  for (int i = 0; i < n; i++)
    for (int o = 0; o < g->oc; o++)
      for (int oy = 0; oy < g->oh; oy++)
        for (int ox = 0; ox < g->ow; ox++) {
          double s = b ? b[o] : 0.0;
          for (int ci = 0; ci < g->c; ci++)
            for (int ky = 0; ky < g->kh; ky++)
              for (int kx = 0; kx < g->kw; kx++)
                s += w[(((size_t)o * g->c + ci) * g->kh + ky) * g->kw + kx] *
                     at(g, x, i, ci, oy - g->pad + ky, ox - g->pad + kx);
          if (g->relu && s < 0.0) s = 0.0;
          y[(((size_t)i * g->oc + o) * g->oh + oy) * g->ow + ox] = (float)s;
        }
}

/* dw, db += ; dx = ; the ReLU's mask from y (the kernel's own output, so
 * that a value within rounding of 0 is masked alike). */
static void ref_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                         const float *dy, float *dw, float *db, float *dx) {
  const size_t ohw = (size_t)g->oh * g->ow, ys = (size_t)g->oc * ohw;
  float *gd = malloc((size_t)n * ys * sizeof(float));
  for (size_t i = 0; i < (size_t)n * ys; i++) gd[i] = g->relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
  for (int o = 0; o < g->oc; o++) {
    double s = 0.0;
    for (int i = 0; i < n; i++)
      for (size_t p = 0; p < ohw; p++) s += gd[i * ys + o * ohw + p];
    db[o] += (float)s;
    for (int ci = 0; ci < g->c; ci++)
      for (int ky = 0; ky < g->kh; ky++)
        for (int kx = 0; kx < g->kw; kx++) {
          double t = 0.0;
          for (int i = 0; i < n; i++)
            for (int oy = 0; oy < g->oh; oy++)
              for (int ox = 0; ox < g->ow; ox++)
                t += gd[i * ys + o * ohw + (size_t)oy * g->ow + ox] * at(g, x, i, ci, oy - g->pad + ky, ox - g->pad + kx);
          dw[(((size_t)o * g->c + ci) * g->kh + ky) * g->kw + kx] += (float)t;
        }
  }
  for (int i = 0; i < n; i++)
    for (int ci = 0; ci < g->c; ci++)
      for (int iy = 0; iy < g->h; iy++)
        for (int ix = 0; ix < g->w; ix++) {
          double s = 0.0;
          for (int o = 0; o < g->oc; o++)
            for (int ky = 0; ky < g->kh; ky++)
              for (int kx = 0; kx < g->kw; kx++) {
                const int oy = iy + g->pad - ky, ox = ix + g->pad - kx;
                if (oy < 0 || oy >= g->oh || ox < 0 || ox >= g->ow) continue;
                s += (double)gd[i * ys + o * ohw + (size_t)oy * g->ow + ox] *
                     w[(((size_t)o * g->c + ci) * g->kh + ky) * g->kw + kx];
              }
          dx[(((size_t)i * g->c + ci) * g->h + iy) * g->w + ix] = (float)s;
        }
  free(gd);
}

/* Whether pt_conv2d_* take the direct kernel for g (rather than Winograd). */
static int dispatched_direct(const pt_conv_geom *g) {
  return !pt_conv_wino_ok(g) && pt_conv_direct_ok(g);
}

static pt_conv_geom geom(const shape *s) {
  pt_conv_geom g = {s->c, s->h, s->w, s->oc, s->kh, s->kw, 1, s->pad, 0, 0, s->relu};
  assert_true(pt_conv_init(&g));
  assert_true(pt_conv_direct_ok(&g));
  return g;
}

/* fp32 sums of up to ~2000 products of numbers in [-1, 1], in blocks: a few
 * 1e-7 relative to the largest seen. */
#define TOL 1e-5

static void check_shape(const shape *s, int threads) {
  const pt_conv_geom g = geom(s);
  pt_ops_set_threads(threads);
  const size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->oc * g.oh * g.ow;
  const size_t nw = (size_t)s->oc * s->c * s->kh * s->kw, nb = (size_t)s->oc;
  float *x = rand_array(nx), *w = rand_array(nw), *b = rand_array(nb), *dy = rand_array(ny);
  float *dw0 = rand_array(nw), *db0 = rand_array(nb); /* the gradients accumulate onto these */
  float *y = calloc(ny, sizeof(float)), *yr = calloc(ny, sizeof(float)), *y2 = calloc(ny, sizeof(float));
  float *dx = malloc(nx * sizeof(float)), *dxr = calloc(nx, sizeof(float)), *dx2 = malloc(nx * sizeof(float));
  float *dw = malloc(nw * sizeof(float)), *dwr = malloc(nw * sizeof(float)), *dw2 = malloc(nw * sizeof(float));
  float *db = malloc(nb * sizeof(float)), *dbr = malloc(nb * sizeof(float)), *db2 = malloc(nb * sizeof(float));
  float *ws = calloc(pt_conv_direct_workspace(&g, threads), sizeof(float));
  memcpy(dw, dw0, nw * sizeof(float)), memcpy(dwr, dw0, nw * sizeof(float));
  memcpy(db, db0, nb * sizeof(float)), memcpy(dbr, db0, nb * sizeof(float));
  memset(dx, 0xff, nx * sizeof(float)); /* NaN: the input gradient is overwritten, every element */

  pt_conv_direct_forward(&g, s->n, x, w, b, y, NULL, ws);
  pt_conv_direct_backward(&g, s->n, x, w, y, NULL, dy, dw, db, dx, ws);
  ref_forward(&g, s->n, x, w, b, yr);
  ref_backward(&g, s->n, x, w, y, dy, dwr, dbr, dxr);

  const double ey = rel_err(y, yr, ny), ex = rel_err(dx, dxr, nx), ew = rel_err(dw, dwr, nw);
  const double eb = rel_err(db, dbr, nb);
  print_message("%dx%d: n %d c %d %dx%d oc %d pad %d relu %d threads %d: y %.1e dx %.1e dw %.1e db %.1e\n", s->kh,
                s->kw, s->n, s->c, s->h, s->w, s->oc, s->pad, s->relu, threads, ey, ex, ew, eb);
  assert_true(ey < TOL);
  assert_true(ex < TOL);
  assert_true(ew < TOL);
  assert_true(eb < TOL);
  if (s->relu)
    for (size_t i = 0; i < ny; i++) assert_true(y[i] >= 0.0f);

  /* without the input gradient, the same weight gradient */
  memcpy(dw2, dw0, nw * sizeof(float)), memcpy(db2, db0, nb * sizeof(float));
  pt_conv_direct_backward(&g, s->n, x, w, y, NULL, dy, dw2, db2, NULL, ws);
  assert_memory_equal(dw, dw2, nw * sizeof(float));
  assert_memory_equal(db, db2, nb * sizeof(float));

  /* the ops, where they take this kernel: the same bits */
  if (dispatched_direct(&g)) {
    float *wsc = calloc(pt_conv_workspace(&g, threads), sizeof(float));
    memcpy(dw2, dw0, nw * sizeof(float)), memcpy(db2, db0, nb * sizeof(float));
    pt_conv2d_forward(&g, s->n, x, w, b, y2, wsc);
    pt_conv2d_backward(&g, s->n, x, w, y2, dy, dw2, db2, dx2, wsc);
    assert_memory_equal(y, y2, ny * sizeof(float));
    assert_memory_equal(dx, dx2, nx * sizeof(float));
    assert_memory_equal(dw, dw2, nw * sizeof(float));
    assert_memory_equal(db, db2, nb * sizeof(float));
    free(wsc);
  }
  free(x); free(w); free(b); free(dy); free(dw0); free(db0); free(y); free(yr); free(y2);
  free(dx); free(dxr); free(dx2); free(dw); free(dwr); free(dw2); free(db); free(dbr); free(db2); free(ws);
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
static void test_thread_count_invariant(void **state) {
  (void)state;
  const shape s = {5, 3, 12, 12, 20, 3, 3, 1, 1};
  const pt_conv_geom g = geom(&s);
  const size_t nx = (size_t)s.n * s.c * 144, ny = (size_t)s.n * s.oc * 144, nw = (size_t)s.oc * s.c * 9;
  float *x = rand_array(nx), *w = rand_array(nw), *b = rand_array((size_t)s.oc), *dy = rand_array(ny);
  float *y1 = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float));
  float *d1 = malloc(nx * sizeof(float)), *d2 = malloc(nx * sizeof(float));
  float *dw = calloc(nw, sizeof(float)), *db = calloc((size_t)s.oc, sizeof(float));
  float *ws = calloc(pt_conv_direct_workspace(&g, 2), sizeof(float));
  pt_ops_set_threads(1);
  pt_conv_direct_forward(&g, s.n, x, w, b, y1, NULL, ws);
  pt_conv_direct_backward(&g, s.n, x, w, y1, NULL, dy, dw, db, d1, ws);
  pt_ops_set_threads(2);
  pt_conv_direct_forward(&g, s.n, x, w, b, y2, NULL, ws);
  pt_conv_direct_backward(&g, s.n, x, w, y2, NULL, dy, dw, db, d2, ws);
  pt_ops_set_threads(1);
  assert_memory_equal(y1, y2, ny * sizeof(float));
  assert_memory_equal(d1, d2, nx * sizeof(float));
  free(x); free(w); free(b); free(dy); free(y1); free(y2); free(d1); free(d2); free(dw); free(db); free(ws);
}

/* ---- with the 2x2 max-pool fused ---- */

static const shape pool_shapes[] = {
    {3, 1, 28, 28, 16, 5, 5, 2, 1},  /* tutorial-cnn's conv1.0 */
    {2, 16, 14, 14, 32, 5, 5, 2, 1}, /* tutorial-cnn's conv2.0: 7x7 pooled */
    {2, 32, 26, 26, 64, 3, 3, 0, 1}, /* mnist-cnn's conv2 */
    {2, 1, 28, 28, 32, 3, 3, 0, 1},  /* mnist-cnn's conv1 (not followed by a pool there) */
    {2, 3, 10, 12, 5, 3, 3, 1, 1},   /* channels off the tile */
    {1, 2, 40, 36, 8, 3, 3, 1, 1},   /* 20x18 pooled: rows past one vector */
    {2, 4, 8, 70, 20, 1, 1, 0, 1},   /* 35 windows a row: three vectors; 1x1 */
};

/* The maximum of each 2x2 window, and where (0..3 row by row, the first
 * of equal ones), -1 where it is not above 0. */
static void ref_pool(size_t planes, int h, int w, const float *y, float *p, int32_t *code) {
  const int ph = h / 2, pw = w / 2;
  for (size_t q = 0; q < planes; q++)
    for (int py = 0; py < ph; py++)
      for (int px = 0; px < pw; px++) {
        const float *r = y + (q * h + 2 * py) * w + 2 * px;
        const float v[4] = {r[0], r[1], r[w], r[w + 1]};
        int k = 0;
        for (int i = 1; i < 4; i++)
          if (v[i] > v[k]) k = i;
        const size_t o = (q * ph + py) * pw + px;
        p[o] = v[k];
        code[o] = v[k] > 0.0f ? k : -1;
      }
}

static void check_pool_shape(const shape *s, int threads) {
  const pt_conv_geom g = geom(s);
  assert_true(pt_conv_direct_pool_ok(&g));
  pt_ops_set_threads(threads);
  const int ph = g.oh / 2, pw = g.ow / 2;
  const size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->oc * g.oh * g.ow, np = ny / 4;
  const size_t nw = (size_t)s->oc * s->c * s->kh * s->kw, nb = (size_t)s->oc, planes = (size_t)s->n * s->oc;
  float *x = rand_array(nx), *w = rand_array(nw), *b = rand_array(nb), *dp = rand_array(np);
  float *y = calloc(ny, sizeof(float)), *dy = calloc(ny, sizeof(float));
  float *p1 = calloc(np, sizeof(float)), *p2 = calloc(np, sizeof(float));
  int32_t *c1 = calloc(np, sizeof(int32_t)), *c2 = calloc(np, sizeof(int32_t));
  float *dx1 = calloc(nx, sizeof(float)), *dx2 = malloc(nx * sizeof(float));
  float *dw1 = calloc(nw, sizeof(float)), *dw2 = calloc(nw, sizeof(float));
  float *db1 = calloc(nb, sizeof(float)), *db2 = calloc(nb, sizeof(float));
  float *ws = calloc(pt_conv_direct_workspace(&g, threads), sizeof(float));

  /* apart: the kernel's conv + ReLU, the pool written here, and the
   * pool's gradient put back in place through the codes */
  pt_conv_direct_forward(&g, s->n, x, w, b, y, NULL, ws);
  ref_pool(planes, g.oh, g.ow, y, p1, c1);
  for (size_t q = 0; q < planes; q++)
    for (int py = 0; py < ph; py++)
      for (int px = 0; px < pw; px++) {
        const size_t o = (q * ph + py) * pw + px;
        if (c1[o] >= 0) dy[(q * g.oh + 2 * py + c1[o] / 2) * g.ow + 2 * px + c1[o] % 2] = dp[o];
      }
  pt_conv_direct_backward(&g, s->n, x, w, y, NULL, dy, dw1, db1, dx1, ws);

  memset(dx2, 0xff, nx * sizeof(float));
  pt_conv_direct_forward(&g, s->n, x, w, b, p2, c2, ws);
  pt_conv_direct_backward(&g, s->n, x, w, NULL, c2, dp, dw2, db2, dx2, ws);

  size_t zeros = 0;
  for (size_t i = 0; i < np; i++) zeros += c1[i] < 0;
  assert_true(zeros > 0 && zeros < np); /* both kinds of window seen */
  assert_memory_equal(p1, p2, np * sizeof(float));
  assert_memory_equal(c1, c2, np * sizeof(int32_t));
  assert_memory_equal(dx1, dx2, nx * sizeof(float));
  assert_memory_equal(dw1, dw2, nw * sizeof(float));
  assert_memory_equal(db1, db2, nb * sizeof(float));
  /* without the input gradient (a first layer), the same weight gradient */
  memset(dw2, 0, nw * sizeof(float)), memset(db2, 0, nb * sizeof(float));
  pt_conv_direct_backward(&g, s->n, x, w, NULL, c2, dp, dw2, db2, NULL, ws);
  assert_memory_equal(dw1, dw2, nw * sizeof(float));
  assert_memory_equal(db1, db2, nb * sizeof(float));

  /* the fused ops and the max-pool op, where the direct kernel serves */
  if (dispatched_direct(&g)) {
    float *wsc = calloc(pt_conv_workspace(&g, threads), sizeof(float));
    int32_t *am = calloc(np, sizeof(int32_t));
    assert_true(pt_conv_pool_ok(&g));
    memset(p2, 0, np * sizeof(float)), memset(c2, 0, np * sizeof(int32_t));
    memset(dw2, 0, nw * sizeof(float)), memset(db2, 0, nb * sizeof(float));
    pt_conv2d_pool_forward(&g, s->n, x, w, b, p2, c2, wsc);
    pt_conv2d_pool_backward(&g, s->n, x, w, c2, dp, dw2, db2, dx2, wsc);
    assert_memory_equal(p1, p2, np * sizeof(float));
    assert_memory_equal(c1, c2, np * sizeof(int32_t));
    assert_memory_equal(dx1, dx2, nx * sizeof(float));
    assert_memory_equal(dw1, dw2, nw * sizeof(float));
    assert_memory_equal(db1, db2, nb * sizeof(float));
    pt_maxpool_forward(s->n, s->oc, g.oh, g.ow, 2, 2, ph, pw, y, p2, am);
    assert_memory_equal(p1, p2, np * sizeof(float));
    free(am);
    free(wsc);
  }
  free(x); free(w); free(b); free(dp); free(y); free(dy); free(p1); free(p2); free(c1); free(c2);
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

/* A NaN weight makes its output channel NaN through the fused ReLU, as in
 * PyTorch, on each path the ops take (direct, Winograd, unrolled GEMM),
 * and through the ReLU op: a ReLU that made NaN 0 once hid damaged
 * weights behind a finite, wrong evaluation. */
static void test_relu_passes_nan(void **state) {
  (void)state;
  const pt_conv_geom gs[] = {
      {1, 28, 28, 32, 3, 3, 1, 0, 0, 0, 1},  /* direct */
      {16, 14, 14, 32, 5, 5, 1, 2, 0, 0, 1}, /* Winograd where it is built */
      {3, 16, 16, 8, 3, 3, 2, 1, 0, 0, 1},   /* stride 2: unrolled GEMM */
  };
  for (size_t k = 0; k < sizeof gs / sizeof gs[0]; k++) {
    pt_conv_geom g = gs[k];
    assert_true(pt_conv_init(&g));
    const int n = 2;
    const size_t nx = (size_t)n * g.c * g.h * g.w, nw = (size_t)g.oc * g.c * g.kh * g.kw;
    const size_t ohw = (size_t)g.oh * g.ow, ny = (size_t)n * g.oc * ohw;
    float *x = rand_array(nx), *w = rand_array(nw), *b = rand_array((size_t)g.oc), *y = malloc(ny * sizeof(float));
    float *ws = calloc(pt_conv_workspace(&g, 1), sizeof(float));
    w[0] = NAN; /* output channel 0, every position */
    pt_conv2d_forward(&g, n, x, w, b, y, ws);
    for (int i = 0; i < n; i++)
      for (int o = 0; o < g.oc; o++)
        for (size_t q = 0; q < ohw; q++) {
          const float v = y[((size_t)i * g.oc + o) * ohw + q];
          if (o == 0 ? !isnan(v) : !(v >= 0.0f)) fail_msg("geometry %zu: y[%d][%d][%zu] = %g", k, i, o, q, v);
        }
    free(x), free(w), free(b), free(y), free(ws);
  }
  const float in[4] = {NAN, -1.0f, 2.0f, -0.0f};
  float out[4];
  pt_relu_forward(4, in, out);
  assert_true(isnan(out[0]) && out[1] == 0.0f && out[2] == 2.0f && out[3] == 0.0f);
}

/* Which geometries the kernel takes: stride 1, padding below the kernel. */
static void test_scope(void **state) {
  (void)state;
  pt_conv_geom g = {1, 28, 28, 16, 5, 5, 1, 2, 0, 0, 1}; /* tutorial-cnn's conv1.0 */
  assert_true(pt_conv_init(&g));
  assert_true(pt_conv_direct_ok(&g));
  assert_true(pt_conv_direct_pool_ok(&g));
  assert_true(pt_conv_pool_ok(&g)); /* too thin for Winograd: the direct kernel serves it */
  pt_conv_geom odd = {4, 13, 14, 8, 3, 3, 1, 1, 0, 0, 1}; /* 13 rows out: no fused pool */
  assert_true(pt_conv_init(&odd));
  assert_true(pt_conv_direct_ok(&odd));
  assert_false(pt_conv_direct_pool_ok(&odd));
  pt_conv_geom strided = {4, 12, 12, 8, 3, 3, 2, 1, 0, 0, 1};
  assert_true(pt_conv_init(&strided));
  assert_false(pt_conv_direct_ok(&strided));
  assert_false(pt_conv_pool_ok(&strided));
  pt_conv_geom wide_pad = {4, 12, 12, 8, 3, 3, 1, 3, 0, 0, 0};
  assert_true(pt_conv_init(&wide_pad));
  assert_false(pt_conv_direct_ok(&wide_pad));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scope),
      cmocka_unit_test(test_against_reference),
      cmocka_unit_test(test_against_reference_2_threads),
      cmocka_unit_test(test_thread_count_invariant),
      cmocka_unit_test(test_fused_pool),
      cmocka_unit_test(test_relu_passes_nan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The linear layer with its weight in panels (pt_linear_panel_index,
 * linear_sparse_forward.c, pt_linear_forward_p / pt_linear_backward_p):
 * panels are given by shape alone; the layout is a permutation with whole
 * aligned rows; the forward pass, zero-skipping or by the BLAS, matches a
 * double-precision reference with zeros, negative zeros and NaN in x; the
 * weight gradient has, element for element, the bits of the kernel for
 * PyTorch's order; the zero-skipping kernels' results have the same bits
 * at 1, 2 and 3 threads; and the model's tensors convert both ways. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "linear_ref.h"
#include "nn/model.h"
#include "ops/cpu/ops.h"

/* x (n, in) half zeros (+0 and -0), in runs as an image's pixels are. */
static float *image_like(pt_rng *r, int n, int in) {
  float *x = random_floats(r, (size_t)n * in, 0, 1);
  for (int t = 0; t < n; t++)
    for (int k = 0; k < in; k += 4)
      if (pt_rng_uniform(r) < 0.5f)
        for (int i = 0; i < 4 && k + i < in; i++) x[(size_t)t * in + k + i] = (k / 4) % 2 ? 0.0f : -0.0f;
  return x;
}

static float *to_panels(int in, int out, const float *w) {
  float *wp = pt_alloc_aligned(sizeof(float) * (size_t)in * out);
  assert_non_null(wp);
  for (int o = 0; o < out; o++)
    for (int k = 0; k < in; k++) wp[pt_linear_panel_index(in, out, o, k)] = w[(size_t)o * in + k];
  return wp;
}

/* Panels depend on the shape alone, the same at every instruction-set
 * level, so that a model's parameter layout does not depend on the CPU. */
static void test_panels_ok(void **s) {
  (void)s;
  const int take[][2] = {{784, 200}, {64, 16}, {96, 17}, {128, 33}, {9216, 128}};
  const int decline[][2] = {{792, 200}, {48, 200}, {784, 15}, {100, 16}};
  for (size_t c = 0; c < sizeof take / sizeof take[0]; c++)
    if (!pt_linear_panels_ok(take[c][0], take[c][1])) fail_msg("%d -> %d: no panels", take[c][0], take[c][1]);
  for (size_t c = 0; c < sizeof decline / sizeof decline[0]; c++)
    if (pt_linear_panels_ok(decline[c][0], decline[c][1])) fail_msg("%d -> %d: panels", decline[c][0], decline[c][1]);
}

static void test_index_is_a_permutation(void **s) {
  (void)s;
  const int shapes[][2] = {{64, 16}, {784, 200}, {96, 17}, {128, 33}, {64, 48}};
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
    const int in = shapes[c][0], out = shapes[c][1];
    unsigned char *seen = calloc((size_t)in * out, 1);
    assert_non_null(seen);
    for (int o = 0; o < out; o++)
      for (int k = 0; k < in; k++) {
        const size_t i = pt_linear_panel_index(in, out, o, k);
        if (i >= (size_t)in * out || seen[i]++)
          fail_msg("%d -> %d: (%d, %d) at %zu twice or outside", in, out, o, k, i);
        /* a whole panel's row starts on a cache line */
        if (o % 16 == 0 && o + 16 <= out && i % 16)
          fail_msg("%d -> %d: row %d of panel %d unaligned", in, out, k, o / 16);
      }
    free(seen);
  }
}

/* keep: where the pass is to keep what the weight gradient reads, or NULL */
static void forward(int threads, int n, int in, int out, const float *x, const float *wp, const float *b, float *y,
                    int use_ws, float *keep) {
  assert_int_equal(pt_ops_set_threads(threads), 0);
  float *ws = use_ws ? pt_alloc_aligned(sizeof(float) * (pt_linear_workspace(n, in, out, threads) + 1)) : NULL;
  pt_linear_forward_p(n, in, out, x, wp, b, y, ws, keep);
  free(ws);
  assert_int_equal(pt_ops_set_threads(1), 0);
}

static void check_forward(int n, int in, int out, int with_bias, int use_ws) {
  pt_rng r;
  pt_rng_init(&r, (uint64_t)n * 7919u + (uint64_t)in * 31u + (uint64_t)out, 5);
  float *x = image_like(&r, n, in), *w = random_floats(&r, (size_t)out * in, -0.1f, 0.1f);
  float *b = with_bias ? random_floats(&r, (size_t)out, -0.1f, 0.1f) : NULL, *wp = to_panels(in, out, w);
  if (n > 2) x[(size_t)2 * in + 5] = NAN; /* sample 2: all NaN, the others untouched */
  float *y[4];
  for (int t = 0; t < 3; t++) {
    y[t] = random_floats(&r, (size_t)n * out, 7, 8);
    forward(t + 1, n, in, out, x, wp, b, y[t], use_ws, NULL);
  }
  /* keeping data for the backward pass changes nothing in y (against the
   * same thread count: without a workspace the BLAS runs) */
  float *keep = random_floats(&r, pt_linear_keep_floats(n, in), -1, 1);
  y[3] = random_floats(&r, (size_t)n * out, 7, 8);
  forward(2, n, in, out, x, wp, b, y[3], use_ws, keep);
  if (memcmp(y[1], y[3], sizeof(float) * (size_t)n * out))
    fail_msg("%d x %d -> %d: keeping data for the backward pass changed y", n, in, out);
  free(keep), free(y[3]);
  for (int s = 0; s < n; s++)
    for (int o = 0; o < out; o++) {
      double tol, ref = linear_ref(in, x + (size_t)s * in, w + (size_t)o * in, b ? b[o] : 0.0f, &tol);
      const float got = y[0][(size_t)s * out + o];
      if (s == 2 && n > 2) {
        if (!isnan(got)) fail_msg("%d x %d -> %d: NaN input skipped at (%d, %d)", n, in, out, s, o);
      } else if (!(fabs(got - ref) <= tol)) {
        fail_msg("%d x %d -> %d: y[%d][%d] = %.9g, expected %.9g", n, in, out, s, o, got, ref);
      }
    }
  /* the zero-skipping pass; OpenBLAS blocks differently by thread count */
  for (int t = 1; t < 3 && use_ws; t++)
    if (memcmp(y[0], y[t], sizeof(float) * (size_t)n * out))
      fail_msg("%d x %d -> %d: %d threads gave other bits than 1", n, in, out, t + 1);
  for (int t = 0; t < 3; t++) free(y[t]);
  free(x), free(w), free(b), free(wp);
}

static void test_forward(void **s) {
  (void)s;
  const int shapes[][3] = {{100, 784, 200}, {1, 64, 16}, {5, 96, 17}, {37, 128, 33}, {64, 784, 10 * 16}};
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
    for (int use_ws = 0; use_ws < 2; use_ws++) /* without a workspace: the BLAS, panel by panel */
      check_forward(shapes[c][0], shapes[c][1], shapes[c][2], (int)c % 2 == 0, use_ws);
  check_forward(3, 64, 224, 1, 1); /* 14 vectors of outputs: two blocks */
  check_forward(5, 96, 24, 1, 1);  /* a last panel of 8 alone in its block, with a bias */
  check_forward(9, 64, 232, 0, 1); /* 15 vectors, the last of 8: two blocks, no bias */
}

/* The weight gradient in panels against the kernel for PyTorch's order
 * (same bits), the bias gradient and the input gradient against
 * references, in write and add modes, at 1, 2 and 3 threads; and again
 * from what a forward pass kept, that pass at another thread count. */
static void check_backward(int n, int in, int out, int add) {
  pt_rng r;
  pt_rng_init(&r, (uint64_t)n * 104729u + (uint64_t)in * 13u + (uint64_t)out, 9);
  const size_t nw = (size_t)out * in;
  float *x = image_like(&r, n, in), *w = random_floats(&r, nw, -0.1f, 0.1f);
  float *dy = random_floats(&r, (size_t)n * out, -1, 1), *wp = to_panels(in, out, w);
  float *dw0 = random_floats(&r, nw, -0.5f, 0.5f), *db0 = random_floats(&r, (size_t)out, -1, 1);
  float *dwp0 = to_panels(in, out, dw0);
  float *ref = pt_alloc_aligned(sizeof(float) * nw);
  memcpy(ref, dw0, sizeof(float) * nw);
  float *wsr = pt_alloc_aligned(sizeof(float) * (pt_linear_sparse_workspace(n, in, out, 1) + 1));
  assert_int_equal(pt_linear_backward_dw_sparse(n, in, out, x, dy, ref, add, wsr), 1);
  float *expect = to_panels(in, out, ref);
  for (int t = 0; t < 3; t++) {
    assert_int_equal(pt_ops_set_threads(t + 1), 0);
    float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_workspace(n, in, out, t + 1) + 1));
    float *dwp = pt_alloc_aligned(sizeof(float) * nw), *db = malloc(sizeof(float) * out);
    float *dx = malloc(sizeof(float) * (size_t)n * in);
    memcpy(dwp, dwp0, sizeof(float) * nw);
    memcpy(db, db0, sizeof(float) * out);
    pt_linear_backward_p(n, in, out, x, wp, dy, dwp, db, dx, add, ws, NULL);
    if (memcmp(dwp, expect, sizeof(float) * nw))
      fail_msg("%d x %d -> %d, %d threads: dw in panels differs from dw", n, in, out, t + 1);
    /* kept by a forward pass on 3 - t threads (garbage before it) */
    float *keep = random_floats(&r, pt_linear_keep_floats(n, in), -1, 1), *y = malloc(sizeof(float) * n * out);
    float *dwk = pt_alloc_aligned(sizeof(float) * nw), *dbk = malloc(sizeof(float) * out);
    forward(3 - t, n, in, out, x, wp, NULL, y, 1, keep);
    assert_int_equal(pt_ops_set_threads(t + 1), 0);
    memcpy(dwk, dwp0, sizeof(float) * nw);
    memcpy(dbk, db0, sizeof(float) * out);
    pt_linear_backward_p(n, in, out, x, wp, dy, dwk, dbk, NULL, add, ws, keep);
    if (memcmp(dwk, expect, sizeof(float) * nw) || memcmp(dbk, db, sizeof(float) * out))
      fail_msg("%d x %d -> %d, %d threads: dw from the kept data differs", n, in, out, t + 1);
    free(keep), free(y), free(dwk), free(dbk);
    for (int o = 0; o < out; o++) {
      double e = add ? db0[o] : 0.0;
      for (int s = 0; s < n; s++) e += dy[(size_t)s * out + o];
      if (!(fabs(db[o] - e) <= 1e-5 * (n + 1))) fail_msg("db[%d] = %g, expected %g", o, db[o], e);
    }
    for (int s = 0; s < n; s++)
      for (int k = 0; k < in; k++) {
        double e = 0.0, mag = 0.0;
        for (int o = 0; o < out; o++) {
          e += (double)dy[(size_t)s * out + o] * w[(size_t)o * in + k];
          mag += fabs((double)dy[(size_t)s * out + o] * w[(size_t)o * in + k]);
        }
        if (!(fabs(dx[(size_t)s * in + k] - e) <= 1e-6 * mag + 1e-7))
          fail_msg("dx[%d][%d] = %.9g, expected %.9g", s, k, dx[(size_t)s * in + k], e);
      }
    free(ws), free(dwp), free(db), free(dx);
  }
  assert_int_equal(pt_ops_set_threads(1), 0);
  free(x), free(w), free(dy), free(wp), free(dw0), free(db0), free(dwp0), free(ref), free(wsr), free(expect);
}

static void test_backward(void **s) {
  (void)s;
  check_backward(100, 784, 200, 0);
  check_backward(100, 784, 200, 1);
  check_backward(16, 64, 17, 0);
  check_backward(33, 96, 48, 1);
}

static void test_tensor_conversion(void **s) {
  (void)s;
  pt_tensor_info t = {.name = "lin1.weight", .ndim = 2, .shape = {200, 784}, .numel = 200 * 784, .panels = 1};
  pt_rng r;
  pt_rng_init(&r, 11, 1);
  float *w = random_floats(&r, t.numel, -1, 1), *p = malloc(sizeof(float) * t.numel);
  float *back = malloc(sizeof(float) * t.numel);
  pt_tensor_from_torch(&t, w, p);
  for (int o = 0; o < 200; o += 37)
    for (int k = 0; k < 784; k += 53) assert_true(p[pt_linear_panel_index(784, 200, o, k)] == w[(size_t)o * 784 + k]);
  pt_tensor_to_torch(&t, p, back);
  assert_memory_equal(w, back, sizeof(float) * t.numel);
  t.panels = 0; /* a plain copy */
  pt_tensor_from_torch(&t, w, p);
  assert_memory_equal(w, p, sizeof(float) * t.numel);
  free(w), free(p), free(back);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_panels_ok),
      cmocka_unit_test(test_index_is_a_permutation),
      cmocka_unit_test(test_forward),
      cmocka_unit_test(test_backward),
      cmocka_unit_test(test_tensor_conversion),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

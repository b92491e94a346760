/* Log-softmax and cross-entropy against the order of operations softmax.c
 * documents, written out here one element at a time: 16 double partial
 * sums (lane l takes elements l, l + 16, ... in order), combined by halves,
 * exponentials by pt_expf. Every level must give these bits exactly,
 * at row lengths that end mid-vector and at every block boundary, with
 * rows of -inf, of huge values and (log-softmax) of NaN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ops/cpu/expf.h"
#include "ops/cpu/ops.h"
#include "util/philox.h"

static double combine(double part[16]) {
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) part[l] += part[l + w];
  return part[0];
}

/* A row's maximum *mx and the sum of exp(x - mx) over it. */
static double ref_row(const float *xr, int k, float *mx) {
  float m = xr[0]; /* a NaN first element makes the row NaN; later NaNs are not the maximum */
  for (int c = 1; c < k; c++) m = xr[c] > m ? xr[c] : m;
  double part[16] = {0};
  for (int c = 0; c < k; c++) part[c % 16] += pt_expf(xr[c] - m);
  *mx = m;
  return combine(part);
}

static void ref_forward(int n, int k, const float *x, float *y) {
  for (int s = 0; s < n; s++) {
    const float *xr = x + (size_t)s * k;
    float mx;
    const double sum = ref_row(xr, k, &mx);
    const float lse = mx + (float)log(sum);
    for (int c = 0; c < k; c++) y[(size_t)s * k + c] = xr[c] - lse;
  }
}

/* The softmax the forward pass keeps: each exponential times the float
 * nearest 1 / sum. */
static void ref_softmax(int n, int k, const float *x, float *p) {
  for (int s = 0; s < n; s++) {
    const float *xr = x + (size_t)s * k;
    float mx;
    const float inv = (float)(1.0 / ref_row(xr, k, &mx));
    for (int c = 0; c < k; c++) p[(size_t)s * k + c] = pt_expf(xr[c] - mx) * inv;
  }
}

/* p: the kept softmax, or NULL: exp(y) */
static void ref_backward(int n, int k, const float *y, const float *p, const float *dy, float *dx) {
  for (int s = 0; s < n; s++) {
    double part[16] = {0};
    for (int c = 0; c < k; c++) part[c % 16] += dy[(size_t)s * k + c];
    const float fs = (float)combine(part);
    for (int c = 0; c < k; c++) {
      const size_t i = (size_t)s * k + c;
      dx[i] = dy[i] - (p ? p[i] : pt_expf(y[i])) * fs;
    }
  }
}

static double ref_cross_entropy(int n, int k, const float *z, const int32_t *y, float *dz, float scale) {
  double loss = 0.0;
  for (int s = 0; s < n; s++) {
    const float *zr = z + (size_t)s * k;
    float mx;
    const double sum = ref_row(zr, k, &mx);
    loss += (double)mx + log(sum) - zr[y[s]];
    for (int c = 0; c < k; c++)
      dz[(size_t)s * k + c] =
          (float)((double)pt_expf(zr[c] - mx) * ((double)scale / ((double)n * sum))) - (c == y[s] ? scale / (float)n : 0.0f);
  }
  return loss / n;
}

/* Same bits, NaN matching NaN. */
static void assert_same(const float *got, const float *want, size_t n, const char *what, int k) {
  for (size_t i = 0; i < n; i++) {
    if (isnan(got[i]) && isnan(want[i])) continue;
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
      fail_msg("%s, k = %d: element %zu is %.9g, expected %.9g", what, k, i, got[i], want[i]);
  }
}

static void test_matches_reference(void **s) {
  (void)s;
  static const int ks[] = {1, 2, 10, 15, 16, 17, 31, 32, 33, 200, 257, 1000};
  const int n = 21; /* more than one block of rows, and not a multiple of it */
  pt_rng r;
  pt_rng_init(&r, 11, 0);
  for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
    const int k = ks[t];
    const size_t len = (size_t)n * k;
    float *x = malloc(len * sizeof(float)), *y = malloc(len * sizeof(float)), *yr = malloc(len * sizeof(float));
    float *dy = malloc(len * sizeof(float)), *dx = malloc(len * sizeof(float)), *dxr = malloc(len * sizeof(float));
    assert_non_null(x), assert_non_null(y), assert_non_null(yr), assert_non_null(dy), assert_non_null(dx),
        assert_non_null(dxr);
    for (size_t i = 0; i < len; i++) {
      x[i] = 40.0f * (pt_rng_uniform(&r) - 0.5f);
      dy[i] = pt_rng_uniform(&r) - 0.5f;
    }
    /* Row 1 has a -inf, row 2 values far apart (exponentials that underflow
     * to 0), row 3 a NaN past the first element, row 4 a NaN first. */
    x[(size_t)1 * k + k / 2] = -INFINITY;
    for (int c = 0; c < k; c++) x[(size_t)2 * k + c] = c % 3 ? -1e30f : 1e30f;
    x[(size_t)3 * k + k - 1] = k > 1 ? NAN : x[(size_t)3 * k];
    x[(size_t)4 * k] = NAN;
    pt_log_softmax_forward(n, k, x, y, NULL);
    ref_forward(n, k, x, yr);
    assert_same(y, yr, len, "forward", k);
    pt_log_softmax_backward(n, k, yr, NULL, dy, dx);
    ref_backward(n, k, yr, NULL, dy, dxr);
    assert_same(dx, dxr, len, "backward", k);
    /* as in training: the softmax kept by the forward pass and read back */
    float *p = malloc(len * sizeof(float)), *pr = malloc(len * sizeof(float));
    assert_non_null(p), assert_non_null(pr);
    pt_log_softmax_forward(n, k, x, y, p);
    assert_same(y, yr, len, "forward keeping the softmax", k);
    ref_softmax(n, k, x, pr);
    assert_same(p, pr, len, "kept softmax", k);
    pt_log_softmax_backward(n, k, yr, pr, dy, dx);
    ref_backward(n, k, yr, pr, dy, dxr);
    assert_same(dx, dxr, len, "backward from the kept softmax", k);
    free(x), free(y), free(yr), free(dy), free(dx), free(dxr), free(p), free(pr);
  }
}

static void test_cross_entropy_matches_reference(void **s) {
  (void)s;
  static const int ks[] = {1, 2, 10, 15, 16, 17, 31, 32, 33, 200, 257};
  const int n = 13;
  pt_rng r;
  pt_rng_init(&r, 12, 0);
  for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
    const int k = ks[t];
    const size_t len = (size_t)n * k;
    float *z = malloc(len * sizeof(float)), *dz = malloc(len * sizeof(float)), *dzr = malloc(len * sizeof(float));
    int32_t *y = malloc(n * sizeof(int32_t));
    assert_non_null(z), assert_non_null(dz), assert_non_null(dzr), assert_non_null(y);
    for (size_t i = 0; i < len; i++) z[i] = 40.0f * (pt_rng_uniform(&r) - 0.5f);
    for (int i = 0; i < n; i++) y[i] = (int32_t)(pt_rng_uniform(&r) * k) % k;
    /* Row 1 has a -inf away from its label, row 2 values far apart. */
    if (k > 1) z[(size_t)1 * k + (y[1] + 1) % k] = -INFINITY;
    for (int c = 0; c < k; c++) z[(size_t)2 * k + c] = c % 3 ? -1e30f : 1e30f;
    const double got = pt_cross_entropy_loss(n, k, z, y, dz, 0.5f), want = ref_cross_entropy(n, k, z, y, dzr, 0.5f);
    if (memcmp(&got, &want, sizeof got)) fail_msg("cross-entropy, k = %d: loss %.17g, expected %.17g", k, got, want);
    assert_same(dz, dzr, len, "cross-entropy gradient", k);
    assert_true(pt_cross_entropy_loss(n, k, z, y, NULL, 0.5f) == got); /* the loss alone, without a gradient */
    free(z), free(dz), free(dzr), free(y);
  }
}

/* The cross-entropy of logits (1, 2, 3) with label 1, and its gradient
 * softmax minus the one-hot vector, against double arithmetic. */
static void test_cross_entropy_values(void **s) {
  (void)s;
  const float z[3] = {1.0f, 2.0f, 3.0f};
  const int32_t y[1] = {1};
  float dz[3];
  const double sum = exp(1.0) + exp(2.0) + exp(3.0);
  assert_true(fabs(pt_cross_entropy_loss(1, 3, z, y, dz, 1.0f) - (log(sum) - 2.0)) < 1e-6);
  for (int c = 0; c < 3; c++) assert_true(fabs(dz[c] - (exp(z[c]) / sum - (c == 1))) < 1e-6);
}

/* The rows sum to 1 after exponentiating, to float precision, and the
 * gradient of a one-hot loss is softmax minus the one-hot vector. */
static void test_values(void **s) {
  (void)s;
  const float x[3] = {1.0f, 2.0f, 3.0f};
  float y[3], dx[3];
  float p[3];
  pt_log_softmax_forward(1, 3, x, y, p);
  const double z = exp(1.0) + exp(2.0) + exp(3.0);
  for (int c = 0; c < 3; c++) assert_true(fabs(y[c] - (x[c] - log(z))) < 1e-6);
  for (int c = 0; c < 3; c++) assert_true(fabs(p[c] - exp(x[c]) / z) < 1e-7);
  const float dy[3] = {0.0f, -1.0f, 0.0f};
  for (int kept = 0; kept <= 1; kept++) {
    pt_log_softmax_backward(1, 3, y, kept ? p : NULL, dy, dx);
    for (int c = 0; c < 3; c++) assert_true(fabs(dx[c] - (exp(x[c]) / z - (c == 1))) < 1e-6);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matches_reference),
      cmocka_unit_test(test_values),
      cmocka_unit_test(test_cross_entropy_matches_reference),
      cmocka_unit_test(test_cross_entropy_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The linear layer's gradients as outer products (linear_outer.c).
 * Input gradient: each dx[s][k] is a chain of fused multiply-adds over the
 * outputs in order, from 0. Weight gradient: each dw[o][k] is what it held
 * plus a chain over the samples in order, from 0 (OpenBLAS's order, which
 * the layer used before), or that chain alone where the layer writes the
 * gradient, with what dw held (NaN here) not read. Both checked bit for
 * bit against fmaf, or at a level without fused multiply-adds against the
 * chains with each product rounded (all of dx and dw one way or all the
 * other); the same bits at 1, 2 and 3 threads; shapes with rows past the
 * last tile of 4,
 * partial chunks of inputs and partial vectors; what they leave outside dx
 * and dw untouched; and the shapes they decline. Through
 * pt_linear_backward, so that the layer takes them where they apply. */
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

#define GUARD 16 /* floats past dx's and dw's ends that must stay as they were */

static void backward(int threads, int n, int in, int out, const float *x, const float *w, const float *dy,
                     float *dw, float *dx, int add) {
  assert_int_equal(pt_ops_set_threads(threads), 0);
  float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_workspace(n, in, out, threads) + 1));
  assert_non_null(ws);
  pt_linear_backward(n, in, out, x, w, dy, dw, NULL, dx, add, ws);
  free(ws);
  assert_int_equal(pt_ops_set_threads(1), 0);
}

static void untouched(const float *v, size_t n, const char *what, int rows, int in, int out) {
  for (int i = 0; i < GUARD; i++)
    if (!(v[n + i] >= 7 && v[n + i] < 8)) fail_msg("%d x %d -> %d: wrote past %s", rows, in, out, what);
}

/* Whether the outer products take the shape: dw (1) or dx (0). */
static int taken(int n, int in, int out, const float *x, const float *dy, const float *w, int dw) {
  float *c = pt_alloc_aligned(sizeof(float) * ((size_t)(dw ? out : n) * in + 1));
  float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_dw_workspace(n, out) + 1));
  assert_non_null(c);
  assert_non_null(ws);
  const int done = dw ? pt_linear_backward_dw(n, in, out, x, dy, c, 0, ws) : pt_linear_backward_dx(n, in, out, dy, w, c);
  free(c), free(ws);
  return done;
}

static void check_shape(int n, int in, int out, int add) {
  pt_rng r;
  pt_rng_init(&r, (uint64_t)n * 1000003u + (uint64_t)in * 1009u + (uint64_t)out, 2);
  const size_t nx = (size_t)n * in, nw = (size_t)out * in;
  float *x = random_floats(&r, nx, -1, 1), *w = random_floats(&r, nw, -0.1f, 0.1f);
  float *dy = random_floats(&r, (size_t)n * out, -1, 1);
  float *dw0 = random_floats(&r, nw, -0.5f, 0.5f), *dx[3], *dw[3];
  for (int t = 0; t < 3; t++) {
    dx[t] = random_floats(&r, nx + GUARD, 7, 8);
    dw[t] = random_floats(&r, nw + GUARD, 7, 8);
    for (size_t i = 0; i < nw; i++) dw[t][i] = add ? dw0[i] : NAN; /* the gradient so far, or junk */
    backward(t + 1, n, in, out, x, w, dy, dw[t], dx[t], add);
    untouched(dx[t], nx, "dx", n, in, out);
    untouched(dw[t], nw, "dw", n, in, out);
  }
  /* Where the outer products decline (dx: under 4 samples, 96 inputs or 8
   * outputs; dw: under 16 samples or 8 outputs; both, on levels narrower than
   * AVX-512, where in is a multiple of 1,024), the BLAS sums in an order of
   * its own: there, within a float sum's tolerance. */
  const int ours_dx = taken(n, in, out, x, dy, w, 0), ours = taken(n, in, out, x, dy, w, 1);
  if (in % 1024 && ours_dx != (n >= 4 && in >= 96 && out >= 8))
    fail_msg("%d x %d -> %d: dx %s", n, in, out, ours_dx ? "taken" : "declined");
  if (in % 1024 && ours != (n >= 16 && out >= 8 && in >= 96))
    fail_msg("%d x %d -> %d: dw %s", n, in, out, ours ? "taken" : "declined");
  /* the outer products' bits do not depend on the thread count (the
   * BLAS's may) */
  for (int t = 1; t < 3; t++) {
    if (ours_dx && memcmp(dx[0], dx[t], sizeof(float) * nx))
      fail_msg("%d x %d -> %d: dx at 1 and %d threads differ", n, in, out, t + 1);
    if (ours && memcmp(dw[0], dw[t], sizeof(float) * nw))
      fail_msg("%d x %d -> %d: dw at 1 and %d threads differ", n, in, out, t + 1);
  }
  /* Each chain fused (fmaf) and unfused (the product stored, so that the
   * compiler cannot contract it): a level with fused multiply-adds has the
   * first's bits everywhere, one without the second's. The first element
   * differing from each. */
  chain_bits c = chain_bits_start();
  for (int s = 0; s < n; s++)
    for (int k = 0; k < in; k++) {
      float acc[2] = {0.0f, 0.0f};
      double ref = 0.0, mag = 0.0;
      for (int o = 0; o < out; o++) {
        const float a = dy[(size_t)s * out + o], b = w[(size_t)o * in + k];
        volatile float p = a * b;
        acc[0] = fmaf(a, b, acc[0]);
        acc[1] = acc[1] + p;
        ref += (double)a * b;
        mag += fabs((double)a * b);
      }
      const float got = dx[0][(size_t)s * in + k];
      if (ours_dx) chain_bits_check(&c, "dx", (long)s * in + k, got, acc[0], acc[1]);
      else if (fabs(got - ref) > 4.0 * (out + 1) * 6e-8 * mag + 1e-7)
        fail_msg("%d x %d -> %d: dx[%d][%d] = %.9g, expected %.9g", n, in, out, s, k, got, ref);
    }
  for (int o = 0; o < out; o++)
    for (int k = 0; k < in; k++) {
      float acc[2] = {0.0f, 0.0f};
      const float before = add ? dw0[(size_t)o * in + k] : 0.0f;
      double ref = before, mag = fabs(ref);
      for (int s = 0; s < n; s++) {
        const float a = dy[(size_t)s * out + o], b = x[(size_t)s * in + k];
        volatile float p = a * b;
        acc[0] = fmaf(a, b, acc[0]);
        acc[1] = acc[1] + p;
        ref += (double)a * b;
        mag += fabs((double)a * b);
      }
      const float got = dw[0][(size_t)o * in + k];
      if (ours) chain_bits_check(&c, "dw", (long)o * in + k, got, add ? before + acc[0] : acc[0], add ? before + acc[1] : acc[1]);
      else if (fabs(got - ref) > 4.0 * (n + 1) * 6e-8 * mag + 1e-7)
        fail_msg("%d x %d -> %d: dw[%d][%d] = %.9g, expected %.9g", n, in, out, o, k, got, ref);
    }
  if (chain_bits_neither(&c))
    fail_msg("%d x %d -> %d, add %d: %s element %ld = %.9g, expected %.9g (fused); %s element %ld = %.9g, expected "
             "%.9g (unfused)",
             n, in, out, add, c.what[0], c.at[0], c.got[0], c.want[0], c.what[1], c.at[1], c.got[1], c.want[1]);
  free(x), free(w), free(dy), free(dw0);
  for (int t = 0; t < 3; t++) free(dx[t]), free(dw[t]);
}

static void test_shapes(void **s) {
  (void)s;
  /* mnist-cnn's fc1; fmnist-mlp's lin1; rows of dx past the last 4
   * samples and of dw past the last 4 outputs; inputs past the last 96, in
   * 1 to 6 vectors, whole and partial; few samples or outputs (dw declines
   * below 16 samples, both below 8 outputs); fmnist-mlp's lin2 and
   * mnist-cnn's fc2 */
  const int shapes[][3] = {{64, 9216, 128}, {100, 784, 200}, {7, 100, 20}, {4, 96, 16},  {65, 191, 33},
                           {10, 1000, 17},  {5, 200, 300},   {5, 116, 17}, {6, 156, 18}, {9, 166, 16},
                           {16, 96, 16},    {17, 130, 17},   {33, 250, 18}, {20, 100, 19}, {16, 200, 15},
                           {100, 200, 10}, {64, 128, 10}, {16, 96, 8},   {20, 100, 7}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int add = 0; add <= 1; add++) check_shape(shapes[i][0], shapes[i][1], shapes[i][2], add);
}

static void test_declines(void **s) {
  (void)s;
  static float dy[200 * 64], w[64 * 200], dx[200 * 200], ws[64 * 200 + 16];
  assert_int_equal(pt_linear_backward_dx(3, 200, 64, dy, w, dx), 0);   /* fewer samples than a tile */
  assert_int_equal(pt_linear_backward_dx(200, 95, 64, dy, w, dx), 0);  /* fewer inputs than a chunk */
  assert_int_equal(pt_linear_backward_dx(200, 200, 7, dy, w, dx), 0);  /* few outputs */
  assert_int_equal(pt_linear_backward_dw(15, 200, 64, w, dy, dx, 1, ws), 0);  /* few samples */
  assert_int_equal(pt_linear_backward_dw(64, 95, 64, w, dy, dx, 1, ws), 0);   /* fewer inputs than a chunk */
  assert_int_equal(pt_linear_backward_dw(64, 200, 7, w, dy, dx, 1, ws), 0);   /* few outputs */
  assert_int_equal(pt_linear_backward_dw(64, 200, 64, w, dy, dx, 1, NULL), 0); /* no workspace */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_declines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

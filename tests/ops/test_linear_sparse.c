/* The weight gradient that skips zero inputs (linear_sparse.c): each
 * dw[o][k] must have the bits of the dense chain (fmaf over the samples in
 * order, from 0, then added to what dw held where the gradient
 * accumulates; or, at a level without fused multiply-adds, the same chain
 * with each product rounded before it is added: all of dw one way or all
 * the other), zeros and negative zeros in x included; the same bits at 1,
 * 2 and 3 threads; nothing written past dw; and the kernel declines
 * inputs with zeros too few to pay, shapes it does not take, and inputs
 * too large for the cache. */
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

#define GUARD 16 /* floats past dw's end that must stay as they were */

/* x (n, in) like an image's pixels: each group of 4 inputs all zero with
 * probability p_zero, and otherwise each input zero (+0 or -0) with
 * probability 1/4. */
static float *sparse_floats(pt_rng *r, int n, int in, float p_zero) {
  float *x = random_floats(r, (size_t)n * in, -1, 1);
  for (int t = 0; t < n; t++)
    for (int k = 0; k < in; k += 4) {
      const int all = pt_rng_uniform(r) < p_zero;
      for (int i = 0; i < 4 && k + i < in; i++)
        if (all || pt_rng_uniform(r) < 0.25f) x[(size_t)t * in + k + i] = pt_rng_uniform(r) < 0.5f ? 0.0f : -0.0f;
    }
  return x;
}

static int run(int threads, int n, int in, int out, const float *x, const float *dy, float *dw, int add) {
  assert_int_equal(pt_ops_set_threads(threads), 0);
  float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_sparse_workspace(n, in, out, threads) + 1));
  assert_non_null(ws);
  const int done = pt_linear_backward_dw_sparse(n, in, out, x, dy, dw, add, ws);
  free(ws);
  assert_int_equal(pt_ops_set_threads(1), 0);
  return done;
}

static void check_shape(int n, int in, int out, int add) {
  pt_rng r;
  pt_rng_init(&r, (uint64_t)n * 1000003u + (uint64_t)in * 1009u + (uint64_t)out, 3);
  const size_t nw = (size_t)out * in;
  float *x = sparse_floats(&r, n, in, 0.5f), *dy = random_floats(&r, (size_t)n * out, -1, 1);
  float *dw0 = random_floats(&r, nw, -0.5f, 0.5f), *dw[3];
  for (int t = 0; t < 3; t++) {
    dw[t] = random_floats(&r, nw + GUARD, 7, 8);
    for (size_t i = 0; i < nw; i++) dw[t][i] = add ? dw0[i] : NAN; /* the gradient so far, or junk */
    if (!run(t + 1, n, in, out, x, dy, dw[t], add)) fail_msg("%d x %d -> %d: declined", n, in, out);
    for (int i = 0; i < GUARD; i++)
      if (!(dw[t][nw + i] >= 7 && dw[t][nw + i] < 8)) fail_msg("%d x %d -> %d: wrote past dw", n, in, out);
  }
  for (int t = 1; t < 3; t++)
    if (memcmp(dw[0], dw[t], sizeof(float) * nw))
      fail_msg("%d x %d -> %d: dw at 1 and %d threads differ", n, in, out, t + 1);
  /* the chain fused, and unfused (the product stored, so that the
   * compiler cannot contract it); the first element differing from each */
  chain_bits c = chain_bits_start();
  for (int o = 0; o < out; o++)
    for (int k = 0; k < in; k++) {
      float acc[2] = {0.0f, 0.0f};
      for (int s = 0; s < n; s++) {
        const float a = dy[(size_t)s * out + o], b = x[(size_t)s * in + k];
        volatile float p = a * b;
        acc[0] = fmaf(a, b, acc[0]);
        acc[1] = acc[1] + p;
      }
      const float got = dw[0][(size_t)o * in + k];
      const float before = add ? dw0[(size_t)o * in + k] : 0.0f;
      chain_bits_check(&c, "dw", (long)o * in + k, got, add ? before + acc[0] : acc[0], add ? before + acc[1] : acc[1]);
    }
  if (chain_bits_neither(&c))
    fail_msg("%d x %d -> %d, add %d: dw[%ld][%ld] = %.9g, expected %.9g (fused); dw[%ld][%ld] = %.9g, expected "
             "%.9g (unfused)",
             n, in, out, add, c.at[0] / in, c.at[0] % in, c.got[0], c.want[0], c.at[1] / in, c.at[1] % in, c.got[1],
             c.want[1]);
  free(x), free(dy), free(dw0);
  for (int t = 0; t < 3; t++) free(dw[t]);
}

static void test_shapes(void **s) {
  (void)s;
  /* fmnist-mlp's lin1; the smallest it takes; samples past a word of 64 and
   * a test of 32, outputs past a vector and blocks of 6; over two words of
   * samples; one vector of outputs */
  const int shapes[][3] = {{100, 784, 200}, {16, 64, 16}, {65, 128, 33}, {33, 96, 100}, {130, 80, 50}, {20, 64, 16}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int add = 0; add <= 1; add++) check_shape(shapes[i][0], shapes[i][1], shapes[i][2], add);
}

/* Declining leaves dw as it was. */
static void declines(int n, int in, int out, float p_zero, int with_ws, const char *why) {
  pt_rng r;
  pt_rng_init(&r, 7, 3);
  float *x = sparse_floats(&r, n, in, p_zero), *dy = random_floats(&r, (size_t)n * out, -1, 1);
  float *dw = random_floats(&r, (size_t)out * in, 0, 1), *was = random_floats(&r, (size_t)out * in, 0, 1);
  memcpy(was, dw, sizeof(float) * (size_t)out * in);
  float *ws = pt_alloc_aligned(sizeof(float) * (pt_linear_sparse_workspace(n, in, out, 1) + 1));
  assert_non_null(ws);
  if (pt_linear_backward_dw_sparse(n, in, out, x, dy, dw, 0, with_ws ? ws : NULL))
    fail_msg("%d x %d -> %d: took it, where %s", n, in, out, why);
  if (memcmp(dw, was, sizeof(float) * (size_t)out * in)) fail_msg("%d x %d -> %d: declined but wrote dw", n, in, out);
  free(x), free(dy), free(dw), free(was), free(ws);
}

static void test_declines(void **s) {
  (void)s;
  declines(100, 784, 200, 0.0f, 1, "no group is all zero");
  declines(100, 784, 200, 0.2f, 1, "groups are all zero in 20% of samples");
  declines(100, 792, 200, 0.5f, 1, "inputs are not whole slabs of 16");
  declines(15, 784, 200, 0.5f, 1, "there are under 16 samples");
  declines(100, 784, 15, 0.5f, 1, "there are under 16 outputs");
  declines(100, 48, 200, 0.5f, 1, "there are under 64 inputs");
  declines(64, 9216, 128, 0.5f, 1, "x (2.4 MB) is larger than the L2 cache");
  declines(100, 784, 200, 0.5f, 0, "there is no workspace");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_declines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

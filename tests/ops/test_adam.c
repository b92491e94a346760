/* pt_adam_update against the float formula it implements, written out
 * here one element at a time: the same bits, NaN for NaN, for Adam, Adam
 * with weight decay and AdamW, at early and late steps (bias corrections
 * far from and near 1), over values from denormal to overflowing, with
 * denormals flushed and kept, at every level. The levels with fused
 * multiply-adds divide by the bias correction through a product and a
 * fused correction (v16_div_by, see adam.c); this is the test that its
 * rounding is the division's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ops/cpu/simd/v16.h"
#include "ops/cpu/updates.h"
#include "optim/optimizer.h"
#include "util/fpmode.h"
#include "util/philox.h"

#define N 100003 /* not a multiple of 16: the masked last chunk runs too */

static void reference(const pt_opt_config *c, size_t n, float *p, const float *g, float *m, float *v, int64_t step,
                      float lr) {
  const float b1 = c->beta1, b2 = c->beta2, eps = c->eps, wd = c->weight_decay;
  const double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
  const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  for (size_t i = 0; i < n; i++) {
    float d = g[i];
    if (c->kind == PT_OPT_ADAMW) p[i] *= 1.0f - lr * wd;
    else if (wd != 0.0f) d = d + wd * p[i];
    m[i] = m[i] * b1 + (1.0f - b1) * d;
    v[i] = v[i] * b2 + (1.0f - b2) * d * d;
    const float denom = sqrtf(v[i]) / bc2_sqrt + eps;
    p[i] = p[i] - step_size * (m[i] / denom);
  }
}

/* Magnitudes spread log-uniformly over 10^lo .. 10^hi, either sign, with
 * some exact zeros, denormals, infinities and NaNs among them. */
static void fill(pt_rng *r, float *x, size_t n, double lo, double hi, int positive) {
  for (size_t i = 0; i < n; i++) {
    const uint32_t u = pt_rng_u32(r);
    switch (u % 200) {
      case 0: x[i] = 0.0f; break;
      case 1: x[i] = 3e-40f; break;
      case 2: x[i] = INFINITY; break;
      case 3: x[i] = NAN; break;
      default: x[i] = (float)pow(10.0, lo + (hi - lo) * pt_rng_uniform(r));
    }
    if (!positive && (u >> 31)) x[i] = -x[i];
  }
}

static int same(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  uint32_t x, y;
  memcpy(&x, &a, 4);
  memcpy(&y, &b, 4);
  return x == y;
}

static void check(pt_opt_kind kind, float wd, float eps, int flush) {
  pt_fp_set_flush(flush);
  pt_opt_config c;
  pt_opt_config_defaults(&c, kind);
  c.weight_decay = wd;
  c.eps = eps;
  pt_rng r;
  pt_rng_init(&r, 7 + (uint64_t)kind * 100 + (uint64_t)flush, 0);
  float *p = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N), *m = malloc(sizeof(float) * N),
        *v = malloc(sizeof(float) * N);
  float *p2 = malloc(sizeof(float) * N), *m2 = malloc(sizeof(float) * N), *v2 = malloc(sizeof(float) * N);
  fill(&r, p, N, -6, 1, 0);
  fill(&r, m, N, -38, 3, 0);
  fill(&r, v, N, -38, 8, 1);
  memcpy(p2, p, sizeof(float) * N);
  memcpy(m2, m, sizeof(float) * N);
  memcpy(v2, v, sizeof(float) * N);
  const int64_t steps[] = {1, 2, 3, 10, 1000, 100000};
  long compared = 0;
  for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
    fill(&r, g, N, -30, 20, 0); /* up to 1e20: d * d overflows v */
    pt_adam_update(&c, N, p, g, m, v, steps[k], 0.01f);
    reference(&c, N, p2, g, m2, v2, steps[k], 0.01f);
    for (size_t i = 0; i < N; i++) {
      if (!same(p[i], p2[i]) || !same(m[i], m2[i]) || !same(v[i], v2[i]))
        fail_msg("kind %d wd %g eps %g flush %d step %lld element %zu: p %a/%a m %a/%a v %a/%a", (int)kind, wd, eps,
                 flush, (long long)steps[k], i, p[i], p2[i], m[i], m2[i], v[i], v2[i]);
      compared++;
    }
  }
  assert_int_equal(compared, 6 * N);
  free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2);
  pt_fp_set_flush(0);
}

static void test_adam_bits(void **s) {
  (void)s;
  for (int flush = 0; flush <= 1; flush++) {
    check(PT_OPT_ADAM, 0.0f, 1e-8f, flush);
    check(PT_OPT_ADAM, 1e-2f, 1e-8f, flush);
    check(PT_OPT_ADAM, 0.0f, 1e-3f, flush);
  }
}

static void test_adamw_bits(void **s) {
  (void)s;
  for (int flush = 0; flush <= 1; flush++) check(PT_OPT_ADAMW, 1e-2f, 1e-8f, flush);
}

/* Square roots of every float exponent and a spread of significands,
 * divided by every bias correction of the first 3,000 steps: the quotients
 * nearest a rounding boundary are where a double product could go wrong. */
static void test_quotients_dense(void **s) {
  (void)s;
  pt_opt_config c;
  pt_opt_config_defaults(&c, PT_OPT_ADAM);
  enum { M = 4096 };
  float p[M], g[M], m[M], v[M], p2[M], m2[M], v2[M];
  for (int64_t step = 1; step <= 3000; step++) {
    for (int i = 0; i < M; i++) {
      /* v from 2^-126 to 2^127, significand bits varying with the step */
      const uint32_t bits = (uint32_t)(1 + i % 254) << 23 | (uint32_t)((i * 2654435761u + (uint32_t)step * 40503u) & 0x7fffffu);
      float x;
      memcpy(&x, &bits, 4);
      v[i] = v2[i] = x;
      m[i] = m2[i] = 1.0f;
      p[i] = p2[i] = 0.0f;
      g[i] = 0.0f;
    }
    pt_adam_update(&c, M, p, g, m, v, step, 1.0f);
    reference(&c, M, p2, g, m2, v2, step, 1.0f);
    for (int i = 0; i < M; i++)
      if (!same(p[i], p2[i])) fail_msg("step %lld v %a: %a, expected %a", (long long)step, v2[i], p[i], p2[i]);
  }
}

/* Every length of a last, masked chunk, and whole chunks only: each
 * element the formula's bits, and nothing past n written. */
static void test_every_tail(void **s) {
  (void)s;
  pt_opt_config c;
  pt_opt_config_defaults(&c, PT_OPT_ADAMW);
  c.weight_decay = 1e-2f;
  pt_rng r;
  pt_rng_init(&r, 99, 0);
  enum { M = 48 };
  float p[M + 1], g[M + 1], m[M + 1], v[M + 1], p2[M + 1], m2[M + 1], v2[M + 1];
  for (size_t n = 1; n <= M; n++) {
    fill(&r, p, M + 1, -6, 1, 0);
    fill(&r, g, M + 1, -8, 2, 0);
    fill(&r, m, M + 1, -8, 1, 0);
    fill(&r, v, M + 1, -16, 2, 1);
    memcpy(p2, p, sizeof p), memcpy(m2, m, sizeof m), memcpy(v2, v, sizeof v);
    pt_adam_update(&c, n, p, g, m, v, 5, 0.01f);
    reference(&c, n, p2, g, m2, v2, 5, 0.01f);
    for (size_t i = 0; i <= M; i++)
      if (!same(p[i], p2[i]) || !same(m[i], m2[i]) || !same(v[i], v2[i]))
        fail_msg("n %zu element %zu: p %a/%a m %a/%a v %a/%a", n, i, p[i], p2[i], m[i], m2[i], v[i], v2[i]);
  }
}

/* v16_div_by against the division for every significand of a in [1, 2),
 * which covers every finite normal a: a power of 2 scales both quotients
 * exactly. The divisors: Adam's bias corrections sqrt(1 - beta2^t) for
 * several beta2 and t, and significands where the proof's margin is
 * thinnest (all ones) or where 1 / b rounds up to a power of 2. */
static void test_div_by_every_significand(void **s) {
  (void)s;
  if (!PT_V16_FMA) skip(); /* v16_div_by is the division itself here */
  float cs[24];
  int nc = 0;
  const double beta2[] = {0.999, 0.99, 0.9, 0.5};
  const int64_t ts[] = {1, 2, 3, 7, 100};
  for (int b = 0; b < 4; b++)
    for (int t = 0; t < 5; t++) cs[nc++] = (float)sqrt(1.0 - pow(beta2[b], (double)ts[t]));
  const uint32_t edge[] = {0x3F7FFFFFu, 0x3FFFFFFFu, 0x3F800001u, 0x3FAAAAABu};
  for (int e = 0; e < 4; e++) memcpy(&cs[nc++], &edge[e], 4);
  long wrong = 0, compared = 0;
  for (int k = 0; k < nc; k++) {
    const pt_v16 c = v16_set1(cs[k]), rc = v16_set1(1.0f / cs[k]);
    for (uint32_t i = 0; i < (1u << 23); i += 16) {
      float a[16], q[16], d[16];
      for (uint32_t l = 0; l < 16; l++) {
        const uint32_t bits = 0x3F800000u + i + l;
        memcpy(&a[l], &bits, 4);
      }
      v16_storeu(q, v16_div_by(v16_loadu(a), c, rc));
      v16_storeu(d, v16_div(v16_loadu(a), c));
      for (int l = 0; l < 16; l++) {
        if (memcmp(&q[l], &d[l], 4) && wrong++ < 5)
          print_error("%a / %a: %a, the division %a\n", (double)a[l], (double)cs[k], (double)q[l], (double)d[l]);
        compared++;
      }
    }
  }
  assert_int_equal(compared, (long)nc << 23);
  assert_int_equal(wrong, 0);
}

/* Betas outside [0, 1) and a negative epsilon are refused, as
 * torch.optim refuses them (and a beta2 of 1 would make the bias
 * correction 0). */
static void test_config_refuses_bad_betas(void **s) {
  (void)s;
  pt_opt_config c;
  pt_opt_config_defaults(&c, PT_OPT_ADAM);
  assert_int_equal(pt_opt_config_check(&c), PT_OK);
  const float bad[] = {1.0f, -0.1f, NAN, 1.5f};
  for (int i = 0; i < 4; i++) {
    pt_opt_config_defaults(&c, PT_OPT_ADAM);
    c.beta2 = bad[i];
    assert_int_equal(pt_opt_config_check(&c), PT_ERR_ARG);
    pt_opt_config_defaults(&c, PT_OPT_ADAM);
    c.beta1 = bad[i];
    assert_int_equal(pt_opt_config_check(&c), PT_ERR_ARG);
  }
  pt_opt_config_defaults(&c, PT_OPT_ADAM);
  c.eps = -1e-8f;
  assert_int_equal(pt_opt_config_check(&c), PT_ERR_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adam_bits),
      cmocka_unit_test(test_adamw_bits),
      cmocka_unit_test(test_quotients_dense),
      cmocka_unit_test(test_every_tail),
      cmocka_unit_test(test_div_by_every_significand),
      cmocka_unit_test(test_config_refuses_bad_betas),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

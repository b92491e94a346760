/* Adam and AdamW as torch.optim: Adam adds weight decay to the gradient,
 * AdamW decays the parameter itself (p *= 1 - lr * wd) before the update.
 * Bias corrections are computed in double and applied as PyTorch does:
 * denom = sqrt(v) / sqrt(1 - beta2^t) + eps; p -= lr / (1 - beta1^t) * m / denom.
 *
 * Every operation is rounded as in that float formula, so results are
 * PyTorch's bit for bit given the same gradients, at every level: 16
 * floats at a time over the vector layer, the last ones masked, nothing
 * fused. A square root and two divisions per element keep the CPU's
 * divider busy: 11 cycles per 8 floats on AVX-512 Intel cores, 78 us a
 * step for fmnist-mlp's 159,010 parameters. There the first division, by
 * the constant c = sqrt(1 - beta2^t), comes off the divider: sqrt(v) times
 * 1/c in double, rounded to float, is the float quotient sqrt(v) / c
 * exactly (68 us). Why: a float quotient a / b
 * of normal floats is never within 2^-49 of its size of a rounding
 * boundary of float (a midpoint between floats has 25 significant bits, and
 * b times it cannot equal a 24-bit a), and the double product is within
 * 2^-52. sqrt(v) is at least 3.7e-23 or 0, so the quotient is never
 * subnormal, where the boundaries have fewer bits. test_adam compares
 * every level with the formula bit for bit. On AVX2 (Zen 3) and the
 * portable level the widening and narrowing cost more than the division
 * they save (100 us against 78 on AVX2, 208 against 151 portable), so
 * those divide; PT_V16_REGS tells the AVX-512 build apart.
 *
 * The second division, by a denominator that varies, stays on the divider:
 * getting it from a reciprocal estimate and Newton steps in double is as
 * exact but took 125 us, the conversions and steps costing more than the
 * divider's wait. */
#include <math.h>

#include "ops/cpu/simd/v16.h"
#include "ops/cpu/updates.h"

#if PT_V16_REGS >= 32
#define ADAM_PRODUCT 1 /* sqrt(v) / c as a double product */
#else
#define ADAM_PRODUCT 0
#endif

typedef struct {
  pt_v16 b1, b2, a1, a2, eps, wd, decay, step, c;
  pt_vd8 inv_c;
  float wd_s;
  int decoupled;
} adam_consts;

/* One chunk of 16, or its first lanes m (the rest load 0 and are not
 * stored): the same operations in the same order as the scalar formula
 * (nothing here is fused, C11 contracting nothing), so every element has
 * the formula's bits whichever way it is reached. Inlined into both
 * calls, so that the whole chunks take plain loads and stores. */
static inline __attribute__((always_inline)) void adam16(float *p, const float *g, float *m, float *v, pt_m16 lanes,
                                                         const adam_consts *k) {
  const int all = lanes == 0xFFFFu;
  pt_v16 pi = all ? v16_loadu(p) : v16_maskz_loadu(lanes, p), d = all ? v16_loadu(g) : v16_maskz_loadu(lanes, g);
  const pt_v16 m0 = all ? v16_loadu(m) : v16_maskz_loadu(lanes, m), v0 = all ? v16_loadu(v) : v16_maskz_loadu(lanes, v);
  if (k->decoupled) pi = v16_mul(pi, k->decay);
  else if (k->wd_s != 0.0f) d = v16_add(d, v16_mul(k->wd, pi));
  const pt_v16 mi = v16_add(v16_mul(m0, k->b1), v16_mul(k->a1, d));
  const pt_v16 vi = v16_add(v16_mul(v0, k->b2), v16_mul(v16_mul(k->a2, d), d));
  const pt_v16 root = v16_sqrt(vi);
#if ADAM_PRODUCT
  const pt_v16 scaled = v16_from_vd8(vd8_mul(vd8_from_lo(root), k->inv_c), vd8_mul(vd8_from_hi(root), k->inv_c));
#else
  const pt_v16 scaled = v16_div(root, k->c);
#endif
  const pt_v16 q = v16_div(mi, v16_add(scaled, k->eps));
  const pt_v16 pn = v16_sub(pi, v16_mul(k->step, q));
  if (all) {
    v16_storeu(m, mi);
    v16_storeu(v, vi);
    v16_storeu(p, pn);
  } else {
    v16_mask_storeu(m, lanes, mi);
    v16_mask_storeu(v, lanes, vi);
    v16_mask_storeu(p, lanes, pn);
  }
}

void pt_adam_update(const pt_opt_config *c, size_t n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                    int64_t step, float lr) {
  const float b1 = c->beta1, b2 = c->beta2, wd = c->weight_decay;
  const double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
  const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  const adam_consts k = {v16_set1(b1),        v16_set1(b2),       v16_set1(1.0f - b1),
                         v16_set1(1.0f - b2), v16_set1(c->eps),   v16_set1(wd),
                         v16_set1(1.0f - lr * wd), v16_set1(step_size), v16_set1(bc2_sqrt),
                         vd8_set1(1.0 / (double)bc2_sqrt), wd, c->kind == PT_OPT_ADAMW};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) adam16(p + i, g + i, m + i, v + i, 0xFFFFu, &k);
  if (i < n) adam16(p + i, g + i, m + i, v + i, v16_lanes((int)(n - i)), &k);
}

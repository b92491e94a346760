/* Adam and AdamW as torch.optim: Adam adds weight decay to the gradient,
 * AdamW decays the parameter itself (p *= 1 - lr * wd) before the update.
 * Bias corrections are computed in double and applied as PyTorch does:
 * denom = sqrt(v) / sqrt(1 - beta2^t) + eps; p -= lr / (1 - beta1^t) * m / denom.
 *
 * Every operation is rounded as in that float formula, so results are
 * PyTorch's bit for bit given the same gradients, at every level: 16
 * floats at a time over the vector layer, the last ones masked. A square
 * root and two divisions per element make it a divider's loop, not a
 * memory one: on Zen 3 (AVX2) it took 0.47 ns an element whether the
 * arrays sat in L1 or not, 74 us a step for fmnist-mlp's 159,010
 * parameters. Where the level has fused multiply-adds, the first division,
 * by the constant c = sqrt(1 - beta2^t), leaves the divider: a product by
 * 1/c and Markstein's fused correction give the float quotient exactly
 * (v16_div_by in the vector layer has the proof; test_adam checks it
 * against the division for every significand). With the two passes below,
 * 56 us. (On AVX-512 this replaces sqrt(v) times 1/c in double, rounded to
 * float, exact too but four conversions where this is three arithmetic
 * operations; on AVX2 the conversions had cost more than the division they
 * saved. Not yet timed on an AVX-512 machine.)
 *
 * The second division, by a denominator that varies, stays on the divider:
 * getting it from a reciprocal estimate and Newton steps in double is as
 * exact but took 125 us, the conversions and steps costing more than the
 * divider's wait. */
#include <math.h>

#include "ops/cpu/simd/v16.h"
#include "ops/cpu/updates.h"

typedef struct {
  pt_v16 b1, b2, a1, a2, eps, wd, decay, step, c, rc; /* rc: 1 / c rounded to float */
  float wd_s;
  int decoupled;
} adam_consts;

/* Where the level has fused multiply-adds, elements go in blocks, each in
 * two passes: the moments and square roots, then the quotients and
 * parameters. In one pass a vector's chain (square root, the exact
 * quotient's three steps, the division) is about 50 cycles long, and the
 * loop ran, as we read it, at the rate the scheduler could hold chains in
 * flight rather than at the divider's: 74 us at fmnist-mlp's 159,010
 * parameters on Zen 3 at 1 thread with the quotient (73.8 with two
 * divisions). Split after the square root, each pass's chain is short
 * enough to keep the divider busy: 56 us. The roots wait in L1 between
 * the passes. The portable level divides twice and is bound by that;
 * there the second pass's loads cost 12% (164 us against 147), so it
 * takes one. */
#define ADAM_BLOCK 512
#define ADAM_TWO_PASSES PT_V16_FMA

/* The chunk of 16 at p, g, m and v, or its first lanes (the others load 0
 * and are not stored). The operations and their order are the scalar
 * formula's (nothing here is fused, C11 contracting nothing, but for
 * v16_div_by's exact quotient), so every element has the formula's bits
 * whichever way it is reached. In two passes this is the first: the
 * moments, and sqrt(v) to root (16 floats). */
static inline __attribute__((always_inline)) void adam16(float *p, const float *g, float *m, float *v, pt_m16 lanes,
                                                         const adam_consts *k, float *root) {
  const int all = lanes == 0xFFFFu;
  pt_v16 pi = all ? v16_loadu(p) : v16_maskz_loadu(lanes, p), d = all ? v16_loadu(g) : v16_maskz_loadu(lanes, g);
  const pt_v16 m0 = all ? v16_loadu(m) : v16_maskz_loadu(lanes, m), v0 = all ? v16_loadu(v) : v16_maskz_loadu(lanes, v);
  if (k->decoupled) pi = v16_mul(pi, k->decay);
  else if (k->wd_s != 0.0f) d = v16_add(d, v16_mul(k->wd, pi));
  const pt_v16 mi = v16_add(v16_mul(m0, k->b1), v16_mul(k->a1, d));
  const pt_v16 vi = v16_add(v16_mul(v0, k->b2), v16_mul(v16_mul(k->a2, d), d));
  const pt_v16 rt = v16_sqrt(vi);
  if (ADAM_TWO_PASSES) {
    v16_store(root, rt);
  } else {
    const pt_v16 q = v16_div(mi, v16_add(v16_div_by(rt, k->c, k->rc), k->eps));
    const pt_v16 pn = v16_sub(pi, v16_mul(k->step, q));
    if (all) v16_storeu(p, pn);
    else v16_mask_storeu(p, lanes, pn);
  }
  if (all) {
    v16_storeu(m, mi);
    v16_storeu(v, vi);
  } else {
    v16_mask_storeu(m, lanes, mi);
    v16_mask_storeu(v, lanes, vi);
  }
}

/* The second pass over a chunk: the parameters from m and root. */
static inline __attribute__((always_inline)) void adam16_params(float *p, const float *m, const float *root,
                                                                pt_m16 lanes, const adam_consts *k) {
  const int all = lanes == 0xFFFFu;
  pt_v16 pi = all ? v16_loadu(p) : v16_maskz_loadu(lanes, p);
  const pt_v16 mi = all ? v16_loadu(m) : v16_maskz_loadu(lanes, m);
  if (k->decoupled) pi = v16_mul(pi, k->decay);
  const pt_v16 q = v16_div(mi, v16_add(v16_div_by(v16_load(root), k->c, k->rc), k->eps));
  const pt_v16 pn = v16_sub(pi, v16_mul(k->step, q));
  if (all) v16_storeu(p, pn);
  else v16_mask_storeu(p, lanes, pn);
}

/* The first len elements, at most ADAM_BLOCK, in two passes: whole chunks
 * with plain loads and stores, a last partial one with masked ones. */
static inline __attribute__((always_inline)) void adam_block(float *p, const float *g, float *m, float *v, int len,
                                                             const adam_consts *k) {
  float root[ADAM_BLOCK] __attribute__((aligned(64))); /* sqrt(v), (len) */
  const int whole = len & ~15;
  const pt_m16 tail = v16_lanes(len - whole);
  for (int j = 0; j < whole; j += 16) adam16(p + j, g + j, m + j, v + j, 0xFFFFu, k, root + j);
  if (tail) adam16(p + whole, g + whole, m + whole, v + whole, tail, k, root + whole);
  for (int j = 0; j < whole; j += 16) adam16_params(p + j, m + j, root + j, 0xFFFFu, k);
  if (tail) adam16_params(p + whole, m + whole, root + whole, tail, k);
}

void pt_adam_update(const pt_opt_config *c, size_t n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                    int64_t step, float lr) {
  const float b1 = c->beta1, b2 = c->beta2, wd = c->weight_decay;
  const double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
  const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  const adam_consts k = {v16_set1(b1),        v16_set1(b2),       v16_set1(1.0f - b1),
                         v16_set1(1.0f - b2), v16_set1(c->eps),   v16_set1(wd),
                         v16_set1(1.0f - lr * wd), v16_set1(step_size), v16_set1(bc2_sqrt),
                         v16_set1(1.0f / bc2_sqrt), wd, c->kind == PT_OPT_ADAMW};
  size_t i = 0;
  if (ADAM_TWO_PASSES) {
    for (; i + ADAM_BLOCK <= n; i += ADAM_BLOCK) adam_block(p + i, g + i, m + i, v + i, ADAM_BLOCK, &k);
    if (i < n) adam_block(p + i, g + i, m + i, v + i, (int)(n - i), &k);
  } else {
    /* in one flat loop: in blocks, GCC moved the portable level's vectors
     * through the stack (147 us became 299) */
    for (; i + 16 <= n; i += 16) adam16(p + i, g + i, m + i, v + i, 0xFFFFu, &k, NULL);
    if (i < n) adam16(p + i, g + i, m + i, v + i, v16_lanes((int)(n - i)), &k, NULL);
  }
}

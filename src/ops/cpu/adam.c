/* Adam and AdamW as torch.optim: Adam adds weight decay to the gradient,
 * AdamW decays the parameter itself (p *= 1 - lr * wd) before the update.
 * Bias corrections are computed in double and applied as PyTorch does:
 * denom = sqrt(v) / sqrt(1 - beta2^t) + eps; p -= lr / (1 - beta1^t) * m / denom.
 *
 * Every operation is rounded as in that float formula, so results are
 * PyTorch's bit for bit given the same gradients. A square root and two
 * divisions per element keep the CPU's divider busy: 11 cycles per 8
 * floats, 78 us a step for fmnist-mlp's 159,010 parameters. The AVX-512
 * path takes the first division, by the constant c = sqrt(1 - beta2^t),
 * off the divider: sqrt(v) times 1/c in double, rounded to float, is the
 * float quotient sqrt(v) / c exactly (68 us). Why: a float quotient a / b
 * of normal floats is never within 2^-49 of its size of a rounding
 * boundary of float (a midpoint between floats has 25 significant bits, and
 * b times it cannot equal a 24-bit a), and the double product is within
 * 2^-52. sqrt(v) is at least 3.7e-23 or 0, so the quotient is never
 * subnormal, where the boundaries have fewer bits. test_adam compares the
 * two paths bit for bit.
 *
 * The second division, by a denominator that varies, stays on the divider:
 * getting it from a reciprocal estimate and Newton steps in double is as
 * exact but took 125 us, the conversions and steps costing more than the
 * divider's wait. */
#include <math.h>

#include "ops/cpu/updates.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

void pt_adam_update(const pt_opt_config *c, size_t n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                    int64_t step, float lr) {
  const float b1 = c->beta1, b2 = c->beta2, eps = c->eps, wd = c->weight_decay;
  const int decoupled = c->kind == PT_OPT_ADAMW;
  const double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
  const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  const float decay = 1.0f - lr * wd;
  size_t i = 0;
#ifdef __AVX512F__
  /* 8 floats at a time: the divider takes ymm square roots and divisions
   * at twice its zmm rate on these cores. */
  const __m256 vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2), va1 = _mm256_set1_ps(1.0f - b1),
               va2 = _mm256_set1_ps(1.0f - b2), veps = _mm256_set1_ps(eps), vwd = _mm256_set1_ps(wd),
               vdecay = _mm256_set1_ps(decay), vstep = _mm256_set1_ps(step_size);
  const __m512d inv_c = _mm512_set1_pd(1.0 / (double)bc2_sqrt);
  for (; i + 8 <= n; i += 8) {
    __m256 pi = _mm256_loadu_ps(p + i), d = _mm256_loadu_ps(g + i);
    if (decoupled) pi = _mm256_mul_ps(pi, vdecay);
    else if (wd != 0.0f) d = _mm256_add_ps(d, _mm256_mul_ps(vwd, pi));
    const __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), vb1), _mm256_mul_ps(va1, d));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), vb2), _mm256_mul_ps(_mm256_mul_ps(va2, d), d));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 scaled = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm256_sqrt_ps(vi)), inv_c));
    const __m256 q = _mm256_div_ps(mi, _mm256_add_ps(scaled, veps));
    _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_mul_ps(vstep, q)));
  }
#endif
  for (; i < n; i++) {
    float d = g[i];
    if (decoupled) p[i] *= decay;
    else if (wd != 0.0f) d = d + wd * p[i];
    m[i] = m[i] * b1 + (1.0f - b1) * d;
    v[i] = v[i] * b2 + (1.0f - b2) * d * d;
    float denom = sqrtf(v[i]) / bc2_sqrt + eps;
    p[i] = p[i] - step_size * (m[i] / denom);
  }
}

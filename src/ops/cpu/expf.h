/* exp for float arrays, written so the compiler vectorises it.
 *
 * The C library's expf is a call per element that no loop vectorises
 * (without -ffast-math), and in log-softmax, which exponentiates every
 * activation forward and backward, it took most of the layer's time. This
 * is the textbook reduction: exp(x) = 2^n * exp(r) with n = round(x /
 * ln 2) and r = x - n ln 2 (ln 2 split in two so r stays exact), exp(r) by
 * its Taylor series to degree 7 on |r| <= ln 2 / 2 (truncation below
 * 2^-29 relative, so the result is within about 2 ulp of the exact value),
 * and 2^n built in the exponent bits. Inputs below -87.3 (where floats
 * become denormal) give 0, and above 88.7 give +inf, as expf would round
 * them; NaN gives NaN.
 */
#ifndef PT_OPS_CPU_EXPF_H
#define PT_OPS_CPU_EXPF_H

#include <stdint.h>

#include "ops/cpu/simd/v16.h"

/* Fused exactly where the vector level's v16_fmadd is, so that pt_expf16
 * gives every lane pt_expf's bits at every level; where it is not (the
 * portable level), a software fmaf would cost more than the loop. */
#if PT_V16_FMA
#define PT_EXPF_MADD(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define PT_EXPF_MADD(a, b, c) ((a) * (b) + (c))
#endif

static inline float pt_expf(float x) {
  const float lo = -87.33654f, hi = 88.72283f;
  /* A NaN becomes 0 here, so that the steps below stay defined (converting
   * NaN to an integer is undefined behaviour); the result is x again. */
  const float xc = x < lo ? lo : x > hi ? hi : x == x ? x : 0.0f;
  /* Round to nearest even by the float adder: 1.5 * 2^23 leaves no
   * fraction bits. (roundevenf would be exact too, but blocks vectorising.) */
  const float shift = 12582912.0f;
  const float n = (xc * 1.44269504088896341f + shift) - shift;
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  /* Horner's steps as fused multiply-adds where the CPU has them: half the
   * instructions, one rounding each (log-softmax forward and backward 12%
   * faster at fmnist-mlp's 100 x 200). */
  float p = 1.0f / 5040.0f;
  p = PT_EXPF_MADD(p, r, 1.0f / 720.0f);
  p = PT_EXPF_MADD(p, r, 1.0f / 120.0f);
  p = PT_EXPF_MADD(p, r, 1.0f / 24.0f);
  p = PT_EXPF_MADD(p, r, 1.0f / 6.0f);
  p = PT_EXPF_MADD(p, r, 0.5f);
  p = PT_EXPF_MADD(p, r, 1.0f);
  p = PT_EXPF_MADD(p, r, 1.0f);
  /* 2^n in the exponent field: n + 127, with n in [-126, 128]; 2^128 does
   * not fit one float, so its last factor of 2 is applied separately. */
  const int32_t e = (int32_t)n + 127;
  const int32_t big = e > 254;
  union {
    int32_t i;
    float f;
  } scale = {.i = (int32_t)((uint32_t)(e - big) << 23)};
  const float y = p * scale.f * (big ? 2.0f : 1.0f);
  return x < lo ? 0.0f : x > hi ? __builtin_inff() : x != x ? x : y;
}

/* exp(xc) for xc already clamped: n = round(xc / ln 2), the polynomial
 * in r = xc - n ln 2, left in *p, with n returned for the caller's 2^n.
 * pt_expf's steps in pt_expf's order, fused where the level's
 * v16_fmadd is. */
static inline pt_v16 pt_expf16_reduced(pt_v16 xc, pt_v16 *p) {
  const pt_v16 shift = v16_set1(12582912.0f);
  const pt_v16 n = v16_sub(v16_add(v16_mul(xc, v16_set1(1.44269504088896341f)), shift), shift);
  const pt_v16 r = v16_sub(v16_sub(xc, v16_mul(n, v16_set1(0.693359375f))), v16_mul(n, v16_set1(-2.12194440e-4f)));
#if PT_V16_FMA
#define PT_EXPF16_MADD(a, b, c) v16_fmadd((a), (b), (c))
#else
#define PT_EXPF16_MADD(a, b, c) v16_add(v16_mul((a), (b)), (c))
#endif
  pt_v16 q = v16_set1(1.0f / 5040.0f);
  q = PT_EXPF16_MADD(q, r, v16_set1(1.0f / 720.0f));
  q = PT_EXPF16_MADD(q, r, v16_set1(1.0f / 120.0f));
  q = PT_EXPF16_MADD(q, r, v16_set1(1.0f / 24.0f));
  q = PT_EXPF16_MADD(q, r, v16_set1(1.0f / 6.0f));
  q = PT_EXPF16_MADD(q, r, v16_set1(0.5f));
  q = PT_EXPF16_MADD(q, r, v16_set1(1.0f));
  q = PT_EXPF16_MADD(q, r, v16_set1(1.0f));
#undef PT_EXPF16_MADD
  *p = q;
  return n;
}

/* pt_expf on 16 lanes, every lane with the bits pt_expf gives it
 * (test_expf checks it): the same operations in the same order, fused
 * where pt_expf's are. GCC vectorises the scalar loops only where nothing
 * else is in the way; log-softmax's rows, with a reduction on either side
 * of the exponentials, ran at a quarter of this speed on AVX-512.
 *
 * Two steps are spelled differently, for the levels whose masks are bits
 * rather than registers (AVX2, portable), where every blend costs several
 * instructions: the clamp is a max and a min (NaN becomes lo rather than
 * 0, a value that is replaced by x at the end either way), and 2^128's
 * extra factor of 2 is chosen by integer arithmetic, e + 1 >> 8 being 1
 * exactly where e > 254 (e is 1 to 255). The lanes outside [lo, hi] or
 * NaN, which are the only ones the clamp moves, are found by one compare
 * and are rare, so their fix-ups sit behind a branch. */
static inline pt_v16 pt_expf16(pt_v16 x) {
  const pt_v16 lo = v16_set1(-87.33654f), hi = v16_set1(88.72283f);
  const pt_v16 xc = v16_min(v16_max(x, lo), hi);
  pt_v16 p;
  const pt_v16 n = pt_expf16_reduced(xc, &p);
  const pt_vi16 e = vi16_add(vi16_from_v16(n), vi16_set1(127));
  const pt_vi16 big = vi16_srli(vi16_add(e, vi16_set1(1)), 8);
  const pt_v16 scale = vi16_as_float(vi16_slli(vi16_sub(e, big), 23));
  const pt_v16 twice = vi16_as_float(vi16_slli(vi16_add(big, vi16_set1(127)), 23)); /* 2^big */
  pt_v16 y = v16_mul(v16_mul(p, scale), twice);
  const pt_m16 moved = ~v16_cmpeq(x, xc) & 0xFFFFu;
  if (moved) {
    y = v16_blend(moved, y, x); /* NaN stays NaN; the other lanes are set below */
    y = v16_blend(v16_cmpgt(x, hi), y, v16_set1(__builtin_inff()));
    y = v16_blend(v16_cmplt(x, lo), y, v16_zero());
  }
  return y;
}

/* pt_expf16 of an x that is <= 0 or NaN, as log-softmax's x - max(x)
 * always is: the same bits with 7 fewer operations a vector, since nothing
 * can overflow (no lane passes the upper clamp, and 2^n needs no second
 * factor, which pt_expf16 multiplies by 1 here). Log-softmax's forward
 * pass went from 26 to 21.7 us at fmnist-mlp's 100 x 200 (AVX2, Zen 3). */
static inline pt_v16 pt_expf16_nonpos(pt_v16 x) {
  const pt_v16 lo = v16_set1(-87.33654f);
  const pt_v16 xc = v16_max(x, lo); /* a NaN lane becomes lo, and x again below */
  pt_v16 p;
  const pt_v16 n = pt_expf16_reduced(xc, &p);
  /* n in [-126, 0]: 2^n is one float */
  pt_v16 y = v16_mul(p, vi16_as_float(vi16_slli(vi16_add(vi16_from_v16(n), vi16_set1(127)), 23)));
  const pt_m16 moved = ~v16_cmpeq(x, xc) & 0xFFFFu;
  if (moved) {
    y = v16_blend(moved, y, x);
    y = v16_blend(v16_cmplt(x, lo), y, v16_zero());
  }
  return y;
}

#endif

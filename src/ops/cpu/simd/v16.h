/* The vector layer every CPU kernel is written over: 16 floats (pt_v16),
 * 16 int32 (pt_vi16), 8 doubles (pt_vd8) and a 16-bit lane mask (pt_m16),
 * with one set of inline operations implemented once per instruction-set
 * level. A kernel's source is written once, against these names, and built
 * once per level (see src/ops/cpu/isa/): one 512-bit register on AVX-512,
 * two 256-bit ones on AVX2 + FMA, four 128-bit ones (SSE2 on x86-64, NEON
 * on Arm, plain C elsewhere) in the portable build.
 *
 * Why 16 lanes everywhere rather than the machine's width: the kernels'
 * data layouts (linear weights in panels of 16 outputs, pool codes, the
 * Philox streams, 16x16 transposes) then stay the same at every level, so
 * checkpoints, masks and tests do not depend on the CPU; what a narrower
 * level changes is how many of these vectors a register tile holds, which
 * each kernel takes from PT_V16_REGS rather than forking its source.
 *
 * Semantics follow the AVX-512 intrinsics they are named after, including
 * the ones that matter for correctness: masked loads never touch memory in
 * unselected lanes (they may be past the end of a buffer), and a blend
 * takes b where the mask is set. Results are deterministic at each level;
 * they may differ between levels (FMA contracts, reduction trees), which is
 * why tests compare each level with the portable reference within a
 * tolerance and with itself bit for bit.
 */
#ifndef PT_OPS_CPU_SIMD_V16_H
#define PT_OPS_CPU_SIMD_V16_H

#include <stddef.h>
#include <stdint.h>

/* The bits of the lanes selected, lane i at bit i. */
typedef uint32_t pt_m16;

/* The first n lanes (none for n <= 0, all for n >= 16). */
static inline pt_m16 v16_lanes(int n) { return n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1u; }

#if defined(PT_V16_EMULATE_AVX512) ||                                                                               \
    (defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__))
#include "ops/cpu/simd/v16_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__)
#include "ops/cpu/simd/v16_avx2.h"
#else
#include "ops/cpu/simd/v16_portable.h"
#endif

/* ---- half vectors ----
 * pt_v8 holds 8 floats with the same arithmetic as pt_v16 (v8_fmadd is
 * fused exactly where v16_fmadd is), for register tiles that need a finer
 * grain than 16 lanes on a narrow level: on AVX2 a tile of 3 half vectors
 * by 4 inputs fills the 16 registers, where whole vectors give only 2 by 4
 * or 4 by 4 (spilled). Only the operations such tiles use are defined. */
static inline pt_v8 v8_maskz_loadu(pt_m16 m, const float *p) {
  float l[8] = {0};
  for (int i = 0; i < 8; i++)
    if (m >> i & 1u) l[i] = p[i];
  return v8_loadu(l);
}
static inline void v8_mask_storeu(float *p, pt_m16 m, pt_v8 v) {
  float l[8];
  v8_storeu(l, v);
  for (int i = 0; i < 8; i++)
    if (m >> i & 1u) p[i] = l[i];
}

/* ---- built from the above, the same at every level ---- */

/* c + a * the vector at base + off bytes (aligned): for inner loops that
 * read several arrays at one varying offset. Written out on AVX2
 * (v16_avx2.h), where GCC otherwise reaches each array's element through
 * an address of its own, two instructions an array in the loop. */
#if !PT_V16_HAS_FMADD_AT
static inline pt_v16 v16_fmadd_at(pt_v16 a, const float *base, size_t off, pt_v16 c) {
  return v16_fmadd(a, v16_load((const float *)((const char *)base + off)), c);
}
static inline pt_v8 v8_fmadd_at(pt_v8 a, const float *base, size_t off, pt_v8 c) {
  return v8_fmadd(a, v8_load((const float *)((const char *)base + off)), c);
}
#endif

static inline pt_v16 v16_mask_mov(pt_v16 src, pt_m16 m, pt_v16 a) { return v16_blend(m, src, a); }
static inline pt_v16 v16_maskz_mov(pt_m16 m, pt_v16 a) { return v16_blend(m, v16_zero(), a); }
static inline pt_v16 v16_maskz_loadu(pt_m16 m, const float *p) { return v16_mask_loadu(v16_zero(), m, p); }
/* c - a * b, fused where a * b + c is. */
static inline pt_v16 v16_fnmadd(pt_v16 a, pt_v16 b, pt_v16 c) { return v16_fmadd(v16_sub(v16_zero(), a), b, c); }
/* a / b rounded as the division is, for a b shared by many a, given rb =
 * 1 / b rounded to float: q = a rb, then Markstein's correction q + (a - q b)
 * rb, both fused, in place of the divider (on Zen 3 a division of 8 floats
 * holds the divider for 3 cycles, a square root for 5). Exact for finite a
 * with a / b and b normal. Why: the fused remainder r = a - q b is exact and
 * q + r rb = a / b + r (rb - 1 / b); that error moves the sum across a
 * rounding boundary of float only if a / b lies nearer to a midpoint than
 * |q - a / b| |b rb - 1|. With 24-bit significands A, B of a, b, a / b is
 * never nearer to a midpoint than a relative 1 / (2 B) of an ulp (b times a
 * midpoint is a multiple of 2^-47 of b's and the midpoint's scale; a is a
 * multiple of that too, and differs), q lies within half an ulp of the
 * midpoint then, and |b rb - 1| <= B 2^-48 (rb is 1 / b rounded to
 * nearest): the error stays below the distance because B (B + 1) < 2^48.
 * Also +inf / b is +inf and NaN stays NaN; -inf would give NaN and -0
 * gives +0, so those are for callers whose a is at least +0 (square roots).
 * Where v16_fmadd is not fused (the portable level) this divides. */
static inline pt_v16 v16_div_by(pt_v16 a, pt_v16 b, pt_v16 rb) {
#if PT_V16_FMA
  /* -b: a constant where b is, out of the caller's loop; q at most the
   * largest float, so that a = +inf gives inf - (finite) = inf */
  const pt_v16 q = v16_mul(a, rb), r = v16_fmadd(v16_min(q, v16_set1(3.40282347e38f)), v16_sub(v16_zero(), b), a);
  return v16_fmadd(r, rb, q);
#else
  (void)rb;
  return v16_div(a, b);
#endif
}
static inline pt_vi16 vi16_mask_mov(pt_vi16 src, pt_m16 m, pt_vi16 a) { return vi16_blend(m, src, a); }
static inline pt_vi16 vi16_maskz_loadu(pt_m16 m, const int32_t *p) {
  return v16_as_int(v16_maskz_loadu(m, (const float *)p));
}
static inline void vi16_mask_storeu(int32_t *p, pt_m16 m, pt_vi16 v) { v16_mask_storeu((float *)p, m, vi16_as_float(v)); }
static inline pt_vi16 vi16_loadu(const int32_t *p) { return v16_as_int(v16_loadu((const float *)p)); }
static inline void vi16_storeu(int32_t *p, pt_vi16 v) { v16_storeu((float *)p, vi16_as_float(v)); }

/* The used lanes m of v to the front, in order, the rest 0
 * (_mm512_maskz_compress_ps), and its inverse (_mm512_maskz_expand_ps). */
static inline pt_v16 v16_compress(pt_m16 m, pt_v16 v) {
#if PT_V16_HAS_COMPRESS
  return v16_compress_native(m, v);
#else
  float in[16], out[16] = {0};
  v16_storeu(in, v);
  for (int l = 0, k = 0; l < 16; l++)
    if (m >> l & 1u) out[k++] = in[l];
  return v16_loadu(out);
#endif
}
static inline pt_v16 v16_expand(pt_m16 m, pt_v16 v) {
#if PT_V16_HAS_COMPRESS
  return v16_expand_native(m, v);
#else
  float in[16], out[16] = {0};
  v16_storeu(in, v);
  for (int l = 0, k = 0; l < 16; l++)
    if (m >> l & 1u) out[l] = in[k++];
  return v16_loadu(out);
#endif
}

/* Lane j: the sum of v[j]'s lanes, in one order at every level: ((P0 +
 * P1) + (P2 + P3)), P_q being (l[4q] + l[4q+2]) + (l[4q+1] + l[4q+3]) of
 * its lanes l (v16_avx512.h's shuffles sum in this order). */
static inline pt_v16 v16_hsum16(const pt_v16 v[16]) {
#if PT_V16_HAS_HSUM16
  return v16_hsum16_native(v);
#else
  float out[16];
  for (int j = 0; j < 16; j++) {
    float l[16], p[4];
    v16_storeu(l, v[j]);
    for (int q = 0; q < 4; q++) p[q] = (l[4 * q] + l[4 * q + 2]) + (l[4 * q + 1] + l[4 * q + 3]);
    out[j] = (p[0] + p[1]) + (p[2] + p[3]);
  }
  return v16_loadu(out);
#endif
}

#endif

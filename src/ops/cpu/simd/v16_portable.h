/* pt_v16 in portable C: four 4-lane GCC vectors per vector, which the
 * compiler lowers to SSE2 on any x86-64, NEON on aarch64 and scalar code
 * elsewhere. On x86-64 and elsewhere, no fused multiply-add: x86-64's
 * baseline has none, and a software fmaf would cost more than the kernels
 * gain. On aarch64 it is baseline (ARMv8-A's FMLA), one instruction where
 * a multiply and an add are two, so v16_fmadd fuses there, as on AVX2.
 * Included by v16.h only. */
#ifndef PT_OPS_CPU_SIMD_V16_PORTABLE_H
#define PT_OPS_CPU_SIMD_V16_PORTABLE_H

#include <math.h>
#include <string.h>
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define PT_V16_NEON 1
#else
#define PT_V16_NEON 0
#endif

#define PT_V16_LEVEL "generic"
/* 16 SSE registers; on aarch64 32 NEON ones, but AVX2's tiles (8) spilled
 * there: NEON's multiply-adds take no memory operand, so each row loaded
 * needs a register, and the innermost loops of the sparse forward pass,
 * the direct convolution and the dot kernel touched the stack 132-288
 * times against 18-80 with these tiles (GCC 12, counted in the objects) */
#define PT_V16_REGS 4
#define PT_V16_HAS_COMPRESS 0
#define PT_V16_HAS_FMADD_AT 0 /* v16.h's, from v16_load */
#define PT_V16_HAS_HSUM16 0 /* v16.h's, through memory */

typedef float pt_f4 __attribute__((vector_size(16)));
typedef int32_t pt_i4 __attribute__((vector_size(16)));
typedef double pt_d2 __attribute__((vector_size(16)));
typedef struct {
  pt_f4 q[4];
} pt_v16;
typedef struct {
  pt_i4 q[4];
} pt_vi16;
typedef struct {
  pt_d2 q[4];
} pt_vd8;

#define V16_P_MAP(T, expr)                                                                                           \
  do {                                                                                                               \
    for (int i_ = 0; i_ < 4; i_++) r.q[i_] = (expr);                                                                 \
  } while (0)

static inline pt_v16 v16_zero(void) { return (pt_v16){{{0}, {0}, {0}, {0}}}; }
static inline pt_v16 v16_set1(float f) {
  const pt_f4 s = {f, f, f, f};
  return (pt_v16){{s, s, s, s}};
}
static inline pt_v16 v16_loadu(const float *p) {
  pt_v16 r;
  memcpy(&r, p, sizeof r);
  return r;
}
static inline pt_v16 v16_load(const float *p) { return v16_loadu(p); }
static inline void v16_storeu(float *p, pt_v16 v) { memcpy(p, &v, sizeof v); }
static inline void v16_store(float *p, pt_v16 v) { memcpy(p, &v, sizeof v); }
static inline pt_v16 v16_mask_loadu(pt_v16 src, pt_m16 m, const float *p) {
  for (int l = 0; l < 16; l++)
    if (m >> l & 1u) src.q[l / 4][l % 4] = p[l];
  return src;
}
static inline void v16_mask_storeu(float *p, pt_m16 m, pt_v16 v) {
  for (int l = 0; l < 16; l++)
    if (m >> l & 1u) p[l] = v.q[l / 4][l % 4];
}

static inline pt_v16 v16_add(pt_v16 a, pt_v16 b) {
  pt_v16 r;
  V16_P_MAP(pt_f4, a.q[i_] + b.q[i_]);
  return r;
}
static inline pt_v16 v16_sub(pt_v16 a, pt_v16 b) {
  pt_v16 r;
  V16_P_MAP(pt_f4, a.q[i_] - b.q[i_]);
  return r;
}
static inline pt_v16 v16_mul(pt_v16 a, pt_v16 b) {
  pt_v16 r;
  V16_P_MAP(pt_f4, a.q[i_] * b.q[i_]);
  return r;
}
static inline pt_v16 v16_div(pt_v16 a, pt_v16 b) {
  pt_v16 r;
  V16_P_MAP(pt_f4, a.q[i_] / b.q[i_]);
  return r;
}
/* v where g > 0, +0 elsewhere (and where g is NaN): the ReLU's gate. */
static inline pt_v16 v16_gate(pt_v16 v, pt_v16 g) {
  pt_v16 r;
  const pt_f4 z = {0.0f, 0.0f, 0.0f, 0.0f};
  V16_P_MAP(pt_f4, (pt_f4)((pt_i4)v.q[i_] & (g.q[i_] > z)));
  return r;
}
/* As maxps: b where either is NaN or they are equal. */
static inline pt_v16 v16_max(pt_v16 a, pt_v16 b) {
  pt_v16 r = a; /* every lane is written; the copy spares GCC 12 a false uninitialised read */
  for (int l = 0; l < 16; l++) r.q[l / 4][l % 4] = a.q[l / 4][l % 4] > b.q[l / 4][l % 4] ? a.q[l / 4][l % 4] : b.q[l / 4][l % 4];
  return r;
}
static inline pt_v16 v16_min(pt_v16 a, pt_v16 b) {
  pt_v16 r = a; /* every lane is written; the copy spares GCC 12 a false uninitialised read */
  for (int l = 0; l < 16; l++) r.q[l / 4][l % 4] = a.q[l / 4][l % 4] < b.q[l / 4][l % 4] ? a.q[l / 4][l % 4] : b.q[l / 4][l % 4];
  return r;
}
static inline pt_v16 v16_sqrt(pt_v16 a) {
  pt_v16 r;
  for (int l = 0; l < 16; l++) r.q[l / 4][l % 4] = sqrtf(a.q[l / 4][l % 4]);
  return r;
}
/* pt_f4 and NEON's float32x4_t are the same 16 bytes; the casts only
 * rename the type */
#if PT_V16_NEON
static inline pt_f4 v16_p_fma4(pt_f4 a, pt_f4 b, pt_f4 c) {
  return (pt_f4)vfmaq_f32((float32x4_t)c, (float32x4_t)a, (float32x4_t)b);
}
#else
static inline pt_f4 v16_p_fma4(pt_f4 a, pt_f4 b, pt_f4 c) { return a * b + c; }
#endif
static inline pt_v16 v16_fmadd(pt_v16 a, pt_v16 b, pt_v16 c) {
  pt_v16 r;
  V16_P_MAP(pt_f4, v16_p_fma4(a.q[i_], b.q[i_], c.q[i_]));
  return r;
}

/* pt_v8: half a vector, two 4-lane GCC vectors (see v16.h). */
typedef struct {
  pt_f4 q[2];
} pt_v8;
static inline pt_v8 v8_zero(void) { return (pt_v8){{{0}, {0}}}; }
static inline pt_v8 v8_set1(float f) {
  const pt_f4 s = {f, f, f, f};
  return (pt_v8){{s, s}};
}
static inline pt_v8 v8_loadu(const float *p) {
  pt_v8 r;
  memcpy(&r, p, sizeof r);
  return r;
}
static inline pt_v8 v8_load(const float *p) { return v8_loadu(p); }
static inline void v8_storeu(float *p, pt_v8 v) { memcpy(p, &v, sizeof v); }
static inline pt_v8 v8_add(pt_v8 a, pt_v8 b) { return (pt_v8){{a.q[0] + b.q[0], a.q[1] + b.q[1]}}; }
/* rounded as v16_fmadd is here */
static inline pt_v8 v8_fmadd(pt_v8 a, pt_v8 b, pt_v8 c) {
  return (pt_v8){{v16_p_fma4(a.q[0], b.q[0], c.q[0]), v16_p_fma4(a.q[1], b.q[1], c.q[1])}};
}

static inline pt_m16 v16_p_bits(pt_vi16 t) {
  pt_m16 m = 0;
  for (int l = 0; l < 16; l++) m |= (pt_m16)(t.q[l / 4][l % 4] != 0) << l;
  return m;
}
#define V16_P_CMP(a, b, expr)                                                                                        \
  do {                                                                                                               \
    pt_vi16 t_;                                                                                                      \
    for (int i_ = 0; i_ < 4; i_++) {                                                                                 \
      const pt_f4 x_ = (a).q[i_], y_ = (b).q[i_];                                                                    \
      t_.q[i_] = (expr);                                                                                             \
    }                                                                                                                \
    return v16_p_bits(t_);                                                                                           \
  } while (0)
static inline pt_m16 v16_cmpgt(pt_v16 a, pt_v16 b) { V16_P_CMP(a, b, x_ > y_); }
static inline pt_m16 v16_cmpge(pt_v16 a, pt_v16 b) { V16_P_CMP(a, b, x_ >= y_); }
static inline pt_m16 v16_cmplt(pt_v16 a, pt_v16 b) { V16_P_CMP(a, b, x_ < y_); }
static inline pt_m16 v16_cmpeq(pt_v16 a, pt_v16 b) { V16_P_CMP(a, b, x_ == y_); }
static inline pt_m16 v16_cmpunord(pt_v16 a, pt_v16 b) { V16_P_CMP(a, b, (x_ != x_) | (y_ != y_)); }
static inline pt_v16 v16_blend(pt_m16 m, pt_v16 a, pt_v16 b) {
  for (int l = 0; l < 16; l++)
    if (m >> l & 1u) a.q[l / 4][l % 4] = b.q[l / 4][l % 4];
  return a;
}

/* The order of v16_avx512.h's: lane i + i+8, i + i+4, i + i+2, 0 + 1. */
static inline float v16_reduce_add(pt_v16 v) {
  const pt_f4 h8a = v.q[0] + v.q[2], h8b = v.q[1] + v.q[3], h4 = h8a + h8b;
  const float h20 = h4[0] + h4[2], h21 = h4[1] + h4[3];
  return h20 + h21;
}
static inline float v16_reduce_max(pt_v16 v) {
  float m = v.q[0][0];
  for (int l = 1; l < 16; l++) m = v.q[l / 4][l % 4] > m ? v.q[l / 4][l % 4] : m;
  return m;
}

static inline void v16_transpose(pt_v16 r[16]) {
  float t[16][16];
  for (int i = 0; i < 16; i++) v16_storeu(t[i], r[i]);
  for (int i = 0; i < 16; i++)
    for (int l = 0; l < 16; l++) r[i].q[l / 4][l % 4] = t[l][i];
}
static inline void v16_deinterleave(pt_v16 a, pt_v16 b, pt_v16 *even, pt_v16 *odd) {
  float t[32];
  v16_storeu(t, a);
  v16_storeu(t + 16, b);
  for (int l = 0; l < 16; l++) even->q[l / 4][l % 4] = t[2 * l], odd->q[l / 4][l % 4] = t[2 * l + 1];
}
static inline void v16_interleave(pt_v16 e, pt_v16 o, pt_v16 *lo, pt_v16 *hi) {
  float t[32];
  for (int l = 0; l < 16; l++) t[2 * l] = e.q[l / 4][l % 4], t[2 * l + 1] = o.q[l / 4][l % 4];
  *lo = v16_loadu(t);
  *hi = v16_loadu(t + 16);
}

/* ---- 16 x int32 ---- */
static inline pt_vi16 vi16_zero(void) { return (pt_vi16){{{0}, {0}, {0}, {0}}}; }
static inline pt_vi16 vi16_set1(int32_t i) {
  const pt_i4 s = {i, i, i, i};
  return (pt_vi16){{s, s, s, s}};
}
static inline pt_vi16 v16_as_int(pt_v16 v) {
  pt_vi16 r;
  memcpy(&r, &v, sizeof r);
  return r;
}
static inline pt_v16 vi16_as_float(pt_vi16 v) {
  pt_v16 r;
  memcpy(&r, &v, sizeof r);
  return r;
}
/* Wrapping arithmetic, as the vector instructions: through unsigned lanes. */
typedef uint32_t pt_u4 __attribute__((vector_size(16)));
#define VI16_P_U(a, b, op)                                                                                           \
  do {                                                                                                               \
    pt_vi16 r;                                                                                                       \
    for (int i_ = 0; i_ < 4; i_++) r.q[i_] = (pt_i4)((pt_u4)(a).q[i_] op (pt_u4)(b).q[i_]);                          \
    return r;                                                                                                        \
  } while (0)
static inline pt_vi16 vi16_add(pt_vi16 a, pt_vi16 b) { VI16_P_U(a, b, +); }
static inline pt_vi16 vi16_sub(pt_vi16 a, pt_vi16 b) { VI16_P_U(a, b, -); }
static inline pt_vi16 vi16_mullo(pt_vi16 a, pt_vi16 b) { VI16_P_U(a, b, *); }
static inline pt_vi16 vi16_and(pt_vi16 a, pt_vi16 b) { VI16_P_U(a, b, &); }
static inline pt_vi16 vi16_or(pt_vi16 a, pt_vi16 b) { VI16_P_U(a, b, |); }
static inline pt_vi16 vi16_xor(pt_vi16 a, pt_vi16 b) { VI16_P_U(a, b, ^); }
static inline pt_vi16 vi16_slli(pt_vi16 a, unsigned n) {
  pt_vi16 r;
  for (int i = 0; i < 4; i++) r.q[i] = n > 31 ? (pt_i4){0} : (pt_i4)((pt_u4)a.q[i] << n);
  return r;
}
static inline pt_vi16 vi16_srli(pt_vi16 a, unsigned n) {
  pt_vi16 r;
  for (int i = 0; i < 4; i++) r.q[i] = n > 31 ? (pt_i4){0} : (pt_i4)((pt_u4)a.q[i] >> n);
  return r;
}
static inline pt_m16 vi16_cmpeq(pt_vi16 a, pt_vi16 b) {
  pt_vi16 t;
  for (int i = 0; i < 4; i++) t.q[i] = a.q[i] == b.q[i];
  return v16_p_bits(t);
}
static inline pt_m16 vi16_cmpgt(pt_vi16 a, pt_vi16 b) {
  pt_vi16 t;
  for (int i = 0; i < 4; i++) t.q[i] = a.q[i] > b.q[i];
  return v16_p_bits(t);
}
static inline pt_vi16 vi16_blend(pt_m16 m, pt_vi16 a, pt_vi16 b) {
  for (int l = 0; l < 16; l++)
    if (m >> l & 1u) a.q[l / 4][l % 4] = b.q[l / 4][l % 4];
  return a;
}
/* x where a > b (NaN: not), y elsewhere; v where k == q, +0 elsewhere. */
static inline pt_vi16 vi16_select_gt(pt_v16 a, pt_v16 b, pt_vi16 x, pt_vi16 y) {
  pt_vi16 r;
  for (int i_ = 0; i_ < 4; i_++) {
    const pt_i4 m = a.q[i_] > b.q[i_];
    r.q[i_] = (x.q[i_] & m) | (y.q[i_] & ~m);
  }
  return r;
}
static inline pt_v16 v16_keep_eq(pt_v16 v, pt_vi16 k, pt_vi16 q) {
  pt_v16 r;
  V16_P_MAP(pt_f4, (pt_f4)((pt_i4)v.q[i_] & (k.q[i_] == q.q[i_])));
  return r;
}
/* Out-of-range lanes give INT32_MIN, as cvttps2dq (C's cast would be undefined). */
static inline pt_vi16 vi16_from_v16(pt_v16 v) {
  pt_vi16 r;
  for (int l = 0; l < 16; l++) {
    const float f = v.q[l / 4][l % 4];
    r.q[l / 4][l % 4] = f > -2147483648.0f && f < 2147483648.0f ? (int32_t)f : INT32_MIN;
  }
  return r;
}

/* ---- 8 x double ---- */
static inline pt_vd8 vd8_zero(void) { return (pt_vd8){{{0}, {0}, {0}, {0}}}; }
static inline pt_vd8 vd8_set1(double d) {
  const pt_d2 s = {d, d};
  return (pt_vd8){{s, s, s, s}};
}
static inline pt_vd8 vd8_loadu(const double *p) {
  pt_vd8 r;
  memcpy(&r, p, sizeof r);
  return r;
}
static inline pt_vd8 vd8_load(const double *p) { return vd8_loadu(p); }
static inline void vd8_storeu(double *p, pt_vd8 v) { memcpy(p, &v, sizeof v); }
static inline void vd8_store(double *p, pt_vd8 v) { memcpy(p, &v, sizeof v); }
static inline pt_vd8 vd8_add(pt_vd8 a, pt_vd8 b) {
  for (int i = 0; i < 4; i++) a.q[i] += b.q[i];
  return a;
}
static inline pt_vd8 vd8_mul(pt_vd8 a, pt_vd8 b) {
  for (int i = 0; i < 4; i++) a.q[i] *= b.q[i];
  return a;
}
static inline pt_vd8 vd8_from_lo(pt_v16 v) {
  pt_vd8 r;
  for (int l = 0; l < 8; l++) r.q[l / 2][l % 2] = v.q[l / 4][l % 4];
  return r;
}
static inline pt_vd8 vd8_from_hi(pt_v16 v) {
  pt_vd8 r;
  for (int l = 0; l < 8; l++) r.q[l / 2][l % 2] = v.q[2 + l / 4][l % 4];
  return r;
}
static inline pt_v16 v16_from_vd8(pt_vd8 lo, pt_vd8 hi) {
  pt_v16 r;
  for (int l = 0; l < 8; l++) r.q[l / 4][l % 4] = (float)lo.q[l / 2][l % 2], r.q[2 + l / 4][l % 4] = (float)hi.q[l / 2][l % 2];
  return r;
}
/* The order of v16_avx512.h's: (0+4, 1+5, 2+6, 3+7), (0+2, 1+3), 0+1. */
static inline double vd8_reduce_add(pt_vd8 v) {
  const pt_d2 a = v.q[0] + v.q[2], b = v.q[1] + v.q[3], c = a + b;
  return c[0] + c[1];
}

/* ---- added for linear_sparse.c ---- */
static inline pt_m16 v16_cmpneq(pt_v16 a, pt_v16 b) { V16_P_CMP(a, b, x_ != y_); }
static inline uint32_t v16_test_u16x32(const uint16_t *p, uint16_t sel) {
  uint32_t m = 0;
  for (int i = 0; i < 32; i++) m |= (uint32_t)((p[i] & sel) != 0) << i;
  return m;
}

/* ---- added for conv_direct.c ---- */
/* The lanes m of v, in order, to p[0, popcount(m)); nothing else is written. */
static inline void v16_compress_storeu(float *p, pt_m16 m, pt_v16 v) {
  for (int l = 0, k = 0; l < 16; l++)
    if (m >> l & 1u) p[k++] = v.q[l / 4][l % 4];
}

/* ---- added for expf.h ---- */
/* Whether v16_fmadd rounds once (pt_expf fuses its steps where it does). */
#define PT_V16_FMA PT_V16_NEON

/* ---- added for philox.c ---- */
/* pt_vi16 as 8 unsigned 64-bit lanes, lane i in 32-bit lanes 2i (low half)
 * and 2i + 1: the full product of the low halves (_mm512_mul_epu32), and a
 * right shift. Through 64-bit vector lanes where those are laid out so
 * (little-endian), which SSE2 and NEON multiply as 32x32->64. */
typedef uint64_t pt_u2 __attribute__((vector_size(16)));
static inline pt_vi16 vi16_mul_epu32(pt_vi16 a, pt_vi16 b) {
  pt_vi16 r;
#if defined(__SSE2__)
  /* pmuludq itself: written as a 64-bit product of masked lanes, GCC 12
   * emits a full 64x64 multiply (three pmuludq and shifts) */
  for (int i = 0; i < 4; i++) r.q[i] = (pt_i4)__builtin_ia32_pmuludq128(a.q[i], b.q[i]);
#elif defined(__aarch64__) && defined(__ARM_NEON)
  /* the low words narrowed, then one umull */
  for (int i = 0; i < 4; i++)
    r.q[i] = (pt_i4)vmull_u32(vmovn_u64(vreinterpretq_u64_s32(a.q[i])), vmovn_u64(vreinterpretq_u64_s32(b.q[i])));
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const pt_u2 lo32 = {0xFFFFFFFFu, 0xFFFFFFFFu};
  for (int i = 0; i < 4; i++) r.q[i] = (pt_i4)(((pt_u2)a.q[i] & lo32) * ((pt_u2)b.q[i] & lo32));
#else
  for (int l = 0; l < 16; l += 2) {
    const uint64_t p = (uint64_t)(uint32_t)a.q[l / 4][l % 4] * (uint32_t)b.q[l / 4][l % 4];
    r.q[l / 4][l % 4] = (int32_t)(uint32_t)p;
    r.q[l / 4][l % 4 + 1] = (int32_t)(uint32_t)(p >> 32);
  }
#endif
  return r;
}
static inline pt_vi16 vi16_srli_epi64(pt_vi16 a, unsigned n) {
  pt_vi16 r;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (int i = 0; i < 4; i++) r.q[i] = n > 63 ? (pt_i4){0} : (pt_i4)((pt_u2)a.q[i] >> n);
#else
  for (int l = 0; l < 16; l += 2) {
    const uint64_t w = (uint64_t)(uint32_t)a.q[l / 4][l % 4 + 1] << 32 | (uint32_t)a.q[l / 4][l % 4];
    const uint64_t s = n > 63 ? 0 : w >> n;
    r.q[l / 4][l % 4] = (int32_t)(uint32_t)s;
    r.q[l / 4][l % 4 + 1] = (int32_t)(uint32_t)(s >> 32);
  }
#endif
  return r;
}

#endif

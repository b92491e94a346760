/* pt_v16 on AVX-512 (F, BW, DQ, VL): one register per vector, the masks
 * native. Included by v16.h only. */
#ifndef PT_OPS_CPU_SIMD_V16_AVX512_H
#define PT_OPS_CPU_SIMD_V16_AVX512_H

#ifdef PT_V16_EMULATE_AVX512
#include "ops/cpu/simd/avx512_emulated.h" /* tests only: this file checked without AVX-512 */
#else
#include <immintrin.h>
#endif

#define PT_V16_LEVEL "avx512"
#define PT_V16_REGS 32 /* vectors a register tile may hold, loads and broadcasts included */
#define PT_V16_HAS_COMPRESS 1
#define PT_V16_HAS_FMADD_AT 0 /* v16.h's, from v16_load */
#define PT_V16_HAS_HSUM16 1

typedef __m512 pt_v16;
typedef __m512i pt_vi16;
typedef __m512d pt_vd8;

static inline pt_v16 v16_zero(void) { return _mm512_setzero_ps(); }
static inline pt_v16 v16_set1(float f) { return _mm512_set1_ps(f); }
static inline pt_v16 v16_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline pt_v16 v16_load(const float *p) { return _mm512_load_ps(p); }
static inline void v16_storeu(float *p, pt_v16 v) { _mm512_storeu_ps(p, v); }
static inline void v16_store(float *p, pt_v16 v) { _mm512_store_ps(p, v); }
static inline pt_v16 v16_mask_loadu(pt_v16 src, pt_m16 m, const float *p) {
  return _mm512_mask_loadu_ps(src, (__mmask16)m, p);
}
static inline void v16_mask_storeu(float *p, pt_m16 m, pt_v16 v) { _mm512_mask_storeu_ps(p, (__mmask16)m, v); }

static inline pt_v16 v16_add(pt_v16 a, pt_v16 b) { return _mm512_add_ps(a, b); }
static inline pt_v16 v16_sub(pt_v16 a, pt_v16 b) { return _mm512_sub_ps(a, b); }
static inline pt_v16 v16_mul(pt_v16 a, pt_v16 b) { return _mm512_mul_ps(a, b); }
static inline pt_v16 v16_div(pt_v16 a, pt_v16 b) { return _mm512_div_ps(a, b); }
/* v where g > 0, +0 elsewhere (and where g is NaN): the ReLU's gate. */
static inline pt_v16 v16_gate(pt_v16 v, pt_v16 g) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_GT_OQ), v);
}
static inline pt_v16 v16_max(pt_v16 a, pt_v16 b) { return _mm512_max_ps(a, b); }
static inline pt_v16 v16_min(pt_v16 a, pt_v16 b) { return _mm512_min_ps(a, b); }
static inline pt_v16 v16_sqrt(pt_v16 a) { return _mm512_sqrt_ps(a); }
static inline pt_v16 v16_fmadd(pt_v16 a, pt_v16 b, pt_v16 c) { return _mm512_fmadd_ps(a, b, c); }

/* pt_v8: half a vector, one 256-bit register (see v16.h). */
typedef __m256 pt_v8;
static inline pt_v8 v8_zero(void) { return _mm256_setzero_ps(); }
static inline pt_v8 v8_set1(float f) { return _mm256_set1_ps(f); }
static inline pt_v8 v8_load(const float *p) { return _mm256_load_ps(p); }
static inline pt_v8 v8_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline void v8_storeu(float *p, pt_v8 v) { _mm256_storeu_ps(p, v); }
static inline pt_v8 v8_add(pt_v8 a, pt_v8 b) { return _mm256_add_ps(a, b); }
static inline pt_v8 v8_fmadd(pt_v8 a, pt_v8 b, pt_v8 c) { return _mm256_fmadd_ps(a, b, c); }

static inline pt_m16 v16_cmpgt(pt_v16 a, pt_v16 b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline pt_m16 v16_cmpge(pt_v16 a, pt_v16 b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
static inline pt_m16 v16_cmplt(pt_v16 a, pt_v16 b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline pt_m16 v16_cmpeq(pt_v16 a, pt_v16 b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
static inline pt_m16 v16_cmpunord(pt_v16 a, pt_v16 b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
/* Lanes in m from b, the others from a. */
static inline pt_v16 v16_blend(pt_m16 m, pt_v16 a, pt_v16 b) { return _mm512_mask_blend_ps((__mmask16)m, a, b); }

/* Halves folded: lane i + i+8, then i + i+4, i + i+2, 0 + 1; every level
 * sums in this order. */
static inline float v16_reduce_add(pt_v16 v) {
  const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}
static inline float v16_reduce_max(pt_v16 v) { return _mm512_reduce_max_ps(v); }

static inline pt_v16 v16_compress_native(pt_m16 m, pt_v16 v) { return _mm512_maskz_compress_ps((__mmask16)m, v); }
static inline pt_v16 v16_expand_native(pt_m16 m, pt_v16 v) { return _mm512_maskz_expand_ps((__mmask16)m, v); }

/* In-place transpose of a 16x16 block held as 16 rows. */
static inline void v16_transpose(pt_v16 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; g++) { /* u[4g + c] lane L: column 4L + c of rows 4g..4g+3 */
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 2]);
    const __m512d e = _mm512_castps_pd(t[4 * g + 1]), f = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(e, f));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(e, f));
  }
  for (int c = 0; c < 4; c++) {
    const __m512 v88 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), vdd = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 w88 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 wdd = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v88, w88, 0x88);
    r[c + 8] = _mm512_shuffle_f32x4(v88, w88, 0xDD);
    r[c + 4] = _mm512_shuffle_f32x4(vdd, wdd, 0x88);
    r[c + 12] = _mm512_shuffle_f32x4(vdd, wdd, 0xDD);
  }
}

/* 32 floats a (0..15), b (16..31) into their even and odd elements. */
static inline void v16_deinterleave(pt_v16 a, pt_v16 b, pt_v16 *even, pt_v16 *odd) {
  const __m512i e = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  *even = _mm512_permutex2var_ps(a, e, b);
  *odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(e, _mm512_set1_epi32(1)), b);
}
/* The inverse: *lo = e0 o0 e1 o1 .. e7 o7, *hi = e8 o8 .. e15 o15. */
static inline void v16_interleave(pt_v16 e, pt_v16 o, pt_v16 *lo, pt_v16 *hi) {
  const __m512i l = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  *lo = _mm512_permutex2var_ps(e, l, o);
  *hi = _mm512_permutex2var_ps(e, _mm512_add_epi32(l, _mm512_set1_epi32(8)), o);
}

/* ---- 16 x int32 ---- */
static inline pt_vi16 vi16_zero(void) { return _mm512_setzero_si512(); }
static inline pt_vi16 vi16_set1(int32_t i) { return _mm512_set1_epi32(i); }
static inline pt_vi16 v16_as_int(pt_v16 v) { return _mm512_castps_si512(v); }
static inline pt_v16 vi16_as_float(pt_vi16 v) { return _mm512_castsi512_ps(v); }
static inline pt_vi16 vi16_add(pt_vi16 a, pt_vi16 b) { return _mm512_add_epi32(a, b); }
static inline pt_vi16 vi16_sub(pt_vi16 a, pt_vi16 b) { return _mm512_sub_epi32(a, b); }
static inline pt_vi16 vi16_mullo(pt_vi16 a, pt_vi16 b) { return _mm512_mullo_epi32(a, b); }
static inline pt_vi16 vi16_and(pt_vi16 a, pt_vi16 b) { return _mm512_and_si512(a, b); }
static inline pt_vi16 vi16_or(pt_vi16 a, pt_vi16 b) { return _mm512_or_si512(a, b); }
static inline pt_vi16 vi16_xor(pt_vi16 a, pt_vi16 b) { return _mm512_xor_si512(a, b); }
static inline pt_vi16 vi16_slli(pt_vi16 a, unsigned n) { return _mm512_slli_epi32(a, n); }
static inline pt_vi16 vi16_srli(pt_vi16 a, unsigned n) { return _mm512_srli_epi32(a, n); }
static inline pt_m16 vi16_cmpeq(pt_vi16 a, pt_vi16 b) { return _mm512_cmpeq_epi32_mask(a, b); }
static inline pt_m16 vi16_cmpgt(pt_vi16 a, pt_vi16 b) { return _mm512_cmpgt_epi32_mask(a, b); }
static inline pt_vi16 vi16_blend(pt_m16 m, pt_vi16 a, pt_vi16 b) { return _mm512_mask_blend_epi32((__mmask16)m, a, b); }
/* x where a > b (NaN: not), y elsewhere; v where k == q, +0 elsewhere. */
static inline pt_vi16 vi16_select_gt(pt_v16 a, pt_v16 b, pt_vi16 x, pt_vi16 y) {
  return _mm512_mask_mov_epi32(y, _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), x);
}
static inline pt_v16 v16_keep_eq(pt_v16 v, pt_vi16 k, pt_vi16 q) {
  return _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, q), v);
}
/* Truncating conversion (C's (int32_t)f for floats in range). */
static inline pt_vi16 vi16_from_v16(pt_v16 v) { return _mm512_cvttps_epi32(v); }

/* ---- 8 x double ---- */
static inline pt_vd8 vd8_zero(void) { return _mm512_setzero_pd(); }
static inline pt_vd8 vd8_set1(double d) { return _mm512_set1_pd(d); }
static inline pt_vd8 vd8_load(const double *p) { return _mm512_load_pd(p); }
static inline pt_vd8 vd8_loadu(const double *p) { return _mm512_loadu_pd(p); }
static inline void vd8_store(double *p, pt_vd8 v) { _mm512_store_pd(p, v); }
static inline void vd8_storeu(double *p, pt_vd8 v) { _mm512_storeu_pd(p, v); }
static inline pt_vd8 vd8_add(pt_vd8 a, pt_vd8 b) { return _mm512_add_pd(a, b); }
static inline pt_vd8 vd8_mul(pt_vd8 a, pt_vd8 b) { return _mm512_mul_pd(a, b); }
/* Lanes 0..7 and 8..15 of v, widened. */
static inline pt_vd8 vd8_from_lo(pt_v16 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
static inline pt_vd8 vd8_from_hi(pt_v16 v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
/* lo's lanes then hi's, rounded to float. */
static inline pt_v16 v16_from_vd8(pt_vd8 lo, pt_vd8 hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}
/* Lanes summed pairwise: (0+4, 1+5, 2+6, 3+7), then (0+2, 1+3), then 0+1. */
static inline double vd8_reduce_add(pt_vd8 v) {
  const __m256d h4 = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
  const __m128d h2 = _mm_add_pd(_mm256_castpd256_pd128(h4), _mm256_extractf128_pd(h4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h2, _mm_unpackhi_pd(h2, h2)));
}

/* ---- added for linear_sparse.c ---- */
/* Lanes where a != b or either is NaN (the complement of v16_cmpeq). */
static inline pt_m16 v16_cmpneq(pt_v16 a, pt_v16 b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }
/* 32 uint16 from p: bit i set where p[i] & sel is nonzero (_mm512_test_epi16_mask). */
static inline uint32_t v16_test_u16x32(const uint16_t *p, uint16_t sel) {
  return _mm512_test_epi16_mask(_mm512_loadu_si512(p), _mm512_set1_epi16((short)sel));
}

/* ---- added for conv_direct.c ---- */
/* The lanes m of v, in order, to p[0, popcount(m)); nothing else is
 * written. A compress in registers and a masked store: the compressing
 * store to memory is microcoded and several times slower. */
static inline void v16_compress_storeu(float *p, pt_m16 m, pt_v16 v) {
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << __builtin_popcount(m)) - 1u), _mm512_maskz_compress_ps((__mmask16)m, v));
}

/* ---- added for expf.h ---- */
/* v16_fmadd rounds once (pt_expf fuses its steps where this is 1). */
#define PT_V16_FMA 1

/* ---- added for philox.c ---- */
/* pt_vi16 as 8 unsigned 64-bit lanes, lane i in 32-bit lanes 2i (low half)
 * and 2i + 1: the full product of the low halves (_mm512_mul_epu32), and a
 * right shift. */
static inline pt_vi16 vi16_mul_epu32(pt_vi16 a, pt_vi16 b) { return _mm512_mul_epu32(a, b); }
static inline pt_vi16 vi16_srli_epi64(pt_vi16 a, unsigned n) { return _mm512_srli_epi64(a, n); }

/* ---- added for linear_dot.c (v16.h's v16_hsum16) ---- */
/* Lane j: the sum of v[j]'s lanes. Pairs of vectors are interleaved and
 * added, halving the vectors and doubling the lanes each holds sums for,
 * four times; lane j is ((P0 + P1) + (P2 + P3)) of v[j], P_q being
 * (l[4q] + l[4q+2]) + (l[4q+1] + l[4q+3]) of its lanes l, at every level. */
static inline pt_v16 v16_hsum16_native(const pt_v16 v[16]) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; i++) /* a[i]: lanes hold partial sums of v[2i] (even) and v[2i+1] (odd) */
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; i++) {
    const __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
    b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  /* b[i]: each 128-bit block holds its own part of the sums for v[4i .. 4i+3] */
  for (int i = 0; i < 2; i++)
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  /* c[i]: blocks 0 and 1 hold halves of the sums for v[8i .. 8i+3], blocks
   * 2 and 3 for v[8i+4 .. 8i+7]; adding the halves leaves them in order */
  return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xDD));
}

#endif

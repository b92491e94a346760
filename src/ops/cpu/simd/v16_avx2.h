/* pt_v16 on AVX2 + FMA: two 256-bit registers per vector (lanes 0..7 in
 * lo, 8..15 in hi); masks are bits, turned into lane masks where an
 * operation needs one. Included by v16.h only. */
#ifndef PT_OPS_CPU_SIMD_V16_AVX2_H
#define PT_OPS_CPU_SIMD_V16_AVX2_H

#include <immintrin.h>

#define PT_V16_LEVEL "avx2"
#define PT_V16_REGS 8 /* 16 ymm registers hold 8 vectors */
#define PT_V16_HAS_COMPRESS 0

typedef struct {
  __m256 lo, hi;
} pt_v16;
typedef struct {
  __m256i lo, hi;
} pt_vi16;
typedef struct {
  __m256d lo, hi;
} pt_vd8;

/* Bits 0..7 of m as a lane mask (all ones where set). */
static inline __m256i v16_avx2_mask8(unsigned m) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)m), bit), bit);
}
#define V16_AVX2_2(op, a, b) ((pt_v16){op((a).lo, (b).lo), op((a).hi, (b).hi)})
#define VI16_AVX2_2(op, a, b) ((pt_vi16){op((a).lo, (b).lo), op((a).hi, (b).hi)})

static inline pt_v16 v16_zero(void) { return (pt_v16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline pt_v16 v16_set1(float f) { return (pt_v16){_mm256_set1_ps(f), _mm256_set1_ps(f)}; }
static inline pt_v16 v16_loadu(const float *p) { return (pt_v16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline pt_v16 v16_load(const float *p) { return (pt_v16){_mm256_load_ps(p), _mm256_load_ps(p + 8)}; }
static inline void v16_storeu(float *p, pt_v16 v) {
  _mm256_storeu_ps(p, v.lo);
  _mm256_storeu_ps(p + 8, v.hi);
}
static inline void v16_store(float *p, pt_v16 v) {
  _mm256_store_ps(p, v.lo);
  _mm256_store_ps(p + 8, v.hi);
}
/* vmaskmov reads nothing in unselected lanes, so a row's tail may end at
 * the end of its buffer; a half with no lanes is not touched at all. */
static inline pt_v16 v16_mask_loadu(pt_v16 src, pt_m16 m, const float *p) {
  if ((m & 0xFFFFu) == 0xFFFFu) return v16_loadu(p);
  const __m256i ml = v16_avx2_mask8(m), mh = v16_avx2_mask8(m >> 8);
  const __m256 lo = (m & 0xFFu) ? _mm256_maskload_ps(p, ml) : _mm256_setzero_ps();
  const __m256 hi = (m & 0xFF00u) ? _mm256_maskload_ps(p + 8, mh) : _mm256_setzero_ps();
  return (pt_v16){_mm256_blendv_ps(src.lo, lo, _mm256_castsi256_ps(ml)),
                  _mm256_blendv_ps(src.hi, hi, _mm256_castsi256_ps(mh))};
}
static inline void v16_mask_storeu(float *p, pt_m16 m, pt_v16 v) {
  if ((m & 0xFFFFu) == 0xFFFFu) {
    v16_storeu(p, v);
    return;
  }
  if (m & 0xFFu) _mm256_maskstore_ps(p, v16_avx2_mask8(m), v.lo);
  if (m & 0xFF00u) _mm256_maskstore_ps(p + 8, v16_avx2_mask8(m >> 8), v.hi);
}

static inline pt_v16 v16_add(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_add_ps, a, b); }
static inline pt_v16 v16_sub(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_sub_ps, a, b); }
static inline pt_v16 v16_mul(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_mul_ps, a, b); }
static inline pt_v16 v16_div(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_div_ps, a, b); }
static inline pt_v16 v16_max(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_max_ps, a, b); }
static inline pt_v16 v16_min(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_min_ps, a, b); }
static inline pt_v16 v16_sqrt(pt_v16 a) { return (pt_v16){_mm256_sqrt_ps(a.lo), _mm256_sqrt_ps(a.hi)}; }
static inline pt_v16 v16_fmadd(pt_v16 a, pt_v16 b, pt_v16 c) {
  return (pt_v16){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}

#define V16_AVX2_CMP(a, b, pred)                                                                                     \
  ((pt_m16)_mm256_movemask_ps(_mm256_cmp_ps((a).lo, (b).lo, pred)) |                                                \
   (pt_m16)_mm256_movemask_ps(_mm256_cmp_ps((a).hi, (b).hi, pred)) << 8)
static inline pt_m16 v16_cmpgt(pt_v16 a, pt_v16 b) { return V16_AVX2_CMP(a, b, _CMP_GT_OQ); }
static inline pt_m16 v16_cmpge(pt_v16 a, pt_v16 b) { return V16_AVX2_CMP(a, b, _CMP_GE_OQ); }
static inline pt_m16 v16_cmplt(pt_v16 a, pt_v16 b) { return V16_AVX2_CMP(a, b, _CMP_LT_OQ); }
static inline pt_m16 v16_cmpeq(pt_v16 a, pt_v16 b) { return V16_AVX2_CMP(a, b, _CMP_EQ_OQ); }
static inline pt_m16 v16_cmpunord(pt_v16 a, pt_v16 b) { return V16_AVX2_CMP(a, b, _CMP_UNORD_Q); }
static inline pt_v16 v16_blend(pt_m16 m, pt_v16 a, pt_v16 b) {
  return (pt_v16){_mm256_blendv_ps(a.lo, b.lo, _mm256_castsi256_ps(v16_avx2_mask8(m))),
                  _mm256_blendv_ps(a.hi, b.hi, _mm256_castsi256_ps(v16_avx2_mask8(m >> 8)))};
}

/* The order of v16_avx512.h's: lane i + i+8, i + i+4, i + i+2, 0 + 1. */
static inline float v16_reduce_add(pt_v16 v) {
  const __m256 h8 = _mm256_add_ps(v.lo, v.hi);
  const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}
static inline float v16_reduce_max(pt_v16 v) {
  const __m256 h8 = _mm256_max_ps(v.lo, v.hi);
  const __m128 h4 = _mm_max_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  const __m128 h2 = _mm_max_ps(h4, _mm_movehl_ps(h4, h4));
  return _mm_cvtss_f32(_mm_max_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}

/* Rows r[0..7] of 8 floats transposed in place. */
static inline void v16_avx2_transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 2; g++) {
    u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[c + 4] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}
/* In-place transpose of a 16x16 block held as 16 rows: four 8x8 ones. */
static inline void v16_transpose(pt_v16 r[16]) {
  __m256 a[8], b[8], c[8], d[8]; /* rows 0..7 lo, 8..15 lo, 0..7 hi, 8..15 hi */
  for (int i = 0; i < 8; i++) a[i] = r[i].lo, b[i] = r[8 + i].lo, c[i] = r[i].hi, d[i] = r[8 + i].hi;
  v16_avx2_transpose8(a);
  v16_avx2_transpose8(b);
  v16_avx2_transpose8(c);
  v16_avx2_transpose8(d);
  for (int i = 0; i < 8; i++) r[i] = (pt_v16){a[i], b[i]}, r[8 + i] = (pt_v16){c[i], d[i]};
}

static inline __m256 v16_avx2_evens(__m256 x, __m256 y) { /* x0 x2 .. x6 y0 y2 .. y6 */
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(x, y, 0x88)), 0xD8));
}
static inline __m256 v16_avx2_odds(__m256 x, __m256 y) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(x, y, 0xDD)), 0xD8));
}
static inline void v16_deinterleave(pt_v16 a, pt_v16 b, pt_v16 *even, pt_v16 *odd) {
  *even = (pt_v16){v16_avx2_evens(a.lo, a.hi), v16_avx2_evens(b.lo, b.hi)};
  *odd = (pt_v16){v16_avx2_odds(a.lo, a.hi), v16_avx2_odds(b.lo, b.hi)};
}
static inline void v16_interleave(pt_v16 e, pt_v16 o, pt_v16 *lo, pt_v16 *hi) {
  const __m256 l0 = _mm256_unpacklo_ps(e.lo, o.lo), h0 = _mm256_unpackhi_ps(e.lo, o.lo);
  const __m256 l1 = _mm256_unpacklo_ps(e.hi, o.hi), h1 = _mm256_unpackhi_ps(e.hi, o.hi);
  *lo = (pt_v16){_mm256_permute2f128_ps(l0, h0, 0x20), _mm256_permute2f128_ps(l0, h0, 0x31)};
  *hi = (pt_v16){_mm256_permute2f128_ps(l1, h1, 0x20), _mm256_permute2f128_ps(l1, h1, 0x31)};
}

/* ---- 16 x int32 ---- */
static inline pt_vi16 vi16_zero(void) { return (pt_vi16){_mm256_setzero_si256(), _mm256_setzero_si256()}; }
static inline pt_vi16 vi16_set1(int32_t i) { return (pt_vi16){_mm256_set1_epi32(i), _mm256_set1_epi32(i)}; }
static inline pt_vi16 v16_as_int(pt_v16 v) { return (pt_vi16){_mm256_castps_si256(v.lo), _mm256_castps_si256(v.hi)}; }
static inline pt_v16 vi16_as_float(pt_vi16 v) { return (pt_v16){_mm256_castsi256_ps(v.lo), _mm256_castsi256_ps(v.hi)}; }
static inline pt_vi16 vi16_add(pt_vi16 a, pt_vi16 b) { return VI16_AVX2_2(_mm256_add_epi32, a, b); }
static inline pt_vi16 vi16_sub(pt_vi16 a, pt_vi16 b) { return VI16_AVX2_2(_mm256_sub_epi32, a, b); }
static inline pt_vi16 vi16_mullo(pt_vi16 a, pt_vi16 b) { return VI16_AVX2_2(_mm256_mullo_epi32, a, b); }
static inline pt_vi16 vi16_and(pt_vi16 a, pt_vi16 b) { return VI16_AVX2_2(_mm256_and_si256, a, b); }
static inline pt_vi16 vi16_or(pt_vi16 a, pt_vi16 b) { return VI16_AVX2_2(_mm256_or_si256, a, b); }
static inline pt_vi16 vi16_xor(pt_vi16 a, pt_vi16 b) { return VI16_AVX2_2(_mm256_xor_si256, a, b); }
static inline pt_vi16 vi16_slli(pt_vi16 a, unsigned n) {
  return (pt_vi16){_mm256_slli_epi32(a.lo, (int)n), _mm256_slli_epi32(a.hi, (int)n)};
}
static inline pt_vi16 vi16_srli(pt_vi16 a, unsigned n) {
  return (pt_vi16){_mm256_srli_epi32(a.lo, (int)n), _mm256_srli_epi32(a.hi, (int)n)};
}
static inline pt_m16 vi16_cmpeq(pt_vi16 a, pt_vi16 b) {
  return (pt_m16)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a.lo, b.lo))) |
         (pt_m16)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a.hi, b.hi))) << 8;
}
static inline pt_m16 vi16_cmpgt(pt_vi16 a, pt_vi16 b) {
  return (pt_m16)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a.lo, b.lo))) |
         (pt_m16)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a.hi, b.hi))) << 8;
}
static inline pt_vi16 vi16_blend(pt_m16 m, pt_vi16 a, pt_vi16 b) {
  return (pt_vi16){_mm256_blendv_epi8(a.lo, b.lo, v16_avx2_mask8(m)), _mm256_blendv_epi8(a.hi, b.hi, v16_avx2_mask8(m >> 8))};
}
static inline pt_vi16 vi16_from_v16(pt_v16 v) { return (pt_vi16){_mm256_cvttps_epi32(v.lo), _mm256_cvttps_epi32(v.hi)}; }

/* ---- 8 x double ---- */
static inline pt_vd8 vd8_zero(void) { return (pt_vd8){_mm256_setzero_pd(), _mm256_setzero_pd()}; }
static inline pt_vd8 vd8_set1(double d) { return (pt_vd8){_mm256_set1_pd(d), _mm256_set1_pd(d)}; }
static inline pt_vd8 vd8_load(const double *p) { return (pt_vd8){_mm256_load_pd(p), _mm256_load_pd(p + 4)}; }
static inline pt_vd8 vd8_loadu(const double *p) { return (pt_vd8){_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)}; }
static inline void vd8_store(double *p, pt_vd8 v) {
  _mm256_store_pd(p, v.lo);
  _mm256_store_pd(p + 4, v.hi);
}
static inline void vd8_storeu(double *p, pt_vd8 v) {
  _mm256_storeu_pd(p, v.lo);
  _mm256_storeu_pd(p + 4, v.hi);
}
static inline pt_vd8 vd8_add(pt_vd8 a, pt_vd8 b) { return (pt_vd8){_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)}; }
static inline pt_vd8 vd8_mul(pt_vd8 a, pt_vd8 b) { return (pt_vd8){_mm256_mul_pd(a.lo, b.lo), _mm256_mul_pd(a.hi, b.hi)}; }
static inline pt_vd8 v16_avx2_widen(__m256 f) {
  return (pt_vd8){_mm256_cvtps_pd(_mm256_castps256_ps128(f)), _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1))};
}
static inline pt_vd8 vd8_from_lo(pt_v16 v) { return v16_avx2_widen(v.lo); }
static inline pt_vd8 vd8_from_hi(pt_v16 v) { return v16_avx2_widen(v.hi); }
static inline pt_v16 v16_from_vd8(pt_vd8 lo, pt_vd8 hi) {
  return (pt_v16){_mm256_set_m128(_mm256_cvtpd_ps(lo.hi), _mm256_cvtpd_ps(lo.lo)),
                  _mm256_set_m128(_mm256_cvtpd_ps(hi.hi), _mm256_cvtpd_ps(hi.lo))};
}
static inline double vd8_reduce_add(pt_vd8 v) {
  const __m256d h4 = _mm256_add_pd(v.lo, v.hi);
  const __m128d h2 = _mm_add_pd(_mm256_castpd256_pd128(h4), _mm256_extractf128_pd(h4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h2, _mm_unpackhi_pd(h2, h2)));
}

/* ---- added for linear_sparse.c ---- */
static inline pt_m16 v16_cmpneq(pt_v16 a, pt_v16 b) { return V16_AVX2_CMP(a, b, _CMP_NEQ_UQ); }
static inline uint32_t v16_test_u16x32(const uint16_t *p, uint16_t sel) {
  const __m256i s = _mm256_set1_epi16((short)sel), z = _mm256_setzero_si256();
  const __m256i a = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)p), s), z);
  const __m256i b = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + 16)), s), z);
  /* the pack interleaves the halves' 128-bit lanes (a0 b0 a1 b1); the
   * permutation puts them back in order, one byte per uint16 */
  const __m256i zeros = _mm256_permute4x64_epi64(_mm256_packs_epi16(a, b), 0xD8);
  return ~(uint32_t)_mm256_movemask_epi8(zeros);
}

#endif

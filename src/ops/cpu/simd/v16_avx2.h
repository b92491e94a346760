/* pt_v16 on AVX2 + FMA: two 256-bit registers per vector (lanes 0..7 in
 * lo, 8..15 in hi); masks are bits, turned into lane masks where an
 * operation needs one. Included by v16.h only. */
#ifndef PT_OPS_CPU_SIMD_V16_AVX2_H
#define PT_OPS_CPU_SIMD_V16_AVX2_H

#include <immintrin.h>

#define PT_V16_LEVEL "avx2"
#define PT_V16_REGS 8 /* 16 ymm registers hold 8 vectors */
#define PT_V16_HAS_COMPRESS 0
#define PT_V16_HAS_HSUM16 0 /* v16.h's, through memory */

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
/* The first n (0..8) lanes of h to p, by plain stores of 4, 2 and 1: a
 * masked store (vmaskmovps) takes about 23 cycles on Zen 3, against 1 for
 * a store (7.2 ns and 0.65 measured), and rows' tails are prefixes. */
static inline void v16_avx2_store_prefix(float *p, int n, __m256 h) {
  if (n == 8) {
    _mm256_storeu_ps(p, h);
    return;
  }
  __m128 q = _mm256_castps256_ps128(h);
  if (n >= 4) {
    _mm_storeu_ps(p, q);
    p += 4, n -= 4;
    q = _mm256_extractf128_ps(h, 1);
  }
  if (n >= 2) {
    _mm_storel_pi((__m64 *)(void *)p, q);
    p += 2, n -= 2;
    q = _mm_movehl_ps(q, q);
  }
  if (n) _mm_store_ss(p, q);
}
/* Half h's lanes m8 to p: whole, a prefix, or (other patterns) masked. */
static inline void v16_avx2_mask_store_half(float *p, unsigned m8, __m256 h) {
  if (!(m8 & (m8 + 1u))) v16_avx2_store_prefix(p, __builtin_popcount(m8), h);
  else _mm256_maskstore_ps(p, v16_avx2_mask8(m8), h);
}
static inline void v16_mask_storeu(float *p, pt_m16 m, pt_v16 v) {
  if ((m & 0xFFFFu) == 0xFFFFu) {
    v16_storeu(p, v);
    return;
  }
  v16_avx2_mask_store_half(p, m & 0xFFu, v.lo);
  v16_avx2_mask_store_half(p + 8, m >> 8 & 0xFFu, v.hi);
}

static inline pt_v16 v16_add(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_add_ps, a, b); }
static inline pt_v16 v16_sub(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_sub_ps, a, b); }
static inline pt_v16 v16_mul(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_mul_ps, a, b); }
static inline pt_v16 v16_div(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_div_ps, a, b); }
/* v where g > 0, +0 elsewhere (and where g is NaN): the ReLU's gate, with
 * the compare's mask used as it is rather than through a bit mask. */
static inline pt_v16 v16_gate(pt_v16 v, pt_v16 g) {
  const __m256 z = _mm256_setzero_ps();
  return (pt_v16){_mm256_and_ps(v.lo, _mm256_cmp_ps(g.lo, z, _CMP_GT_OQ)),
                  _mm256_and_ps(v.hi, _mm256_cmp_ps(g.hi, z, _CMP_GT_OQ))};
}
static inline pt_v16 v16_max(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_max_ps, a, b); }
static inline pt_v16 v16_min(pt_v16 a, pt_v16 b) { return V16_AVX2_2(_mm256_min_ps, a, b); }
static inline pt_v16 v16_sqrt(pt_v16 a) { return (pt_v16){_mm256_sqrt_ps(a.lo), _mm256_sqrt_ps(a.hi)}; }
static inline pt_v16 v16_fmadd(pt_v16 a, pt_v16 b, pt_v16 c) {
  return (pt_v16){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}


/* pt_v8: half a vector, one 256-bit register (see v16.h). */
typedef __m256 pt_v8;
static inline pt_v8 v8_zero(void) { return _mm256_setzero_ps(); }
static inline pt_v8 v8_set1(float f) { return _mm256_set1_ps(f); }
static inline pt_v8 v8_load(const float *p) { return _mm256_load_ps(p); }
static inline pt_v8 v8_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline void v8_storeu(float *p, pt_v8 v) { _mm256_storeu_ps(p, v); }
static inline pt_v8 v8_add(pt_v8 a, pt_v8 b) { return _mm256_add_ps(a, b); }
static inline pt_v8 v8_fmadd(pt_v8 a, pt_v8 b, pt_v8 c) { return _mm256_fmadd_ps(a, b, c); }

/* v16.h's v16_fmadd_at and v8_fmadd_at, the loads folded into the
 * multiply-adds and addressed as base + off from two registers. From the
 * intrinsics, GCC computed each base + off with an instruction of its own
 * (and chained the bases by adding their distance): in lin1's sparse
 * forward pass, 37 instructions for 14 multiply-adds a nonzero input,
 * against 21 so, and 0.91x the time (Zen 3, 1 thread). The "m" operand
 * tells the compiler that the asm reads memory from base on (an array of
 * 2^20 floats for "some of what follows": clang takes no array of unknown
 * size there). */
#define PT_V16_HAS_FMADD_AT 1
static inline pt_v16 v16_fmadd_at(pt_v16 a, const float *base, size_t off, pt_v16 c) {
  __asm__("vfmadd231ps (%[b],%[o]), %[xl], %[l]\n\t"
          "vfmadd231ps 32(%[b],%[o]), %[xh], %[h]"
          : [l] "+x"(c.lo), [h] "+x"(c.hi)
          : [xl] "x"(a.lo), [xh] "x"(a.hi), [b] "r"(base), [o] "r"(off), "m"(*(const float(*)[1 << 20])base));
  return c;
}
static inline pt_v8 v8_fmadd_at(pt_v8 a, const float *base, size_t off, pt_v8 c) {
  __asm__("vfmadd231ps (%[b],%[o]), %[x], %[c]"
          : [c] "+x"(c)
          : [x] "x"(a), [b] "r"(base), [o] "r"(off), "m"(*(const float(*)[1 << 20])base));
  return c;
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
/* Selections by a compare's vector mask, without the 16-bit mask the
 * compares above return (which AVX2 has to rebuild into a vector):
 * x where a > b (NaN: not), y elsewhere; and v where k == q, +0
 * elsewhere. */
static inline pt_vi16 vi16_select_gt(pt_v16 a, pt_v16 b, pt_vi16 x, pt_vi16 y) {
  const __m256i lo = _mm256_castps_si256(_mm256_cmp_ps(a.lo, b.lo, _CMP_GT_OQ));
  const __m256i hi = _mm256_castps_si256(_mm256_cmp_ps(a.hi, b.hi, _CMP_GT_OQ));
  return (pt_vi16){_mm256_blendv_epi8(y.lo, x.lo, lo), _mm256_blendv_epi8(y.hi, x.hi, hi)};
}
static inline pt_v16 v16_keep_eq(pt_v16 v, pt_vi16 k, pt_vi16 q) {
  return (pt_v16){_mm256_and_ps(v.lo, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k.lo, q.lo))),
                  _mm256_and_ps(v.hi, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k.hi, q.hi)))};
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

/* ---- added for conv_direct.c ---- */
/* The lanes m of v, in order, to p[0, popcount(m)); nothing else is
 * written. Each half is compressed by a permute whose indices come from a
 * table (3 bits a lane, the lanes of the half's mask in order) and stored
 * as a prefix; a full half takes a plain store, vmaskmov being the slower. */
static inline int v16_avx2_compress_half(float *p, unsigned m, __m256 h) {
  static const uint32_t perm[256] = {
      0x000000, 0x000000, 0x000001, 0x000008, 0x000002, 0x000010, 0x000011, 0x000088,
      0x000003, 0x000018, 0x000019, 0x0000c8, 0x00001a, 0x0000d0, 0x0000d1, 0x000688,
      0x000004, 0x000020, 0x000021, 0x000108, 0x000022, 0x000110, 0x000111, 0x000888,
      0x000023, 0x000118, 0x000119, 0x0008c8, 0x00011a, 0x0008d0, 0x0008d1, 0x004688,
      0x000005, 0x000028, 0x000029, 0x000148, 0x00002a, 0x000150, 0x000151, 0x000a88,
      0x00002b, 0x000158, 0x000159, 0x000ac8, 0x00015a, 0x000ad0, 0x000ad1, 0x005688,
      0x00002c, 0x000160, 0x000161, 0x000b08, 0x000162, 0x000b10, 0x000b11, 0x005888,
      0x000163, 0x000b18, 0x000b19, 0x0058c8, 0x000b1a, 0x0058d0, 0x0058d1, 0x02c688,
      0x000006, 0x000030, 0x000031, 0x000188, 0x000032, 0x000190, 0x000191, 0x000c88,
      0x000033, 0x000198, 0x000199, 0x000cc8, 0x00019a, 0x000cd0, 0x000cd1, 0x006688,
      0x000034, 0x0001a0, 0x0001a1, 0x000d08, 0x0001a2, 0x000d10, 0x000d11, 0x006888,
      0x0001a3, 0x000d18, 0x000d19, 0x0068c8, 0x000d1a, 0x0068d0, 0x0068d1, 0x034688,
      0x000035, 0x0001a8, 0x0001a9, 0x000d48, 0x0001aa, 0x000d50, 0x000d51, 0x006a88,
      0x0001ab, 0x000d58, 0x000d59, 0x006ac8, 0x000d5a, 0x006ad0, 0x006ad1, 0x035688,
      0x0001ac, 0x000d60, 0x000d61, 0x006b08, 0x000d62, 0x006b10, 0x006b11, 0x035888,
      0x000d63, 0x006b18, 0x006b19, 0x0358c8, 0x006b1a, 0x0358d0, 0x0358d1, 0x1ac688,
      0x000007, 0x000038, 0x000039, 0x0001c8, 0x00003a, 0x0001d0, 0x0001d1, 0x000e88,
      0x00003b, 0x0001d8, 0x0001d9, 0x000ec8, 0x0001da, 0x000ed0, 0x000ed1, 0x007688,
      0x00003c, 0x0001e0, 0x0001e1, 0x000f08, 0x0001e2, 0x000f10, 0x000f11, 0x007888,
      0x0001e3, 0x000f18, 0x000f19, 0x0078c8, 0x000f1a, 0x0078d0, 0x0078d1, 0x03c688,
      0x00003d, 0x0001e8, 0x0001e9, 0x000f48, 0x0001ea, 0x000f50, 0x000f51, 0x007a88,
      0x0001eb, 0x000f58, 0x000f59, 0x007ac8, 0x000f5a, 0x007ad0, 0x007ad1, 0x03d688,
      0x0001ec, 0x000f60, 0x000f61, 0x007b08, 0x000f62, 0x007b10, 0x007b11, 0x03d888,
      0x000f63, 0x007b18, 0x007b19, 0x03d8c8, 0x007b1a, 0x03d8d0, 0x03d8d1, 0x1ec688,
      0x00003e, 0x0001f0, 0x0001f1, 0x000f88, 0x0001f2, 0x000f90, 0x000f91, 0x007c88,
      0x0001f3, 0x000f98, 0x000f99, 0x007cc8, 0x000f9a, 0x007cd0, 0x007cd1, 0x03e688,
      0x0001f4, 0x000fa0, 0x000fa1, 0x007d08, 0x000fa2, 0x007d10, 0x007d11, 0x03e888,
      0x000fa3, 0x007d18, 0x007d19, 0x03e8c8, 0x007d1a, 0x03e8d0, 0x03e8d1, 0x1f4688,
      0x0001f5, 0x000fa8, 0x000fa9, 0x007d48, 0x000faa, 0x007d50, 0x007d51, 0x03ea88,
      0x000fab, 0x007d58, 0x007d59, 0x03eac8, 0x007d5a, 0x03ead0, 0x03ead1, 0x1f5688,
      0x000fac, 0x007d60, 0x007d61, 0x03eb08, 0x007d62, 0x03eb10, 0x03eb11, 0x1f5888,
      0x007d63, 0x03eb18, 0x03eb19, 0x1f58c8, 0x03eb1a, 0x1f58d0, 0x1f58d1, 0xfac688,
  };
  if (m == 0xFFu) {
    _mm256_storeu_ps(p, h);
    return 8;
  }
  if (m == 0u) return 0;
  const int n = __builtin_popcount(m);
  const __m256i idx = _mm256_srlv_epi32(_mm256_set1_epi32((int)perm[m]), _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21));
  v16_avx2_store_prefix(p, n, _mm256_permutevar8x32_ps(h, idx));
  return n;
}
static inline void v16_compress_storeu(float *p, pt_m16 m, pt_v16 v) {
  const int n = v16_avx2_compress_half(p, m & 0xFFu, v.lo);
  v16_avx2_compress_half(p + n, m >> 8 & 0xFFu, v.hi);
}

/* ---- added for expf.h ---- */
/* v16_fmadd rounds once (pt_expf fuses its steps where this is 1). */
#define PT_V16_FMA 1

/* ---- added for philox.c ---- */
/* pt_vi16 as 8 unsigned 64-bit lanes, lane i in 32-bit lanes 2i (low half)
 * and 2i + 1: the full product of the low halves (_mm512_mul_epu32), and a
 * right shift. */
static inline pt_vi16 vi16_mul_epu32(pt_vi16 a, pt_vi16 b) { return VI16_AVX2_2(_mm256_mul_epu32, a, b); }
static inline pt_vi16 vi16_srli_epi64(pt_vi16 a, unsigned n) {
  return (pt_vi16){_mm256_srli_epi64(a.lo, (int)n), _mm256_srli_epi64(a.hi, (int)n)};
}

#endif

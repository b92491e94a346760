/* The 2x2, stride-2 windows of two input rows, 16 at a time, in AVX-512
 * registers: the max-pool (pool.c) and the pool fused after a convolution
 * (pool_codes.c) both read their windows and write their gradients so. */
#ifndef PT_OPS_CPU_POOL2X2_H
#define PT_OPS_CPU_POOL2X2_H

#ifdef __AVX512F__
#include <immintrin.h>

#include "ops/cpu/lanes.h"

/* n <= 16 windows from rows r0 and r1 (2n columns each): v[0] and v[1] the
 * windows' top-left and top-right inputs, v[2] and v[3] the bottom ones;
 * lanes past n are 0. Each row is loaded as two vectors and split into its
 * even and odd columns by one permute each. */
static inline void pt_pool2x2_load(const float *r0, const float *r1, int n, __m512 v[4]) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __mmask16 ma = pt_lanes(2 * n), mb = pt_lanes(2 * n - 16);
  const __m512 a0 = _mm512_maskz_loadu_ps(ma, r0), a1 = _mm512_maskz_loadu_ps(mb, r0 + 16);
  const __m512 b0 = _mm512_maskz_loadu_ps(ma, r1), b1 = _mm512_maskz_loadu_ps(mb, r1 + 16);
  v[0] = _mm512_permutex2var_ps(a0, even, a1);
  v[1] = _mm512_permutex2var_ps(a0, odd, a1);
  v[2] = _mm512_permutex2var_ps(b0, even, b1);
  v[3] = _mm512_permutex2var_ps(b0, odd, b1);
}

/* The inverse, for gradients: v[0..3] as pt_pool2x2_load gives them, n
 * windows, interleaved back into rows d0 and d1 (2n columns each). */
static inline void pt_pool2x2_store(const __m512 v[4], int n, float *d0, float *d1) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
  const __mmask16 ma = pt_lanes(2 * n), mb = pt_lanes(2 * n - 16);
  _mm512_mask_storeu_ps(d0, ma, _mm512_permutex2var_ps(v[0], lo, v[1]));
  _mm512_mask_storeu_ps(d0 + 16, mb, _mm512_permutex2var_ps(v[0], hi, v[1]));
  _mm512_mask_storeu_ps(d1, ma, _mm512_permutex2var_ps(v[2], lo, v[3]));
  _mm512_mask_storeu_ps(d1 + 16, mb, _mm512_permutex2var_ps(v[2], hi, v[3]));
}
#endif

#endif

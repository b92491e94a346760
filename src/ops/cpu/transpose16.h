/* A 16x16 block of floats transposed in AVX-512 registers: the conv
 * kernels' weight gradients want channels in the lanes where the data has
 * positions there. */
#ifndef PT_OPS_CPU_TRANSPOSE16_H
#define PT_OPS_CPU_TRANSPOSE16_H

#ifdef __AVX512F__
#include <immintrin.h>

/* In-place transpose of a 16x16 block held as 16 rows. */
static inline void pt_transpose16(__m512 r[16]) {
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

/* Channels into the lanes: r[l] = position l of 16 channel planes (plane
 * floats apart, from src), of which the first nc are real and the rest 0;
 * the positions m selects are read, the others are 0. With gate (at the
 * same offsets as src), only elements where gate > 0 are kept: a ReLU's
 * mask applied on the way. */
static inline void pt_transpose16_planes(const float *src, const float *gate, size_t plane, int nc, __mmask16 m,
                                         __m512 r[16]) {
  const __m512 zero = _mm512_setzero_ps();
  for (int c = 0; c < 16; c++) {
    if (c >= nc) {
      r[c] = zero;
      continue;
    }
    r[c] = _mm512_maskz_loadu_ps(m, src + plane * (size_t)c);
    if (gate)
      r[c] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, gate + plane * (size_t)c), zero,
                                                    _CMP_GT_OQ),
                                 r[c]);
  }
  pt_transpose16(r);
}

#endif
#endif

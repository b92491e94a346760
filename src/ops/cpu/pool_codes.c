/* Serial: the callers (the direct convolution's threads) run it on their
 * own group of samples while it is in cache. Rows of up to 32 inputs go as
 * two vectors, split into even and odd columns by one permute each way. */
#include "ops/cpu/pool_codes.h"

#ifdef __AVX512F__
#include <immintrin.h>

static __mmask16 lanes(int n) { return (__mmask16)(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1); }

void pt_pool_codes_forward(size_t planes, int h, int w, const float *x, float *y, int32_t *code) {
  const int ph = h / 2, pw = w / 2;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (size_t p = 0; p < planes; p++)
    for (int py = 0; py < ph; py++) {
      const float *r0 = x + ((size_t)p * h + 2 * py) * w, *r1 = r0 + w;
      float *yo = y + ((size_t)p * ph + py) * pw;
      int32_t *co = code + ((size_t)p * ph + py) * pw;
      for (int px = 0; px < pw; px += 16) {
        const int n = pw - px < 16 ? pw - px : 16, cols = 2 * n;
        const __m512 a0 = _mm512_maskz_loadu_ps(lanes(cols), r0 + 2 * px);
        const __m512 a1 = _mm512_maskz_loadu_ps(lanes(cols - 16), r0 + 2 * px + 16);
        const __m512 b0 = _mm512_maskz_loadu_ps(lanes(cols), r1 + 2 * px);
        const __m512 b1 = _mm512_maskz_loadu_ps(lanes(cols - 16), r1 + 2 * px + 16);
        const __m512 v[4] = {_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1),
                             _mm512_permutex2var_ps(b0, even, b1), _mm512_permutex2var_ps(b0, odd, b1)};
        __m512 best;
        __m512i at;
        pt_pool_codes_max4(v, &best, &at);
        _mm512_mask_storeu_ps(yo + px, lanes(n), best);
        _mm512_mask_storeu_epi32(co + px, lanes(n), at);
      }
    }
}

void pt_pool_codes_backward(size_t planes, int h, int w, const float *dy, const int32_t *code, float *dx) {
  const int ph = h / 2, pw = w / 2;
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
  for (size_t p = 0; p < planes; p++)
    for (int py = 0; py < ph; py++) {
      const float *d = dy + ((size_t)p * ph + py) * pw;
      const int32_t *c = code + ((size_t)p * ph + py) * pw;
      float *r0 = dx + ((size_t)p * h + 2 * py) * w, *r1 = r0 + w;
      for (int px = 0; px < pw; px += 16) {
        const int n = pw - px < 16 ? pw - px : 16, cols = 2 * n;
        const __m512 g = _mm512_maskz_loadu_ps(lanes(n), d + px);
        const __m512i k = _mm512_maskz_loadu_epi32(lanes(n), c + px);
        __m512 v[4];
        for (int q = 0; q < 4; q++) v[q] = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(q)), g);
        /* row 0 interleaves positions 0 and 1, row 1 positions 2 and 3 */
        _mm512_mask_storeu_ps(r0 + 2 * px, lanes(cols), _mm512_permutex2var_ps(v[0], lo, v[1]));
        _mm512_mask_storeu_ps(r0 + 2 * px + 16, lanes(cols - 16), _mm512_permutex2var_ps(v[0], hi, v[1]));
        _mm512_mask_storeu_ps(r1 + 2 * px, lanes(cols), _mm512_permutex2var_ps(v[2], lo, v[3]));
        _mm512_mask_storeu_ps(r1 + 2 * px + 16, lanes(cols - 16), _mm512_permutex2var_ps(v[2], hi, v[3]));
      }
    }
}

#endif /* __AVX512F__: only the direct convolution, itself AVX-512, calls these */

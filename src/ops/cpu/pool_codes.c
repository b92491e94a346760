/* Serial: the callers (the direct convolution's threads) run it on their
 * own group of samples while it is in cache, 16 windows at a time
 * (pool2x2.h). */
#include "ops/cpu/pool_codes.h"

#ifdef __AVX512F__
#include "ops/cpu/pool2x2.h"

void pt_pool_codes_forward(size_t planes, int h, int w, const float *x, float *y, int32_t *code) {
  const int ph = h / 2, pw = w / 2;
  for (size_t p = 0; p < planes; p++)
    for (int py = 0; py < ph; py++) {
      const float *r0 = x + ((size_t)p * h + 2 * py) * w, *r1 = r0 + w;
      float *yo = y + ((size_t)p * ph + py) * pw;
      int32_t *co = code + ((size_t)p * ph + py) * pw;
      for (int px = 0; px < pw; px += 16) {
        const int n = pw - px < 16 ? pw - px : 16;
        __m512 v[4], best;
        __m512i at;
        pt_pool2x2_load(r0 + 2 * px, r1 + 2 * px, n, v);
        pt_pool_codes_max4(v, &best, &at);
        _mm512_mask_storeu_ps(yo + px, pt_lanes(n), best);
        _mm512_mask_storeu_epi32(co + px, pt_lanes(n), at);
      }
    }
}

void pt_pool_codes_backward(size_t planes, int h, int w, const float *dy, const int32_t *code, float *dx) {
  const int ph = h / 2, pw = w / 2;
  for (size_t p = 0; p < planes; p++)
    for (int py = 0; py < ph; py++) {
      const float *d = dy + ((size_t)p * ph + py) * pw;
      const int32_t *c = code + ((size_t)p * ph + py) * pw;
      float *r0 = dx + ((size_t)p * h + 2 * py) * w;
      for (int px = 0; px < pw; px += 16) {
        const int n = pw - px < 16 ? pw - px : 16;
        const __m512 g = _mm512_maskz_loadu_ps(pt_lanes(n), d + px);
        const __m512i k = _mm512_maskz_loadu_epi32(pt_lanes(n), c + px);
        __m512 v[4];
        for (int q = 0; q < 4; q++) v[q] = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(q)), g);
        pt_pool2x2_store(v, n, r0 + 2 * px, r0 + w + 2 * px);
      }
    }
}

#endif /* __AVX512F__: only the direct convolution, itself AVX-512, calls these */

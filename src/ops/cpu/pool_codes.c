/* Serial: the callers (the direct convolution's threads) run it on their
 * own group of samples while it is in cache, 16 windows at a time
 * (pool2x2.h). */
#include "ops/cpu/pool_codes.h"

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
        pt_v16 v[4], best;
        pt_vi16 at;
        pt_pool2x2_load(r0 + 2 * px, r1 + 2 * px, n, v);
        pt_pool_codes_max4(v, &best, &at);
        v16_mask_storeu(yo + px, v16_lanes(n), best);
        vi16_mask_storeu(co + px, v16_lanes(n), at);
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
        const pt_v16 g = v16_maskz_loadu(v16_lanes(n), d + px);
        const pt_vi16 k = vi16_maskz_loadu(v16_lanes(n), c + px);
        pt_v16 v[4];
        for (int q = 0; q < 4; q++) v[q] = v16_keep_eq(g, k, vi16_set1(q));
        pt_pool2x2_store(v, n, r0 + 2 * px, r0 + w + 2 * px);
      }
    }
}

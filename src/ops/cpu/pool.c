/* Max-pooling without padding, floor mode. The forward pass records the flat
 * input index of each maximum so backward is a scatter, and ties go to the
 * first maximum in scan order, as PyTorch's CPU kernel does. */
#include <string.h>

#include "ops/cpu/ops.h"

void pt_maxpool_forward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *x,
                        float *y, int32_t *argmax) {
  for (int p = 0; p < n * c; p++) {
    const float *xp = x + (size_t)p * h * w;
    float *yp = y + (size_t)p * oh * ow;
    int32_t *ap = argmax + (size_t)p * oh * ow;
    for (int oy = 0; oy < oh; oy++) {
      for (int ox = 0; ox < ow; ox++) {
        int best = (oy * s) * w + ox * s;
        float bv = xp[best];
        for (int ky = 0; ky < k; ky++) {
          const float *row = xp + (size_t)(oy * s + ky) * w + ox * s;
          for (int kx = 0; kx < k; kx++) {
            /* NaN propagates, as in PyTorch */
            if (row[kx] > bv || row[kx] != row[kx]) {
              bv = row[kx];
              best = (oy * s + ky) * w + ox * s + kx;
            }
          }
        }
        yp[oy * ow + ox] = bv;
        ap[oy * ow + ox] = best;
      }
    }
  }
}

void pt_maxpool_backward(int n, int c, int h, int w, int oh, int ow, const float *dy,
                         const int32_t *argmax, float *dx) {
  memset(dx, 0, sizeof(float) * (size_t)n * c * h * w);
  for (int p = 0; p < n * c; p++) {
    float *dxp = dx + (size_t)p * h * w;
    const float *dyp = dy + (size_t)p * oh * ow;
    const int32_t *ap = argmax + (size_t)p * oh * ow;
    for (int i = 0; i < oh * ow; i++) dxp[ap[i]] += dyp[i];
  }
}

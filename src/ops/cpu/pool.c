/* Max-pooling without padding, floor mode. The forward pass records the flat
 * input index of each maximum so backward is a scatter, and ties go to the
 * first maximum in scan order, as PyTorch's CPU kernel does. */
#include <string.h>

#include "ops/cpu/ops.h"

typedef struct {
  int h, w, k, s, oh, ow;
  const float *x, *dy;
  const int32_t *argmax_in;
  float *y, *dx;
  int32_t *argmax;
} pool_job;

static void maxpool_fwd(void *ctx, size_t lo, size_t hi) {
  const pool_job *j = ctx;
  const int h = j->h, w = j->w, k = j->k, s = j->s, oh = j->oh, ow = j->ow;
  const float *x = j->x;
  float *y = j->y;
  int32_t *argmax = j->argmax;
  for (size_t p = lo; p < hi; p++) {
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

/* Planes (one image channel each) are independent: split them over threads. */
void pt_maxpool_forward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *x,
                        float *y, int32_t *argmax) {
  pool_job j = {h, w, k, s, oh, ow, x, NULL, NULL, y, NULL, argmax};
  pt_parallel_for((size_t)n * c, 16, maxpool_fwd, &j);
}

static void maxpool_bwd(void *ctx, size_t lo, size_t hi) {
  const pool_job *j = ctx;
  const size_t in = (size_t)j->h * j->w, out = (size_t)j->oh * j->ow;
  for (size_t p = lo; p < hi; p++) {
    float *dxp = j->dx + p * in;
    const float *dyp = j->dy + p * out;
    const int32_t *ap = j->argmax_in + p * out;
    memset(dxp, 0, sizeof(float) * in);
    for (size_t i = 0; i < out; i++) dxp[ap[i]] += dyp[i];
  }
}

void pt_maxpool_backward(int n, int c, int h, int w, int oh, int ow, const float *dy,
                         const int32_t *argmax, float *dx) {
  pool_job j = {h, w, 0, 0, oh, ow, NULL, dy, argmax, NULL, dx, NULL};
  pt_parallel_for((size_t)n * c, 16, maxpool_bwd, &j);
}

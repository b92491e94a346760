/* Max-pooling without padding, floor mode. The forward pass records the flat
 * input index of each maximum so backward is a scatter, and ties go to the
 * first maximum in scan order, as PyTorch's CPU kernel does. */
#include <string.h>

#include "ops/cpu/ops.h"

#include "ops/cpu/pool2x2.h"
#include "ops/cpu/simd/v16.h"

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

/* The tutorials' pooling, kernel 2 stride 2: four candidates per output,
 * compared branch-free in scan order (ties keep the first, NaN wins). */
static inline pt_m16 takes(pt_v16 v, pt_v16 best) { return v16_cmpgt(v, best) | v16_cmpunord(v, v); }

/* Each window's top-left input index, for windows ox .. ox+15 of row oy. */
static inline pt_vi16 top_left(int oy, int ox, int w) {
  static const int32_t step[16] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
  return vi16_add(vi16_set1(2 * oy * w + 2 * ox), vi16_loadu(step));
}

static void maxpool2_fwd(void *ctx, size_t lo, size_t hi) {
  const pool_job *j = ctx;
  const int w = j->w, oh = j->oh, ow = j->ow;
  for (size_t p = lo; p < hi; p++) {
    const float *xp = j->x + p * (size_t)j->h * w;
    float *yp = j->y + p * (size_t)oh * ow;
    int32_t *ap = j->argmax + p * (size_t)oh * ow;
    for (int oy = 0; oy < oh; oy++) {
      const float *r0 = xp + (size_t)(2 * oy) * w, *r1 = r0 + w;
      /* 16 outputs at a time (pool2x2.h), compared in the order of a scan
       * of the window; the index offsets of the four positions are 0, 1, w,
       * w + 1 */
      for (int ox = 0; ox < ow; ox += 16) {
        const int n = ow - ox < 16 ? ow - ox : 16;
        const pt_vi16 i00 = top_left(oy, ox, w);
        const int32_t offset[4] = {0, 1, w, w + 1};
        /* zeroed for GCC alone: it cannot tell that the portable build's
         * lane-by-lane fill writes every lane (-Wmaybe-uninitialized) */
        pt_v16 v[4] = {v16_zero(), v16_zero(), v16_zero(), v16_zero()};
        pt_pool2x2_load(r0 + 2 * ox, r1 + 2 * ox, n, v);
        pt_v16 bv = v[0];
        pt_vi16 bi = i00;
        for (int q = 1; q < 4; q++) {
          const pt_m16 t = takes(v[q], bv);
          bv = v16_mask_mov(bv, t, v[q]);
          bi = vi16_mask_mov(bi, t, vi16_add(i00, vi16_set1(offset[q])));
        }
        v16_mask_storeu(yp + oy * ow + ox, v16_lanes(n), bv);
        vi16_mask_storeu(ap + oy * ow + ox, v16_lanes(n), bi);
      }
    }
  }
}

/* Planes (one image channel each) are independent: split them over threads. */
void pt_maxpool_forward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *x,
                        float *y, int32_t *argmax) {
  pool_job j = {h, w, k, s, oh, ow, x, NULL, NULL, y, NULL, argmax};
  pt_parallel_for((size_t)n * c, 16, k == 2 && s == 2 ? maxpool2_fwd : maxpool_fwd, &j);
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

/* Kernel 2 stride 2 windows tile the input, so every input element is
 * written exactly once (its window's gradient or zero): no memset needed. */
static void maxpool2_bwd(void *ctx, size_t lo, size_t hi) {
  const pool_job *j = ctx;
  const int w = j->w, oh = j->oh, ow = j->ow;
  for (size_t p = lo; p < hi; p++) {
    float *dxp = j->dx + p * (size_t)j->h * w;
    const float *dyp = j->dy + p * (size_t)oh * ow;
    const int32_t *ap = j->argmax_in + p * (size_t)oh * ow;
    if (2 * oh != j->h || 2 * ow != w) memset(dxp, 0, sizeof(float) * (size_t)j->h * w); /* odd edges */
    for (int oy = 0; oy < oh; oy++) {
      /* 16 windows at a time: each of the four positions gets the
       * gradient where it is the argmax (pool2x2.h puts them back) */
      for (int ox = 0; ox < ow; ox += 16) {
        const int n = ow - ox < 16 ? ow - ox : 16;
        const pt_vi16 i00 = top_left(oy, ox, w);
        const int32_t offset[4] = {0, 1, w, w + 1};
        const pt_v16 g = v16_maskz_loadu(v16_lanes(n), dyp + oy * ow + ox);
        const pt_vi16 a = vi16_maskz_loadu(v16_lanes(n), ap + oy * ow + ox);
        pt_v16 v[4];
        for (int q = 0; q < 4; q++) v[q] = v16_maskz_mov(vi16_cmpeq(a, vi16_add(i00, vi16_set1(offset[q]))), g);
        float *d0 = dxp + (size_t)(2 * oy) * w + 2 * ox;
        pt_pool2x2_store(v, n, d0, d0 + w);
      }
    }
  }
}

void pt_maxpool_backward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *dy,
                         const int32_t *argmax, float *dx) {
  pool_job j = {h, w, k, s, oh, ow, NULL, dy, argmax, NULL, dx, NULL};
  pt_parallel_for((size_t)n * c, 16, k == 2 && s == 2 ? maxpool2_bwd : maxpool_bwd, &j);
}

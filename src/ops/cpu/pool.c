/* Max-pooling without padding, floor mode. The forward pass records the flat
 * input index of each maximum so backward is a scatter, and ties go to the
 * first maximum in scan order, as PyTorch's CPU kernel does. */
#include <string.h>

#include "ops/cpu/ops.h"

#include "ops/cpu/pool2x2.h"

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
#ifdef __AVX512F__
static inline __mmask16 takes(__m512 v, __m512 best) {
  return _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}

/* Each window's top-left input index, for windows ox .. ox+15 of row oy. */
static inline __m512i top_left(int oy, int ox, int w) {
  return _mm512_add_epi32(_mm512_set1_epi32(2 * oy * w + 2 * ox),
                          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
}
#endif

static void maxpool2_fwd(void *ctx, size_t lo, size_t hi) {
  const pool_job *j = ctx;
  const int w = j->w, oh = j->oh, ow = j->ow;
  for (size_t p = lo; p < hi; p++) {
    const float *xp = j->x + p * (size_t)j->h * w;
    float *yp = j->y + p * (size_t)oh * ow;
    int32_t *ap = j->argmax + p * (size_t)oh * ow;
    for (int oy = 0; oy < oh; oy++) {
      const float *r0 = xp + (size_t)(2 * oy) * w, *r1 = r0 + w;
#ifdef __AVX512F__
      /* 16 outputs at a time (pool2x2.h), compared in the scalar loop's
       * order; the index offsets of the four positions are 0, 1, w, w + 1 */
      for (int ox = 0; ox < ow; ox += 16) {
        const int n = ow - ox < 16 ? ow - ox : 16;
        const __m512i i00 = top_left(oy, ox, w);
        const int32_t offset[4] = {0, 1, w, w + 1};
        __m512 v[4];
        pt_pool2x2_load(r0 + 2 * ox, r1 + 2 * ox, n, v);
        __m512 bv = v[0];
        __m512i bi = i00;
        for (int q = 1; q < 4; q++) {
          const __mmask16 t = takes(v[q], bv);
          bv = _mm512_mask_mov_ps(bv, t, v[q]);
          bi = _mm512_mask_add_epi32(bi, t, i00, _mm512_set1_epi32(offset[q]));
        }
        _mm512_mask_storeu_ps(yp + oy * ow + ox, pt_lanes(n), bv);
        _mm512_mask_storeu_epi32(ap + oy * ow + ox, pt_lanes(n), bi);
      }
#else
      const int base = 2 * oy * w;
      for (int ox = 0; ox < ow; ox++) {
        float bv = r0[2 * ox];
        int32_t bi = base + 2 * ox;
        float v = r0[2 * ox + 1];
        int take = v > bv || v != v;
        bv = take ? v : bv;
        bi = take ? base + 2 * ox + 1 : bi;
        v = r1[2 * ox];
        take = v > bv || v != v;
        bv = take ? v : bv;
        bi = take ? base + w + 2 * ox : bi;
        v = r1[2 * ox + 1];
        take = v > bv || v != v;
        bv = take ? v : bv;
        bi = take ? base + w + 2 * ox + 1 : bi;
        yp[oy * ow + ox] = bv;
        ap[oy * ow + ox] = bi;
      }
#endif
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
#ifdef __AVX512F__
      /* 16 windows at a time: each of the four positions gets the
       * gradient where it is the argmax (pool2x2.h puts them back) */
      for (int ox = 0; ox < ow; ox += 16) {
        const int n = ow - ox < 16 ? ow - ox : 16;
        const __m512i i00 = top_left(oy, ox, w);
        const int32_t offset[4] = {0, 1, w, w + 1};
        const __m512 g = _mm512_maskz_loadu_ps(pt_lanes(n), dyp + oy * ow + ox);
        const __m512i a = _mm512_maskz_loadu_epi32(pt_lanes(n), ap + oy * ow + ox);
        __m512 v[4];
        for (int q = 0; q < 4; q++)
          v[q] = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(i00, _mm512_set1_epi32(offset[q]))), g);
        float *d0 = dxp + (size_t)(2 * oy) * w + 2 * ox;
        pt_pool2x2_store(v, n, d0, d0 + w);
      }
#else
      for (int ox = 0; ox < ow; ox++) {
        const int32_t a = ap[oy * ow + ox], i0 = 2 * oy * w + 2 * ox;
        const float g = dyp[oy * ow + ox];
        dxp[i0] = a == i0 ? g : 0.0f;
        dxp[i0 + 1] = a == i0 + 1 ? g : 0.0f;
        dxp[i0 + w] = a == i0 + w ? g : 0.0f;
        dxp[i0 + w + 1] = a == i0 + w + 1 ? g : 0.0f;
      }
#endif
    }
  }
}

void pt_maxpool_backward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *dy,
                         const int32_t *argmax, float *dx) {
  pool_job j = {h, w, k, s, oh, ow, NULL, dy, argmax, NULL, dx, NULL};
  pt_parallel_for((size_t)n * c, 16, k == 2 && s == 2 ? maxpool2_bwd : maxpool_bwd, &j);
}

/* Max-pooling without padding, floor mode. The forward pass records the flat
 * input index of each maximum so backward is a scatter, and ties go to the
 * first maximum in scan order, as PyTorch's CPU kernel does. */
#include <string.h>

#include "ops/cpu/ops.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

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

/* The windows ox .. ox+15 of output row oy (fewer at the row's end): m
 * masks the windows, ma and mb their 2n input columns as two vectors, and
 * i00 holds each window's top-left input index. */
typedef struct {
  __mmask16 m, ma, mb;
  __m512i i00;
} segment;

static inline segment segment_at(int oy, int ox, int w, int ow) {
  const int n = ow - ox < 16 ? ow - ox : 16;
  segment g;
  g.m = (__mmask16)(n == 16 ? 0xFFFFu : (1u << n) - 1);
  g.ma = (__mmask16)(2 * n >= 16 ? 0xFFFFu : (1u << (2 * n)) - 1);
  g.mb = (__mmask16)(2 * n >= 32 ? 0xFFFFu : 2 * n > 16 ? (1u << (2 * n - 16)) - 1 : 0);
  g.i00 = _mm512_add_epi32(_mm512_set1_epi32(2 * oy * w + 2 * ox),
                           _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
  return g;
}
#endif

static void maxpool2_fwd(void *ctx, size_t lo, size_t hi) {
  const pool_job *j = ctx;
  const int w = j->w, oh = j->oh, ow = j->ow;
#ifdef __AVX512F__
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(1));
#endif
  for (size_t p = lo; p < hi; p++) {
    const float *xp = j->x + p * (size_t)j->h * w;
    float *yp = j->y + p * (size_t)oh * ow;
    int32_t *ap = j->argmax + p * (size_t)oh * ow;
    for (int oy = 0; oy < oh; oy++) {
      const float *r0 = xp + (size_t)(2 * oy) * w, *r1 = r0 + w;
#ifdef __AVX512F__
      /* 16 outputs at a time: the even and odd columns of the two input
       * rows, split by permutes, compared in the scalar loop's order */
      for (int ox = 0; ox < ow; ox += 16) {
        const segment g = segment_at(oy, ox, w, ow);
        const __mmask16 m = g.m;
        const __m512i i00 = g.i00;
        const __m512 a0 = _mm512_maskz_loadu_ps(g.ma, r0 + 2 * ox), b0 = _mm512_maskz_loadu_ps(g.mb, r0 + 2 * ox + 16);
        const __m512 a1 = _mm512_maskz_loadu_ps(g.ma, r1 + 2 * ox), b1 = _mm512_maskz_loadu_ps(g.mb, r1 + 2 * ox + 16);
        __m512 bv = _mm512_permutex2var_ps(a0, ie, b0);
        __m512i bi = i00;
        __m512 v = _mm512_permutex2var_ps(a0, io, b0);
        __mmask16 t = takes(v, bv);
        bv = _mm512_mask_mov_ps(bv, t, v);
        bi = _mm512_mask_add_epi32(bi, t, i00, _mm512_set1_epi32(1));
        v = _mm512_permutex2var_ps(a1, ie, b1);
        t = takes(v, bv);
        bv = _mm512_mask_mov_ps(bv, t, v);
        bi = _mm512_mask_add_epi32(bi, t, i00, _mm512_set1_epi32(w));
        v = _mm512_permutex2var_ps(a1, io, b1);
        t = takes(v, bv);
        bv = _mm512_mask_mov_ps(bv, t, v);
        bi = _mm512_mask_add_epi32(bi, t, i00, _mm512_set1_epi32(w + 1));
        _mm512_mask_storeu_ps(yp + oy * ow + ox, m, bv);
        _mm512_mask_storeu_epi32(ap + oy * ow + ox, m, bi);
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
#ifdef __AVX512F__
  /* 16 windows of a row at a time: each of the four positions gets the
   * gradient where it is the argmax, and the even and odd columns are
   * interleaved back into two rows of 32 */
  const __m512i lo16 = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi16 = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
#endif
  for (size_t p = lo; p < hi; p++) {
    float *dxp = j->dx + p * (size_t)j->h * w;
    const float *dyp = j->dy + p * (size_t)oh * ow;
    const int32_t *ap = j->argmax_in + p * (size_t)oh * ow;
    if (2 * oh != j->h || 2 * ow != w) memset(dxp, 0, sizeof(float) * (size_t)j->h * w); /* odd edges */
    for (int oy = 0; oy < oh; oy++) {
#ifdef __AVX512F__
      for (int ox = 0; ox < ow; ox += 16) {
        const segment sg = segment_at(oy, ox, w, ow);
        const __mmask16 ma = sg.ma, mb = sg.mb;
        const __m512i i00 = sg.i00;
        const __m512 g = _mm512_maskz_loadu_ps(sg.m, dyp + oy * ow + ox);
        const __m512i a = _mm512_maskz_loadu_epi32(sg.m, ap + oy * ow + ox);
        const __m512 v00 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, i00), g);
        const __m512 v01 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(i00, _mm512_set1_epi32(1))), g);
        const __m512 v10 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(i00, _mm512_set1_epi32(w))), g);
        const __m512 v11 =
            _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(i00, _mm512_set1_epi32(w + 1))), g);
        float *d0 = dxp + (size_t)(2 * oy) * w + 2 * ox, *d1 = d0 + w;
        _mm512_mask_storeu_ps(d0, ma, _mm512_permutex2var_ps(v00, lo16, v01));
        _mm512_mask_storeu_ps(d0 + 16, mb, _mm512_permutex2var_ps(v00, hi16, v01));
        _mm512_mask_storeu_ps(d1, ma, _mm512_permutex2var_ps(v10, lo16, v11));
        _mm512_mask_storeu_ps(d1 + 16, mb, _mm512_permutex2var_ps(v10, hi16, v11));
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

/* conv2d as im2col + GEMM, one sample at a time.
 *
 * Per sample, im2col unrolls x into col (c*kh*kw, oh*ow) so the convolution
 * is one GEMM: y (oc, oh*ow) = w (oc, c*kh*kw) col. Backward reuses the same
 * unrolling: dw += dy col^T and dcol = w^T dy, folded back by col2im. A 1x1,
 * stride-1, unpadded convolution needs no unrolling: col is x itself.
 */
#include <string.h>

#include "ops/cpu/ops.h"

int pt_conv_init(pt_conv_geom *g) {
  if (g->stride < 1 || g->pad < 0 || g->kh < 1 || g->kw < 1) return 0;
  int hp = g->h + 2 * g->pad, wp = g->w + 2 * g->pad;
  if (hp < g->kh || wp < g->kw) return 0;
  g->oh = (hp - g->kh) / g->stride + 1;
  g->ow = (wp - g->kw) / g->stride + 1;
  return 1;
}

static int is_pointwise(const pt_conv_geom *g) {
  return g->kh == 1 && g->kw == 1 && g->stride == 1 && g->pad == 0;
}

size_t pt_conv_workspace(const pt_conv_geom *g) {
  return is_pointwise(g) ? 0 : (size_t)g->c * g->kh * g->kw * g->oh * g->ow;
}

/* col (c*kh*kw, oh*ow) from x (c, h, w) */
static void im2col(const pt_conv_geom *g, const float *x, float *col) {
  const int ohw = g->oh * g->ow;
  for (int ci = 0; ci < g->c; ci++) {
    const float *xc = x + (size_t)ci * g->h * g->w;
    for (int ky = 0; ky < g->kh; ky++) {
      for (int kx = 0; kx < g->kw; kx++) {
        float *row = col + ((size_t)(ci * g->kh + ky) * g->kw + kx) * ohw;
        for (int oy = 0; oy < g->oh; oy++) {
          int iy = oy * g->stride - g->pad + ky;
          float *dst = row + oy * g->ow;
          if (iy < 0 || iy >= g->h) {
            memset(dst, 0, sizeof(float) * g->ow);
            continue;
          }
          const float *src = xc + (size_t)iy * g->w;
          if (g->stride == 1) {
            /* Contiguous run; only the edges can fall into the padding.
             * Valid ox satisfy 0 <= ox - pad + kx < w. */
            int lo = g->pad - kx, hi = g->w + g->pad - kx;
            if (lo < 0) lo = 0;
            if (lo > g->ow) lo = g->ow;
            if (hi > g->ow) hi = g->ow;
            if (hi < lo) hi = lo;
            memset(dst, 0, sizeof(float) * (size_t)lo);
            memcpy(dst + lo, src + lo - g->pad + kx, sizeof(float) * (size_t)(hi - lo));
            memset(dst + hi, 0, sizeof(float) * (size_t)(g->ow - hi));
          } else {
            for (int ox = 0; ox < g->ow; ox++) {
              int ix = ox * g->stride - g->pad + kx;
              dst[ox] = (ix >= 0 && ix < g->w) ? src[ix] : 0.0f;
            }
          }
        }
      }
    }
  }
}

/* dx (c, h, w) = fold of dcol (c*kh*kw, oh*ow); dx is overwritten */
static void col2im(const pt_conv_geom *g, const float *col, float *dx) {
  const int ohw = g->oh * g->ow;
  memset(dx, 0, sizeof(float) * (size_t)g->c * g->h * g->w);
  for (int ci = 0; ci < g->c; ci++) {
    float *xc = dx + (size_t)ci * g->h * g->w;
    for (int ky = 0; ky < g->kh; ky++) {
      for (int kx = 0; kx < g->kw; kx++) {
        const float *row = col + ((size_t)(ci * g->kh + ky) * g->kw + kx) * ohw;
        for (int oy = 0; oy < g->oh; oy++) {
          int iy = oy * g->stride - g->pad + ky;
          if (iy < 0 || iy >= g->h) continue;
          float *dst = xc + (size_t)iy * g->w;
          const float *src = row + oy * g->ow;
          for (int ox = 0; ox < g->ow; ox++) {
            int ix = ox * g->stride - g->pad + kx;
            if (ix >= 0 && ix < g->w) dst[ix] += src[ox];
          }
        }
      }
    }
  }
}

void pt_conv2d_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                       float *y, float *ws) {
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw;
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  for (int s = 0; s < n; s++) {
    const float *col = x + s * xs;
    if (!is_pointwise(g)) {
      im2col(g, x + s * xs, ws);
      col = ws;
    }
    float *ys_ = y + s * ys;
    if (b) {
      for (int o = 0; o < g->oc; o++)
        for (int i = 0; i < ohw; i++) ys_[(size_t)o * ohw + i] = b[o];
    }
    pt_sgemm(0, 0, g->oc, ohw, ckk, 1.0f, w, ckk, col, ohw, b ? 1.0f : 0.0f, ys_, ohw);
  }
}

void pt_conv2d_backward(const pt_conv_geom *g, int n, const float *x, const float *w,
                        const float *dy, float *dw, float *db, float *dx, float *ws) {
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw;
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  for (int s = 0; s < n; s++) {
    const float *dys = dy + s * ys;
    if (db) {
      for (int o = 0; o < g->oc; o++) {
        float acc = 0.0f;
        for (int i = 0; i < ohw; i++) acc += dys[(size_t)o * ohw + i];
        db[o] += acc;
      }
    }
    const float *col = x + s * xs;
    if (!is_pointwise(g)) {
      im2col(g, x + s * xs, ws);
      col = ws;
    }
    pt_sgemm(0, 1, g->oc, ckk, ohw, 1.0f, dys, ohw, col, ohw, 1.0f, dw, ckk);
    if (dx) {
      if (is_pointwise(g)) {
        pt_sgemm(1, 0, ckk, ohw, g->oc, 1.0f, w, ckk, dys, ohw, 0.0f, dx + s * xs, ohw);
      } else {
        pt_sgemm(1, 0, ckk, ohw, g->oc, 1.0f, w, ckk, dys, ohw, 0.0f, ws, ohw);
        col2im(g, ws, dx + s * xs);
      }
    }
  }
}

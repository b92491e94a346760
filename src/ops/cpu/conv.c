/* conv2d as im2col + GEMM over chunks of samples.
 *
 * A chunk of n samples is unrolled into col (c*kh*kw, n*oh*ow), sample after
 * sample along the columns, so the whole chunk is ONE large GEMM:
 * y' (oc, n*oh*ow) = w (oc, c*kh*kw) col. Per-sample GEMMs of mnist-cnn's
 * conv2 are 64x576x288, too small for the BLAS to spread over threads; the
 * chunked one is 64x23616x288 and runs near the machine's GEMM peak. y' is
 * channel-major, so one transpose brings it to (n, oc, oh, ow). Backward
 * mirrors it: dw += dy' col^T and dcol = w^T dy', folded back by col2im.
 * Chunks bound the workspace (PT_CONV_WS_FLOATS) whatever the batch size.
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

/* Samples per chunk: as many as fit the workspace cap, at least one. */
static int chunk_of(const pt_conv_geom *g, int n) {
  size_t per = ((size_t)g->c * g->kh * g->kw + (size_t)g->oc) * g->oh * g->ow;
  size_t fit = per ? PT_CONV_WS_FLOATS / per : (size_t)n;
  if (fit < 1) fit = 1;
  return (size_t)n < fit ? n : (int)fit;
}

size_t pt_conv_workspace(const pt_conv_geom *g, int max_batch) {
  int c = chunk_of(g, max_batch);
  return (size_t)c * ((size_t)g->c * g->kh * g->kw + (size_t)g->oc) * g->oh * g->ow;
}

/* col (c*kh*kw, ld) columns [0, oh*ow) from x (c, h, w); ld is the row
 * stride of col, so samples of a chunk sit side by side. */
static void im2col(const pt_conv_geom *g, const float *x, float *col, size_t ld) {
  for (int ci = 0; ci < g->c; ci++) {
    const float *xc = x + (size_t)ci * g->h * g->w;
    for (int ky = 0; ky < g->kh; ky++) {
      for (int kx = 0; kx < g->kw; kx++) {
        float *row = col + ((size_t)(ci * g->kh + ky) * g->kw + kx) * ld;
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

/* dx (c, h, w) = fold of dcol (c*kh*kw, ld) columns [0, oh*ow); dx is overwritten */
static void col2im(const pt_conv_geom *g, const float *col, size_t ld, float *dx) {
  memset(dx, 0, sizeof(float) * (size_t)g->c * g->h * g->w);
  for (int ci = 0; ci < g->c; ci++) {
    float *xc = dx + (size_t)ci * g->h * g->w;
    for (int ky = 0; ky < g->kh; ky++) {
      for (int kx = 0; kx < g->kw; kx++) {
        const float *row = col + ((size_t)(ci * g->kh + ky) * g->kw + kx) * ld;
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

/* (oc, n, hw) <-> (n, oc, hw) */
static void to_sample_major(const float *src, int oc, int n, int hw, float *dst) {
  for (int s = 0; s < n; s++)
    for (int o = 0; o < oc; o++)
      memcpy(dst + ((size_t)s * oc + o) * hw, src + ((size_t)o * n + s) * hw, sizeof(float) * (size_t)hw);
}

static void to_channel_major(const float *src, int oc, int n, int hw, float *dst) {
  for (int s = 0; s < n; s++)
    for (int o = 0; o < oc; o++)
      memcpy(dst + ((size_t)o * n + s) * hw, src + ((size_t)s * oc + o) * hw, sizeof(float) * (size_t)hw);
}

void pt_conv2d_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                       float *y, float *ws) {
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw;
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  const int chunk = chunk_of(g, n);
  for (int s0 = 0; s0 < n; s0 += chunk) {
    const int cn = n - s0 < chunk ? n - s0 : chunk;
    const size_t ld = (size_t)cn * ohw;
    float *col = ws, *tmp = ws + (size_t)ckk * ld; /* col (ckk, cn*ohw), tmp (oc, cn*ohw) */
    for (int s = 0; s < cn; s++) im2col(g, x + (s0 + s) * xs, col + (size_t)s * ohw, ld);
    if (b) {
      for (int o = 0; o < g->oc; o++)
        for (size_t i = 0; i < ld; i++) tmp[(size_t)o * ld + i] = b[o];
    }
    pt_sgemm(0, 0, g->oc, (int)ld, ckk, 1.0f, w, ckk, col, (int)ld, b ? 1.0f : 0.0f, tmp, (int)ld);
    to_sample_major(tmp, g->oc, cn, ohw, y + s0 * ys);
  }
}

void pt_conv2d_backward(const pt_conv_geom *g, int n, const float *x, const float *w,
                        const float *dy, float *dw, float *db, float *dx, float *ws) {
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw;
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  const int chunk = chunk_of(g, n);
  for (int s0 = 0; s0 < n; s0 += chunk) {
    const int cn = n - s0 < chunk ? n - s0 : chunk;
    const size_t ld = (size_t)cn * ohw;
    float *col = ws, *dyt = ws + (size_t)ckk * ld; /* col (ckk, cn*ohw), dyt (oc, cn*ohw) */
    to_channel_major(dy + s0 * ys, g->oc, cn, ohw, dyt);
    if (db) {
      for (int o = 0; o < g->oc; o++) {
        const float *r = dyt + (size_t)o * ld;
        float acc = 0.0f;
        for (size_t i = 0; i < ld; i++) acc += r[i];
        db[o] += acc;
      }
    }
    for (int s = 0; s < cn; s++) im2col(g, x + (s0 + s) * xs, col + (size_t)s * ohw, ld);
    pt_sgemm(0, 1, g->oc, ckk, (int)ld, 1.0f, dyt, (int)ld, col, (int)ld, 1.0f, dw, ckk);
    if (dx) {
      /* dcol (ckk, cn*ohw) = w^T dyt, written over col, which dw no longer needs */
      pt_sgemm(1, 0, ckk, (int)ld, g->oc, 1.0f, w, ckk, dyt, (int)ld, 0.0f, col, (int)ld);
      for (int s = 0; s < cn; s++) col2im(g, col + (size_t)s * ohw, ld, dx + (s0 + s) * xs);
    }
  }
}

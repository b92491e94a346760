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

/* The per-sample and per-channel loops around the GEMMs run on the pool:
 * each task gets a block of samples (or channels) and writes only its own
 * part of the output. */
typedef struct {
  const pt_conv_geom *g;
  const float *x, *b;
  float *col, *tmp, *y, *dx, *db;
  int cn;
  size_t ld;
} conv_job;

static void im2col_task(void *ctx, size_t lo, size_t hi) {
  const conv_job *j = ctx;
  const size_t xs = (size_t)j->g->c * j->g->h * j->g->w, ohw = (size_t)j->g->oh * j->g->ow;
  for (size_t s = lo; s < hi; s++) im2col(j->g, j->x + s * xs, j->col + s * ohw, j->ld);
}

static void col2im_task(void *ctx, size_t lo, size_t hi) {
  const conv_job *j = ctx;
  const size_t xs = (size_t)j->g->c * j->g->h * j->g->w, ohw = (size_t)j->g->oh * j->g->ow;
  for (size_t s = lo; s < hi; s++) col2im(j->g, j->col + s * ohw, j->ld, j->dx + s * xs);
}

/* tmp (oc, cn, ohw) <- bias, per channel */
static void bias_task(void *ctx, size_t lo, size_t hi) {
  const conv_job *j = ctx;
  for (size_t o = lo; o < hi; o++)
    for (size_t i = 0; i < j->ld; i++) j->tmp[o * j->ld + i] = j->b[o];
}

/* y (cn, oc, ohw) <- tmp (oc, cn, ohw), per sample */
static void to_sample_major_task(void *ctx, size_t lo, size_t hi) {
  const conv_job *j = ctx;
  const size_t ohw = (size_t)j->g->oh * j->g->ow, oc = (size_t)j->g->oc;
  for (size_t s = lo; s < hi; s++)
    for (size_t o = 0; o < oc; o++)
      memcpy(j->y + (s * oc + o) * ohw, j->tmp + (o * j->cn + s) * ohw, sizeof(float) * ohw);
}

/* tmp (oc, cn, ohw) <- y (cn, oc, ohw), per sample (y holds dy here) */
static void to_channel_major_task(void *ctx, size_t lo, size_t hi) {
  const conv_job *j = ctx;
  const size_t ohw = (size_t)j->g->oh * j->g->ow, oc = (size_t)j->g->oc;
  for (size_t s = lo; s < hi; s++)
    for (size_t o = 0; o < oc; o++)
      memcpy(j->tmp + (o * j->cn + s) * ohw, j->y + (s * oc + o) * ohw, sizeof(float) * ohw);
}

/* db (oc) += row sums of tmp (oc, ld), per channel */
static void bias_grad_task(void *ctx, size_t lo, size_t hi) {
  const conv_job *j = ctx;
  for (size_t o = lo; o < hi; o++) {
    const float *r = j->tmp + o * j->ld;
    float acc = 0.0f;
    for (size_t i = 0; i < j->ld; i++) acc += r[i];
    j->db[o] += acc;
  }
}

void pt_conv2d_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                       float *y, float *ws) {
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw;
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  const int chunk = chunk_of(g, n);
  for (int s0 = 0; s0 < n; s0 += chunk) {
    conv_job j = {.g = g, .x = x + s0 * xs, .b = b, .y = y + s0 * ys};
    j.cn = n - s0 < chunk ? n - s0 : chunk;
    j.ld = (size_t)j.cn * ohw;
    j.col = ws;                        /* (ckk, cn*ohw) */
    j.tmp = ws + (size_t)ckk * j.ld;   /* (oc, cn*ohw) */
    pt_parallel_for((size_t)j.cn, 1, im2col_task, &j);
    if (b) pt_parallel_for((size_t)g->oc, 1, bias_task, &j);
    pt_sgemm(0, 0, g->oc, (int)j.ld, ckk, 1.0f, w, ckk, j.col, (int)j.ld, b ? 1.0f : 0.0f, j.tmp, (int)j.ld);
    pt_parallel_for((size_t)j.cn, 1, to_sample_major_task, &j);
  }
}

void pt_conv2d_backward(const pt_conv_geom *g, int n, const float *x, const float *w,
                        const float *dy, float *dw, float *db, float *dx, float *ws) {
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw;
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  const int chunk = chunk_of(g, n);
  for (int s0 = 0; s0 < n; s0 += chunk) {
    conv_job j = {.g = g, .x = x + s0 * xs, .y = (float *)(dy + s0 * ys), .db = db};
    j.cn = n - s0 < chunk ? n - s0 : chunk;
    j.ld = (size_t)j.cn * ohw;
    j.col = ws;                        /* (ckk, cn*ohw) */
    j.tmp = ws + (size_t)ckk * j.ld;   /* dy as (oc, cn*ohw) */
    j.dx = dx ? dx + s0 * xs : NULL;
    pt_parallel_for((size_t)j.cn, 1, to_channel_major_task, &j);
    if (db) pt_parallel_for((size_t)g->oc, 1, bias_grad_task, &j);
    pt_parallel_for((size_t)j.cn, 1, im2col_task, &j);
    pt_sgemm(0, 1, g->oc, ckk, (int)j.ld, 1.0f, j.tmp, (int)j.ld, j.col, (int)j.ld, 1.0f, dw, ckk);
    if (dx) {
      /* dcol (ckk, cn*ohw) = w^T dy, written over col, which dw no longer needs */
      pt_sgemm(1, 0, ckk, (int)j.ld, g->oc, 1.0f, w, ckk, j.tmp, (int)j.ld, 0.0f, j.col, (int)j.ld);
      pt_parallel_for((size_t)j.cn, 1, col2im_task, &j);
    }
  }
}

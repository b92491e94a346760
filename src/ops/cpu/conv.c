/* conv2d as im2col + GEMM, parallel over samples.
 *
 * Each pool thread takes a contiguous block of the batch and, one sample at
 * a time, unrolls it into its own col (c*kh*kw, oh*ow) and multiplies:
 * y_s (oc, oh*ow) = w (oc, c*kh*kw) col. The unrolled sample is small enough
 * to stay in the core's L2 cache (mnist-cnn's conv2: 650 KB), so neither
 * the unrolling nor the BLAS's own packing of it goes to memory, and y_s
 * lands directly in (n, oc, oh, ow) order with no transpose. Backward per
 * sample: dw_t += dy_s col^T into the thread's own partial, dcol = w^T dy_s
 * folded back by col2im. The partials are summed in thread order after the
 * batch, so results depend on the thread count but never on timing.
 */
#include <string.h>

#include "ops/cpu/ops.h"
#include "util/threadpool.h"

int pt_conv_init(pt_conv_geom *g) {
  if (g->stride < 1 || g->pad < 0 || g->kh < 1 || g->kw < 1) return 0;
  int hp = g->h + 2 * g->pad, wp = g->w + 2 * g->pad;
  if (hp < g->kh || wp < g->kw) return 0;
  g->oh = (hp - g->kh) / g->stride + 1;
  g->ow = (wp - g->kw) / g->stride + 1;
  return 1;
}

/* Per-thread workspace, in floats: col (ckk, ohw), a masked dy (oc, ohw),
 * and the partial weight and bias gradients (oc, ckk) and (oc). */
static size_t per_thread(const pt_conv_geom *g) {
  size_t ckk = (size_t)g->c * g->kh * g->kw, ohw = (size_t)g->oh * g->ow;
  return ckk * ohw + (size_t)g->oc * ohw + (size_t)g->oc * ckk + (size_t)g->oc;
}

size_t pt_conv_workspace(const pt_conv_geom *g, int nthreads) { return per_thread(g) * (size_t)nthreads; }

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
        /* ox range whose ix = ox*stride - pad + kx falls inside [0, w) */
        int lo = g->pad - kx > 0 ? (g->pad - kx + g->stride - 1) / g->stride : 0;
        int hi = (g->w + g->pad - kx + g->stride - 1) / g->stride;
        if (hi > g->ow) hi = g->ow;
        for (int oy = 0; oy < g->oh; oy++) {
          int iy = oy * g->stride - g->pad + ky;
          if (iy < 0 || iy >= g->h) continue;
          float *dst = xc + (size_t)iy * g->w;
          const float *src = row + oy * g->ow;
          const int off = kx - g->pad;
          if (g->stride == 1) {
            for (int ox = lo; ox < hi; ox++) dst[ox + off] += src[ox];
          } else {
            for (int ox = lo; ox < hi; ox++) dst[ox * g->stride + off] += src[ox];
          }
        }
      }
    }
  }
}

typedef struct {
  const pt_conv_geom *g;
  int n;
  const float *x, *w, *b, *y, *dy;
  float *out, *dw, *db, *dx, *ws;
} conv_job;

static void forward_task(void *ctx, int tid, int nt) {
  const conv_job *j = ctx;
  const pt_conv_geom *g = j->g;
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw;
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  float *col = j->ws + per_thread(g) * (size_t)tid; /* (ckk, ohw) */
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s = lo; s < hi; s++) {
    float *y = j->out + s * ys; /* (oc, ohw) */
    im2col(g, j->x + s * xs, col, (size_t)ohw);
    if (j->b)
      for (int o = 0; o < g->oc; o++)
        for (int i = 0; i < ohw; i++) y[(size_t)o * ohw + i] = j->b[o];
    pt_sgemm_serial(0, 0, g->oc, ohw, ckk, 1.0f, j->w, ckk, col, ohw, j->b ? 1.0f : 0.0f, y, ohw);
    if (g->relu)
      for (size_t i = 0; i < ys; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
  }
}

void pt_conv2d_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                       float *y, float *ws) {
  conv_job j = {.g = g, .n = n, .x = x, .w = w, .b = b, .out = y, .ws = ws};
  pt_parallel(forward_task, &j);
}

static void backward_task(void *ctx, int tid, int nt) {
  const conv_job *j = ctx;
  const pt_conv_geom *g = j->g;
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw;
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  float *col = j->ws + per_thread(g) * (size_t)tid;  /* (ckk, ohw) */
  float *dym = col + (size_t)ckk * ohw;              /* (oc, ohw) dy through the fused ReLU */
  float *dw = dym + ys;                              /* (oc, ckk) this thread's partial */
  float *db = dw + (size_t)g->oc * ckk;              /* (oc) */
  memset(dw, 0, sizeof(float) * ((size_t)g->oc * ckk + g->oc));
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s = lo; s < hi; s++) {
    const float *dy = j->dy + s * ys;
    if (g->relu) {
      const float *y = j->y + s * ys;
      for (size_t i = 0; i < ys; i++) dym[i] = y[i] > 0.0f ? dy[i] : 0.0f;
      dy = dym;
    }
    for (int o = 0; o < g->oc; o++) {
      float acc = 0.0f;
      for (int i = 0; i < ohw; i++) acc += dy[(size_t)o * ohw + i];
      db[o] += acc;
    }
    im2col(g, j->x + s * xs, col, (size_t)ohw);
    pt_sgemm_serial(0, 1, g->oc, ckk, ohw, 1.0f, dy, ohw, col, ohw, 1.0f, dw, ckk);
    if (j->dx) {
      /* dcol = w^T dy, over col, which dw no longer needs */
      pt_sgemm_serial(1, 0, ckk, ohw, g->oc, 1.0f, j->w, ckk, dy, ohw, 0.0f, col, ohw);
      col2im(g, col, (size_t)ohw, j->dx + s * xs);
    }
  }
}

/* dw += the threads' partials, in thread order, split over elements. */
static void reduce_task(void *ctx, size_t lo, size_t hi) {
  const conv_job *j = ctx;
  const pt_conv_geom *g = j->g;
  const size_t ckk = (size_t)g->c * g->kh * g->kw, per = per_thread(g), nw = (size_t)g->oc * ckk;
  const size_t part = ckk * g->oh * g->ow + (size_t)g->oc * g->oh * g->ow; /* offset of dw in a thread's ws */
  for (int t = 0; t < j->n; t++) {
    const float *pw = j->ws + per * (size_t)t + part;
    for (size_t i = lo; i < hi; i++) {
      if (i < nw) j->dw[i] += pw[i];
      else if (j->db) j->db[i - nw] += pw[i];
    }
  }
}

void pt_conv2d_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                        const float *dy, float *dw, float *db, float *dx, float *ws) {
  conv_job j = {.g = g, .n = n, .x = x, .w = w, .y = y, .dy = dy, .dw = dw, .db = db, .dx = dx, .ws = ws};
  pt_parallel(backward_task, &j);
  j.n = pt_ops_get_threads(); /* now: how many partials to add */
  pt_parallel_for((size_t)g->oc * g->c * g->kh * g->kw + g->oc, 4096, reduce_task, &j);
}

/* conv2d as im2col + GEMM, parallel over samples.
 *
 * Each pool thread takes a contiguous block of the batch and, a group of G
 * samples at a time, unrolls them side by side into its own col
 * (c*kh*kw, G*oh*ow) and multiplies: (oc, G*oh*ow) = w (oc, c*kh*kw) col.
 * G is as large as keeps the group within 1 MiB of the core's L2 (1 for
 * mnist-cnn's conv2, 10 for tutorial-cnn's conv1), so neither the unrolling
 * nor the BLAS's own packing of it goes to memory; the result is scattered
 * to (n, oc, oh, ow) with the bias and the fused ReLU while it is still in
 * cache. Backward per group: dw_t += dy col^T into the thread's own partial,
 * dcol = w^T dy folded back by col2im. The partials are summed in thread
 * order after the batch, so results depend on the thread count but never on
 * timing.
 */
#include <string.h>

#include "ops/cpu/conv_direct.h"
#include "ops/cpu/conv_winograd.h"
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

/* Samples unrolled side by side into one GEMM. Small convolutions (tutorial-
 * cnn's conv1 is a 16x784x25 GEMM per sample) waste most of a GEMM call on
 * its edges; grouping samples widens it, while the group's unrolled input
 * and output still fit in 1 MiB of the core's L2. Depends on the geometry
 * alone, so results do not depend on anything but the thread count. */
#define GROUP_BUDGET_FLOATS ((size_t)256 << 10)
static int group_of(const pt_conv_geom *g) {
  size_t per = ((size_t)g->c * g->kh * g->kw + (size_t)g->oc) * g->oh * g->ow;
  size_t G = per ? GROUP_BUDGET_FLOATS / per : 1;
  return G < 1 ? 1 : G > 64 ? 64 : (int)G;
}

/* Per-thread workspace, in floats: col (ckk, G*ohw), the output or masked
 * gradient of the group (oc, G*ohw), and the partial weight and bias
 * gradients (oc, ckk) and (oc). */
static size_t padded_floats(const pt_conv_geom *g) {
  return g->pad ? (size_t)g->c * (g->h + 2 * g->pad) * (g->w + 2 * g->pad) : 0;
}

static size_t per_thread(const pt_conv_geom *g) {
  size_t ckk = (size_t)g->c * g->kh * g->kw, ohw = (size_t)g->oh * g->ow, G = (size_t)group_of(g);
  return ckk * ohw * G + (size_t)g->oc * ohw * G + (size_t)g->oc * ckk + (size_t)g->oc + padded_floats(g);
}

/* Which vector kernel serves g, if any: Winograd first, where it takes
 * the shape. */
static inline int use_wino(const pt_conv_geom *g) { return pt_conv_wino_ok(g); }
static inline int use_direct(const pt_conv_geom *g) { return !use_wino(g) && pt_conv_direct_ok(g); }

size_t pt_conv_workspace(const pt_conv_geom *g, int nthreads) {
  if (use_wino(g)) return pt_conv_wino_workspace(g, nthreads);
  if (use_direct(g)) return pt_conv_direct_workspace(g, nthreads);
  return per_thread(g) * (size_t)nthreads;
}

/* col (c*kh*kw, ld) columns [0, oh*ow) from x (c, h, w); ld is the row
 * stride of col, so samples of a group sit side by side. A padded
 * convolution first copies the sample into pad (c, h+2p, w+2p) with a zero
 * border, so that every unrolled row is a plain strided copy with no bounds
 * to test: these rows are 14-28 floats long, and the tests cost more than
 * the copy. */
static void im2col(const pt_conv_geom *g, const float *x, float *col, size_t ld, float *pad) {
  const int ow = g->ow, oh = g->oh, st = g->stride, p = g->pad;
  const int hp = g->h + 2 * p, wp = g->w + 2 * p;
  const float *src0 = x;
  if (p) {
    for (int ci = 0; ci < g->c; ci++) {
      float *d = pad + (size_t)ci * hp * wp;
      const float *xc = x + (size_t)ci * g->h * g->w;
      for (int i = 0; i < p * wp; i++) d[i] = 0.0f;
      for (int y = 0; y < g->h; y++) {
        float *r = d + (size_t)(y + p) * wp;
        for (int i = 0; i < p; i++) r[i] = r[p + g->w + i] = 0.0f;
        for (int i = 0; i < g->w; i++) r[p + i] = xc[(size_t)y * g->w + i];
      }
      for (int i = (p + g->h) * wp; i < hp * wp; i++) d[i] = 0.0f;
    }
    src0 = pad;
  }
  for (int ci = 0; ci < g->c; ci++) {
    const float *xc = src0 + (size_t)ci * hp * wp;
    for (int ky = 0; ky < g->kh; ky++)
      for (int kx = 0; kx < g->kw; kx++) {
        float *row = col + ((size_t)(ci * g->kh + ky) * g->kw + kx) * ld;
        for (int oy = 0; oy < oh; oy++) {
          float *dst = row + oy * ow;
          const float *src = xc + (size_t)(oy * st + ky) * wp + kx;
          if (st == 1)
            for (int ox = 0; ox < ow; ox++) dst[ox] = src[ox];
          else
            for (int ox = 0; ox < ow; ox++) dst[ox] = src[ox * st];
        }
      }
  }
}

/* Sum of r[0..n) in a fixed order that vectorises: 16 running partial sums,
 * then those in order. A plain running sum cannot be vectorised without
 * reassociating, and stays a chain of dependent scalar adds. */
static float row_sum(const float *r, int n) {
  float part[16] = {0};
  int k = 0;
  for (; k + 16 <= n; k += 16)
    for (int l = 0; l < 16; l++) part[l] += r[k + l];
  for (int l = 0; k < n; k++, l++) part[l] += r[k];
  float acc = 0.0f;
  for (int l = 0; l < 16; l++) acc += part[l];
  return acc;
}

/* dx (c, h, w) = fold of dcol (c*kh*kw, ld) columns [0, oh*ow); dx is
 * overwritten. A padded convolution folds into pad (c, h+2p, w+2p), where
 * every row is a plain strided add, and copies the interior out: the
 * mirror image of im2col. */
static void col2im(const pt_conv_geom *g, const float *col, size_t ld, float *dx, float *pad) {
  const int ow = g->ow, oh = g->oh, st = g->stride, p = g->pad;
  const int hp = g->h + 2 * p, wp = g->w + 2 * p;
  float *acc = p ? pad : dx;
  memset(acc, 0, sizeof(float) * (size_t)g->c * hp * wp);
  for (int ci = 0; ci < g->c; ci++) {
    float *xc = acc + (size_t)ci * hp * wp;
    for (int ky = 0; ky < g->kh; ky++)
      for (int kx = 0; kx < g->kw; kx++) {
        const float *row = col + ((size_t)(ci * g->kh + ky) * g->kw + kx) * ld;
        for (int oy = 0; oy < oh; oy++) {
          float *dst = xc + (size_t)(oy * st + ky) * wp + kx;
          const float *src = row + oy * ow;
          if (st == 1)
            for (int ox = 0; ox < ow; ox++) dst[ox] += src[ox];
          else
            for (int ox = 0; ox < ow; ox++) dst[ox * st] += src[ox];
        }
      }
  }
  if (!p) return;
  for (int ci = 0; ci < g->c; ci++)
    for (int y = 0; y < g->h; y++) {
      const float *r = pad + ((size_t)ci * hp + y + p) * wp + p;
      float *d = dx + ((size_t)ci * g->h + y) * g->w;
      for (int x = 0; x < g->w; x++) d[x] = r[x];
    }
}

typedef struct {
  const pt_conv_geom *g;
  int n;
  int nparts; /* backward: thread partials of dw/db to sum, one per pool thread */
  const float *x, *w, *b, *y, *dy;
  float *out, *dw, *db, *dx, *ws;
} conv_job;

static void forward_task(void *ctx, int tid, int nt) {
  const conv_job *j = ctx;
  const pt_conv_geom *g = j->g;
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw, G = group_of(g);
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  float *col = j->ws + per_thread(g) * (size_t)tid; /* (ckk, G*ohw) */
  float *tmp = col + (size_t)ckk * ohw * G;         /* (oc, G*ohw) */
  float *pad = j->ws + per_thread(g) * (size_t)(tid + 1) - padded_floats(g); /* (c, h+2p, w+2p) */
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s0 = lo; s0 < hi; s0 += (size_t)G) {
    const int cn = hi - s0 < (size_t)G ? (int)(hi - s0) : G;
    const int ld = cn * ohw;
    for (int i = 0; i < cn; i++) im2col(g, j->x + (s0 + i) * xs, col + (size_t)i * ohw, (size_t)ld, pad);
    pt_sgemm_serial(0, 0, g->oc, ld, ckk, 1.0f, j->w, ckk, col, ld, 0.0f, tmp, ld);
    /* scatter (oc, cn, ohw) -> (cn, oc, ohw), adding the bias and the fused ReLU */
    for (int i = 0; i < cn; i++)
      for (int o = 0; o < g->oc; o++) {
        float *y = j->out + (s0 + i) * ys + (size_t)o * ohw;
        const float *t = tmp + (size_t)o * ld + (size_t)i * ohw;
        const float b = j->b ? j->b[o] : 0.0f;
        if (g->relu)
          for (int k = 0; k < ohw; k++) {
            float v = t[k] + b;
            y[k] = !(v <= 0.0f) ? v : 0.0f; /* NaN passes, as in relu_fwd */
          }
        else
          for (int k = 0; k < ohw; k++) y[k] = t[k] + b;
      }
  }
}

void pt_conv2d_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                       float *y, float *ws) {
  if (use_wino(g)) {
    pt_conv_wino_forward(g, n, x, w, b, y, NULL, ws);
    return;
  }
  if (use_direct(g)) {
    pt_conv_direct_forward(g, n, x, w, b, y, NULL, ws);
    return;
  }
  conv_job j = {.g = g, .n = n, .x = x, .w = w, .b = b, .out = y, .ws = ws};
  pt_parallel(forward_task, &j);
}

static void backward_task(void *ctx, int tid, int nt) {
  const conv_job *j = ctx;
  const pt_conv_geom *g = j->g;
  const int ohw = g->oh * g->ow, ckk = g->c * g->kh * g->kw, G = group_of(g);
  const size_t xs = (size_t)g->c * g->h * g->w, ys = (size_t)g->oc * ohw;
  float *col = j->ws + per_thread(g) * (size_t)tid; /* (ckk, G*ohw) */
  float *dyt = col + (size_t)ckk * ohw * G;         /* (oc, G*ohw) the group's dy, ReLU applied */
  float *dw = dyt + ys * G;                         /* (oc, ckk) this thread's partial */
  float *db = dw + (size_t)g->oc * ckk;             /* (oc) */
  float *pad = db + g->oc;                          /* (c, h+2p, w+2p) */
  memset(dw, 0, sizeof(float) * ((size_t)g->oc * ckk + g->oc));
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s0 = lo; s0 < hi; s0 += (size_t)G) {
    const int cn = hi - s0 < (size_t)G ? (int)(hi - s0) : G;
    const int ld = cn * ohw;
    /* gather (cn, oc, ohw) -> (oc, cn, ohw) through the fused ReLU's mask */
    for (int i = 0; i < cn; i++)
      for (int o = 0; o < g->oc; o++) {
        const size_t at = (s0 + i) * ys + (size_t)o * ohw;
        const float *dy = j->dy + at;
        float *t = dyt + (size_t)o * ld + (size_t)i * ohw;
        if (g->relu) {
          const float *y = j->y + at;
          for (int k = 0; k < ohw; k++) t[k] = y[k] > 0.0f ? dy[k] : 0.0f;
        } else {
          memcpy(t, dy, sizeof(float) * (size_t)ohw);
        }
      }
    for (int o = 0; o < g->oc; o++) db[o] += row_sum(dyt + (size_t)o * ld, ld);
    for (int i = 0; i < cn; i++) im2col(g, j->x + (s0 + i) * xs, col + (size_t)i * ohw, (size_t)ld, pad);
    pt_sgemm_serial(0, 1, g->oc, ckk, ld, 1.0f, dyt, ld, col, ld, 1.0f, dw, ckk);
    if (j->dx) {
      /* dcol = w^T dy, over col, which dw no longer needs */
      pt_sgemm_serial(1, 0, ckk, ld, g->oc, 1.0f, j->w, ckk, dyt, ld, 0.0f, col, ld);
      for (int i = 0; i < cn; i++) col2im(g, col + (size_t)i * ohw, (size_t)ld, j->dx + (s0 + i) * xs, pad);
    }
  }
}

void pt_conv2d_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                        const float *dy, float *dw, float *db, float *dx, float *ws) {
  if (use_wino(g)) {
    pt_conv_wino_backward(g, n, x, w, y, NULL, dy, dw, db, dx, ws);
    return;
  }
  if (use_direct(g)) {
    pt_conv_direct_backward(g, n, x, w, y, NULL, dy, dw, db, dx, ws);
    return;
  }
  conv_job j = {.g = g, .n = n, .x = x, .w = w, .y = y, .dy = dy, .dw = dw, .db = db, .dx = dx, .ws = ws};
  j.nparts = pt_ops_get_threads();
  pt_parallel(backward_task, &j);
  const size_t ckk = (size_t)g->c * g->kh * g->kw;
  const size_t part = (ckk + (size_t)g->oc) * g->oh * g->ow * (size_t)group_of(g); /* dw's offset in a thread's ws */
  pt_add_partials(dw, (size_t)g->oc * ckk, db, (size_t)g->oc, ws + part, per_thread(g), j.nparts);
}

/* The same path as the unfused op would take, with the pool inside. */
int pt_conv_pool_ok(const pt_conv_geom *g) {
  if (use_wino(g)) return pt_conv_wino_pool_ok(g);
  return use_direct(g) && pt_conv_direct_pool_ok(g);
}

/* Only where pt_conv_pool_ok said yes, so one of the two serves g. */
void pt_conv2d_pool_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                            int32_t *code, float *ws) {
  if (use_wino(g)) {
    pt_conv_wino_forward(g, n, x, w, b, y, code, ws);
    return;
  }
  pt_conv_direct_forward(g, n, x, w, b, y, code, ws);
}

void pt_conv2d_pool_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const int32_t *code,
                             const float *dy, float *dw, float *db, float *dx, float *ws) {
  if (use_wino(g)) {
    pt_conv_wino_backward(g, n, x, w, NULL, code, dy, dw, db, dx, ws);
    return;
  }
  pt_conv_direct_backward(g, n, x, w, NULL, code, dy, dw, db, dx, ws);
}

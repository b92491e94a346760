/* Linear layer, PyTorch's convention: weight (out, in), y = x w^T + b;
 * or with the weight in panels (pt_linear_panel_index). */
#include "ops/cpu/ops.h"
#include "ops/cpu/workspace.h"

/* The forward pass's blocks (linear_xt.c) and the weight gradient's
 * copies of dy (linear_outer.c, or linear_sparse.c with its masks) are
 * never needed at once. */
size_t pt_linear_workspace(int max_batch, int in, int out, int nthreads) {
  const size_t f = pt_linear_xt_workspace(in, out, nthreads), b = pt_linear_dw_workspace(max_batch, out),
               s = pt_linear_sparse_workspace(max_batch, in, out, nthreads),
               p = pt_linear_sparse_forward_workspace(max_batch, in), w = pt_linear_narrow_workspace(in, nthreads);
  const size_t fb = f > b ? f : b, sp = s > p ? s : p, all = fb > sp ? fb : sp;
  return all > w ? all : w;
}

/* y (n, out): every row b, for the BLAS to add to. */
static void bias_rows(int n, int out, const float *b, float *y) {
  for (int s = 0; s < n; s++)
    for (int o = 0; o < out; o++) y[(size_t)s * out + o] = b[o];
}

void pt_linear_forward(int n, int in, int out, const float *x, const float *w, const float *b, float *y, float *ws) {
  /* Fewer than 16 outputs on their own pass; else blocks of 96 rows (and
   * one of 64) as outer products, the rest as dot products or by the BLAS,
   * whichever applies. */
  if (pt_linear_forward_narrow(n, in, out, x, w, b, y, ws)) return;
  const int done = pt_linear_forward_xt(n, in, out, x, w, b, y, ws);
  n -= done;
  x += (size_t)done * in;
  y += (size_t)done * out;
  if (n == 0 || pt_linear_forward_dot(n, in, out, x, w, b, y)) return;
  if (b) bias_rows(n, out, b, y);
  pt_sgemm(0, 1, n, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

static void bias_grad(int n, int out, const float *dy, float *db, int add) {
  if (!add)
    for (int o = 0; o < out; o++) db[o] = 0.0f;
  for (int s = 0; s < n; s++)
    for (int o = 0; o < out; o++) db[o] += dy[(size_t)s * out + o];
}

void pt_linear_backward(int n, int in, int out, const float *x, const float *w, const float *dy,
                        float *dw, float *db, float *dx, int add, float *ws) {
  /* dw (out, in) (+)= dy^T (out, n) x (n, in): skipping zero inputs where
   * they are many, else the outer products, else the BLAS */
  if (!pt_linear_backward_dw_sparse(n, in, out, x, dy, dw, add, ws) &&
      !pt_linear_backward_dw(n, in, out, x, dy, dw, add, ws))
    pt_sgemm(1, 0, out, in, n, 1.0f, dy, out, x, in, add ? 1.0f : 0.0f, dw, in);
  if (db) bias_grad(n, out, dy, db, add);
  /* dx (n, in) = dy (n, out) w (out, in) */
  if (dx && !pt_linear_backward_dx(n, in, out, dy, w, dx)) pt_sgemm(0, 0, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

/* ---- w in panels (see pt_linear_panel_index) ---- */

int pt_linear_panels_ok(int in, int out) {
  /* the shapes the zero-skipping kernels take, elsewhere the panels would
   * only slow the BLAS; the shape alone, so that a model's parameter layout
   * is the same at every instruction-set level */
  return in % 16 == 0 && in >= 64 && out >= 16;
}

size_t pt_linear_keep_floats(int max_batch, int in) {
  /* the layout of pt_linear_kept_codes_at, as linear_sparse.c reads it */
  return pt_linear_kept_codes_at(max_batch, in) +
         pt_up16((size_t)(in / 16) * (size_t)pt_round_up(max_batch, 32) / 2 + 1) + 16; /* 16: room to align */
}

void pt_linear_forward_p(int n, int in, int out, const float *x, const float *wp, const float *b, float *y,
                         float *ws, float *keep) {
  if (pt_linear_forward_sparse(n, in, out, x, wp, b, y, ws, keep)) return;
  /* y[:, panel p] (n, wd) = x (n, in) panel (in, wd), panel by panel */
  if (b) bias_rows(n, out, b, y);
  for (int p = 0; 16 * p < out; p++) {
    const int wd = pt_linear_panel_width(out, p);
    pt_sgemm(0, 0, n, wd, in, 1.0f, x, in, wp + pt_linear_panel_offset(in, p), wd, b ? 1.0f : 0.0f, y + 16 * p, out);
  }
}

void pt_linear_backward_p(int n, int in, int out, const float *x, const float *wp, const float *dy, float *dwp,
                          float *db, float *dx, int add, float *ws, const float *kept) {
  /* panel p of dw (in, wd) (+)= x^T (in, n) dy[:, panel p] (n, wd) */
  if (!pt_linear_backward_dwp_sparse(n, in, out, x, dy, dwp, add, ws, kept))
    for (int p = 0; 16 * p < out; p++) {
      const int wd = pt_linear_panel_width(out, p);
      pt_sgemm(1, 0, in, wd, n, 1.0f, x, in, dy + 16 * p, out, add ? 1.0f : 0.0f, dwp + pt_linear_panel_offset(in, p),
               wd);
    }
  if (db) bias_grad(n, out, dy, db, add);
  if (!dx) return;
  /* dx (n, in) = sum over panels of dy[:, panel p] (n, wd) panel^T (wd, in) */
  for (int p = 0; 16 * p < out; p++) {
    const int wd = pt_linear_panel_width(out, p);
    pt_sgemm(0, 1, n, in, wd, 1.0f, dy + 16 * p, out, wp + pt_linear_panel_offset(in, p), wd, p ? 1.0f : 0.0f, dx, in);
  }
}

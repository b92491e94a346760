/* Linear layer, PyTorch's convention: weight (out, in), y = x w^T + b. */
#include "ops/cpu/ops.h"

/* The forward pass's blocks (linear_xt.c) and the weight gradient's
 * copies of dy (linear_outer.c, or linear_sparse.c with its masks) are
 * never needed at once. */
size_t pt_linear_workspace(int max_batch, int in, int out, int nthreads) {
  const size_t f = pt_linear_xt_workspace(in, out, nthreads), b = pt_linear_dw_workspace(max_batch, out),
               s = pt_linear_sparse_workspace(max_batch, in, out, nthreads);
  return f > b ? (f > s ? f : s) : (b > s ? b : s);
}

void pt_linear_forward(int n, int in, int out, const float *x, const float *w, const float *b, float *y, float *ws) {
  /* Blocks of 96 rows (and one of 64) as outer products, the rest as dot products
   * or by the BLAS, whichever applies. */
  const int done = pt_linear_forward_xt(n, in, out, x, w, b, y, ws);
  n -= done;
  x += (size_t)done * in;
  y += (size_t)done * out;
  if (n == 0 || pt_linear_forward_dot(n, in, out, x, w, b, y)) return;
  if (b) {
    for (int s = 0; s < n; s++)
      for (int o = 0; o < out; o++) y[(size_t)s * out + o] = b[o];
  }
  pt_sgemm(0, 1, n, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

void pt_linear_backward(int n, int in, int out, const float *x, const float *w, const float *dy,
                        float *dw, float *db, float *dx, int add, float *ws) {
  /* dw (out, in) (+)= dy^T (out, n) x (n, in): skipping zero inputs where
   * they are many, else the outer products, else the BLAS */
  if (!pt_linear_backward_dw_sparse(n, in, out, x, dy, dw, add, ws) &&
      !pt_linear_backward_dw(n, in, out, x, dy, dw, add, ws))
    pt_sgemm(1, 0, out, in, n, 1.0f, dy, out, x, in, add ? 1.0f : 0.0f, dw, in);
  if (db) {
    if (!add)
      for (int o = 0; o < out; o++) db[o] = 0.0f;
    for (int s = 0; s < n; s++)
      for (int o = 0; o < out; o++) db[o] += dy[(size_t)s * out + o];
  }
  /* dx (n, in) = dy (n, out) w (out, in) */
  if (dx && !pt_linear_backward_dx(n, in, out, dy, w, dx)) pt_sgemm(0, 0, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

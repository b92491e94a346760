/* Linear layer, PyTorch's convention: weight (out, in), y = x w^T + b. */
#include "ops/cpu/ops.h"

size_t pt_linear_workspace(int in, int out, int nthreads) { return pt_linear_xt_workspace(in, out, nthreads); }

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
                        float *dw, float *db, float *dx) {
  /* dw (out, in) += dy^T (out, n) x (n, in) */
  pt_sgemm(1, 0, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
  if (db) {
    for (int s = 0; s < n; s++)
      for (int o = 0; o < out; o++) db[o] += dy[(size_t)s * out + o];
  }
  /* dx (n, in) = dy (n, out) w (out, in) */
  if (dx && !pt_linear_backward_dx(n, in, out, dy, w, dx)) pt_sgemm(0, 0, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

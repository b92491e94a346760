/* conv2d with stride 1 as an implicit GEMM: no unrolled col matrix, the
 * GEMM's B operand is loaded straight from a padded copy of the input.
 * conv.c uses it where pt_conv_direct_ok says so (and the Winograd kernels
 * do not take the shape) and falls back to im2col + BLAS elsewhere (other
 * strides).
 */
#ifndef PT_OPS_CPU_CONV_DIRECT_H
#define PT_OPS_CPU_CONV_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cpu/ops.h"

/* Non-zero when the geometry can take the direct path. */
int pt_conv_direct_ok(const pt_conv_geom *g);
/* Floats of workspace for nthreads threads (only meaningful when ok). */
size_t pt_conv_direct_workspace(const pt_conv_geom *g, int nthreads);
/* As pt_conv2d_forward and pt_conv2d_backward; with code (where
 * pt_conv_direct_pool_ok), the 2x2 max-pool fused as pt_conv2d_pool_forward
 * and pt_conv2d_pool_backward (ops.h) have it: y and dy are then the
 * pool's, and y is unused backward. */
void pt_conv_direct_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                            float *y, int32_t *code, float *ws);
void pt_conv_direct_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                             const int32_t *code, const float *dy, float *dw, float *db, float *dx, float *ws);
/* ok, with the ReLU and an even output: a 2x2 pool can be fused. */
int pt_conv_direct_pool_ok(const pt_conv_geom *g);

#endif

/* conv2d by Winograd minimal filtering, stride 1: F(4x4, 5x5) on 8x8
 * tiles for 5x5 kernels (64 multiplications per 4x4 outputs and input
 * channel instead of 400) and F(4x4, 3x3) on 6x6 tiles for 3x3 ones (36
 * instead of 144), for the forward pass and both gradients. conv.c takes it first
 * where pt_conv_wino_ok says so (tutorial-cnn's conv2.0, mnist-cnn's
 * conv2, cifar-convnet's conv2-6), and the direct kernels (conv_direct.c)
 * elsewhere.
 */
#ifndef PT_OPS_CPU_CONV_WINOGRAD_H
#define PT_OPS_CPU_CONV_WINOGRAD_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cpu/ops.h"

/* Non-zero when the geometry can take this path and it is expected to be
 * faster than the direct one. */
int pt_conv_wino_ok(const pt_conv_geom *g);
/* Floats of workspace for nthreads threads (only meaningful when ok). */
size_t pt_conv_wino_workspace(const pt_conv_geom *g, int nthreads);
/* y (n, oc, oh, ow) = relu?(conv(x (n, c, h, w), w (oc, c, k, k)) + b).
 * With code (where pt_conv_wino_pool_ok), y and code are the 2x2 max-pool
 * of that as pt_conv2d_pool_forward (ops.h) gives them. */
void pt_conv_wino_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                           int32_t *code, float *ws);
/* ok, with the ReLU and an even output: a 2x2 pool can be fused. */
int pt_conv_wino_pool_ok(const pt_conv_geom *g);
/* dw, db += the weight and bias gradients, and dx (n, c, h, w) = the input
 * gradient when dx is not NULL (overwritten); dy goes through the fused
 * ReLU's mask (y > 0) when g->relu. With code, dy is the fused pool's
 * output gradient and code the forward's (y unused). */
void pt_conv_wino_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                            const int32_t *code, const float *dy, float *dw, float *db, float *dx, float *ws);

#endif

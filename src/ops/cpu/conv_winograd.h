/* conv2d 3x3, stride 1, by Winograd minimal filtering F(2x2, 3x3): 16
 * multiplications per 2x2 outputs and input channel instead of 36, for the
 * forward pass and both gradients. conv.c takes it where pt_conv_wino_ok
 * says so, and the direct kernels (conv_direct.c) elsewhere.
 */
#ifndef PT_OPS_CPU_CONV_WINOGRAD_H
#define PT_OPS_CPU_CONV_WINOGRAD_H

#include <stddef.h>

#include "ops/cpu/ops.h"

/* Defined in builds with AVX-512 (__AVX512F__) only; conv.c calls them
 * under the same test. Non-zero when the geometry can take the Winograd
 * path and it is expected to be faster than the direct one. */
int pt_conv_wino_ok(const pt_conv_geom *g);
/* Floats of workspace for nthreads threads (only meaningful when ok). */
size_t pt_conv_wino_workspace(const pt_conv_geom *g, int nthreads);
/* y (n, oc, oh, ow) = relu?(conv(x (n, c, h, w), w (oc, c, 3, 3)) + b). */
void pt_conv_wino_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                          float *ws);
/* dx (n, c, h, w) = the input gradient of dy (n, oc, oh, ow), through the
 * fused ReLU's mask (y > 0) when g->relu; dx is overwritten. */
void pt_conv_wino_backward_data(const pt_conv_geom *g, int n, const float *w, const float *y, const float *dy,
                                float *dx, float *ws);

/* dw, db += the weight and bias gradients (Winograd too), and dx as
 * pt_conv_wino_backward_data when dx is not NULL. */
void pt_conv_wino_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                           const float *dy, float *dw, float *db, float *dx, float *ws);

#endif

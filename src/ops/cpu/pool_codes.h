/* The 2x2, stride-2 max-pool fused after a conv's ReLU (pt_conv2d_pool_*
 * in ops.h), on planes (h, w) with h and w even: the maximum of each window
 * and a code for where it was, 0 to 3 row by row (the first of equal
 * maxima, as pt_maxpool_forward takes), or -1 where the maximum is 0 and
 * the ReLU stops the gradient. The input is ReLU'd, so nothing is NaN. */
#ifndef PT_OPS_CPU_POOL_CODES_H
#define PT_OPS_CPU_POOL_CODES_H

#include <stddef.h>
#include <stdint.h>

/* y, code (planes, h/2, w/2) from x (planes, h, w). */
void pt_pool_codes_forward(size_t planes, int h, int w, const float *x, float *y, int32_t *code);
/* dx (planes, h, w) = dy (planes, h/2, w/2) at each window's code, 0
 * elsewhere: what the unfused pool's and ReLU's backward passes give. */
void pt_pool_codes_backward(size_t planes, int h, int w, const float *dy, const int32_t *code, float *dx);

#endif

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

#include "ops/cpu/simd/v16.h"
#include "ops/cpu/transpose16.h"

/* One window per lane: *best = the maximum of v[0..3] (the window's
 * positions, row by row) and *code where it was, the first of equal
 * maxima, or -1 where the maximum is not above 0. Both the planar pool
 * (pool_codes.c) and the Winograd path's take their windows through it. */
static inline void pt_pool_codes_max4(const pt_v16 v[4], pt_v16 *best, pt_vi16 *code) {
  pt_v16 b = v[0];
  pt_vi16 at = vi16_zero();
  for (int k = 1; k < 4; k++) {
    at = vi16_select_gt(v[k], b, vi16_set1(k), at);
    b = v16_max(v[k], b); /* v[k] where v[k] > b, as the compare above */
  }
  *best = b;
  *code = vi16_select_gt(b, v16_zero(), at, vi16_set1(-1));
}

/* Backward into a channels-in-lanes layout (the Winograd and direct
 * convolutions' weight gradients read dy so): one pooled row of n <= 16
 * windows for 16 channels, of which nc are real (the rest are zeros), from
 * dy and code (channel c at c * plane). Window l's position q goes to dst +
 * 2 l col + (q / 2) row + (q % 2) col, a whole vector of channels, 0 where
 * the code is not q, so each of the four is written. */
static inline void pt_pool_codes_scatter16(const float *dy, const int32_t *code, size_t plane, int nc, int n,
                                           float *dst, size_t row, size_t col) {
  const pt_m16 m = v16_lanes(n);
  const pt_v16 none = vi16_as_float(vi16_set1(-1));
  pt_v16 r[16], a[16];
  pt_transpose16_planes(dy, NULL, plane, nc, m, r);
  for (int c = 0; c < 16; c++) /* the codes as floats' bits; -1 (no position) past nc and n */
    a[c] = c < nc ? v16_mask_loadu(none, m, (const float *)(code + plane * c)) : none;
  pt_transpose16(a);
  for (int l = 0; l < n; l++) {
    const pt_vi16 k = v16_as_int(a[l]);
    float *d = dst + 2 * (size_t)l * col;
    for (int q = 0; q < 4; q++)
      v16_store(d + (size_t)(q / 2) * row + (size_t)(q % 2) * col, v16_keep_eq(r[l], k, vi16_set1(q)));
  }
}

#endif

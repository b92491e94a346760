/* The 2x2, stride-2 windows of two input rows, 16 at a time, in vector
 * registers: the max-pool (pool.c) and the pool fused after a convolution
 * (pool_codes.c) both read their windows and write their gradients so. */
#ifndef PT_OPS_CPU_POOL2X2_H
#define PT_OPS_CPU_POOL2X2_H

#include "ops/cpu/simd/v16.h"

/* n <= 16 windows from rows r0 and r1 (2n columns each): v[0] and v[1] the
 * windows' top-left and top-right inputs, v[2] and v[3] the bottom ones;
 * lanes past n are 0. Each row is loaded as two vectors and split into its
 * even and odd columns. */
static inline void pt_pool2x2_load(const float *r0, const float *r1, int n, pt_v16 v[4]) {
  const pt_m16 ma = v16_lanes(2 * n), mb = v16_lanes(2 * n - 16);
  v16_deinterleave(v16_maskz_loadu(ma, r0), v16_maskz_loadu(mb, r0 + 16), &v[0], &v[1]);
  v16_deinterleave(v16_maskz_loadu(ma, r1), v16_maskz_loadu(mb, r1 + 16), &v[2], &v[3]);
}

/* The inverse, for gradients: v[0..3] as pt_pool2x2_load gives them, n
 * windows, interleaved back into rows d0 and d1 (2n columns each). */
static inline void pt_pool2x2_store(const pt_v16 v[4], int n, float *d0, float *d1) {
  const pt_m16 ma = v16_lanes(2 * n), mb = v16_lanes(2 * n - 16);
  pt_v16 lo, hi;
  v16_interleave(v[0], v[1], &lo, &hi);
  v16_mask_storeu(d0, ma, lo);
  v16_mask_storeu(d0 + 16, mb, hi);
  v16_interleave(v[2], v[3], &lo, &hi);
  v16_mask_storeu(d1, ma, lo);
  v16_mask_storeu(d1 + 16, mb, hi);
}

#endif

/* 16x16 blocks of floats transposed in vector registers: the conv
 * kernels' weight gradients want channels in the lanes where the data has
 * positions there. */
#ifndef PT_OPS_CPU_TRANSPOSE16_H
#define PT_OPS_CPU_TRANSPOSE16_H

#include "ops/cpu/simd/v16.h"

/* In-place transpose of a 16x16 block held as 16 rows. */
static inline void pt_transpose16(pt_v16 r[16]) { v16_transpose(r); }

/* Channels into the lanes: r[l] = position l of 16 channel planes (plane
 * floats apart, from src), of which the first nc are real and the rest 0;
 * the positions m selects are read, the others are 0. With gate (at the
 * same offsets as src), only elements where gate > 0 are kept: a ReLU's
 * mask applied on the way. */
static inline void pt_transpose16_planes(const float *src, const float *gate, size_t plane, int nc, pt_m16 m,
                                         pt_v16 r[16]) {
  const pt_v16 zero = v16_zero();
  for (int c = 0; c < 16; c++) {
    if (c >= nc) {
      r[c] = zero;
      continue;
    }
    r[c] = v16_maskz_loadu(m, src + plane * (size_t)c);
    if (gate) r[c] = v16_gate(r[c], v16_maskz_loadu(m, gate + plane * (size_t)c));
  }
  pt_transpose16(r);
}

#endif

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

/* Two lines ahead in each of the first nc (at most 16) planes from src,
 * plane elements apart, and from also where it is not NULL: the
 * transpositions read 16 planes of data and 16 of a gate or of codes at
 * once, more streams than the hardware prefetcher follows, and lines from
 * memory then arrived one miss at a time. left: elements from src to its
 * plane's end; nothing at or past it is prefetched. Elements are 4 bytes
 * (floats, or int32 codes). At 1 thread on Zen 3: mnist-cnn's conv1
 * backward 0.88-0.91x the time (4 lines ahead or more gained less);
 * tutorial-cnn's conv1.0 pooled transposition 0.37-0.42 ms instead of
 * 0.65-0.67 (1 line ahead: 0.50; 4: 0.43-0.45).
 *
 * always_inline, not a plain inline: GCC counts a prefetch as free of side
 * effects, found this function "const", and deleted every call to it as
 * dead code before inlining, so no binary held a prefetch from 1d977ff on
 * (build_test_prefetch checks the objects). */
#define PT_PLANES_AHEAD 32 /* elements */
static inline __attribute__((always_inline)) void pt_prefetch16_planes(const void *src, const void *also, size_t plane,
                                                                       int nc, size_t left) {
  if (left <= PT_PLANES_AHEAD) return;
  const float *s = (const float *)src, *a = (const float *)also;
  for (int c = 0; c < nc && c < 16; c++) {
    __builtin_prefetch(s + plane * (size_t)c + PT_PLANES_AHEAD, 0, 3);
    if (a) __builtin_prefetch(a + plane * (size_t)c + PT_PLANES_AHEAD, 0, 3);
  }
}

#endif

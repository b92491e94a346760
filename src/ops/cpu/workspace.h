/* Sizes and alignment for the kernels' workspaces: the direct and the
 * Winograd convolutions (conv_direct.c, conv_winograd.c) and the linear
 * layer's kernels (linear_xt.c, linear_outer.c, linear_sparse.c) lay
 * their shared and per-thread buffers out, in floats, in one block the
 * caller allocates (pt_conv_workspace, pt_linear_workspace), rounded to
 * whole vectors and cache lines. */
#ifndef PT_OPS_CPU_WORKSPACE_H
#define PT_OPS_CPU_WORKSPACE_H

#include <stddef.h>
#include <stdint.h>

/* n rounded up to a multiple of m > 0. */
static inline int pt_round_up(int n, int m) { return (n + m - 1) / m * m; }
/* n floats rounded up to whole 64-byte lines (16 floats). */
static inline size_t pt_up16(size_t n) { return (n + 15) & ~(size_t)15; }
/* The first 64-byte boundary at or after p (the workspaces allocate 16
 * floats of room for it). */
static inline float *pt_align64(float *p) { return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }
static inline const float *pt_align64_const(const float *p) {
  return (const float *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* What the sparse forward pass keeps for the weight gradient
 * (pt_linear_keep_floats), for a batch of n: from the first 64-byte
 * boundary, x by slabs of 16 inputs (in / 16, n, 16), then, this many
 * floats further, the slabs' codes (in / 16, n rounded up to 32) uint16. */
static inline size_t pt_linear_kept_codes_at(int n, int in) { return pt_up16((size_t)n * (size_t)in); }

#endif

/* The random draws and index arithmetic the CUDA kernels share with the CPU
 * code they must reproduce bit for bit: dropout masks (ops/cpu/activation.c)
 * and a batch's crop, flip and normalisation (data/loader.c).
 *
 * Plain C with host/device functions. The CPU takes its dropout threshold
 * and scale, its crop and flip draws and its normalisation from here too;
 * its loops stay its own (a row at a time, or 128 elements per 16 Philox
 * calls, where a kernel thread takes one element or one unit), and
 * tests/cuda/test_draws.c runs the kernels' per-element functions on the
 * host against the CPU op and the loader, on a machine without a GPU.
 */
#ifndef PT_UTIL_DRAWS_H
#define PT_UTIL_DRAWS_H

#include <stddef.h>
#include <stdint.h>

#include "util/philox_core.h"

/* ---- dropout ----
 * activation.c draws one Philox call per unit of 8 elements: unit u has
 * counter (c0 = step, c1 = (layer << 40) + u), and element 8u + k takes the
 * 16-bit half k % 2 (low half first: the CPU reads the words as uint16 in
 * little-endian order) of word k / 2. The CPU asks for 16 units per call at
 * (layer << 40 | q0) + i, which is the same counter for any unit below
 * 2^40, so the mask depends on neither the thread split nor this kernel's. */

/* Drop when the 16-bit draw is below this; computed in float as the CPU does. */
PT_HD static inline uint32_t pt_dropout_threshold(float p) { return (uint32_t)(p * 65536.0f + 0.5f); }
PT_HD static inline float pt_dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

/* The mask values of unit u's elements: mask[k] for k < count (count <= 8,
 * the last unit of a tensor may be short). */
PT_HD static inline void pt_dropout_unit_mask(uint64_t key, uint64_t step, uint32_t layer, uint64_t unit,
                                              uint32_t threshold, float scale, int count, float mask[8]) {
  uint32_t r[4];
  pt_philox_core(key, step, ((uint64_t)layer << 40) + unit, r);
  for (int k = 0; k < 8; k++) {
    const uint32_t u16 = (r[k >> 1] >> (16 * (k & 1))) & 0xffffu;
    if (k < count) mask[k] = u16 < threshold ? 0.0f : scale;
  }
}

/* Unit u of dropout over n elements: mask and y = x * mask for elements 8u
 * .. min(8u + 8, n). One product, so no contraction can change it. */
PT_HD static inline void pt_dropout_unit(size_t n, uint64_t unit, uint64_t key, uint64_t step, uint32_t layer,
                                         uint32_t threshold, float scale, const float *x, float *y, float *mask) {
  const size_t i0 = 8 * unit;
  const int count = n - i0 < 8 ? (int)(n - i0) : 8;
  float m[8];
  pt_dropout_unit_mask(key, step, layer, unit, threshold, scale, count, m);
  for (int k = 0; k < count; k++) {
    mask[i0 + k] = m[k];
    y[i0 + k] = x[i0 + k] * m[k];
  }
}

/* ---- batches ----
 * loader.c's augmentation of dataset sample idx in epoch e: a sequential
 * stream (key, c0 = e << 32 | idx), from which come, in this order, the
 * crop's row offset and column offset (pt_rng_below(2 * pad + 1) - pad
 * each, when pad > 0) and the flip (pt_rng_uniform < 0.5, when hflip). */
typedef struct {
  int dy, dx; /* where the crop window's corner lands relative to the image */
  int flip;
} pt_augment;

PT_HD static inline pt_augment pt_augment_draw(uint64_t key, int epoch, int32_t idx, int crop_pad, int hflip) {
  pt_augment a = {0, 0, 0};
  if (crop_pad <= 0 && !hflip) return a;
  pt_philox_seq s;
  pt_philox_seq_init(&s, key, (uint64_t)(uint32_t)epoch << 32 | (uint32_t)idx);
  if (crop_pad > 0) {
    a.dy = (int)pt_philox_seq_below(&s, (uint32_t)(2 * crop_pad + 1)) - crop_pad;
    a.dx = (int)pt_philox_seq_below(&s, (uint32_t)(2 * crop_pad + 1)) - crop_pad;
  }
  if (hflip) a.flip = pt_philox_seq_uniform(&s) < 0.5f;
  return a;
}

/* The loader's table entry for byte p: the float expression torchvision's
 * ToTensor + Normalize evaluates. On the device the correctly rounded
 * intrinsics keep it exact even under --use_fast_math. */
PT_HD static inline float pt_normalize_byte(int p, float mean, float std) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(__fsub_rn(__fdiv_rn((float)p, 255.0f), mean), std);
#else
  return ((float)p / 255.0f - mean) / std;
#endif
}

/* Which byte of sample img (c, h, w) lands at output element e = (ch, y, x)
 * after the augmentation a; -1 where the crop reads the zero padding. Flip
 * after crop (RandomCrop then RandomHorizontalFlip): output column x shows
 * cropped column w - 1 - x. */
PT_HD static inline long long pt_augment_source(int h, int w, pt_augment a, size_t e) {
  const size_t hw = (size_t)h * w;
  const size_t ch = e / hw;
  const int rem = (int)(e - ch * hw), y = rem / w, x = rem - y * w;
  const int sy = y + a.dy, sx = (a.flip ? w - 1 - x : x) + a.dx;
  if (sy < 0 || sy >= h || sx < 0 || sx >= w) return -1;
  return (long long)(ch * hw + (size_t)sy * w + (size_t)sx);
}

#endif

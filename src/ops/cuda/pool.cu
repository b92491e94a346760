/* Max-pooling without padding, floor mode, as src/ops/cpu/pool.c: argmax
 * holds the flat index of the maximum within its (h, w) plane, ties go to
 * the first maximum in scan order and NaN propagates. Backward is a gather
 * over input pixels rather than the CPU's scatter, so it needs no atomics;
 * each pixel adds its outputs' gradients in the CPU's order (output rows,
 * then columns), so the sums are the same. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/context.h"
#include "ops/cuda/ops.h"

static const int kThreads = 256;

/* Grid-stride loops cover any total; the cap only bounds the launch. */
static unsigned blocks_for(size_t total) {
  size_t b = (total + kThreads - 1) / kThreads;
  return (unsigned)(b < ((size_t)1 << 20) ? b : ((size_t)1 << 20));
}

/* One thread per output; y, argmax (planes, oh, ow), x (planes, h, w). */
static __global__ void maxpool_fwd_kernel(size_t total, int h, int w, int k, int s, int oh, int ow,
                                          const float *__restrict__ x, float *__restrict__ y,
                                          int32_t *__restrict__ argmax) {
  const size_t ohw = (size_t)oh * ow;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    const size_t plane = i / ohw;
    const int q = (int)(i - plane * ohw), oy = q / ow, ox = q - oy * ow;
    const float *xp = x + plane * (size_t)h * w;
    int best = (oy * s) * w + ox * s;
    float bv = xp[best];
    /* The first candidate is compared with itself too, as the CPU's general
     * loop does: that changes nothing unless it is NaN, where the index
     * stays the same. */
    for (int ky = 0; ky < k; ky++) {
      const int r = (oy * s + ky) * w + ox * s;
      for (int kx = 0; kx < k; kx++) {
        const float v = xp[r + kx];
        if (v > bv || v != v) {
          bv = v;
          best = r + kx;
        }
      }
    }
    y[i] = bv;
    argmax[i] = best;
  }
}

/* One thread per input pixel: dx (planes, h, w) = sum of dy over the
 * windows holding the pixel whose argmax it is; zero outside every window
 * (the floor mode's dropped edge). */
static __global__ void maxpool_bwd_kernel(size_t total, int h, int w, int k, int s, int oh, int ow,
                                          const float *__restrict__ dy, const int32_t *__restrict__ argmax,
                                          float *__restrict__ dx) {
  const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    const size_t plane = i / hw;
    const int at = (int)(i - plane * hw), iy = at / w, ix = at - iy * w;
    /* windows oy with oy*s <= iy < oy*s + k */
    const int oy0 = iy < k ? 0 : (iy - k) / s + 1, oy1 = min(iy / s, oh - 1);
    const int ox0 = ix < k ? 0 : (ix - k) / s + 1, ox1 = min(ix / s, ow - 1);
    const float *dyp = dy + plane * ohw;
    const int32_t *ap = argmax + plane * ohw;
    float acc = 0.0f;
    for (int oy = oy0; oy <= oy1; oy++)
      for (int ox = ox0; ox <= ox1; ox++) {
        const int o = oy * ow + ox;
        if (ap[o] == at) acc += dyp[o];
      }
    dx[i] = acc;
  }
}

extern "C" void pt_cuda_maxpool_forward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *x,
                                        float *y, int32_t *argmax) {
  const size_t total = (size_t)n * c * oh * ow;
  if (total == 0) return;
  cudaStream_t st = (cudaStream_t)pt_cuda_current_stream();
  maxpool_fwd_kernel<<<blocks_for(total), kThreads, 0, st>>>(total, h, w, k, s, oh, ow, x, y, argmax);
  PT_CUDA_CHECK_LAUNCH("maxpool_forward");
}

extern "C" void pt_cuda_maxpool_backward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *dy,
                                         const int32_t *argmax, float *dx) {
  const size_t total = (size_t)n * c * h * w;
  if (total == 0) return;
  cudaStream_t st = (cudaStream_t)pt_cuda_current_stream();
  maxpool_bwd_kernel<<<blocks_for(total), kThreads, 0, st>>>(total, h, w, k, s, oh, ow, dy, argmax, dx);
  PT_CUDA_CHECK_LAUNCH("maxpool_backward");
}

/* ReLU, dropout and scaling, as ops/cpu/activation.c. Dropout's mask is the
 * CPU's bit for bit: both take it from pt_dropout_unit_mask (draws.h, through pt_dropout_unit), one
 * Philox call per unit of 8 elements, here one unit per thread. */
#include <stdint.h>

#include "util/draws.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/ops.h"

using namespace pt_cuda;

namespace {

__global__ void relu_fwd_kernel(size_t n, const float *x, float *y) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    y[i] = !(v <= 0.0f) ? v : 0.0f; /* NaN passes, as on the CPU */
  }
}

__global__ void relu_bwd_kernel(size_t n, const float *y, const float *dy,
                                float *dx) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* units = ceil(n / 8); unit u covers elements 8u .. min(8u + 8, n). */
__global__ void dropout_fwd_kernel(size_t n, size_t units, uint32_t threshold, float scale, uint64_t key,
                                   uint64_t step, const pt_cuda_step_values *dyn, uint32_t layer, const float *x,
                                   float *y, float *mask) {
  if (dyn) step = dyn->dropout_step; /* a captured step: this replay's */
  for (size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += (size_t)gridDim.x * blockDim.x)
    pt_dropout_unit(n, u, key, step, layer, threshold, scale, x, y, mask);
}

__global__ void mul_kernel(size_t n, const float *a, const float *b,
                           float *out) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = fmul_rn(a[i], b[i]);
}

__global__ void scale_kernel(size_t n, float a, float *x) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = fmul_rn(x[i], a);
}

} // namespace

extern "C" void pt_cuda_relu_forward(size_t n, const float *x, float *y) {
  if (n == 0) return;
  relu_fwd_kernel<<<grid_for(n), kThreads, 0, stream()>>>(n, x, y);
  PT_CUDA_CHECK_LAUNCH("relu_forward");
}

extern "C" void pt_cuda_relu_backward(size_t n, const float *y, const float *dy, float *dx) {
  if (n == 0) return;
  relu_bwd_kernel<<<grid_for(n), kThreads, 0, stream()>>>(n, y, dy, dx);
  PT_CUDA_CHECK_LAUNCH("relu_backward");
}

extern "C" void pt_cuda_dropout_forward(size_t n, float p, uint64_t key, uint64_t step, uint32_t layer,
                                        const float *x, float *y, float *mask) {
  if (n == 0) return;
  /* Threshold and scale on the host, with the CPU's float expressions. */
  const uint32_t threshold = pt_dropout_threshold(p);
  const float scale = pt_dropout_scale(p);
  const size_t units = (n + 7) / 8;
  dropout_fwd_kernel<<<grid_for(units), kThreads, 0, stream()>>>(n, units, threshold, scale, key, step,
                                                                 pt_cuda_capture_values(), layer, x, y, mask);
  PT_CUDA_CHECK_LAUNCH("dropout_forward");
}

extern "C" void pt_cuda_dropout_backward(size_t n, const float *mask, const float *dy, float *dx) {
  if (n == 0) return;
  mul_kernel<<<grid_for(n), kThreads, 0, stream()>>>(n, dy, mask, dx);
  PT_CUDA_CHECK_LAUNCH("dropout_backward");
}

extern "C" void pt_cuda_scale(size_t n, float a, float *x) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, stream()>>>(n, a, x);
  PT_CUDA_CHECK_LAUNCH("scale");
}

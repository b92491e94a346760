/* Launch helpers and exactly-rounded float arithmetic for the element-wise
 * and reduction kernels of activation.cu, softmax.cu, batchnorm.cu,
 * optim.cu and batch.cu. CUDA C++ only.
 */
#ifndef PT_OPS_CUDA_LAUNCH_CUH
#define PT_OPS_CUDA_LAUNCH_CUH

#include <stddef.h>

#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/context.h"

namespace pt_cuda {

/* The thread's stream; the legacy default stream (0) when not bound, so
 * work stays ordered even then. */
static inline cudaStream_t stream() { return (cudaStream_t)pt_cuda_current_stream(); }

constexpr int kThreads = 256;

/* Blocks for a grid-stride loop over total items: enough to fill any GPU
 * (an H100 holds about 1,000 such blocks at once), capped so that the
 * launch stays valid for any total. */
static inline unsigned grid_for(size_t total, int threads = kThreads) {
  const size_t b = (total + (size_t)threads - 1) / (size_t)threads;
  const size_t cap = (size_t)1 << 16;
  return (unsigned)(b < cap ? b : cap);
}

/* nvcc contracts a * b + c into one FMA, rounded once, where the CPU
 * (C11, no -ffp-contract) rounds twice. The _rn intrinsics are never
 * contracted, so element-wise results equal the CPU's bit for bit where
 * the CPU's operations are the same IEEE operations. */
__device__ __forceinline__ float fmul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float fadd_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float fsub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float fdiv_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float fsqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double dmul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double dadd_rn(double a, double b) { return __dadd_rn(a, b); }

/* The sum of v over the block, returned to every thread, in an order fixed
 * by blockDim alone: a shuffle tree within each warp, then one over the
 * warps' sums. sh holds 32 values; the block's size is a multiple of 32.
 * Every thread of the block must call it. */
template <typename T>
__device__ __forceinline__ T block_sum(T v, T *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nwarps ? sh[lane] : T(0);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  const T total = sh[0];
  __syncthreads(); /* sh may be reused by the caller's next block_sum */
  return total;
}

/* The sum of v over a warp, in lane 0 (other lanes get partial sums). */
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

} // namespace pt_cuda

#endif

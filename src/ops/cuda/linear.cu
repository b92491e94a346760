/* Linear layer on cuBLAS, PyTorch's convention as src/ops/cpu/linear.c:
 * weight (out, in), y = x w^T + b.
 *
 * cuBLAS is column-major, and a row-major (r, c) matrix is the same memory
 * as its column-major transpose (c, r) with the same leading dimension. So
 * each row-major product C = A B is asked of cuBLAS as C^T = B^T A^T: the
 * operands swap places and keep their leading dimensions.
 *
 * Full fp32 by default: the thread's cuBLAS handle stays in
 * CUBLAS_DEFAULT_MATH, which never lowers fp32 inputs to TF32, so results
 * match the CPU to rounding; --precision tf32 and bf16 go through
 * pt_cuda_gemm (gemm.h). The bias and its gradient stay fp32 sums.
 */
#include <stdint.h>

#include "cuda/cublas.h"
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/context.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/ops.h"

/* y (n, out) = b, broadcast over rows, before the GEMM adds x w^T with
 * beta = 1: the same order of operations as the CPU. */
static __global__ void fill_bias_kernel(size_t total, int out, const float *__restrict__ b, float *__restrict__ y) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
    y[i] = b[i % (size_t)out];
}

/* db (out) += column sums of dy (n, out). A block covers 32 columns with 8
 * lanes of rows each: lane r sums rows r, r+8, ... (coalesced over the
 * columns), then lane 0 adds the 8 partials in lane order. The order
 * depends only on n, so the result is the same on every run. */
enum { kColTile = 32, kRowLanes = 8 };
static __global__ void column_sum_kernel(int n, int out, const float *__restrict__ dy, float *__restrict__ db,
                                         int add) {
  __shared__ float part[kRowLanes][kColTile];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  float acc = 0.0f;
  if (col < out)
    for (int r = threadIdx.y; r < n; r += kRowLanes) acc += dy[(size_t)r * out + col];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < out) {
    float sum = 0.0f;
    for (int l = 0; l < kRowLanes; l++) sum += part[l][threadIdx.x];
    db[col] = add ? db[col] + sum : sum;
  }
}

/* cuBLAS keeps its own workspace. */
extern "C" size_t pt_cuda_linear_workspace(int max_batch, int in, int out, int nthreads) {
  (void)max_batch, (void)in, (void)out, (void)nthreads;
  return 0;
}

extern "C" void pt_cuda_linear_forward(int n, int in, int out, const float *x, const float *w, const float *b,
                                       float *y, float *ws) {
  (void)ws;
  if (n <= 0 || out <= 0) return;
  cublasHandle_t h = pt_cuda_blas_or_note("linear_forward");
  if (!h) return;
  cudaStream_t st = (cudaStream_t)pt_cuda_current_stream();
  const float one = 1.0f, beta = b ? 1.0f : 0.0f;
  if (b) {
    const size_t total = (size_t)n * out;
    const size_t blocks = (total + 255) / 256;
    fill_bias_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, st>>>(total, out, b, y);
    PT_CUDA_CHECK_LAUNCH("linear_forward: bias");
  }
  /* y^T (out, n) = w (out, in) . x^T (in, n): w is stored as w^T (in, out)
   * column-major, hence op T with ld in; x as x^T (in, n), op N. */
  PT_CUBLAS_CHECK(pt_cuda_gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w, in, x, in, &beta, y, out),
                  "linear_forward: sgemm");
}

extern "C" void pt_cuda_linear_backward(int n, int in, int out, const float *x, const float *w, const float *dy,
                                        float *dw, float *db, float *dx, int add, float *ws) {
  (void)ws;
  if (n <= 0) return;
  cublasHandle_t h = pt_cuda_blas_or_note("linear_backward");
  if (!h) return;
  cudaStream_t st = (cudaStream_t)pt_cuda_current_stream();
  const float one = 1.0f, zero = 0.0f, beta = add ? 1.0f : 0.0f;
  /* dw (out, in) (+)= dy^T x. Column-major: dw^T (in, out) (+)= x^T (in, n) .
   * dy (n, out); x^T is x's own memory (op N, ld in), dy is stored as
   * dy^T (out, n) (op T, ld out). */
  PT_CUBLAS_CHECK(pt_cuda_gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x, in, dy, out, &beta, dw, in),
                  "linear_backward: dw sgemm");
  if (db && out > 0) {
    const dim3 block(kColTile, kRowLanes);
    column_sum_kernel<<<(unsigned)((out + kColTile - 1) / kColTile), block, 0, st>>>(n, out, dy, db, add);
    PT_CUDA_CHECK_LAUNCH("linear_backward: bias");
  }
  /* dx (n, in) = dy (n, out) w (out, in). Column-major: dx^T (in, n) =
   * w^T (in, out) . dy^T (out, n), both the arrays' own memory (op N). */
  if (dx)
    PT_CUBLAS_CHECK(pt_cuda_gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, w, in, dy, out, &zero, dx, in),
                    "linear_backward: dx sgemm");
}

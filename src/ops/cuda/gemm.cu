/* pt_cuda_gemm and the handle it takes: see gemm.h. */
#include "ops/cuda/gemm.h"

#include <cuda_bf16.h>

#include "ops/cuda/check.h"
#include "ops/cuda/context.h"
#include "ops/cuda/device_buffer.cuh"
#include "ops/cuda/launch.cuh"

cublasHandle_t pt_cuda_blas_or_note(const char *what) {
  cublasHandle_t h = (cublasHandle_t)pt_cuda_cublas();
  if (!h) pt_cuda_note_error(what, "no cuBLAS handle: this thread is not bound to a GPU");
  return h;
}

namespace {

/* The bf16 copies of one GEMM's A and B, reused GEMM after GEMM: every op
 * of a thread is queued on its one stream, so a GEMM has read its copies
 * before the next conversion writes over them. */
struct bf16_scratch {
  cublasHandle_t handle = nullptr; /* the binding it belongs to */
  pt_cuda_buffer buf;
};

thread_local bf16_scratch t_bf16;

/* t_bf16 at least n elements long, for the binding of h
 * (pt_cuda_buffer_grow, in 128 KiB steps: a few growths, not one per
 * shape). False after noting the error for what; under a capture the
 * note refuses it, and after a failed free the first error stays. */
bool grow_bf16(cublasHandle_t h, size_t n, cudaStream_t st, const char *what) {
  bf16_scratch &s = t_bf16;
  if (s.handle != h) {
    s.buf.release();
    s.handle = h;
  }
  if (pt_cuda_buffer_grow(&s.buf, n * sizeof(__nv_bfloat16), (size_t)128 << 10, st,
                          "the bf16 copies of a GEMM's inputs"))
    return true;
  pt_cuda_note_error(what, "out of GPU memory");
  return false;
}

/* Round to nearest, ties to even, as the tensor cores' conversions do. */
__global__ void to_bf16_kernel(size_t n, const float *__restrict__ src, __nv_bfloat16 *__restrict__ dst) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

/* The elements a column-major rows x cols matrix with leading dimension ld
 * spans, from its first to its last. */
size_t span(int rows, int cols, int ld) { return (size_t)ld * (size_t)(cols - 1) + (size_t)rows; }

} // namespace

cublasStatus_t pt_cuda_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                            float *C, int ldc) {
  if (pt_cuda_precision() != PT_PRECISION_BF16 || m <= 0 || n <= 0 || k <= 0)
    return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  /* cuBLAS's fp32-input compute types (CUBLAS_COMPUTE_32F_FAST_16BF) only
   * allow bf16: on an H100 it ran TF32 kernels instead. Inputs given as
   * bf16 leave no choice. A (op N: m x k; op T: k x m) and B (op N: k x n;
   * op T: n x k), each as stored, with its leading dimension. */
  const size_t na = ta == CUBLAS_OP_N ? span(m, k, lda) : span(k, m, lda);
  const size_t nb = tb == CUBLAS_OP_N ? span(k, n, ldb) : span(n, k, ldb);
  const size_t nb_at = (na + 127) / 128 * 128; /* B's copy 256-byte aligned, as cuBLAS prefers */
  const cudaStream_t st = pt_cuda::stream();
  static const char what[] = "bf16 GEMM: the bf16 copies of its inputs";
  if (!grow_bf16(h, nb_at + nb, st, what)) return CUBLAS_STATUS_ALLOC_FAILED;
  __nv_bfloat16 *a16 = (__nv_bfloat16 *)t_bf16.buf.p, *b16 = a16 + nb_at;
  to_bf16_kernel<<<pt_cuda::grid_for(na), pt_cuda::kThreads, 0, st>>>(na, A, a16);
  to_bf16_kernel<<<pt_cuda::grid_for(nb), pt_cuda::kThreads, 0, st>>>(nb, B, b16);
  PT_CUDA_CHECK_LAUNCH(what);
  /* CUBLAS_GEMM_DEFAULT: cuBLAS's heuristics, which depend only on the
   * shape and the GPU, so a run repeats bit for bit like cublasSgemm's. */
  return cublasGemmEx(h, ta, tb, m, n, k, alpha, a16, CUDA_R_16BF, lda, b16, CUDA_R_16BF, ldb, beta, C, CUDA_R_32F,
                      ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

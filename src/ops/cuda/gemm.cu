/* pt_cuda_gemm and the handle it takes: see gemm.h. */
#include "ops/cuda/gemm.h"

#include "ops/cuda/check.h"
#include "ops/cuda/context.h"

cublasHandle_t pt_cuda_blas_or_note(const char *what) {
  cublasHandle_t h = (cublasHandle_t)pt_cuda_cublas();
  if (!h) pt_cuda_note_error(what, "no cuBLAS handle: this thread is not bound to a GPU");
  return h;
}

cublasStatus_t pt_cuda_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                            float *C, int ldc) {
  if (pt_cuda_precision() != PT_PRECISION_BF16)
    return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  /* CUBLAS_GEMM_DEFAULT: cuBLAS's heuristics, which depend only on the
   * shape and the GPU, so a run repeats bit for bit like cublasSgemm's. */
  return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc,
                      CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
}

/* The one GEMM every CUDA op calls, in the thread's --precision.
 *
 * cublasSgemm's arguments and meaning (column-major, fp32 arrays). Under
 * fp32 and tf32 it is cublasSgemm, whose math the handle's mode sets
 * (pt_cuda_set_precision). Under bf16 it is cublasGemmEx on the same fp32
 * arrays with CUBLAS_COMPUTE_32F_FAST_16BF: the tensor cores take the
 * inputs rounded to bf16 and sum in fp32, and C stays fp32. cuBLAS may
 * pick TF32 or full fp32 kernels for some shapes under that compute type;
 * each is at least as exact as bf16. */
#ifndef PT_OPS_CUDA_GEMM_H
#define PT_OPS_CUDA_GEMM_H

#include <cublas_v2.h>

/* The thread's cuBLAS handle, or NULL after noting an error for what (an
 * op run on a thread with no GPU bound). */
cublasHandle_t pt_cuda_blas_or_note(const char *what);

cublasStatus_t pt_cuda_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                            float *C, int ldc);

#endif

/* The one GEMM every CUDA op calls, in the thread's --precision.
 *
 * cublasSgemm's arguments and meaning (column-major, fp32 arrays). Under
 * fp32 and tf32 it is cublasSgemm, whose math the handle's mode sets
 * (pt_cuda_set_precision). Under bf16 it rounds A and B to bf16 copies
 * (to nearest, ties to even; a scratch buffer of the thread's, grown in
 * stream order) and multiplies those with cublasGemmEx, summing in fp32
 * into the fp32 C.
 */
#ifndef PT_OPS_CUDA_GEMM_H
#define PT_OPS_CUDA_GEMM_H

#include "cuda/cublas.h"

/* The thread's cuBLAS handle, or NULL after noting an error for what (an
 * op run on a thread with no GPU bound). */
cublasHandle_t pt_cuda_blas_or_note(const char *what);

cublasStatus_t pt_cuda_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                            float *C, int ldc);

#endif

/* cuBLAS under ptrain's own names: include this, not <cublas_v2.h>.
 * cublas_lazy.c defines the entry points ptrain calls and loads the
 * library on their first use. Defined under cuBLAS's own names, they
 * would be global symbols of libptrain.a, and a program linking it and
 * libcublas would get ptrain's wrappers in place of cuBLAS's functions
 * (and lose libcublas from its needed libraries). */
#ifndef PT_CUDA_CUBLAS_H
#define PT_CUDA_CUBLAS_H

#define cublasCreate_v2 pt_cublas_create
#define cublasDestroy_v2 pt_cublas_destroy
#define cublasGetProperty pt_cublas_get_property
#define cublasGetStatusString pt_cublas_status_string
#define cublasSetAtomicsMode pt_cublas_set_atomics_mode
#define cublasSetMathMode pt_cublas_set_math_mode
#define cublasSetPointerMode_v2 pt_cublas_set_pointer_mode
#define cublasSetStream_v2 pt_cublas_set_stream
#define cublasSgemm_v2 pt_cublas_sgemm
#define cublasGemmEx pt_cublas_gemm_ex

#include <cublas_v2.h>

#endif

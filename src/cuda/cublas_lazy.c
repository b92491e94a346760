/* cuBLAS, loaded when first used rather than when ptrain starts.
 *
 * Linking libcublas makes the dynamic loader map it and its 500 MB
 * companion libcublasLt at start-up, and relocating them costs about
 * 210 MB of resident memory and 0.1 s before main, in every run of a CUDA
 * build, CPU runs and `ptrain info` included. So ptrain does not link it:
 * this file defines the few cuBLAS entry points ptrain calls, and the
 * first call of any of them loads the library (dlopen) and forwards to it.
 * A CPU run never calls them, so it never pays.
 *
 * Where the library cannot be loaded, every call reports
 * CUBLAS_STATUS_NOT_INITIALIZED and cublasGetStatusString says why.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cublas.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static struct {
  void *lib;
  char why[512];
  cublasStatus_t (*create)(cublasHandle_t *);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*get_property)(libraryPropertyType, int *);
  const char *(*status_string)(cublasStatus_t);
  cublasStatus_t (*set_atomics_mode)(cublasHandle_t, cublasAtomicsMode_t);
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
  cublasStatus_t (*set_pointer_mode)(cublasHandle_t, cublasPointerMode_t);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
                          const float *, int, const float *, int, const float *, float *, int);
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                            const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
} cb;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* dlsym returns void *; C has no cast between object and function
 * pointers, so the address is copied. */
#define RESOLVE(field, name)                                  \
  do {                                                        \
    void *p_ = dlsym(cb.lib, name);                           \
    if (!p_) missing = name;                                  \
    else memcpy(&cb.field, &p_, sizeof p_);                   \
  } while (0)

static void load(void) {
  /* The library the build found first (its directory is often not on the
   * loader's path), then the soname anywhere the loader looks. */
#ifdef PT_CUBLAS_PATH
  cb.lib = dlopen(PT_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
#endif
  if (!cb.lib) cb.lib = dlopen("libcublas.so." STR(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_LOCAL);
  if (!cb.lib) {
    const char *e = dlerror();
    snprintf(cb.why, sizeof cb.why, "cannot load libcublas.so.%d: %s", CUBLAS_VER_MAJOR, e ? e : "not found");
    return;
  }
  const char *missing = NULL;
  RESOLVE(create, "cublasCreate_v2");
  RESOLVE(destroy, "cublasDestroy_v2");
  RESOLVE(get_property, "cublasGetProperty");
  RESOLVE(status_string, "cublasGetStatusString");
  RESOLVE(set_atomics_mode, "cublasSetAtomicsMode");
  RESOLVE(set_math_mode, "cublasSetMathMode");
  RESOLVE(set_pointer_mode, "cublasSetPointerMode_v2");
  RESOLVE(set_stream, "cublasSetStream_v2");
  RESOLVE(sgemm, "cublasSgemm_v2");
  RESOLVE(gemm_ex, "cublasGemmEx");
  if (missing) {
    snprintf(cb.why, sizeof cb.why, "libcublas.so.%d has no %s", CUBLAS_VER_MAJOR, missing);
    dlclose(cb.lib);
    cb.lib = NULL;
  }
}

static int ready(void) {
  pthread_once(&once, load);
  return cb.lib != NULL;
}

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *handle) {
  return ready() ? cb.create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  return ready() ? cb.destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int *value) {
  return ready() ? cb.get_property(type, value) : CUBLAS_STATUS_NOT_INITIALIZED;
}
const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  if (!ready()) return cb.why;
  return cb.status_string(status);
}
cublasStatus_t CUBLASWINAPI cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode) {
  return ready() ? cb.set_atomics_mode(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  return ready() ? cb.set_math_mode(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t CUBLASWINAPI cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  return ready() ? cb.set_pointer_mode(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  return ready() ? cb.set_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                           int m, int n, int k, const float *alpha, const float *A, int lda,
                                           const float *B, int ldb, const float *beta, float *C, int ldc) {
  return ready() ? cb.sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
                 : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                         int lda, const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                                         cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo) {
  return ready() ? cb.gemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,
                              ldc, computeType, algo)
                 : CUBLAS_STATUS_NOT_INITIALIZED;
}

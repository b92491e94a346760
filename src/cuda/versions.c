/* The versions of the CUDA libraries actually loaded, which is what decides
 * compatibility: the headers a build saw may differ from the shared libraries
 * found at run time. */
#include <stdio.h>
#include <string.h>

#include "cuda/cublas.h"
#include <cuda_runtime_api.h>
#ifdef PT_HAVE_CUDNN
#include <cudnn.h>
#endif
#ifdef PT_HAVE_NCCL
#include <nccl.h>
#endif

#include "cuda/device.h"

/* CUDA encodes versions as 1000 * major + 10 * minor (13000 is 13.0). */
static void cuda_version(int v, char *out, size_t size) {
  if (v > 0) snprintf(out, size, "%d.%d", v / 1000, v % 1000 / 10);
}

pt_status pt_cuda_version_info(pt_cuda_versions *out) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_cuda_version_info: out is NULL");
  memset(out, 0, sizeof *out);
  int v = 0;
  /* Without a driver this still succeeds and reports 0, which stays "". */
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) cuda_version(v, out->runtime, sizeof out->runtime);
  v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) cuda_version(v, out->driver, sizeof out->driver);
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    snprintf(out->cublas, sizeof out->cublas, "%d.%d.%d", major, minor, patch);
#ifdef PT_HAVE_CUDNN
  /* cuDNN 9 encodes 10000 * major + 100 * minor + patch. */
  size_t dnn = cudnnGetVersion();
  snprintf(out->cudnn, sizeof out->cudnn, "%zu.%zu.%zu", dnn / 10000, dnn % 10000 / 100,
           dnn % 100);
#endif
#ifdef PT_HAVE_NCCL
  /* NCCL changed its encoding at 2.9, from 1000 * major to 10000 * major. */
  int nc = 0;
  if (ncclGetVersion(&nc) == ncclSuccess) {
    int scale = nc >= 10000 ? 10000 : 1000;
    snprintf(out->nccl, sizeof out->nccl, "%d.%d.%d", nc / scale, nc % scale / 100, nc % 100);
  }
#endif
  return PT_OK;
}

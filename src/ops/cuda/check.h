/* Error capture for the CUDA ops.
 *
 * The ops return void, like the CPU ones, and kernel launches and library
 * calls are asynchronous, so a failure cannot be returned where it happens.
 * Each is handed to pt_cuda_note_error (context.cu), which keeps the
 * thread's first one until pt_cuda_last_error or pt_cuda_sync reports it.
 * For the CUDA sources only: it needs the CUDA headers.
 */
#ifndef PT_OPS_CUDA_CHECK_H
#define PT_OPS_CUDA_CHECK_H

#include <stdio.h>

#include "cuda/cublas.h"
#include <cuda_runtime.h>

#include "util/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records "what: msg" as the thread's error unless one is already pending.
 * what names the op and step ("conv2d_forward: im2col"). */
void pt_cuda_note_error(const char *what, const char *msg);
/* Records a whole message (already naming the device) with its code, for
 * a failure that came as a status: a bounded wait that gave up. */
void pt_cuda_note_status(pt_status code, const char *msg);

#ifdef __cplusplus
}
#endif

static inline void pt_cuda_note_cuda_(cudaError_t e, const char *what) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
  pt_cuda_note_error(what, msg);
}

/* After a kernel launch: a bad configuration is reported at once by
 * cudaGetLastError; a fault while running surfaces at the next sync. */
#define PT_CUDA_CHECK_LAUNCH(what)                        \
  do {                                                    \
    cudaError_t pt_e_ = cudaGetLastError();               \
    if (pt_e_ != cudaSuccess) pt_cuda_note_cuda_(pt_e_, (what)); \
  } while (0)

/* A CUDA runtime call returning cudaError_t. */
#define PT_CUDA_CHECK(call, what)                         \
  do {                                                    \
    cudaError_t pt_e_ = (call);                           \
    if (pt_e_ != cudaSuccess) {                           \
      (void)cudaGetLastError();                           \
      pt_cuda_note_cuda_(pt_e_, (what));                  \
    }                                                     \
  } while (0)

#define PT_CUBLAS_CHECK(call, what)                                     \
  do {                                                                  \
    cublasStatus_t pt_s_ = (call);                                      \
    if (pt_s_ != CUBLAS_STATUS_SUCCESS) pt_cuda_note_error((what), cublasGetStatusString(pt_s_)); \
  } while (0)

#ifdef PT_HAVE_CUDNN
#include <cudnn.h>
#define PT_CUDNN_CHECK(call, what)                                      \
  do {                                                                  \
    cudnnStatus_t pt_s_ = (call);                                       \
    if (pt_s_ != CUDNN_STATUS_SUCCESS) pt_cuda_note_error((what), cudnnGetErrorString(pt_s_)); \
  } while (0)
#endif

#endif

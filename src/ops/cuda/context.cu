/* The calling thread's CUDA context (context.h) and the error capture the
 * ops report through (check.h).
 *
 * State is thread_local: each data-parallel worker thread binds its own
 * GPU, and CUDA's current device is itself per host thread. The ops are
 * void, so a failed launch or library call is kept here, the first one
 * only (later failures are usually its consequences), until pt_cuda_sync
 * or pt_cuda_last_error reports it. Nothing here exits.
 */
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef PT_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "cuda/device.h"
#include "ops/cuda/check.h"
#include "ops/cuda/context.h"

namespace {

struct thread_ctx {
  int device; /* -1: not bound */
  cudaStream_t stream;
  cublasHandle_t cublas;
#ifdef PT_HAVE_CUDNN
  cudnnHandle_t cudnn;
#endif
  int has_error;
  char error[512]; /* "cuda:N: what: message" */
};

thread_local thread_ctx t_ctx = {-1, nullptr, nullptr,
#ifdef PT_HAVE_CUDNN
                                 nullptr,
#endif
                                 0, {0}};

/* The device an error happened on: the bound one, else CUDA's current one
 * (an op run before bind uses it and the legacy default stream). */
int error_device() {
  if (t_ctx.device >= 0) return t_ctx.device;
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    d = -1;
  }
  return d;
}

/* Frees whatever of the context exists, in the reverse order of creation. */
void release(thread_ctx *c) {
#ifdef PT_HAVE_CUDNN
  if (c->cudnn) (void)cudnnDestroy(c->cudnn);
  c->cudnn = nullptr;
#endif
  if (c->cublas) (void)cublasDestroy(c->cublas);
  c->cublas = nullptr;
  if (c->stream) (void)cudaStreamDestroy(c->stream);
  c->stream = nullptr;
  c->device = -1;
  (void)cudaGetLastError();
}

pt_status bind_fail(thread_ctx *c, int device, const char *what, const char *msg) {
  release(c);
  return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s: %s", device, what, msg);
}

pt_status cuda_fail(thread_ctx *c, int device, const char *what, cudaError_t e) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
  return bind_fail(c, device, what, msg);
}

} // namespace

extern "C" void pt_cuda_note_error(const char *what, const char *msg) {
  if (t_ctx.has_error) return;
  t_ctx.has_error = 1;
  snprintf(t_ctx.error, sizeof t_ctx.error, "cuda:%d: %s: %s", error_device(), what ? what : "?",
           msg ? msg : "?");
}

extern "C" pt_status pt_cuda_bind(int device) {
  thread_ctx *c = &t_ctx;
  if (c->device == device && c->stream) return PT_OK;
  /* A bad request leaves the current binding as it was. */
  int count = 0;
  char why[256];
  PT_TRY(pt_cuda_device_count(&count, why, sizeof why));
  if (count == 0) return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s", device, why);
  if (device < 0 || device >= count)
    return pt_fail(PT_ERR_ARG, "cuda:%d: no such device (this machine has cuda:0 to cuda:%d)", device, count - 1);
  /* Leaving the old GPU reports what went wrong there, rather than
   * dropping it with its stream. */
  if (c->device >= 0) PT_TRY(pt_cuda_unbind());
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return cuda_fail(c, device, "selecting it", e);
  /* Non-blocking: the legacy default stream, which other libraries or a
   * stray cudaMemcpy may use, never serialises this thread's work. */
  if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
    c->stream = nullptr;
    return cuda_fail(c, device, "creating its stream", e);
  }
  cublasStatus_t bs = cublasCreate(&c->cublas);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    c->cublas = nullptr;
    return bind_fail(c, device, "creating the cuBLAS handle", cublasGetStatusString(bs));
  }
  /* FP32 math without TF32 (the CPU parity tests allow 1e-4, TF32 gives
   * 1e-3), and no atomics, so results repeat run to run. */
  if ((bs = cublasSetStream(c->cublas, c->stream)) != CUBLAS_STATUS_SUCCESS ||
      (bs = cublasSetMathMode(c->cublas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS ||
      (bs = cublasSetAtomicsMode(c->cublas, CUBLAS_ATOMICS_NOT_ALLOWED)) != CUBLAS_STATUS_SUCCESS ||
      (bs = cublasSetPointerMode(c->cublas, CUBLAS_POINTER_MODE_HOST)) != CUBLAS_STATUS_SUCCESS)
    return bind_fail(c, device, "configuring the cuBLAS handle", cublasGetStatusString(bs));
#ifdef PT_HAVE_CUDNN
  cudnnStatus_t ds = cudnnCreate(&c->cudnn);
  if (ds != CUDNN_STATUS_SUCCESS) {
    c->cudnn = nullptr;
    return bind_fail(c, device, "creating the cuDNN handle", cudnnGetErrorString(ds));
  }
  if ((ds = cudnnSetStream(c->cudnn, c->stream)) != CUDNN_STATUS_SUCCESS)
    return bind_fail(c, device, "binding the cuDNN handle to its stream", cudnnGetErrorString(ds));
#endif
  /* An error noted before binding (an op run on the legacy stream) stays
   * noted, for the next sync to report. */
  c->device = device;
  return PT_OK;
}

extern "C" pt_status pt_cuda_unbind(void) {
  thread_ctx *c = &t_ctx;
  if (c->device < 0) return PT_OK;
  /* Queued work finishes before its stream and handles go, and what it
   * hit, or what an op noted since the last sync, is the caller's to
   * report: the run's last steps may not have been read back. */
  const cudaError_t e = c->stream ? cudaStreamSynchronize(c->stream) : cudaSuccess;
  pt_status st = PT_OK;
  if (c->has_error)
    st = pt_fail(PT_ERR_DEVICE, "%s", c->error);
  else if (e != cudaSuccess)
    st = pt_fail(PT_ERR_DEVICE, "cuda:%d: a queued operation failed: %s (%s)", c->device, cudaGetErrorString(e),
                 cudaGetErrorName(e));
  release(c);
  c->has_error = 0;
  c->error[0] = '\0';
  return st;
}

extern "C" int pt_cuda_current_device(void) { return t_ctx.device; }
extern "C" void *pt_cuda_current_stream(void) { return (void *)t_ctx.stream; }
extern "C" void *pt_cuda_cublas(void) { return (void *)t_ctx.cublas; }

extern "C" void *pt_cuda_cudnn(void) {
#ifdef PT_HAVE_CUDNN
  return (void *)t_ctx.cudnn;
#else
  return nullptr;
#endif
}

extern "C" pt_status pt_cuda_last_error(void) {
  if (!t_ctx.has_error) return PT_OK;
  return pt_fail(PT_ERR_DEVICE, "%s", t_ctx.error);
}

extern "C" pt_status pt_cuda_sync(void) {
  thread_ctx *c = &t_ctx;
  const cudaError_t e = cudaStreamSynchronize(c->stream);
  /* Read the runtime's pending error too: otherwise a failure reported
   * here would be blamed again on the next launch's check. */
  const cudaError_t pending = cudaGetLastError();
  const cudaError_t stream_err = e != cudaSuccess ? e : pending;
  if (c->has_error) {
    c->has_error = 0;
    if (stream_err != cudaSuccess)
      return pt_fail(PT_ERR_DEVICE, "%s; then, at sync: %s (%s)", c->error, cudaGetErrorString(stream_err),
                     cudaGetErrorName(stream_err));
    return pt_fail(PT_ERR_DEVICE, "%s", c->error);
  }
  if (stream_err != cudaSuccess)
    return pt_fail(PT_ERR_DEVICE, "cuda:%d: a queued operation failed: %s (%s)", error_device(),
                   cudaGetErrorString(stream_err), cudaGetErrorName(stream_err));
  return PT_OK;
}

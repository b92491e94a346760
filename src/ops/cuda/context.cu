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

#include "cuda/cublas.h"
#include <cuda_runtime.h>
#ifdef PT_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "cuda/device.h"
#include "ops/cuda/check.h"
#include "ops/cuda/context.h"
#include "ops/cuda/graph.h"

namespace {

struct thread_ctx {
  int device; /* -1: not bound */
  cudaStream_t stream;
  cublasHandle_t cublas;
#ifdef PT_HAVE_CUDNN
  cudnnHandle_t cudnn;
#endif
  int has_error;
  pt_status error_code; /* PT_ERR_DEVICE, or a failed wait's (PT_ERR_COMM) */
  char error[512];      /* "cuda:N: what: message" */
  pt_cuda_wait_fn wait; /* NULL: plain blocking waits */
  void *wait_ctx;
  /* A wait function that failed (a peer's error, the timeout) fails every
   * later wait at once: each would otherwise sit out the timeout again. */
  pt_status wait_failed;
  char wait_error[512];
  pt_precision precision; /* --precision: what cuBLAS and cuDNN may round inputs to */
  /* Waits for the whole stream (syncs, downloads: the GPU's queue
   * empties), and waits for an earlier point that found it not yet reached
   * (an upload's staging slot: the host ahead by the ring's depth, the GPU
   * still busy): a steady-state step makes neither (pt_cuda_host_waits). */
  unsigned long long drains, ahead;
};

thread_local thread_ctx t_ctx = {-1, nullptr, nullptr,
#ifdef PT_HAVE_CUDNN
                                 nullptr,
#endif
                                 0, PT_OK, {0}, nullptr, nullptr, PT_OK, {0}, PT_PRECISION_FP32, 0, 0};

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
  pt_cuda_graph_release();
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

/* Keeps a whole message (pt_error_message) as the thread's pending error,
 * unless one is pending already. */
void keep_error(thread_ctx *c, pt_status code, const char *msg) {
  if (c->has_error) return;
  c->has_error = 1;
  c->error_code = code;
  snprintf(c->error, sizeof c->error, "%s", msg);
}

/* What a bounded wait polls: the event when there is one, else the stream. */
struct query {
  cudaStream_t stream;
  cudaEvent_t event;
  cudaError_t err;
  int polls; /* more than one: the host waited */
};

int query_ready(void *p) {
  query *q = (query *)p;
  q->polls++;
  q->err = q->event ? cudaEventQuery(q->event) : cudaStreamQuery(q->stream);
  if (q->err != cudaErrorNotReady) return 1;
  /* "Not ready" is an answer, not a failure: it must not be what the next
   * launch's check finds pending. */
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
  return 0;
}

/* Waits for q through the thread's wait function, or blocking without one.
 * PT_OK with q->err the CUDA outcome, or the wait function's failure. */
pt_status wait_for(query *q, const char *what) {
  thread_ctx *c = &t_ctx;
  if (!q->event) c->drains++;
  if (!c->wait) {
    if (query_ready(q)) return PT_OK; /* done already: q->err says how */
    if (q->event) c->ahead++;
    q->err = q->event ? cudaEventSynchronize(q->event) : cudaStreamSynchronize(q->stream);
    return PT_OK;
  }
  if (c->wait_failed != PT_OK) return pt_fail(c->wait_failed, "%s", c->wait_error);
  q->err = cudaSuccess;
  q->polls = 0;
  const pt_status st = c->wait(c->wait_ctx, what, query_ready, q);
  if (q->polls > 1 && q->event) c->ahead++;
  if (st != PT_OK) {
    c->wait_failed = st;
    snprintf(c->wait_error, sizeof c->wait_error, "%s", pt_error_message());
  }
  return st;
}

pt_status wait_status(query *q, const char *what) {
  PT_TRY(wait_for(q, what));
  if (q->err == cudaSuccess) return PT_OK;
  const cudaError_t e = q->err;
  (void)cudaGetLastError();
  return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s: %s (%s)", error_device(), what ? what : "waiting for the GPU",
                 cudaGetErrorString(e), cudaGetErrorName(e));
}

} // namespace

extern "C" void pt_cuda_note_error(const char *what, const char *msg) {
  if (pt_cuda_capturing()) { /* the capture's failure, not the run's: the step runs again as usual */
    char why[320];
    snprintf(why, sizeof why, "%s: %s", what ? what : "?", msg ? msg : "?");
    pt_cuda_capture_refuse(why);
    return;
  }
  if (t_ctx.has_error) return;
  t_ctx.has_error = 1;
  t_ctx.error_code = PT_ERR_DEVICE;
  snprintf(t_ctx.error, sizeof t_ctx.error, "cuda:%d: %s: %s", error_device(), what ? what : "?",
           msg ? msg : "?");
}

extern "C" void pt_cuda_note_status(pt_status code, const char *msg) {
  if (code == PT_OK || pt_cuda_capture_refuse(msg ? msg : "?")) return;
  keep_error(&t_ctx, code, msg ? msg : "?");
}

extern "C" void pt_cuda_set_wait(pt_cuda_wait_fn fn, void *ctx) {
  t_ctx.wait = fn;
  t_ctx.wait_ctx = fn ? ctx : nullptr;
  t_ctx.wait_failed = PT_OK;
  t_ctx.wait_error[0] = '\0';
}

extern "C" void pt_cuda_clear_wait(void *ctx) {
  if (t_ctx.wait && t_ctx.wait_ctx == ctx) pt_cuda_set_wait(nullptr, nullptr);
}

/* A host wait inside a capture: nothing has run, so there is nothing to
 * wait for, and a graph cannot hold the wait: the capture fails, and the
 * step runs again as usual. */
static bool refused_wait(const char *what) {
  if (!pt_cuda_capturing()) return false;
  char why[320];
  snprintf(why, sizeof why, "a host wait (%s)", what ? what : "?");
  pt_cuda_capture_refuse(why);
  return true;
}

extern "C" pt_status pt_cuda_wait_stream(const char *what) {
  if (refused_wait(what)) return PT_OK;
  query q = {t_ctx.stream, nullptr, cudaSuccess, 0};
  return wait_status(&q, what);
}

extern "C" pt_status pt_cuda_wait_event(void *event, const char *what) {
  if (refused_wait(what)) return PT_OK;
  query q = {t_ctx.stream, (cudaEvent_t)event, cudaSuccess, 0};
  return wait_status(&q, what);
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
  if (c->device >= 0) {
    /* What the old binding's work met is not this call's failure: it stays
     * pending, for the next sync to report (keep_error below, after the
     * unbind that cleared it). */
    const pt_status old = pt_cuda_unbind();
    if (old != PT_OK) keep_error(c, old, pt_error_message());
  }
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
  /* An error noted before binding (an op run on no stream, or the old
   * binding's) stays pending: clearing it here would lose it. */
  c->device = device;
  return PT_OK;
}

extern "C" pt_status pt_cuda_unbind(void) {
  thread_ctx *c = &t_ctx;
  if (c->device < 0) return PT_OK;
  /* Let queued work finish before its stream and handles go, and report
   * what it met: after this there is no stream left to sync. */
  const pt_status st = c->stream ? pt_cuda_sync() : pt_cuda_last_error();
  release(c);
  c->precision = PT_PRECISION_FP32;
  c->has_error = 0;
  c->error[0] = '\0';
  /* The wait function belongs to a communicator of this binding. */
  pt_cuda_set_wait(nullptr, nullptr);
  return st;
}

extern "C" pt_status pt_cuda_set_precision(pt_precision p) {
  thread_ctx *c = &t_ctx;
  if (c->device < 0 || !c->cublas) return pt_fail(PT_ERR_STATE, "--precision: this thread has no GPU bound");
  if (p != PT_PRECISION_FP32 && p != PT_PRECISION_TF32 && p != PT_PRECISION_BF16)
    return pt_fail(PT_ERR_ARG, "--precision: unknown mode %d", (int)p);
  /* TF32 is the handle's math mode, for every cublasSgemm; bf16 has no
   * math mode and is asked for GEMM by GEMM (pt_cuda_gemm). cuDNN's
   * descriptors follow pt_cuda_precision (conv.cu). */
  const bool tf32 = p == PT_PRECISION_TF32;
  const cublasStatus_t bs = cublasSetMathMode(c->cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  if (bs != CUBLAS_STATUS_SUCCESS)
    return pt_fail(PT_ERR_DEVICE, "cuda:%d: setting cuBLAS's math to %s: %s", c->device, tf32 ? "TF32" : "FP32",
                   cublasGetStatusString(bs));
  c->precision = p;
  return PT_OK;
}

extern "C" pt_precision pt_cuda_precision(void) { return t_ctx.precision; }

extern "C" void pt_cuda_host_waits(uint64_t out[2]) {
  out[0] = t_ctx.drains;
  out[1] = t_ctx.ahead;
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
  return pt_fail(t_ctx.error_code, "%s", t_ctx.error);
}

extern "C" pt_status pt_cuda_sync(void) {
  if (refused_wait("a sync")) return PT_OK;
  thread_ctx *c = &t_ctx;
  query q = {c->stream, nullptr, cudaSuccess, 0};
  const pt_status waited = wait_for(&q, "waiting for the GPU");
  if (waited != PT_OK) {
    /* The wait gave up (a peer's NCCL failure, or the timeout); the op
     * error pending, if any, is older and more to the point. */
    if (!c->has_error) return waited;
    c->has_error = 0;
    return pt_wrap(c->error_code, "%s; then", c->error);
  }
  const cudaError_t e = q.err;
  /* Read the runtime's pending error too: otherwise a failure reported
   * here would be blamed again on the next launch's check. */
  const cudaError_t pending = cudaGetLastError();
  const cudaError_t stream_err = e != cudaSuccess ? e : pending;
  if (c->has_error) {
    c->has_error = 0;
    if (stream_err != cudaSuccess)
      return pt_fail(c->error_code, "%s; then, at sync: %s (%s)", c->error, cudaGetErrorString(stream_err),
                     cudaGetErrorName(stream_err));
    return pt_fail(c->error_code, "%s", c->error);
  }
  if (stream_err != cudaSuccess)
    return pt_fail(PT_ERR_DEVICE, "cuda:%d: a queued operation failed: %s (%s)", error_device(),
                   cudaGetErrorString(stream_err), cudaGetErrorName(stream_err));
  return PT_OK;
}

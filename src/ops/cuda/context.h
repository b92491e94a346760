/* The calling thread's CUDA context: its device, stream and library handles.
 *
 * Like the CPU thread pool, this is per thread: a data-parallel worker is a
 * thread with a GPU of its own. pt_cuda_bind creates the stream and handles
 * once; every kernel of src/ops/cuda is queued on that stream, so one
 * thread's work runs in order and the host waits only in pt_cuda_sync and
 * downloads. Types are void * so C callers (the NCCL communicator, the
 * trainer) need no CUDA headers.
 */
#ifndef PT_OPS_CUDA_CONTEXT_H
#define PT_OPS_CUDA_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "ops/precision.h"
#include "util/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Selects device on this thread and creates its stream, cuBLAS handle (on
 * that stream) and, when built in, cuDNN handle. Binding the same device
 * again does nothing; another device rebinds. */
pt_status pt_cuda_bind(int device);
/* Waits for the thread's queued work, then frees its stream and handles.
 * Returns the error that work (or an op before it) met, which would
 * otherwise have nobody left to report to; unbound either way. An error
 * pending when pt_cuda_bind is called stays pending for the next sync. */
pt_status pt_cuda_unbind(void);
/* -1 when this thread is not bound. */
int pt_cuda_current_device(void);
/* The thread's cudaStream_t; NULL when not bound. */
void *pt_cuda_current_stream(void);
/* cublasHandle_t / cudnnHandle_t (NULL without cuDNN). */
void *pt_cuda_cublas(void);
void *pt_cuda_cudnn(void);
/* --precision: under tf32, cuBLAS's FP32 GEMMs and cuDNN's convolutions
 * may round their inputs to TF32 (10-bit mantissas) on tensor cores; under
 * bf16, every GEMM rounds its inputs to bf16 (7-bit mantissas) and sums in
 * fp32 (pt_cuda_gemm), and convolutions take the gemm path. Per thread,
 * after pt_cuda_bind and before the first op; FP32 again after a rebind. */
pt_status pt_cuda_set_precision(pt_precision p);
pt_precision pt_cuda_precision(void);
/* This thread's host waits for its GPU so far: [0] for its whole queue
 * (syncs, downloads), [1] for an earlier point not yet reached (an upload
 * waiting for its staging slot while the GPU works on). */
void pt_cuda_host_waits(uint64_t out[2]);
/* Waits for the thread's stream; a fault of any kernel queued before it
 * is returned as PT_ERR_DEVICE naming the device and CUDA's message. The
 * error is reported once: the caller must pass it on. Waits through the
 * thread's bounded wait when one is set (pt_cuda_set_wait). */
pt_status pt_cuda_sync(void);

/* Bounded waits. NCCL's kernels share the GPU with the thread's, and one
 * whose peer died never ends, so a plain cudaStreamSynchronize (or an
 * event's) behind it would wait forever. A communicator whose work the
 * thread's stream may wait on sets a wait function here: it calls
 * ready(ready_ctx) until that returns non-zero, checking meanwhile its
 * own error state and its timeout, and fails with a message saying which
 * (what names the host's wait). Every host wait of the CUDA backend (sync,
 * downloads, an upload waiting for a staging slot, the cuDNN workspace
 * growing, an allocation) then goes through it. NULL fn: plain blocking
 * waits, as when no communicator is involved. Per thread, like the rest of
 * the context; unbinding clears it. */
typedef pt_status (*pt_cuda_wait_fn)(void *ctx, const char *what, int (*ready)(void *ready_ctx),
                                     void *ready_ctx);
void pt_cuda_set_wait(pt_cuda_wait_fn fn, void *ctx);
/* Clears the thread's wait function if ctx is the one it was set with (a
 * communicator being destroyed). */
void pt_cuda_clear_wait(void *ctx);
/* Waits for the thread's stream, or for a cudaEvent_t, through the wait
 * function when one is set; PT_ERR_DEVICE naming what on a CUDA error, or
 * the wait function's failure. Neither touches the thread's pending op
 * error (pt_cuda_last_error). */
pt_status pt_cuda_wait_stream(const char *what);
pt_status pt_cuda_wait_event(void *event, const char *what);
/* The first launch or library error seen on this thread since the last
 * sync (kernels are void, like the CPU ops); PT_OK if none. */
pt_status pt_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif

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

#include "util/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Selects device on this thread and creates its stream, cuBLAS handle (on
 * that stream) and, when built in, cuDNN handle. Binding the same device
 * again does nothing; another device rebinds. */
pt_status pt_cuda_bind(int device);
pt_status pt_cuda_unbind(void);
/* -1 when this thread is not bound. */
int pt_cuda_current_device(void);
/* The thread's cudaStream_t; NULL when not bound. */
void *pt_cuda_current_stream(void);
/* cublasHandle_t / cudnnHandle_t (NULL without cuDNN). */
void *pt_cuda_cublas(void);
void *pt_cuda_cudnn(void);
/* Waits for the thread's stream; a fault of any kernel queued before it
 * is returned as PT_ERR_DEVICE naming the device and CUDA's message. */
pt_status pt_cuda_sync(void);
/* The first launch or library error seen on this thread since the last
 * sync (kernels are void, like the CPU ops); PT_OK if none. */
pt_status pt_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif

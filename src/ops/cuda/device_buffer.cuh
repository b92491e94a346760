/* A thread's growable device buffer, grown in stream order: the cuDNN
 * workspace (conv.cu) and the bf16 copies of a GEMM's inputs (gemm.cu).
 * CUDA C++ only.
 */
#ifndef PT_OPS_CUDA_DEVICE_BUFFER_CUH
#define PT_OPS_CUDA_DEVICE_BUFFER_CUH

#include <stddef.h>

#include <cuda_runtime.h>

struct pt_cuda_buffer {
  void *p = nullptr;
  size_t bytes = 0;
  bool async = false; /* from cudaMallocAsync (else cudaMalloc) */
  int device = -1;    /* the device p is memory of */

  /* Frees p: on a rebind (possibly to another GPU) and at thread exit. The
   * device is drained first, as the old stream may still be using p. */
  void release();
  ~pt_cuda_buffer() { release(); }
};

/* Makes b at least bytes long, rounded up to a multiple of step, on the
 * calling thread's device. In stream order (cudaFreeAsync, cudaMallocAsync
 * on st), so the host never waits: the old buffer is freed after the
 * kernels queued before it, and the new one is there for those after.
 * cudaFree would wait for the whole device, NCCL's stream included, which
 * behind a dead peer never drains. Where the device has no stream-ordered
 * allocator, the stream is drained through the thread's bounded wait
 * first.
 *
 * False where b stays as it was or is now empty: under a capture (which
 * would keep the old address for good: it fails, and the step runs as
 * usual), after a failed wait or free (noted, reported at the next sync),
 * or where the memory is not there (nothing noted: the caller decides).
 * name ("the cuDNN workspace") goes into the messages. */
bool pt_cuda_buffer_grow(pt_cuda_buffer *b, size_t bytes, size_t step, cudaStream_t st, const char *name);

#endif

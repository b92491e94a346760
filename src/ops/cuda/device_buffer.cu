/* pt_cuda_buffer: see device_buffer.cuh. */
#include "ops/cuda/device_buffer.cuh"

#include <stdio.h>

#include "ops/cuda/check.h"
#include "ops/cuda/context.h"
#include "ops/cuda/graph.h"

void pt_cuda_buffer::release() {
  if (p) {
    int cur = -1;
    (void)cudaGetDevice(&cur);
    if (cur != device) (void)cudaSetDevice(device);
    (void)cudaDeviceSynchronize();
    if (async) (void)cudaFreeAsync(p, 0); /* the device is idle: no order to keep */
    else (void)cudaFree(p);
    if (cur != device && cur >= 0) (void)cudaSetDevice(cur);
    (void)cudaGetLastError(); /* at process exit the runtime may already be gone */
  }
  p = nullptr;
  bytes = 0;
  async = false;
  device = -1;
}

bool pt_cuda_buffer_grow(pt_cuda_buffer *b, size_t bytes, size_t step, cudaStream_t st, const char *name) {
  if (bytes <= b->bytes) return true;
  char what[160];
  snprintf(what, sizeof what, "%s had to grow", name);
  if (pt_cuda_capture_refuse(what)) return false;
  bytes = (bytes + step - 1) / step * step;
  if (b->p && b->async) {
    snprintf(what, sizeof what, "freeing %s to grow it", name);
    const cudaError_t e = cudaFreeAsync(b->p, st);
    if (e != cudaSuccess) {
      pt_cuda_note_cuda_(e, what);
      return false;
    }
  } else if (b->p) {
    snprintf(what, sizeof what, "waiting to grow %s", name);
    const pt_status w = pt_cuda_wait_stream(what);
    if (w != PT_OK) {
      /* Kernels may still use the old buffer: keep it. */
      pt_cuda_note_status(w, pt_error_message());
      return false;
    }
    snprintf(what, sizeof what, "freeing %s to grow it", name);
    const cudaError_t e = cudaFree(b->p);
    if (e != cudaSuccess) {
      pt_cuda_note_cuda_(e, what);
      return false;
    }
  }
  b->p = nullptr;
  b->bytes = 0;
  pt_cuda_memory_moved(); /* graphs captured with the old buffer are stale */
  b->async = cudaMallocAsync(&b->p, bytes, st) == cudaSuccess;
  if (!b->async) {
    (void)cudaGetLastError();
    b->p = nullptr;
    if (cudaMalloc(&b->p, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      b->p = nullptr;
      return false;
    }
  }
  int dev = -1;
  (void)cudaGetDevice(&dev);
  b->device = dev;
  b->bytes = bytes;
  return true;
}

/* The CUDA backend: device memory on the calling thread's GPU and the
 * kernels of this folder, everything queued on the thread's stream
 * (context.h) in the order the caller issues it. Memory operations report
 * through the same first-error capture as the kernels, so a failure shows
 * at the next sync or download.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <mutex>

#include <cuda_runtime.h>

#include "cuda/device.h"
#include "ops/backend.h"
#include "ops/cuda/check.h"
#include "ops/cuda/context.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/ops.h"
#include "util/notice.h"

namespace {

cudaStream_t stream() { return (cudaStream_t)pt_cuda_current_stream(); }

int device_for_message() {
  const int d = pt_cuda_current_device();
  if (d >= 0) return d;
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess) {
    (void)cudaGetLastError();
    cur = -1;
  }
  return cur;
}

/* Zeroed like the CPU's allocations, and waited for: the memory may be
 * handed to another thread, whose non-blocking stream would not be ordered
 * after this one's. Allocation happens at setup, never in a step, so the
 * wait costs nothing that matters; it is the thread's bounded one
 * (context.h), as the stream may hold NCCL work. cudaMalloc aligns to 256. */
void *cuda_alloc(size_t bytes) {
  void *p = nullptr;
  const size_t size = bytes ? bytes : 1; /* NULL must mean failure */
  const cudaError_t e = cudaMalloc(&p, size);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* an out-of-memory is not the next launch's fault */
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
    pt_fail(e == cudaErrorMemoryAllocation ? PT_ERR_NOMEM : PT_ERR_DEVICE,
            "cuda:%d: cannot allocate %zu bytes (%.1f MiB; %.1f of %.1f MiB free): %s", device_for_message(), bytes,
            (double)bytes / 1048576.0, (double)free_b / 1048576.0, (double)total_b / 1048576.0,
            cudaGetErrorString(e));
    return nullptr;
  }
  PT_CUDA_CHECK(cudaMemsetAsync(p, 0, size, stream()), "alloc: zeroing");
  if (pt_cuda_wait_stream("alloc: waiting for the zeroing") != PT_OK) {
    /* Not freed: cudaFree waits for the whole device, which is what just
     * failed to finish. The run is ending; the memory goes with it. */
    pt_wrap(PT_ERR_DEVICE, "cuda:%d: cannot allocate %zu bytes", device_for_message(), bytes);
    return nullptr;
  }
  return p;
}

/* cudaFree waits for the device; frees happen at teardown, not in a step. */
void cuda_free(void *p) {
  if (p) PT_CUDA_CHECK(cudaFree(p), "free");
}

void cuda_zero(void *p, size_t bytes) {
  if (bytes) PT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()), "zero");
}

void cuda_copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src)
    PT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), "copy");
}

/* The backend's contract is the CPU's: the host buffer may be reused as
 * soon as upload returns. From pageable memory cudaMemcpyAsync keeps that
 * promise, but only by first waiting for everything queued on the stream,
 * which would make every training step wait for the GPU, since each one
 * uploads its batch's indices. So small uploads go through a ring of
 * page-locked slots instead: the bytes are copied into a slot, the slot is
 * copied to the device in stream order, and an event marks when the slot is
 * free again; a slot is reused RING_SLOTS uploads later, by which time its
 * copy has long finished. Large uploads (a dataset, at setup) take the plain
 * path and wait. */
constexpr int RING_SLOTS = 16;
constexpr size_t RING_SLOT_BYTES = 64 << 10;

struct upload_ring {
  unsigned char *host = nullptr; /* (RING_SLOTS, RING_SLOT_BYTES), page-locked */
  cudaEvent_t done[RING_SLOTS] = {};
  int next = 0, device = -1;
  bool broken = false;           /* could not be made: use the plain path */
  void release() {
    for (auto &e : done)
      if (e) (void)cudaEventDestroy(e), e = nullptr;
    if (host) (void)cudaFreeHost(host);
    host = nullptr;
    (void)cudaGetLastError();
  }
  ~upload_ring() { release(); }
};
thread_local upload_ring ring;

bool ring_ready() {
  const int dev = pt_cuda_current_device();
  if (ring.host && ring.device == dev) return true;
  if (ring.broken && ring.device == dev) return false;
  ring.release();
  ring.device = dev;
  ring.broken = cudaHostAlloc((void **)&ring.host, RING_SLOTS * RING_SLOT_BYTES, cudaHostAllocDefault) != cudaSuccess;
  for (int i = 0; i < RING_SLOTS && !ring.broken; i++)
    ring.broken = cudaEventCreateWithFlags(&ring.done[i], cudaEventDisableTiming) != cudaSuccess;
  if (ring.broken) {
    (void)cudaGetLastError();
    ring.release();
  }
  return !ring.broken;
}

/* A bounded wait that failed, kept for the next sync; false then. */
bool waited(pt_status st) {
  if (st == PT_OK) return true;
  pt_cuda_note_status(st, pt_error_message());
  return false;
}

void plain_upload(void *dst, const void *host_src, size_t bytes) {
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, host_src) != cudaSuccess) {
    (void)cudaGetLastError();
    attr.type = cudaMemoryTypeUnregistered;
  }
  const bool pinned = attr.type == cudaMemoryTypeHost || attr.type == cudaMemoryTypeManaged;
  /* From pageable memory the copy first waits, unbounded, for the stream:
   * drained here through the bounded wait, it has nothing to wait for. */
  if (!pinned && !waited(pt_cuda_wait_stream("upload: waiting for the GPU before a copy"))) return;
  PT_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream()), "upload");
  /* From page-locked or managed memory the copy runs truly asynchronously. */
  if (pinned) (void)waited(pt_cuda_wait_stream("upload: waiting for the copy"));
}

void cuda_upload(void *dst, const void *host_src, size_t bytes) {
  if (!bytes) return;
  /* A capture would freeze the staging slot's address and replay the copy
   * from it, whatever the slot then holds. */
  if (pt_cuda_capture_refuse("an upload from host memory")) return;
  if (bytes > RING_SLOT_BYTES || !ring_ready()) {
    plain_upload(dst, host_src, bytes);
    return;
  }
  const int i = ring.next;
  ring.next = (ring.next + 1) % RING_SLOTS;
  unsigned char *slot = ring.host + (size_t)i * RING_SLOT_BYTES;
  /* Blocks only when the host is RING_SLOTS uploads ahead of the GPU (a
   * long log interval). A slot whose copy never finished (a dead peer's
   * NCCL work ahead of it) must not be overwritten: the upload is dropped,
   * and the error waits for the next sync. */
  if (!waited(pt_cuda_wait_event(ring.done[i], "upload: waiting for a staging slot"))) return;
  memcpy(slot, host_src, bytes);
  PT_CUDA_CHECK(cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, stream()), "upload");
  PT_CUDA_CHECK(cudaEventRecord(ring.done[i], stream()), "upload: marking a staging slot");
}

pt_status cuda_download(void *host_dst, const void *src, size_t bytes) {
  /* Inside a capture nothing has run: nothing to read, and the capture fails. */
  if (pt_cuda_capture_refuse("a download to host memory")) return PT_OK;
  if (bytes) PT_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream()), "download");
  return pt_cuda_sync();
}

/* Stages on GPUs (pipe/stage.c): events order one thread's stream after
 * another's without the host waiting. */
void *cuda_event_create() {
  cudaEvent_t e = nullptr;
  const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    pt_fail(PT_ERR_DEVICE, "cuda:%d: cannot create an event: %s", device_for_message(), cudaGetErrorString(err));
    return nullptr;
  }
  return e;
}

void cuda_event_destroy(void *e) {
  if (e) PT_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)e), "event: destroying");
}

void cuda_event_record(void *e) {
  PT_CUDA_CHECK(cudaEventRecord((cudaEvent_t)e, stream()), "event: marking a point for another stage");
}

void cuda_event_wait(void *e) {
  PT_CUDA_CHECK(cudaStreamWaitEvent(stream(), (cudaEvent_t)e, 0), "event: waiting for another stage");
}

/* Peer access is switched on once per ordered pair of GPUs, from the
 * reading GPU (the thread's own), where the hardware offers it; without
 * it cudaMemcpyPeerAsync still copies, staged by the driver. */
constexpr int kPeerDevices = 64; /* beyond, copies go without asking for peer access */
std::mutex peer_mutex;
bool peer_tried[kPeerDevices][kPeerDevices];

void enable_peer(int dev, int peer) {
  if (dev < 0 || peer < 0 || dev >= kPeerDevices || peer >= kPeerDevices) return;
  std::lock_guard<std::mutex> lock(peer_mutex);
  if (peer_tried[dev][peer]) return;
  peer_tried[dev][peer] = true;
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, dev, peer) == cudaSuccess && can) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
      pt_notice("cuda:%d cannot reach cuda:%d directly (%s); copies between them go through the driver's staging",
                dev, peer, cudaGetErrorString(e));
  }
  (void)cudaGetLastError();
}

void cuda_copy_from(void *dst, const void *src, int src_device, size_t bytes) {
  if (!bytes) return;
  const int dev = pt_cuda_current_device();
  if (src_device == dev || dev < 0) {
    cuda_copy(dst, src, bytes);
    return;
  }
  enable_peer(dev, src_device);
  PT_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dev, src, src_device, bytes, stream()), "copy from another GPU");
}

/* Filled by name (C++17 has no designated initialisers), once, on first
 * use: C++ makes that initialisation thread-safe. */
pt_backend make_table() {
  pt_backend b = {};
  b.kind = PT_BACKEND_CUDA;
  b.name = "cuda";
  b.alloc = cuda_alloc;
  b.free = cuda_free;
  b.zero = cuda_zero;
  b.copy = cuda_copy;
  b.upload = cuda_upload;
  b.download = cuda_download;
  b.sync = pt_cuda_sync;
  b.bind = pt_cuda_bind;
  b.unbind = pt_cuda_unbind;
  b.conv_workspace = pt_cuda_conv_workspace;
  b.conv2d_forward = pt_cuda_conv2d_forward;
  b.conv2d_backward = pt_cuda_conv2d_backward;
  b.linear_workspace = pt_cuda_linear_workspace;
  b.linear_forward = pt_cuda_linear_forward;
  b.linear_backward = pt_cuda_linear_backward;
  b.maxpool_forward = pt_cuda_maxpool_forward;
  b.maxpool_backward = pt_cuda_maxpool_backward;
  b.relu_forward = pt_cuda_relu_forward;
  b.relu_backward = pt_cuda_relu_backward;
  b.dropout_forward = pt_cuda_dropout_forward;
  b.dropout_backward = pt_cuda_dropout_backward;
  b.log_softmax_forward = pt_cuda_log_softmax_forward;
  b.log_softmax_backward = pt_cuda_log_softmax_backward;
  b.nll_loss = pt_cuda_nll_loss;
  b.cross_entropy_loss = pt_cuda_cross_entropy_loss;
  b.count_correct = pt_cuda_count_correct;
  b.accumulate_loss = pt_cuda_accumulate_loss;
  b.batchnorm_forward_train = pt_cuda_batchnorm_forward_train;
  b.batchnorm_forward_eval = pt_cuda_batchnorm_forward_eval;
  b.batchnorm_backward_train = pt_cuda_batchnorm_backward_train;
  b.batchnorm_backward_eval = pt_cuda_batchnorm_backward_eval;
  b.batchnorm_sums = pt_cuda_batchnorm_sums;
  b.batchnorm_normalize = pt_cuda_batchnorm_normalize;
  b.batchnorm_backward_sums = pt_cuda_batchnorm_backward_sums;
  b.batchnorm_backward_dx = pt_cuda_batchnorm_backward_dx;
  b.sgd_update = pt_cuda_sgd_update;
  b.adam_update = pt_cuda_adam_update;
  b.adadelta_update = pt_cuda_adadelta_update;
  b.scale = pt_cuda_scale;
  b.make_batch = pt_cuda_make_batch;
  b.set_precision = pt_cuda_set_precision;
  b.host_waits = pt_cuda_host_waits;
  b.event_create = cuda_event_create;
  b.event_destroy = cuda_event_destroy;
  b.event_record = cuda_event_record;
  b.event_wait = cuda_event_wait;
  b.copy_from = cuda_copy_from;
  b.graph_begin = pt_cuda_graph_begin;
  b.graph_end = pt_cuda_graph_end;
  b.graph_launch = pt_cuda_graph_launch;
  b.graph_destroy = pt_cuda_graph_destroy;
  b.memory_generation = pt_cuda_memory_generation;
  return b;
}

} // namespace

extern "C" void pt_cuda_upload(void *dst, const void *host_src, size_t bytes) { cuda_upload(dst, host_src, bytes); }

/* NULL, with the reason, where no GPU can be used: the caller (the
 * trainer, a test) decides whether that is an error. */
extern "C" const pt_backend *pt_backend_cuda(void) {
  int n = 0;
  char why[256];
  if (pt_cuda_device_count(&n, why, sizeof why) != PT_OK) return nullptr;
  if (n == 0) {
    pt_fail(PT_ERR_DEVICE, "%s", why);
    return nullptr;
  }
  static const pt_backend table = make_table();
  return &table;
}

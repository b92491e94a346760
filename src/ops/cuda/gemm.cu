/* pt_cuda_gemm and the handle it takes: see gemm.h. */
#include "ops/cuda/gemm.h"

#include <cuda_bf16.h>

#include "ops/cuda/check.h"
#include "ops/cuda/context.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/launch.cuh"

cublasHandle_t pt_cuda_blas_or_note(const char *what) {
  cublasHandle_t h = (cublasHandle_t)pt_cuda_cublas();
  if (!h) pt_cuda_note_error(what, "no cuBLAS handle: this thread is not bound to a GPU");
  return h;
}

namespace {

/* The bf16 copies of one GEMM's A and B, reused GEMM after GEMM: every op
 * of a thread is queued on its one stream, so a GEMM has read its copies
 * before the next conversion writes over them. */
struct bf16_scratch {
  cublasHandle_t handle = nullptr; /* the binding it belongs to */
  int device = -1;
  __nv_bfloat16 *p = nullptr;
  size_t n = 0; /* elements */
  bool async = false;

  /* On a rebind and at thread exit; the device is drained first, as the
   * old stream may still be reading p. */
  void release() {
    if (p) {
      int cur = -1;
      (void)cudaGetDevice(&cur);
      if (cur != device) (void)cudaSetDevice(device);
      (void)cudaDeviceSynchronize();
      if (async) (void)cudaFreeAsync(p, 0);
      else (void)cudaFree(p);
      if (cur != device && cur >= 0) (void)cudaSetDevice(cur);
      (void)cudaGetLastError(); /* at process exit the runtime may already be gone */
    }
    p = nullptr;
    n = 0;
    async = false;
    handle = nullptr;
    device = -1;
  }
  ~bf16_scratch() { release(); }
};

thread_local bf16_scratch t_bf16;

/* t_bf16 at least n elements long, in stream order like the cuDNN
 * workspace (conv.cu's grow_workspace): the host never waits. False after
 * noting the error for what. */
bool grow_bf16(cublasHandle_t h, size_t n, cudaStream_t st, const char *what) {
  bf16_scratch &s = t_bf16;
  if (s.handle != h) s.release();
  if (n <= s.n) return true;
  /* A capture would keep the old buffer's address for good: it fails, and
   * the step runs (and grows the buffer) as usual. */
  if (pt_cuda_capture_refuse("the bf16 copies of a GEMM's inputs had to grow")) return false;
  n = (n + 65535) / 65536 * 65536; /* 128 KiB steps: a few growths, not one per shape */
  if (s.p && s.async) {
    if (cudaFreeAsync(s.p, st) != cudaSuccess) {
      pt_cuda_note_cuda_(cudaGetLastError(), what);
      return false;
    }
  } else if (s.p) {
    const pt_status w = pt_cuda_wait_stream("waiting to grow the bf16 copies of a GEMM's inputs");
    if (w != PT_OK) {
      pt_cuda_note_status(w, pt_error_message());
      return false;
    }
    (void)cudaFree(s.p);
  }
  s.p = nullptr;
  s.n = 0;
  pt_cuda_memory_moved(); /* graphs captured with the old buffer are stale */
  s.async = cudaMallocAsync((void **)&s.p, n * sizeof(__nv_bfloat16), st) == cudaSuccess;
  if (!s.async) {
    (void)cudaGetLastError();
    s.p = nullptr;
    const cudaError_t e = cudaMalloc((void **)&s.p, n * sizeof(__nv_bfloat16));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      s.p = nullptr;
      pt_cuda_note_cuda_(e, what);
      return false;
    }
  }
  s.handle = h;
  int dev = -1;
  (void)cudaGetDevice(&dev);
  s.device = dev;
  s.n = n;
  return true;
}

/* Round to nearest, ties to even, as the tensor cores' conversions do. */
__global__ void to_bf16_kernel(size_t n, const float *__restrict__ src, __nv_bfloat16 *__restrict__ dst) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

/* The elements a column-major rows x cols matrix with leading dimension ld
 * spans, from its first to its last. */
size_t span(int rows, int cols, int ld) { return (size_t)ld * (size_t)(cols - 1) + (size_t)rows; }

} // namespace

cublasStatus_t pt_cuda_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                            float *C, int ldc) {
  if (pt_cuda_precision() != PT_PRECISION_BF16 || m <= 0 || n <= 0 || k <= 0)
    return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  /* cuBLAS's fp32-input compute types (CUBLAS_COMPUTE_32F_FAST_16BF) only
   * allow bf16: on an H100 it ran TF32 kernels instead. Inputs given as
   * bf16 leave no choice. A (op N: m x k; op T: k x m) and B (op N: k x n;
   * op T: n x k), each as stored, with its leading dimension. */
  const size_t na = ta == CUBLAS_OP_N ? span(m, k, lda) : span(k, m, lda);
  const size_t nb = tb == CUBLAS_OP_N ? span(k, n, ldb) : span(n, k, ldb);
  const size_t nb_at = (na + 127) / 128 * 128; /* B's copy 256-byte aligned, as cuBLAS prefers */
  const cudaStream_t st = pt_cuda::stream();
  static const char what[] = "bf16 GEMM: the bf16 copies of its inputs";
  if (!grow_bf16(h, nb_at + nb, st, what)) return CUBLAS_STATUS_ALLOC_FAILED;
  __nv_bfloat16 *a16 = t_bf16.p, *b16 = t_bf16.p + nb_at;
  to_bf16_kernel<<<pt_cuda::grid_for(na), pt_cuda::kThreads, 0, st>>>(na, A, a16);
  to_bf16_kernel<<<pt_cuda::grid_for(nb), pt_cuda::kThreads, 0, st>>>(nb, B, b16);
  PT_CUDA_CHECK_LAUNCH(what);
  /* CUBLAS_GEMM_DEFAULT: cuBLAS's heuristics, which depend only on the
   * shape and the GPU, so a run repeats bit for bit like cublasSgemm's. */
  return cublasGemmEx(h, ta, tb, m, n, k, alpha, a16, CUDA_R_16BF, lda, b16, CUDA_R_16BF, ldb, beta, C, CUDA_R_32F,
                      ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

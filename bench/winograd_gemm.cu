/* How fast could a Winograd convolution of ptrain's own be, built like
 * cuDNN's nonfused one (transform, batched GEMM, transform back)? This
 * times the part that dominates, the batched SGEMMs, for cifar-convnet's
 * 3x3 layers at batch 64, and a device-to-device copy for the
 * transforms' memory traffic, so that the bound can be set beside the
 * per-layer times of `ptrain train --profile` (docs/gpu-measurements.md).
 * Also fc1's three GEMMs, the step's largest matrix product.
 *
 * Beside them, cuDNN's own nonfused Winograd per direction on the same
 * layers (what ptrain runs today), so the two can be compared directly.
 *
 * Not part of the build (it is a measurement, not a product): on a CUDA
 * host,
 *   nvcc -O2 -o winograd_gemm bench/winograd_gemm.cu -lcublas -lcudnn && ./winograd_gemm
 * FP32 in CUBLAS_DEFAULT_MATH (no TF32), as ptrain's FP32 runs. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)
#define CB(x)                                                              \
  do {                                                                     \
    cublasStatus_t s_ = (x);                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                     \
      fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static const int kReps = 20;

/* Milliseconds of one strided-batched C (m, n) = A (m, k) B (k, n) in
 * column-major terms, the median-free mean of kReps after a warm-up. */
static float time_gemm(cublasHandle_t h, int m, int n, int k, int batch, cublasOperation_t ta, cublasOperation_t tb,
                       float *a, float *b, float *c) {
  const float one = 1.0f, zero = 0.0f;
  const int lda = ta == CUBLAS_OP_N ? m : k, ldb = tb == CUBLAS_OP_N ? k : n;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int r = 0; r < 3; r++)
    CB(cublasSgemmStridedBatched(h, ta, tb, m, n, k, &one, a, lda, (long long)m * k, b, ldb, (long long)k * n,
                                 &zero, c, m, (long long)m * n, batch));
  CK(cudaEventRecord(e0));
  for (int r = 0; r < kReps; r++)
    CB(cublasSgemmStridedBatched(h, ta, tb, m, n, k, &one, a, lda, (long long)m * k, b, ldb, (long long)k * n,
                                 &zero, c, m, (long long)m * n, batch));
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms / kReps;
}

#define CD(x)                                                                               \
  do {                                                                                      \
    cudnnStatus_t s_ = (x);                                                                 \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudnnGetErrorString(s_)); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

struct timer {
  cudaEvent_t e0, e1;
  timer() {
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
  }
  ~timer() {
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  void start() { CK(cudaEventRecord(e0)); }
  float stop_ms(int reps) {
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms / reps;
  }
};

/* cuDNN's WINOGRAD_NONFUSED in each direction for an (n, c, hw, hw) ->
 * (n, k, hw, hw) 3x3 pad-1 layer in FP32 FMA math: ms forward, data
 * gradient, filter gradient. x, w, y, ws: device buffers large enough. */
static void time_cudnn(cudnnHandle_t h, int n, int c, int k, int hw, float *x, float *w, float *y, void *ws,
                       size_t ws_cap, float out[3]) {
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CD(cudnnCreateTensorDescriptor(&xd));
  CD(cudnnCreateTensorDescriptor(&yd));
  CD(cudnnCreateFilterDescriptor(&wd));
  CD(cudnnCreateConvolutionDescriptor(&cd));
  CD(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, hw, hw));
  CD(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, hw, hw));
  CD(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, 3, 3));
  CD(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CD(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
  const float one = 1.0f, zero = 0.0f;
  size_t b0 = 0, b1 = 0, b2 = 0;
  CD(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, &b0));
  CD(cudnnGetConvolutionBackwardDataWorkspaceSize(h, wd, yd, cd, xd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
                                                  &b1));
  CD(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, xd, yd, cd, wd,
                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, &b2));
  if (b0 > ws_cap || b1 > ws_cap || b2 > ws_cap) {
    fprintf(stderr, "workspace over %zu bytes\n", ws_cap);
    exit(1);
  }
  timer t;
  for (int dir = 0; dir < 3; dir++) {
    for (int r = -3; r < kReps; r++) {
      if (r == 0) t.start();
      if (dir == 0)
        CD(cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, ws, b0,
                                   &zero, yd, y));
      else if (dir == 1)
        CD(cudnnConvolutionBackwardData(h, &one, wd, w, yd, y, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
                                        ws, b1, &zero, xd, x));
      else
        CD(cudnnConvolutionBackwardFilter(h, &one, xd, x, yd, y, cd,
                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, ws, b2, &one, wd, w));
    }
    out[dir] = t.stop_ms(kReps);
  }
  printf("         workspace MiB: forward %.0f, data %.0f, filter %.0f\n", b0 / 1048576.0, b1 / 1048576.0,
         b2 / 1048576.0);
  cudnnDestroyConvolutionDescriptor(cd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyTensorDescriptor(xd);
}

int main(void) {
  cublasHandle_t h;
  CB(cublasCreate(&h));
  CB(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("# %s, cuBLAS batched SGEMM (FP32, no TF32), %d reps each\n", prop.name, kReps);

  /* Large enough for the largest operand set below (fc1: 134M weights). */
  const size_t cap = (size_t)160 << 20; /* floats */
  float *a, *b, *c;
  CK(cudaMalloc(&a, cap * sizeof(float)));
  CK(cudaMalloc(&b, cap * sizeof(float)));
  CK(cudaMalloc(&c, cap * sizeof(float)));
  /* Bytes of 0x3c: every float 0.0115, not zero, which some GPUs
   * multiply at less power and so at higher clocks. */
  CK(cudaMemset(a, 0x3c, cap * sizeof(float)));
  CK(cudaMemset(b, 0x3c, cap * sizeof(float)));
  CK(cudaMemset(c, 0x3c, cap * sizeof(float)));

  /* Device-to-device copy: read + write bandwidth, the transforms' pace. */
  {
    const size_t bytes = (size_t)512 << 20;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpy(c, a, bytes, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0));
    for (int r = 0; r < kReps; r++) CK(cudaMemcpy(c, a, bytes, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("copy 512 MiB: %.3f ms, %.0f GB/s read+write\n", ms / kReps, 2.0 * bytes / (ms / kReps * 1e-3) / 1e9);
  }

  /* Batch 64; tiles P per direction: F(4x4,3x3) has 36 products of
   * 6x6 tiles, one tile per 4x4 of output; F(2x2,3x3) 16 of 4x4 tiles. */
  struct layer {
    const char *name;
    int c, k, hw;
  } layers[] = {{"conv2", 48, 96, 32}, {"conv3", 96, 192, 16}, {"conv4", 192, 256, 16},
                {"conv5", 256, 512, 16}, {"conv6", 512, 1024, 16}};
  const int n = 64;
  printf("%-6s %-9s %9s %9s %9s %9s   %s\n", "layer", "tile", "fwd ms", "data ms", "filter ms", "sum ms",
         "TFLOP/s of the GEMMs (fwd)");
  cudnnHandle_t dnn;
  CD(cudnnCreate(&dnn));
  for (const layer &l : layers) {
    float cu[3];
    time_cudnn(dnn, n, l.c, l.k, l.hw, a, b, c, c + ((size_t)32 << 20), (cap - ((size_t)32 << 20)) * sizeof(float),
               cu);
    printf("%-6s %-9s %9.3f %9.3f %9.3f %9.3f   (cuDNN's whole convolution)\n", l.name, "cudnn", cu[0], cu[1], cu[2],
           cu[0] + cu[1] + cu[2]);
    for (int m = 4; m >= 2; m -= 2) {
      const int alpha = m + 2, batch = alpha * alpha;
      const int p = n * (l.hw / m) * (l.hw / m);
      /* forward: M (k, p) = U (k, c) V (c, p); column-major C (p, k) =
       * V^T-as-stored ... shapes only matter for the timing. */
      const float fwd = time_gemm(h, p, l.k, l.c, batch, CUBLAS_OP_N, CUBLAS_OP_N, a, b, c);
      const float data = time_gemm(h, p, l.c, l.k, batch, CUBLAS_OP_N, CUBLAS_OP_T, a, b, c);
      const float filt = time_gemm(h, l.c, l.k, p, batch, CUBLAS_OP_T, CUBLAS_OP_N, a, b, c);
      const double flop = 2.0 * batch * p * (double)l.k * l.c;
      printf("%-6s F(%dx%d) %9.3f %9.3f %9.3f %9.3f   %.1f %.1f %.1f\n", l.name, m, m, fwd, data, filt,
             fwd + data + filt, flop / (fwd * 1e-3) / 1e12, flop / (data * 1e-3) / 1e12,
             flop / (filt * 1e-3) / 1e12);
    }
  }

  /* fc1: 65536 -> 2048 at batch 64, as ptrain's linear asks it
   * (row-major y (n, out) = x (n, in) w^T). */
  {
    const int in = 65536, out = 2048;
    const double flop = 2.0 * n * (double)in * out;
    const float fwd = time_gemm(h, out, n, in, 1, CUBLAS_OP_T, CUBLAS_OP_N, a, b, c);
    const float dx = time_gemm(h, in, n, out, 1, CUBLAS_OP_N, CUBLAS_OP_N, a, b, c);
    const float dw = time_gemm(h, in, out, n, 1, CUBLAS_OP_N, CUBLAS_OP_T, a, b, c);
    printf("fc1    forward %.3f ms (%.1f TFLOP/s), data gradient %.3f (%.1f), weight gradient %.3f (%.1f)\n", fwd,
           flop / (fwd * 1e-3) / 1e12, dx, flop / (dx * 1e-3) / 1e12, dw, flop / (dw * 1e-3) / 1e12);
  }
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(c));
  CB(cublasDestroy(h));
  CD(cudnnDestroy(dnn));
  return 0;
}

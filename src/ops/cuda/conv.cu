/* conv2d on the GPU, with the semantics of src/ops/cpu/conv.c: NCHW fp32,
 * cross-correlation, optional bias and fused ReLU; backward accumulates dw
 * and db and overwrites dx.
 *
 * Two implementations, chosen by the environment variable PT_CUDA_CONV:
 *   cudnn  cuDNN's convolutions, deterministic algorithms only;
 *   gemm   im2col + cuBLAS SGEMM with this file's own kernels;
 *   unset  cuDNN where the build has it and the thread has a handle,
 *          except for 5x5 kernels, which the gemm path ran faster
 *          (gemm_by_default).
 * The variable lets a benchmark compare them (docs/gpu.md). A
 * geometry for which cuDNN offers no deterministic fp32 algorithm runs on
 * the gemm path, whatever the variable says.
 *
 * gemm path. The batch goes in chunks of up to chunk_of(g) samples, unrolled
 * side by side into col (c*kh*kw, cn*oh*ow) of the caller's workspace, so
 * one wide GEMM per chunk covers all its samples (a per-sample GEMM of a
 * small layer is mostly edges). Forward writes (oc, cn*oh*ow) into the
 * workspace, and an epilogue moves it to NCHW with the bias and the ReLU.
 * Backward gathers the chunk's dy into that same (oc, cn*oh*ow) layout, masked
 * by y > 0 under a fused ReLU; dw += dy col^T with beta = 1; dcol = w^T dy
 * overwrites col; col2im is a gather, each input pixel summing its own
 * contributions, so no atomics are needed. db is one block per channel
 * with a fixed reduction tree. Every sum runs in an order fixed by the
 * shapes, so results repeat bit for bit on a given GPU.
 *
 * cuBLAS is column-major; a row-major (r, c) matrix with leading dimension
 * ld is the column-major (c, r) matrix with the same ld, so each row-major
 * product C = A B is asked as C^T = B^T A^T, the operands swapped. The
 * thread's handle is in CUBLAS_DEFAULT_MATH (context.cu), and the cuDNN
 * descriptors ask for CUDNN_FMA_MATH (under --precision tf32,
 * pt_cuda_set_precision, cuBLAS takes TF32 and each cuDNN direction the
 * default or tensor-op math its algorithm asks for): no TF32 by default, so
 * results match the CPU to fp32 rounding rather than TF32's 1e-3.
 *
 * Under --precision bf16 every convolution takes the gemm path, whose
 * GEMMs multiply in bf16 and sum in fp32 (gemm.h). cuDNN computes in bf16
 * only on bf16 tensors, and ptrain's activations and weights are fp32: a
 * cuDNN bf16 convolution would need conversion kernels around every call.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "cuda/cublas.h"
#include <cuda_runtime.h>
#ifdef PT_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "ops/cuda/check.h"
#include "ops/cuda/context.h"
#include "ops/cuda/device_buffer.cuh"
#include "ops/cuda/gemm.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/ops.h"
#include "util/notice.h"

namespace {

const int kThreads = 256;

unsigned blocks_for(size_t total) {
  size_t b = (total + kThreads - 1) / kThreads;
  return (unsigned)(b < ((size_t)1 << 20) ? b : ((size_t)1 << 20));
}

#define GRID_STRIDE(i, total) \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (total); i += (size_t)gridDim.x * blockDim.x)

/* ---- chunking of the gemm path ---- */

/* 64 MiB of unrolled input and GEMM output per chunk: wide enough that the
 * GEMMs fill an H100 for every layer of the presets, small beside its
 * memory. At most 1024 samples, so a small layer does not claim the whole
 * budget for batches it will never see. */
const size_t kChunkBudgetFloats = (size_t)16 << 20;
const size_t kChunkMaxSamples = 1024;

struct dims {
  int ckk, ohw;   /* GEMM inner size c*kh*kw; output pixels per channel */
  size_t xs, ys;  /* floats per sample of x and y */
};

dims dims_of(const pt_conv_geom *g) {
  dims d;
  d.ckk = g->c * g->kh * g->kw;
  d.ohw = g->oh * g->ow;
  d.xs = (size_t)g->c * g->h * g->w;
  d.ys = (size_t)g->oc * d.ohw;
  return d;
}

int chunk_of(const pt_conv_geom *g) {
  const size_t per = ((size_t)g->c * g->kh * g->kw + (size_t)g->oc) * g->oh * g->ow;
  size_t c = per ? kChunkBudgetFloats / per : kChunkMaxSamples;
  if (c < 1) c = 1;
  if (c > kChunkMaxSamples) c = kChunkMaxSamples;
  return (int)c;
}

/* Workspace layout, in floats: col (ckk, chunk*ohw), rounded up to 256
 * bytes so the GEMM operand after it stays aligned, then out
 * (oc, chunk*ohw). */
size_t col_floats(const pt_conv_geom *g) {
  const size_t f = (size_t)g->c * g->kh * g->kw * g->oh * g->ow * (size_t)chunk_of(g);
  return (f + 63) & ~(size_t)63;
}

/* ---- kernels ---- */

/* col (ckk, L) for the chunk's samples x (cn, c, h, w), L = cn*ohw: row
 * r = (ci*kh + ky)*kw + kx, column i*ohw + oy*ow + ox holds
 * x[i, ci, oy*stride - pad + ky, ox*stride - pad + kx], zero outside.
 * Threads run along a row, so the writes are coalesced. */
__global__ void im2col_kernel(size_t total, int L, int ohw, int ow, int c, int h, int w, int kh, int kw,
                              int stride, int pad, const float *__restrict__ x, float *__restrict__ col) {
  GRID_STRIDE(idx, total) {
    const size_t r = idx / (size_t)L;
    const int q = (int)(idx - r * (size_t)L);
    const int i = q / ohw, p = q - i * ohw;
    const int oy = p / ow, ox = p - oy * ow;
    const int kx = (int)(r % (size_t)kw), t = (int)(r / (size_t)kw);
    const int ky = t % kh, ci = t / kh;
    const int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
    float v = 0.0f;
    if (iy >= 0 && iy < h && ix >= 0 && ix < w) v = x[((size_t)i * c + ci) * h * w + (size_t)iy * w + ix];
    col[idx] = v;
  }
}

/* dx (cn, c, h, w) of the chunk = fold of dcol (ckk, L): each pixel sums the
 * columns that read it, in (ky, kx) order, as the CPU's col2im adds them.
 * Overwrites dx. */
__global__ void col2im_kernel(size_t total, int L, int ohw, int oh, int ow, int c, int h, int w, int kh, int kw,
                              int stride, int pad, const float *__restrict__ dcol, float *__restrict__ dx) {
  const size_t hw = (size_t)h * w, xs = (size_t)c * hw;
  GRID_STRIDE(idx, total) {
    const size_t i = idx / xs;
    const size_t rem = idx - i * xs;
    const int ci = (int)(rem / hw), pix = (int)(rem - (size_t)ci * hw);
    const int iy = pix / w, ix = pix - iy * w;
    const float *base = dcol + i * (size_t)ohw;
    float acc = 0.0f;
    for (int ky = 0; ky < kh; ky++) {
      const int ty = iy + pad - ky; /* oy * stride for the output row that reads (iy) at ky */
      if (ty < 0) break;            /* ty only falls as ky grows */
      const int oy = ty / stride;
      if (oy * stride != ty || oy >= oh) continue;
      for (int kx = 0; kx < kw; kx++) {
        const int tx = ix + pad - kx;
        if (tx < 0) break;
        const int ox = tx / stride;
        if (ox * stride != tx || ox >= ow) continue;
        acc += base[((size_t)(ci * kh + ky) * kw + kx) * (size_t)L + (size_t)oy * ow + ox];
      }
    }
    dx[idx] = acc;
  }
}

/* y (cn, oc, ohw) of the chunk = out (oc, L) moved to NCHW, + bias, then the
 * fused ReLU. Without a bias 0.0f is added, as the CPU does. */
__global__ void forward_epilogue_kernel(size_t total, int L, int ohw, size_t ys, const float *__restrict__ out,
                                        const float *__restrict__ b, int relu, float *__restrict__ y) {
  GRID_STRIDE(idx, total) {
    const size_t i = idx / ys;
    const size_t rem = idx - i * ys;
    const int o = (int)(rem / (size_t)ohw), p = (int)(rem - (size_t)o * ohw);
    float v = out[(size_t)o * L + i * (size_t)ohw + p] + (b ? b[o] : 0.0f);
    if (relu) v = !(v <= 0.0f) ? v : 0.0f; /* NaN passes */
    y[idx] = v;
  }
}

/* dyt (oc, L) = the chunk's dy (cn, oc, ohw) in GEMM layout, zero where the
 * fused ReLU's output y was not positive. */
__global__ void gather_dy_kernel(size_t total, int L, int ohw, size_t ys, const float *__restrict__ y,
                                 const float *__restrict__ dy, int relu, float *__restrict__ dyt) {
  GRID_STRIDE(idx, total) {
    const size_t i = idx / ys;
    const size_t rem = idx - i * ys;
    const int o = (int)(rem / (size_t)ohw), p = (int)(rem - (size_t)o * ohw);
    dyt[(size_t)o * L + i * (size_t)ohw + p] = relu && !(y[idx] > 0.0f) ? 0.0f : dy[idx];
  }
}

/* db (oc) += sum over (n, ohw) of dy, masked under a fused ReLU: one block
 * per channel, each thread a fixed stride of the channel's elements, then a
 * tree in shared memory. The order depends on n and the shape only. */
const int kSumThreads = 256;
__global__ void bias_grad_kernel(int n, int ohw, size_t ys, const float *__restrict__ y,
                                 const float *__restrict__ dy, int relu, float *__restrict__ db) {
  __shared__ float part[kSumThreads];
  const int o = blockIdx.x;
  const size_t count = (size_t)n * ohw;
  float acc = 0.0f;
  for (size_t j = threadIdx.x; j < count; j += kSumThreads) {
    const size_t s = j / (size_t)ohw;
    const size_t at = s * ys + (size_t)o * ohw + (j - s * (size_t)ohw);
    const float v = dy[at];
    acc += relu && !(y[at] > 0.0f) ? 0.0f : v;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half >>= 1) {
    if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[o] += part[0];
}

#ifdef PT_HAVE_CUDNN
/* y (n, oc, ohw) = max(0, y + b) in place, after cuDNN's convolution. */
__global__ void bias_act_kernel(size_t total, int ohw, int oc, const float *__restrict__ b, int relu,
                                float *__restrict__ y) {
  GRID_STRIDE(idx, total) {
    const int o = (int)((idx / (size_t)ohw) % (size_t)oc);
    float v = y[idx] + (b ? b[o] : 0.0f);
    if (relu) v = !(v <= 0.0f) ? v : 0.0f; /* NaN passes */
    y[idx] = v;
  }
}

/* out (total) = dy masked by y > 0, for cuDNN, which takes the gradient
 * before the ReLU. */
__global__ void mask_dy_kernel(size_t total, const float *__restrict__ y, const float *__restrict__ dy,
                               float *__restrict__ out) {
  GRID_STRIDE(idx, total) out[idx] = y[idx] > 0.0f ? dy[idx] : 0.0f;
}
#endif

void launch_bias_grad(const pt_conv_geom *g, int n, const float *y, const float *dy, float *db, cudaStream_t st) {
  const dims d = dims_of(g);
  if (d.ohw == 0) return;
  bias_grad_kernel<<<(unsigned)g->oc, kSumThreads, 0, st>>>(n, d.ohw, d.ys, y, dy, g->relu, db);
  PT_CUDA_CHECK_LAUNCH("conv2d_backward: bias gradient");
}

/* ---- the gemm path ---- */

/* cuBLAS takes int sizes: one sample's unrolled input must fit. */
bool gemm_fits(const pt_conv_geom *g, const char *what) {
  const size_t ckk = (size_t)g->c * g->kh * g->kw, ohw = (size_t)g->oh * g->ow;
  if (ckk * ohw * (size_t)chunk_of(g) <= INT_MAX && (size_t)g->oc * ohw * (size_t)chunk_of(g) <= INT_MAX)
    return true;
  pt_cuda_note_error(what, "convolution too large for the im2col path (over 2^31 unrolled elements)");
  return false;
}

void gemm_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                  float *ws) {
  cublasHandle_t h = pt_cuda_blas_or_note("conv2d_forward");
  if (!h || !gemm_fits(g, "conv2d_forward")) return;
  cudaStream_t st = (cudaStream_t)pt_cuda_current_stream();
  const dims d = dims_of(g);
  const int chunk = chunk_of(g);
  float *col = ws;                  /* (ckk, cn*ohw) */
  float *out = ws + col_floats(g);  /* (oc, cn*ohw) */
  const float one = 1.0f, zero = 0.0f;
  for (int s0 = 0; s0 < n; s0 += chunk) {
    const int cn = n - s0 < chunk ? n - s0 : chunk;
    const int L = cn * d.ohw;
    const size_t ncol = (size_t)d.ckk * L;
    im2col_kernel<<<blocks_for(ncol), kThreads, 0, st>>>(ncol, L, d.ohw, g->ow, g->c, g->h, g->w, g->kh, g->kw,
                                                          g->stride, g->pad, x + (size_t)s0 * d.xs, col);
    PT_CUDA_CHECK_LAUNCH("conv2d_forward: im2col");
    /* out (oc, L) = w (oc, ckk) col (ckk, L); column-major: out^T (L, oc) =
     * col^T (L, ckk) w^T (ckk, oc), each the array's own memory (op N). */
    PT_CUBLAS_CHECK(pt_cuda_gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, L, g->oc, d.ckk, &one, col, L, w, d.ckk, &zero, out, L),
                    "conv2d_forward: sgemm");
    const size_t ny = (size_t)cn * d.ys;
    forward_epilogue_kernel<<<blocks_for(ny), kThreads, 0, st>>>(ny, L, d.ohw, d.ys, out, b, g->relu,
                                                                  y + (size_t)s0 * d.ys);
    PT_CUDA_CHECK_LAUNCH("conv2d_forward: bias and activation");
  }
}

/* dw += and dx = over the batch; either may be NULL (the cuDNN path hands
 * over only what it could not do). db is not done here. */
void gemm_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y, const float *dy,
                   float *dw, float *dx, float *ws) {
  if (!dw && !dx) return;
  cublasHandle_t h = pt_cuda_blas_or_note("conv2d_backward");
  if (!h || !gemm_fits(g, "conv2d_backward")) return;
  cudaStream_t st = (cudaStream_t)pt_cuda_current_stream();
  const dims d = dims_of(g);
  const int chunk = chunk_of(g);
  float *col = ws;                  /* (ckk, cn*ohw): the unrolled x, then dcol */
  float *dyt = ws + col_floats(g);  /* (oc, cn*ohw) */
  const float one = 1.0f, zero = 0.0f;
  for (int s0 = 0; s0 < n; s0 += chunk) {
    const int cn = n - s0 < chunk ? n - s0 : chunk;
    const int L = cn * d.ohw;
    const size_t ny = (size_t)cn * d.ys, ncol = (size_t)d.ckk * L;
    gather_dy_kernel<<<blocks_for(ny), kThreads, 0, st>>>(ny, L, d.ohw, d.ys, y + (size_t)s0 * d.ys,
                                                           dy + (size_t)s0 * d.ys, g->relu, dyt);
    PT_CUDA_CHECK_LAUNCH("conv2d_backward: gather dy");
    if (dw) {
      im2col_kernel<<<blocks_for(ncol), kThreads, 0, st>>>(ncol, L, d.ohw, g->ow, g->c, g->h, g->w, g->kh, g->kw,
                                                            g->stride, g->pad, x + (size_t)s0 * d.xs, col);
      PT_CUDA_CHECK_LAUNCH("conv2d_backward: im2col");
      /* dw (oc, ckk) += dyt (oc, L) col^T (L, ckk); column-major: dw^T (ckk,
       * oc) += col (ckk, L) dyt^T (L, oc). col's memory is col^T (L, ckk),
       * hence op T with ld L; dyt's is dyt^T (L, oc), op N. */
      PT_CUBLAS_CHECK(pt_cuda_gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, d.ckk, g->oc, L, &one, col, L, dyt, L, &one, dw,
                                  d.ckk),
                      "conv2d_backward: dw sgemm");
    }
    if (dx) {
      /* dcol (ckk, L) = w^T (ckk, oc) dyt (oc, L); column-major: dcol^T (L,
       * ckk) = dyt^T (L, oc) w (oc, ckk). dyt's memory is dyt^T (op N, ld
       * L); w's is w^T (ckk, oc), hence op T with ld ckk. Overwrites col,
       * which the dw GEMM before it on the stream has finished reading. */
      PT_CUBLAS_CHECK(pt_cuda_gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, L, d.ckk, g->oc, &one, dyt, L, w, d.ckk, &zero, col,
                                  L),
                      "conv2d_backward: dcol sgemm");
      const size_t nx = (size_t)cn * d.xs;
      col2im_kernel<<<blocks_for(nx), kThreads, 0, st>>>(nx, L, d.ohw, g->oh, g->ow, g->c, g->h, g->w, g->kh,
                                                          g->kw, g->stride, g->pad, col, dx + (size_t)s0 * d.xs);
      PT_CUDA_CHECK_LAUNCH("conv2d_backward: col2im");
    }
  }
}

/* ---- the choice between cuDNN and the gemm path ---- */

/* Which of the words (a NULL-terminated list) the variable holds: 0 unset
 * or empty, i + 1 for words[i], and one past the last word for anything
 * else. The enums below are laid out the same way. */
int env_choice(const char *name, const char *const *words) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  int i = 0;
  for (; words[i]; i++)
    if (!strcmp(v, words[i])) return i + 1;
  return i + 1;
}

enum conv_mode { MODE_DEFAULT, MODE_CUDNN, MODE_GEMM, MODE_BAD };

/* Read once per process: the choice must not change under a running model. */
conv_mode mode_from_env() {
  static const char *const words[] = {"cudnn", "gemm", nullptr};
  static const conv_mode mode = (conv_mode)env_choice("PT_CUDA_CONV", words);
  return mode;
}

/* Whether cuDNN may use TF32 (--precision tf32). */
bool tf32_now() { return pt_cuda_precision() == PT_PRECISION_TF32; }

/* To time the Winograd rule (wants_winograd, below) in FP32:
 * PT_CUDA_WINOGRAD=off gives cuDNN's heuristics their own first choice
 * where the rule would take Winograd's algorithms; "all" takes them for
 * every 3x3, stride-1 layer, whatever its channels; "fused" keeps the
 * rule's layers but prefers cuDNN's fused Winograd for the forward pass and
 * the data gradient (the filter gradient has no fused one), then the
 * nonfused. Under TF32 the rule never applies. Read once per process, like
 * PT_CUDA_CONV. */
enum winograd_mode { WINOGRAD_RULE, WINOGRAD_OFF, WINOGRAD_ALL, WINOGRAD_FUSED, WINOGRAD_BAD };

winograd_mode winograd_from_env() {
  static const char *const words[] = {"off", "all", "fused", nullptr};
  static const winograd_mode mode = (winograd_mode)env_choice("PT_CUDA_WINOGRAD", words);
  return mode;
}

/* ---- which path ran ----
 *
 * Counted per thread and per direction (forward, data gradient, filter
 * gradient), so a test or a benchmark that asked for one implementation
 * can check it got it: a direction cuDNN cannot run goes to the gemm path
 * silently otherwise, for good in the case of a cuDNN status error. why
 * keeps the reason of the latest fallback. */
thread_local pt_cuda_conv_paths t_paths;

void note_gemm(const pt_conv_geom *g, int n, const char *direction, const char *reason) {
  t_paths.gemm++;
  snprintf(t_paths.why, sizeof t_paths.why, "%s of conv %dx%dx%d -> %d, kernel %dx%d, stride %d, pad %d, n %d: %s",
           direction, g->c, g->h, g->w, g->oc, g->kh, g->kw, g->stride, g->pad, n, reason);
}

/* Two kinds of layer take the gemm path unless PT_CUDA_CONV says
 * otherwise. Fixed rules, like wants_winograd below, so a run's
 * algorithms and bits do not change.
 *  - 5x5 kernels. Timed on an H200 (cuDNN 9.14, FP32 FMA math, one epoch
 *    each): tutorial-cnn, whose two convolutions are 5x5, trained at 165k
 *    images/s on the gemm path against 108k on cuDNN's heuristic choices
 *    (conv2.0's backward 0.22 against 0.64 ms a step); mnist-cnn's 3x3
 *    layers were the other way round (113k on cuDNN, 81k on gemm).
 *  - 3x3 kernels on 1 to 3 channels in, a grey or RGB image's first
 *    layer. On an H100 (FP32, 200 profiled steps of cifar-convnet, batch
 *    64, the cuDNN of PyTorch 2.11's wheels) its conv1, 3 -> 48 channels on
 *    32x32, took 0.35 ms a step on the gemm path against 0.72 on cuDNN's
 *    choice, where conv2 (48 channels in) took 1.46 against 1.01. mnist-cnn's
 *    conv1, 1 -> 32 on 28x28 (300 profiled steps, batch 64, no data
 *    gradient), took 0.17 ms on the gemm path against 0.25 on cuDNN, where
 *    its conv2 (32 channels in) took 0.52 against 0.45. */
bool gemm_by_default(const pt_conv_geom *g) {
  return (g->kh == 5 && g->kw == 5) || (g->kh == 3 && g->kw == 3 && g->c <= 3);
}

/* The cuDNN handle to use, or NULL for the gemm path. A misspelt or
 * unsatisfiable PT_CUDA_CONV is reported (at the next sync) rather than
 * quietly measuring something else. */
void *cudnn_choice(const pt_conv_geom *g, const char *what, char *why, size_t why_size) {
  const conv_mode mode = mode_from_env();
  if (mode == MODE_BAD) pt_cuda_note_error(what, "PT_CUDA_CONV must be \"cudnn\" or \"gemm\"");
  if (winograd_from_env() == WINOGRAD_BAD)
    pt_cuda_note_error(what, "PT_CUDA_WINOGRAD must be unset, \"off\", \"all\" or \"fused\"");
  if (mode == MODE_GEMM) {
    snprintf(why, why_size, "PT_CUDA_CONV=gemm");
    return nullptr;
  }
  if (pt_cuda_precision() == PT_PRECISION_BF16) {
    if (mode == MODE_CUDNN)
      pt_cuda_note_error(what, "PT_CUDA_CONV=cudnn with --precision bf16: bf16 convolutions run on the gemm path "
                               "(cuDNN takes bf16 only as bf16 tensors); unset PT_CUDA_CONV or set it to gemm");
    snprintf(why, why_size, "--precision bf16 runs convolutions on the gemm path");
    return nullptr;
  }
  if (mode == MODE_DEFAULT && gemm_by_default(g)) {
    snprintf(why, why_size, "%s run faster on the gemm path (PT_CUDA_CONV=cudnn overrides)",
             g->kh == 5 ? "5x5 kernels" : "3x3 kernels on 1 to 3 channels in");
    return nullptr;
  }
#ifdef PT_HAVE_CUDNN
  void *h = pt_cuda_cudnn();
  if (!h && mode == MODE_CUDNN) pt_cuda_note_error(what, "PT_CUDA_CONV=cudnn, but this thread has no cuDNN handle");
  snprintf(why, why_size, "this thread has no cuDNN handle");
  return h;
#else
  if (mode == MODE_CUDNN) pt_cuda_note_error(what, "PT_CUDA_CONV=cudnn, but this build has no cuDNN");
  snprintf(why, why_size, "this build has no cuDNN");
  return nullptr;
#endif
}

#ifdef PT_HAVE_CUDNN
/* ---- the cuDNN path ----
 *
 * Descriptors and algorithm choices are cached per thread (each thread has
 * its own handle and stream) and per geometry and batch size, since cuDNN's
 * tensor descriptors include n. Algorithms come from cuDNN's heuristics
 * (cudnnGet*_v7), not from timing them (cudnnFind*): a timed choice could
 * differ from run to run and with it the result's rounding. Of the
 * heuristics' list, fastest first, the first entry that is deterministic, in
 * plain FMA math and within kAlgoWorkspaceLimit is taken, except that wide
 * 3x3 layers take Winograd where it is usable (wants_winograd); none means
 * the gemm path for that direction. The workspace is one buffer per thread,
 * grown in stream order when a new geometry needs more; once every
 * geometry has run, no call allocates.
 *
 * A plan is needed per convolution and batch size, and a run meets four
 * batch sizes (the training batch, the epoch's short last one, and the
 * same two for evaluation): cifar-convnet's six convolutions need 24. The
 * cache holds several times the largest preset's need, so a run's working
 * set always fits and nothing is evicted once warmed up; past that (a
 * user's spec with many convolutions), the least recently used plan goes,
 * and the eviction only costs a heuristics query. */

const int kPlans = 96;
/* Winograd's workspace for cifar-convnet's conv6 (512 to 1024 channels,
 * 16x16, batch 64) is over 256 MiB; at 1 GiB it fits, while evaluation's
 * batches of 1000 still go to the algorithms that need less. */
const size_t kAlgoWorkspaceLimit = (size_t)1 << 30;

struct conv_plan {
  bool used;
  int key[10]; /* c, h, w, oc, kh, kw, stride, pad, n, precision */
  unsigned long long stamp;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  bool fwd_ok, data_ok, filter_ok;
  /* Why a direction is off after failing to run (SUCCESS: the heuristics
   * offered nothing that qualifies). */
  cudnnStatus_t fwd_err, data_err, filter_err;
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t data;
  cudnnConvolutionBwdFilterAlgo_t filter;
  size_t fwd_ws, data_ws, filter_ws; /* bytes */
  cudnnMathType_t fwd_math, data_math, filter_math; /* set on cd before each direction runs, under TF32 */
};

void destroy_plan(conv_plan *p) {
  if (p->cd) (void)cudnnDestroyConvolutionDescriptor(p->cd);
  if (p->wd) (void)cudnnDestroyFilterDescriptor(p->wd);
  if (p->yd) (void)cudnnDestroyTensorDescriptor(p->yd);
  if (p->xd) (void)cudnnDestroyTensorDescriptor(p->xd);
  memset(p, 0, sizeof *p);
}

struct conv_cache {
  cudnnHandle_t handle = nullptr;
  int device = -1;
  unsigned long long clock = 0;
  conv_plan plans[kPlans] = {};
  pt_cuda_buffer ws; /* the workspace, of device */

  /* Drops everything: on thread exit, or when the thread's handle changes
   * (a rebind, possibly to another GPU). */
  void release() {
    for (int i = 0; i < kPlans; i++)
      if (plans[i].used) destroy_plan(&plans[i]);
    ws.release();
    handle = nullptr;
    device = -1;
  }
  ~conv_cache() { release(); }
};

thread_local conv_cache t_cache;

/* Makes t_cache.ws at least bytes long (pt_cuda_buffer_grow, in MiB
 * steps); false if it cannot, and the caller falls back to the gemm path,
 * whose workspace the caller of the op already holds. */
bool grow_workspace(size_t bytes, cudaStream_t st) {
  return pt_cuda_buffer_grow(&t_cache.ws, bytes, (size_t)1 << 20, st, "the cuDNN workspace");
}

/* Winograd's nonfused algorithms for 3x3, stride-1 layers with at least
 * kWinogradChannels channels in and out. cuDNN's heuristics pick FFT or
 * implicit GEMM there, which timed on an H100 (cuDNN 9.14, FP32 FMA math,
 * batch 64) at 2.2-4.9x Winograd's time in every direction for
 * cifar-convnet's conv3 to conv6 (conv6 forward: 1.01 ms against 4.9),
 * and for its conv2, 48 -> 96 channels, at 1.8x in the backward pass (1.02
 * ms a step against 0.57 with Winograd; an epoch at 6,563 images/s
 * against 6,988). With 3 channels in (conv1), Winograd's forward was the
 * slower (0.196 ms against 0.140); mnist-cnn's conv2, 32 -> 64, was not
 * timed on it and stays on the heuristics. A fixed
 * rule, not a timed choice (cudnnFind), so the same run picks the same
 * algorithms and gives the same bits every time. FP32 only: under TF32 the
 * heuristics rank tensor-core algorithms first, and those beat Winograd's
 * in every direction of conv3 to conv6 (H100, cuDNN 9.14: an epoch at
 * 9,040 images/s against 7,563 with the rule; conv6 forward 0.59 ms
 * against 1.09). */
const int kWinogradChannels = 48;

bool wants_winograd(const pt_conv_geom *g, bool tf32, winograd_mode mode) {
  if (tf32 || mode == WINOGRAD_OFF || g->kh != 3 || g->kw != 3 || g->stride != 1) return false;
  return mode == WINOGRAD_ALL || (g->c >= kWinogradChannels && g->oc >= kWinogradChannels);
}

/* The algorithms a direction prefers before the heuristics' ranking, in
 * order (-1: none): Winograd's nonfused one on the rule's layers, or under
 * PT_CUDA_WINOGRAD=fused the fused one first and the nonfused after it
 * (fused_algo -1 where the direction has no fused one). */
void winograd_prefer(bool winograd, bool fused, int fused_algo, int nonfused_algo, int prefer[2]) {
  const bool take_fused = winograd && fused && fused_algo >= 0;
  prefer[0] = !winograd ? -1 : take_fused ? fused_algo : nonfused_algo;
  prefer[1] = take_fused ? nonfused_algo : -1;
}

/* The math a heuristics entry runs in. In FP32 the descriptor stays in
 * FMA math, and an entry that asks for tensor-op math would not run under
 * it. Under TF32 an entry runs in the math it asks for, as PyTorch sets it
 * from the entry it picks: default math (TF32 allowed) or tensor-op math;
 * never CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, which may round to FP16.
 * (Taking tensor-op entries under TF32 is built, not yet run on a GPU;
 * before, TF32 ran only what default-math entries offered.) */
bool math_ok(cudnnMathType_t m, bool tf32) {
  return m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH || (tf32 && m == CUDNN_TENSOR_OP_MATH);
}
cudnnMathType_t run_math(cudnnMathType_t m, bool tf32) {
  return !tf32 ? CUDNN_FMA_MATH : m == CUDNN_TENSOR_OP_MATH ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
}

/* The workspace an entry needs depends on the math it runs in, so under
 * TF32 the descriptor takes that math before asking. */
template <typename Perf, typename WsFn>
bool usable(const Perf &p, WsFn ws_of, size_t *ws, bool tf32, cudnnConvolutionDescriptor_t cd) {
  if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) return false;
  if (!math_ok(p.mathType, tf32)) return false;
  if (tf32 && cudnnSetConvolutionMathType(cd, run_math(p.mathType, tf32)) != CUDNN_STATUS_SUCCESS) return false;
  return ws_of(p.algo, ws) == CUDNN_STATUS_SUCCESS && *ws <= kAlgoWorkspaceLimit;
}

/* prefer: algorithms to take, the first usable one, before the heuristics'
 * ranking; -1 ends the list. */
template <typename Perf, typename Algo, typename WsFn>
bool pick_algo(const Perf *perf, int count, WsFn ws_of, const int prefer[2], bool tf32,
               cudnnConvolutionDescriptor_t cd, Algo *algo, size_t *ws, cudnnMathType_t *math) {
  for (int pass = 0; pass < 3; pass++) {
    if (pass < 2 && prefer[pass] < 0) continue;
    for (int i = 0; i < count; i++) {
      const Perf &p = perf[i];
      size_t bytes = 0;
      if (pass < 2 && (int)p.algo != prefer[pass]) continue;
      if (!usable(p, ws_of, &bytes, tf32, cd)) continue;
      *algo = p.algo;
      *ws = bytes;
      *math = run_math(p.mathType, tf32);
      return true;
    }
  }
  return false;
}

/* PT_CUDA_CONV_LOG=1 prints each plan's algorithms on stderr as it is
 * built, with every entry the heuristics offered and what usable() looks
 * at first (status, determinism, math; the workspace limit is not shown):
 * a profile says how long a layer took, this says what ran. Read once per
 * process. */
bool conv_log() {
  static const bool on = [] {
    const char *v = getenv("PT_CUDA_CONV_LOG");
    return v && *v && strcmp(v, "0") != 0;
  }();
  return on;
}

const char *algo_name(const char *const *names, int count, int algo) {
  return algo >= 0 && algo < count ? names[algo] : "?";
}

template <typename Perf>
void log_direction(const char *direction, const char *const *names, int nnames, const Perf *perf, int count,
                   bool ok, int algo, size_t ws) {
  char line[2048];
  size_t len = 0;
  auto add = [&](const char *fmt, auto... args) {
    if (len < sizeof line) len += (size_t)snprintf(line + len, sizeof line - len, fmt, args...);
  };
  if (ok) add("  %s: %s, %zu KiB of workspace; offered:", direction, algo_name(names, nnames, algo), ws >> 10);
  else add("  %s: gemm path (no entry usable); offered:", direction);
  for (int i = 0; i < count; i++) {
    const Perf &e = perf[i];
    const char *math = e.mathType == CUDNN_FMA_MATH       ? "fma"
                       : e.mathType == CUDNN_DEFAULT_MATH ? "default math"
                       : e.mathType == CUDNN_TENSOR_OP_MATH ? "tensor-op math"
                                                            : "conversion math";
    add(" %s (%s%s, %s)", algo_name(names, nnames, (int)e.algo),
        e.status == CUDNN_STATUS_SUCCESS ? "ok" : cudnnGetErrorString(e.status),
        e.determinism == CUDNN_DETERMINISTIC ? "" : ", not deterministic", math);
    if (i + 1 < count) add(",");
  }
  fprintf(stderr, "%s\n", line);
}

const char *const kFwdNames[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
                                 "winograd", "winograd_nonfused"};
const char *const kDataNames[] = {"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"};
const char *const kFilterNames[] = {"algo_0", "algo_1", "fft", "algo_3", "winograd", "winograd_nonfused", "fft_tiling"};
static_assert(sizeof kFwdNames / sizeof *kFwdNames == CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "cuDNN's forward algorithms");
static_assert(sizeof kDataNames / sizeof *kDataNames == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, "data algorithms");
static_assert(sizeof kFilterNames / sizeof *kFilterNames == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
              "filter algorithms");

/* Under TF32, the direction's math onto the descriptor the three share. */
cudnnStatus_t apply_math(const conv_plan *p, cudnnMathType_t m) {
  return p->key[9] ? cudnnSetConvolutionMathType(p->cd, m) : CUDNN_STATUS_SUCCESS;
}

/* Fills p for (g, n): descriptors, then an algorithm per direction. A
 * geometry cuDNN cannot describe gets a plan with no direction usable. */
void build_plan(cudnnHandle_t h, const pt_conv_geom *g, int n, conv_plan *p) {
  const int oc = g->oc, oh = g->oh, ow = g->ow;
  if (cudnnCreateTensorDescriptor(&p->xd) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateTensorDescriptor(&p->yd) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateFilterDescriptor(&p->wd) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateConvolutionDescriptor(&p->cd) != CUDNN_STATUS_SUCCESS)
    return;
  if (cudnnSetTensor4dDescriptor(p->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, g->c, g->h, g->w) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnSetTensor4dDescriptor(p->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, oc, oh, ow) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnSetFilter4dDescriptor(p->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, oc, g->c, g->kh, g->kw) !=
          CUDNN_STATUS_SUCCESS ||
      /* cross-correlation, as PyTorch and the CPU's im2col */
      cudnnSetConvolution2dDescriptor(p->cd, g->pad, g->pad, g->stride, g->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT) != CUDNN_STATUS_SUCCESS ||
      /* FMA math keeps FP32 exact to the CPU's rounding; under TF32 the
       * default math lets cuDNN use tensor cores, as PyTorch's default. */
      cudnnSetConvolutionMathType(p->cd, tf32_now() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH) !=
          CUDNN_STATUS_SUCCESS)
    return;
  int dn = 0, dc = 0, dh = 0, dw = 0;
  if (cudnnGetConvolution2dForwardOutputDim(p->cd, p->xd, p->wd, &dn, &dc, &dh, &dw) != CUDNN_STATUS_SUCCESS ||
      dn != n || dc != oc || dh != oh || dw != ow)
    return;

  const bool tf32 = tf32_now();
  const winograd_mode wmode = winograd_from_env();
  const bool winograd = wants_winograd(g, tf32, wmode), fused = wmode == WINOGRAD_FUSED;
  int fwd_prefer[2], data_prefer[2], filter_prefer[2];
  winograd_prefer(winograd, fused, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
                  fwd_prefer);
  winograd_prefer(winograd, fused, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, data_prefer);
  winograd_prefer(winograd, fused, -1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, filter_prefer);
  int got = 0;
  cudnnConvolutionFwdAlgoPerf_t fperf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  if (cudnnGetConvolutionForwardAlgorithm_v7(h, p->xd, p->wd, p->cd, p->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                                             fperf) == CUDNN_STATUS_SUCCESS)
    p->fwd_ok = pick_algo(
        fperf, got,
        [&](cudnnConvolutionFwdAlgo_t a, size_t *b) {
          return cudnnGetConvolutionForwardWorkspaceSize(h, p->xd, p->wd, p->cd, p->yd, a, b);
        },
        fwd_prefer, tf32, p->cd, &p->fwd, &p->fwd_ws,
        &p->fwd_math);
  if (conv_log()) {
    fprintf(stderr, "conv plan: %dx%dx%d -> %d, kernel %dx%d, stride %d, pad %d, batch %d, %s\n", g->c, g->h, g->w,
            oc, g->kh, g->kw, g->stride, g->pad, n, tf32 ? "tf32" : "fp32");
    log_direction("forward", kFwdNames, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, fperf, got, p->fwd_ok, (int)p->fwd,
                  p->fwd_ws);
  }

  got = 0;
  cudnnConvolutionBwdDataAlgoPerf_t dperf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  if (cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->wd, p->yd, p->cd, p->xd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                  &got, dperf) == CUDNN_STATUS_SUCCESS)
    p->data_ok = pick_algo(
        dperf, got,
        [&](cudnnConvolutionBwdDataAlgo_t a, size_t *b) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->wd, p->yd, p->cd, p->xd, a, b);
        },
        data_prefer, tf32, p->cd, &p->data, &p->data_ws,
        &p->data_math);
  if (conv_log())
    log_direction("data gradient", kDataNames, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, dperf, got, p->data_ok,
                  (int)p->data, p->data_ws);

  got = 0;
  cudnnConvolutionBwdFilterAlgoPerf_t wperf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->xd, p->yd, p->cd, p->wd,
                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                    wperf) == CUDNN_STATUS_SUCCESS)
    p->filter_ok = pick_algo(
        wperf, got,
        [&](cudnnConvolutionBwdFilterAlgo_t a, size_t *b) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p->xd, p->yd, p->cd, p->wd, a, b);
        },
        filter_prefer, tf32, p->cd, &p->filter,
        &p->filter_ws, &p->filter_math);
  if (conv_log())
    log_direction("filter gradient", kFilterNames, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, wperf, got,
                  p->filter_ok, (int)p->filter, p->filter_ws);
}

/* The plan for (g, n) on this thread's handle, built at first use; the
 * least recently used plan makes room when all slots are taken. */
conv_plan *find_plan(cudnnHandle_t h, const pt_conv_geom *g, int n) {
  conv_cache &c = t_cache;
  const int device = pt_cuda_current_device();
  if (c.handle != h || c.device != device) {
    c.release();
    c.handle = h;
    c.device = device;
  }
  const int key[10] = {g->c, g->h, g->w, g->oc, g->kh, g->kw, g->stride, g->pad, n, (int)pt_cuda_precision()};
  conv_plan *victim = &c.plans[0];
  for (int i = 0; i < kPlans; i++) {
    conv_plan *p = &c.plans[i];
    if (p->used && !memcmp(p->key, key, sizeof key)) {
      p->stamp = ++c.clock;
      return p;
    }
    if (victim->used && (!p->used || p->stamp < victim->stamp)) victim = p;
  }
  if (victim->used) destroy_plan(victim);
  build_plan(h, g, n, victim);
  victim->used = true;
  memcpy(victim->key, key, sizeof key);
  victim->stamp = ++c.clock;
  return victim;
}

/* A status that says this algorithm cannot run here (as opposed to a
 * failure while running): the direction moves to the gemm path for good. */
bool unsupported(cudnnStatus_t s) { return s >= CUDNN_STATUS_NOT_SUPPORTED && s < CUDNN_STATUS_INTERNAL_ERROR; }

/* Said once per process: a cuDNN error that moves a direction to the gemm
 * path changes what a run measures, and the user should know which. */
std::atomic<bool> warned_fallback{false};

void disable(bool *ok, cudnnStatus_t *err, cudnnStatus_t s, const char *fn, const pt_conv_geom *g, int n) {
  /* Under a capture a status can be the capture's: the capture fails, and
   * the step run as usual decides. */
  if (pt_cuda_capturing()) {
    char why[256];
    snprintf(why, sizeof why, "%s returned %s", fn, cudnnGetErrorString(s));
    pt_cuda_capture_refuse(why);
    return;
  }
  *ok = false;
  *err = s;
  if (warned_fallback.exchange(true)) return;
  pt_notice("%s returned %s for conv %dx%dx%d -> %d (kernel %dx%d, stride %d, pad %d, batch %d); that direction "
            "of that convolution runs on the gemm path from now on",
            fn, cudnnGetErrorString(s), g->c, g->h, g->w, g->oc, g->kh, g->kw, g->stride, g->pad, n);
}

/* Why a direction of plan p is not cuDNN's, into buf. */
const char *off_why(bool ok, cudnnStatus_t err, const char *fn, char *buf, size_t size) {
  if (ok) snprintf(buf, size, "the cuDNN workspace could not be grown");
  else if (err == CUDNN_STATUS_SUCCESS)
    snprintf(buf, size, "cuDNN's heuristics offer no deterministic FMA-math algorithm within %zu MiB of workspace",
             kAlgoWorkspaceLimit >> 20);
  else snprintf(buf, size, "%s returned %s", fn, cudnnGetErrorString(err));
  return buf;
}

size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* True when done; false leaves y untouched for the gemm path, with why. */
bool cudnn_forward(cudnnHandle_t h, const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                   float *y, char *why, size_t why_size) {
  conv_plan *p = find_plan(h, g, n);
  cudaStream_t st = (cudaStream_t)pt_cuda_current_stream();
  if (!p->fwd_ok || !grow_workspace(p->fwd_ws, st)) {
    off_why(p->fwd_ok, p->fwd_err, "cudnnConvolutionForward", why, why_size);
    return false;
  }
  const float one = 1.0f, zero = 0.0f;
  cudnnStatus_t s = apply_math(p, p->fwd_math);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnConvolutionForward(h, &one, p->xd, x, p->wd, w, p->cd, p->fwd, t_cache.ws.p, p->fwd_ws, &zero, p->yd, y);
  if (unsupported(s)) {
    disable(&p->fwd_ok, &p->fwd_err, s, "cudnnConvolutionForward", g, n);
    off_why(false, s, "cudnnConvolutionForward", why, why_size);
    return false;
  }
  if (s != CUDNN_STATUS_SUCCESS) {
    pt_cuda_note_error("conv2d_forward: cudnnConvolutionForward", cudnnGetErrorString(s));
    return true;
  }
  if (b || g->relu) {
    const size_t total = (size_t)n * g->oc * g->oh * g->ow;
    bias_act_kernel<<<blocks_for(total), kThreads, 0, st>>>(total, g->oh * g->ow, g->oc, b, g->relu, y);
    PT_CUDA_CHECK_LAUNCH("conv2d_forward: bias and activation");
  }
  return true;
}

/* Does what of dw += and dx = it can, clearing *dw and *dx for each one
 * done; the gemm path does the rest, and why_w / why_x say why. */
void cudnn_backward(cudnnHandle_t h, const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                    const float *dy, float **dw, float **dx, char *why_w, char *why_x, size_t why_size) {
  conv_plan *p = find_plan(h, g, n);
  const bool do_w = *dw && p->filter_ok, do_x = *dx && p->data_ok;
  /* Reasons for whatever is left to the gemm path below, set now while
   * the plan says why; a direction done here clears its pointer. */
  off_why(p->filter_ok, p->filter_err, "cudnnConvolutionBackwardFilter", why_w, why_size);
  off_why(p->data_ok, p->data_err, "cudnnConvolutionBackwardData", why_x, why_size);
  if (!do_w && !do_x) return;
  cudaStream_t st = (cudaStream_t)pt_cuda_current_stream();
  /* ws: the algorithms' workspace (one at a time), then dy masked by the
   * ReLU (n, oc, oh, ow) */
  size_t algo = 0;
  if (do_w && p->filter_ws > algo) algo = p->filter_ws;
  if (do_x && p->data_ws > algo) algo = p->data_ws;
  const size_t ny = (size_t)n * g->oc * g->oh * g->ow;
  const size_t masked_at = align256(algo);
  if (!grow_workspace(masked_at + (g->relu ? ny * sizeof(float) : 0), st)) return;
  const float *d = dy;
  if (g->relu) {
    float *m = (float *)((char *)t_cache.ws.p + masked_at);
    mask_dy_kernel<<<blocks_for(ny), kThreads, 0, st>>>(ny, y, dy, m);
    PT_CUDA_CHECK_LAUNCH("conv2d_backward: ReLU mask");
    d = m;
  }
  const float one = 1.0f, zero = 0.0f;
  if (do_w) {
    /* beta = 1: dw accumulates */
    cudnnStatus_t s = apply_math(p, p->filter_math);
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnConvolutionBackwardFilter(h, &one, p->xd, x, p->yd, d, p->cd, p->filter, t_cache.ws.p, p->filter_ws, &one,
                                         p->wd, *dw);
    if (unsupported(s)) {
      disable(&p->filter_ok, &p->filter_err, s, "cudnnConvolutionBackwardFilter", g, n);
      off_why(false, s, "cudnnConvolutionBackwardFilter", why_w, why_size);
    } else {
      if (s != CUDNN_STATUS_SUCCESS)
        pt_cuda_note_error("conv2d_backward: cudnnConvolutionBackwardFilter", cudnnGetErrorString(s));
      *dw = nullptr;
    }
  }
  if (do_x) {
    cudnnStatus_t s = apply_math(p, p->data_math);
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnConvolutionBackwardData(h, &one, p->wd, w, p->yd, d, p->cd, p->data, t_cache.ws.p, p->data_ws, &zero,
                                       p->xd, *dx);
    if (unsupported(s)) {
      disable(&p->data_ok, &p->data_err, s, "cudnnConvolutionBackwardData", g, n);
      off_why(false, s, "cudnnConvolutionBackwardData", why_x, why_size);
    } else {
      if (s != CUDNN_STATUS_SUCCESS)
        pt_cuda_note_error("conv2d_backward: cudnnConvolutionBackwardData", cudnnGetErrorString(s));
      *dx = nullptr;
    }
  }
}
#endif /* PT_HAVE_CUDNN */

} // namespace

/* Floats of the gemm path's workspace for a chunk; the same for any batch
 * size and thread count (the GPU runs one thread's op at a time). The cuDNN
 * path keeps its own workspace, but a geometry may fall back to this one. */
extern "C" size_t pt_cuda_conv_workspace(const pt_conv_geom *g, int nthreads) {
  (void)nthreads;
  return col_floats(g) + (size_t)g->oc * g->oh * g->ow * (size_t)chunk_of(g);
}

extern "C" int pt_cuda_conv_plan_slots(void) {
#ifdef PT_HAVE_CUDNN
  return kPlans;
#else
  return 0;
#endif
}

extern "C" int pt_cuda_conv_chunk(const pt_conv_geom *g) { return chunk_of(g); }

extern "C" pt_cuda_conv_paths pt_cuda_conv_paths_get(void) { return t_paths; }

extern "C" void pt_cuda_conv_paths_reset(void) { memset(&t_paths, 0, sizeof t_paths); }

extern "C" void pt_cuda_conv2d_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                                       float *y, float *ws) {
  if (n <= 0) return;
  char why[192];
  void *h = cudnn_choice(g, "conv2d_forward", why, sizeof why);
#ifdef PT_HAVE_CUDNN
  if (h && cudnn_forward((cudnnHandle_t)h, g, n, x, w, b, y, why, sizeof why)) {
    t_paths.cudnn++;
    return;
  }
#else
  (void)h;
#endif
  note_gemm(g, n, "forward", why);
  gemm_forward(g, n, x, w, b, y, ws);
}

extern "C" void pt_cuda_conv2d_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                                        const float *dy, float *dw, float *db, float *dx, float *ws) {
  if (n <= 0) return;
  char why_w[192], why_x[192];
  void *h = cudnn_choice(g, "conv2d_backward", why_w, sizeof why_w);
  memcpy(why_x, why_w, sizeof why_x);
#ifdef PT_HAVE_CUDNN
  const bool want_w = dw, want_x = dx;
  if (h) cudnn_backward((cudnnHandle_t)h, g, n, x, w, y, dy, &dw, &dx, why_w, why_x, sizeof why_w);
  t_paths.cudnn += (unsigned long long)(want_w && !dw) + (unsigned long long)(want_x && !dx);
#else
  (void)h;
#endif
  if (dw) note_gemm(g, n, "filter gradient", why_w);
  if (dx) note_gemm(g, n, "data gradient", why_x);
  gemm_backward(g, n, x, w, y, dy, dw, dx, ws);
  if (db) launch_bias_grad(g, n, y, dy, db, (cudaStream_t)pt_cuda_current_stream());
}

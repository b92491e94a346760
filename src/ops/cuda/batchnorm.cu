/* Batch normalisation over (n, c, hw), as ops/cpu/batchnorm.c.
 *
 * Per-channel sums (in double, as the CPU) run one block per channel: each
 * thread adds its strided elements in order, then the block adds the
 * threads' sums in a fixed tree, so a result depends on the shape alone.
 * The same block then does the channel's scalar work (statistics, running
 * stats, parameter gradients) in thread 0. The element-wise parts (y, dx)
 * run over the whole tensor and use only per-channel floats they read
 * back, with the CPU's operations in its order, uncontracted.
 */
#include <math.h>
#include <stdint.h>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/ops.h"

using namespace pt_cuda;

namespace {

constexpr int kChannelThreads = 512; /* also the kernels' launch bound (registers) */

/* Walks a channel's n * hw elements with stride blockDim: element j is
 * sample j / hw, offset j % hw, at (s * C + c) * hw + i. Consecutive
 * threads read consecutive addresses within a sample. */
struct channel_walk {
  size_t s;
  int i;
  int ds, di; /* blockDim = ds * hw + di */
  int hw;
  __device__ channel_walk(int hw_) : hw(hw_) {
    s = threadIdx.x / hw_;
    i = threadIdx.x % hw_;
    ds = blockDim.x / hw_;
    di = blockDim.x % hw_;
  }
  __device__ void next() {
    s += ds;
    i += di;
    if (i >= hw) {
      i -= hw;
      s++;
    }
  }
};

/* A channel's statistics from its mean and sum of squares around it over
 * cnt values, as pt_batchnorm_normalize: save_mean, save_invstd, and the
 * running stats updated with the unbiased variance. */
__device__ void channel_stats(int c, double mean, double sq, double cnt, float eps, float momentum,
                              float *running_mean, float *running_var, float *save_mean, float *save_invstd) {
  const double var = sq / cnt;
  save_mean[c] = (float)mean;
  save_invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
  const double unbiased = cnt > 1 ? sq / (cnt - 1) : var;
  const double m = (double)momentum, keep = 1.0 - m;
  running_mean[c] = (float)dadd_rn(dmul_rn(keep, (double)running_mean[c]), dmul_rn(m, mean));
  running_var[c] = (float)dadd_rn(dmul_rn(keep, (double)running_var[c]), dmul_rn(m, unbiased));
}

/* Forward training statistics of channel blockIdx.x: mean, then the sum of
 * squares around it; updates the running stats and writes save_mean,
 * save_invstd and scratch (mean, sq) as pt_batchnorm_forward_train does. */
__global__ void __launch_bounds__(kChannelThreads) bn_stats_kernel(int n, int C, int hw, float eps, float momentum, const float *x,
                                float *running_mean, float *running_var,
                                float *save_mean, float *save_invstd,
                                double *scratch) {
  __shared__ double sh[32];
  const int c = blockIdx.x;
  const double cnt = (double)n * hw;
  double acc = 0.0;
  for (channel_walk w(hw); w.s < (size_t)n; w.next()) acc += (double)x[(w.s * C + c) * hw + w.i];
  const double mean = block_sum(acc, sh) / cnt;
  acc = 0.0;
  for (channel_walk w(hw); w.s < (size_t)n; w.next()) {
    const double d = (double)x[(w.s * C + c) * hw + w.i] - mean;
    acc = dadd_rn(acc, dmul_rn(d, d));
  }
  const double sq = block_sum(acc, sh);
  if (threadIdx.x == 0) {
    scratch[c] = mean;
    scratch[C + c] = sq;
    channel_stats(c, mean, sq, cnt, eps, momentum, running_mean, running_var, save_mean, save_invstd);
  }
}

/* Synchronised batch norm, this worker's part of channel blockIdx.x's sums
 * (pt_batchnorm_sums): sum x (center NULL) or sum (x - center[c])^2, each
 * in the order of bn_stats_kernel's. */
__global__ void __launch_bounds__(kChannelThreads) bn_sums_kernel(int n, int C, int hw, const float *x,
                                                                  const double *center, double *out) {
  __shared__ double sh[32];
  const int c = blockIdx.x;
  double acc = 0.0;
  if (!center) {
    for (channel_walk w(hw); w.s < (size_t)n; w.next()) acc += (double)x[(w.s * C + c) * hw + w.i];
  } else {
    const double mean = center[c];
    for (channel_walk w(hw); w.s < (size_t)n; w.next()) {
      const double d = (double)x[(w.s * C + c) * hw + w.i] - mean;
      acc = dadd_rn(acc, dmul_rn(d, d));
    }
  }
  const double total = block_sum(acc, sh);
  if (threadIdx.x == 0) out[c] = total;
}

/* The statistics of every channel from the global sums: one thread each. */
__global__ void bn_global_stats_kernel(int C, double cnt, float eps, float momentum, const double *mean,
                                       const double *sq, float *running_mean, float *running_var, float *save_mean,
                                       float *save_invstd) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < C) channel_stats(c, mean[c], sq[c], cnt, eps, momentum, running_mean, running_var, save_mean, save_invstd);
}

/* y = x * a + b with a = gamma * invstd, b = beta - mean * a per channel:
 * the training forward (mean, invstd = save_mean, save_invstd) and eval
 * (from the running stats) differ only in where a and b come from. */
template <bool kEval>
__global__ void bn_apply_kernel(size_t total, int C, int hw, float eps, const float *x,
                                const float *gamma, const float *beta,
                                const float *mean, const float *var_or_invstd,
                                float *y) {
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
    const int c = (int)((e / (size_t)hw) % (size_t)C);
    const float invstd = kEval ? fdiv_rn(1.0f, fsqrt_rn(fadd_rn(var_or_invstd[c], eps))) : var_or_invstd[c];
    const float a = fmul_rn(gamma[c], invstd), b = fsub_rn(beta[c], fmul_rn(mean[c], a));
    y[e] = fadd_rn(fmul_rn(x[e], a), b);
  }
}

/* Backward sums of channel blockIdx.x: sum dy and sum dy * xhat, into
 * scratch (2, C) when given, and accumulated into dbeta and dgamma. eval:
 * xhat from the running stats, as pt_batchnorm_backward_eval. */
template <bool kEval>
__global__ void __launch_bounds__(kChannelThreads) bn_bwd_sums_kernel(int n, int C, int hw, float eps, const float *x,
                                   const float *mean_in, const float *var_or_invstd,
                                   const float *dy, float *dgamma,
                                   float *dbeta, double *scratch) {
  __shared__ double sh[32];
  const int c = blockIdx.x;
  const float mean = mean_in[c];
  const float invstd = kEval ? fdiv_rn(1.0f, fsqrt_rn(fadd_rn(var_or_invstd[c], eps))) : var_or_invstd[c];
  double sdy = 0.0, sdyx = 0.0;
  for (channel_walk w(hw); w.s < (size_t)n; w.next()) {
    const size_t at = (w.s * C + c) * hw + w.i;
    const float d = dy[at];
    sdy += (double)d;
    /* The CPU's (double)dy * (x - mean) * invstd: a float difference,
     * then two double products. */
    sdyx = dadd_rn(sdyx, dmul_rn(dmul_rn((double)d, (double)fsub_rn(x[at], mean)), (double)invstd));
  }
  sdy = block_sum(sdy, sh);
  sdyx = block_sum(sdyx, sh);
  if (threadIdx.x == 0) {
    if (scratch) {
      scratch[c] = sdy;
      scratch[C + c] = sdyx;
    }
    dgamma[c] = fadd_rn(dgamma[c], (float)sdyx);
    dbeta[c] = fadd_rn(dbeta[c], (float)sdy);
  }
}

/* Training dx = gamma*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)). */
__global__ void bn_bwd_dx_kernel(size_t total, int C, int hw, double count, const float *x,
                                 const float *gamma, const float *save_mean,
                                 const float *save_invstd, const float *dy,
                                 const double *sums, float *dx) {
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
    const int c = (int)((e / (size_t)hw) % (size_t)C);
    const float mean = save_mean[c], invstd = save_invstd[c];
    const float k = fmul_rn(gamma[c], invstd), mdy = (float)(sums[c] / count), mdyx = (float)(sums[C + c] / count);
    const float xhat_term = fmul_rn(fmul_rn(fsub_rn(x[e], mean), invstd), mdyx);
    dx[e] = fmul_rn(k, fsub_rn(fsub_rn(dy[e], mdy), xhat_term));
  }
}

/* Eval dx = dy * gamma * invstd, invstd from the running variance. */
__global__ void bn_bwd_eval_dx_kernel(size_t total, int C, int hw, float eps, const float *gamma,
                                      const float *running_var, const float *dy,
                                      float *dx) {
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
    const int c = (int)((e / (size_t)hw) % (size_t)C);
    const float invstd = fdiv_rn(1.0f, fsqrt_rn(fadd_rn(running_var[c], eps)));
    dx[e] = fmul_rn(fmul_rn(dy[e], gamma[c]), invstd);
  }
}

} // namespace

extern "C" void pt_cuda_batchnorm_forward_train(const pt_bn_geom *g, int n, int hw, const float *x,
                                                const float *gamma, const float *beta, float *running_mean,
                                                float *running_var, float *save_mean, float *save_invstd, float *y,
                                                double *scratch) {
  const int C = g->c;
  if (C <= 0 || n <= 0 || hw <= 0) return;
  bn_stats_kernel<<<C, kChannelThreads, 0, stream()>>>(n, C, hw, g->eps, g->momentum, x, running_mean, running_var,
                                                       save_mean, save_invstd, scratch);
  PT_CUDA_CHECK_LAUNCH("batchnorm_forward_train: statistics");
  const size_t total = (size_t)n * C * hw;
  bn_apply_kernel<false><<<grid_for(total), kThreads, 0, stream()>>>(total, C, hw, g->eps, x, gamma, beta,
                                                                     save_mean, save_invstd, y);
  PT_CUDA_CHECK_LAUNCH("batchnorm_forward_train: normalise");
}

extern "C" void pt_cuda_batchnorm_forward_eval(const pt_bn_geom *g, int n, int hw, const float *x,
                                               const float *gamma, const float *beta, const float *running_mean,
                                               const float *running_var, float *y) {
  const int C = g->c;
  const size_t total = (size_t)n * C * hw;
  if (C <= 0 || n <= 0 || hw <= 0) return;
  bn_apply_kernel<true><<<grid_for(total), kThreads, 0, stream()>>>(total, C, hw, g->eps, x, gamma, beta,
                                                                    running_mean, running_var, y);
  PT_CUDA_CHECK_LAUNCH("batchnorm_forward_eval");
}

extern "C" void pt_cuda_batchnorm_backward_train(const pt_bn_geom *g, int n, int hw, const float *x,
                                                 const float *gamma, const float *save_mean,
                                                 const float *save_invstd, const float *dy, float *dgamma,
                                                 float *dbeta, float *dx, double *scratch) {
  const int C = g->c;
  if (C <= 0 || n <= 0 || hw <= 0) return;
  bn_bwd_sums_kernel<false><<<C, kChannelThreads, 0, stream()>>>(n, C, hw, g->eps, x, save_mean, save_invstd, dy,
                                                                 dgamma, dbeta, scratch);
  PT_CUDA_CHECK_LAUNCH("batchnorm_backward_train: sums");
  if (!dx) return;
  const size_t total = (size_t)n * C * hw;
  bn_bwd_dx_kernel<<<grid_for(total), kThreads, 0, stream()>>>(total, C, hw, (double)n * hw, x, gamma, save_mean,
                                                               save_invstd, dy, scratch, dx);
  PT_CUDA_CHECK_LAUNCH("batchnorm_backward_train: dx");
}

extern "C" void pt_cuda_batchnorm_backward_eval(const pt_bn_geom *g, int n, int hw, const float *x,
                                                const float *gamma, const float *running_mean,
                                                const float *running_var, const float *dy, float *dgamma,
                                                float *dbeta, float *dx) {
  const int C = g->c;
  if (C <= 0 || n <= 0 || hw <= 0) return;
  bn_bwd_sums_kernel<true><<<C, kChannelThreads, 0, stream()>>>(n, C, hw, g->eps, x, running_mean, running_var, dy,
                                                                dgamma, dbeta, nullptr);
  PT_CUDA_CHECK_LAUNCH("batchnorm_backward_eval: sums");
  if (!dx) return;
  const size_t total = (size_t)n * C * hw;
  bn_bwd_eval_dx_kernel<<<grid_for(total), kThreads, 0, stream()>>>(total, C, hw, g->eps, gamma, running_var, dy,
                                                                    dx);
  PT_CUDA_CHECK_LAUNCH("batchnorm_backward_eval: dx");
}

/* Synchronised batch norm: the same kernels, the sums in between coming
 * from every worker (nn/model.c adds them up). */

extern "C" void pt_cuda_batchnorm_sums(const pt_bn_geom *g, int n, int hw, const float *x, const double *center,
                                       double *out) {
  const int C = g->c;
  if (C <= 0) return;
  if (n <= 0 || hw <= 0) { /* an empty shard adds nothing, as the CPU's loops */
    PT_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double) * (size_t)C, stream()), "batchnorm_sums: empty batch");
    return;
  }
  bn_sums_kernel<<<C, kChannelThreads, 0, stream()>>>(n, C, hw, x, center, out);
  PT_CUDA_CHECK_LAUNCH(center ? "batchnorm_sums: squares" : "batchnorm_sums");
}

extern "C" void pt_cuda_batchnorm_normalize(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                            const float *beta, const double *mean, const double *sq, double count,
                                            float *running_mean, float *running_var, float *save_mean,
                                            float *save_invstd, float *y) {
  const int C = g->c;
  if (C <= 0) return;
  bn_global_stats_kernel<<<(C + kThreads - 1) / kThreads, kThreads, 0, stream()>>>(
      C, count, g->eps, g->momentum, mean, sq, running_mean, running_var, save_mean, save_invstd);
  PT_CUDA_CHECK_LAUNCH("batchnorm_normalize: statistics");
  const size_t total = (size_t)n * C * hw;
  if (!total) return;
  bn_apply_kernel<false><<<grid_for(total), kThreads, 0, stream()>>>(total, C, hw, g->eps, x, gamma, beta,
                                                                     save_mean, save_invstd, y);
  PT_CUDA_CHECK_LAUNCH("batchnorm_normalize");
}

extern "C" void pt_cuda_batchnorm_backward_sums(const pt_bn_geom *g, int n, int hw, const float *x,
                                                const float *save_mean, const float *save_invstd, const float *dy,
                                                float *dgamma, float *dbeta, double *sums) {
  const int C = g->c;
  if (C <= 0) return;
  if (n <= 0 || hw <= 0) { /* nothing to add to dgamma and dbeta */
    PT_CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(double) * 2 * (size_t)C, stream()),
                  "batchnorm_backward_sums: empty batch");
    return;
  }
  bn_bwd_sums_kernel<false><<<C, kChannelThreads, 0, stream()>>>(n, C, hw, g->eps, x, save_mean, save_invstd, dy,
                                                                 dgamma, dbeta, sums);
  PT_CUDA_CHECK_LAUNCH("batchnorm_backward_sums");
}

extern "C" void pt_cuda_batchnorm_backward_dx(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                              const float *save_mean, const float *save_invstd, const float *dy,
                                              const double *sums, double count, float *dx) {
  const int C = g->c;
  const size_t total = (size_t)n * C * hw;
  if (C <= 0 || n <= 0 || hw <= 0) return;
  bn_bwd_dx_kernel<<<grid_for(total), kThreads, 0, stream()>>>(total, C, hw, count, x, gamma, save_mean, save_invstd,
                                                               dy, sums, dx);
  PT_CUDA_CHECK_LAUNCH("batchnorm_backward_dx");
}

/* Log-softmax, the losses and the correct-count, as ops/cpu/softmax.c.
 *
 * One warp per row: a row's max and sums are warp reductions in a fixed
 * shuffle order. The losses and counts reduce over the whole batch into one
 * number; with no scratch memory in the interface, a single block of 32
 * warps does it: warp w takes rows w, w + 32, ..., adds its rows' losses in
 * row order, and the block adds the 32 warps' sums in a fixed tree. That is
 * deterministic, and a batch (n x k of a few thousand x tens) is far too
 * small for one block to be the bottleneck of a step.
 *
 * Outputs may alias inputs (log-softmax in place, a gradient written over
 * its input), as the CPU ops allow, so no pointer here is __restrict__.
 */
#include <math.h>
#include <stdint.h>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/ops.h"

using namespace pt_cuda;

namespace {

constexpr int kRowsPerBlock = kThreads / 32;
/* The one-block kernels: 32 warps. They are declared with this bound, so
 * the compiler keeps them within the 64 registers a thread may have in a
 * block of 1024 (otherwise a launch can fail for lack of registers, e.g.
 * when the PTX is compiled for a newer GPU). */
constexpr int kReduceThreads = 1024;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  return v; /* every lane */
}

__device__ __forceinline__ double warp_sum_all(double v) {
  /* xor butterfly: lane i adds lane i^o's value, and a + b == b + a, so
   * every lane ends with the same bits. */
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* y (n, k) = x - logsumexp(x) per row: exp in float, summed in double. */
__global__ void log_softmax_fwd_kernel(int n, int k, const float *x, float *y) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
  if (row >= n) return; /* whole warps leave together */
  const float *xr = x + (size_t)row * k;
  float *yr = y + (size_t)row * k;
  float mx = -INFINITY;
  for (int j = lane; j < k; j += 32) mx = xr[j] > mx ? xr[j] : mx;
  mx = warp_max(mx);
  double sum = 0.0;
  for (int j = lane; j < k; j += 32) sum += (double)expf(fsub_rn(xr[j], mx));
  sum = warp_sum_all(sum);
  const float lse = fadd_rn(mx, (float)log(sum));
  for (int j = lane; j < k; j += 32) yr[j] = fsub_rn(xr[j], lse);
}

/* dx = dy - exp(y) * sum(dy) per row. */
__global__ void log_softmax_bwd_kernel(int n, int k, const float *y, const float *dy,
                                       float *dx) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
  if (row >= n) return;
  const float *yr = y + (size_t)row * k, *dr = dy + (size_t)row * k;
  float *xr = dx + (size_t)row * k;
  double sum = 0.0;
  for (int j = lane; j < k; j += 32) sum += (double)dr[j];
  const float fs = (float)warp_sum_all(sum);
  for (int j = lane; j < k; j += 32) xr[j] = fsub_rn(dr[j], fmul_rn(expf(yr[j]), fs));
}

/* One block: *loss = -mean lp[s, y[s]]; dlp = -scale/n at the label, else 0. */
__global__ void __launch_bounds__(kReduceThreads) nll_kernel(int n, int k, const float *lp, const int32_t *y,
                           float *dlp, float g, double *loss) {
  __shared__ double sh[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double acc = 0.0; /* this warp's rows, in row order, in lane 0 */
  for (int s = warp; s < n; s += 32) {
    const int label = y[s];
    if (lane == 0) acc -= (double)lp[(size_t)s * k + label];
    __syncwarp(); /* dlp may be lp: the read above comes before any lane writes */
    if (dlp)
      for (int j = lane; j < k; j += 32) dlp[(size_t)s * k + j] = j == label ? g : 0.0f;
  }
  if (lane != 0) acc = 0.0;
  const double total = block_sum(acc, sh);
  if (threadIdx.x == 0) *loss = total / n;
}

/* One block: *loss = mean(logsumexp(z) - z[y]); dz = (softmax(z) - onehot) * scale / n. */
__global__ void __launch_bounds__(kReduceThreads) cross_entropy_kernel(int n, int k, const float *z, const int32_t *y,
                                     float *dz, float scale, double *loss) {
  __shared__ double sh[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float g = scale / (float)n;
  double acc = 0.0;
  for (int s = warp; s < n; s += 32) {
    const float *zr = z + (size_t)s * k;
    const int label = y[s];
    float mx = -INFINITY;
    for (int j = lane; j < k; j += 32) mx = zr[j] > mx ? zr[j] : mx;
    mx = warp_max(mx);
    double sum = 0.0;
    for (int j = lane; j < k; j += 32) sum += exp((double)fsub_rn(zr[j], mx));
    sum = warp_sum_all(sum);
    const double lse = (double)mx + log(sum);
    if (lane == 0) acc += lse - (double)zr[label];
    __syncwarp(); /* dz may be z: every read of the row's label entry comes first */
    if (dz) {
      float *dr = dz + (size_t)s * k;
      for (int j = lane; j < k; j += 32) {
        float v = (float)(dmul_rn(exp((double)zr[j] - lse), (double)scale) / (double)n);
        dr[j] = j == label ? fsub_rn(v, g) : v;
      }
    }
  }
  if (lane != 0) acc = 0.0;
  const double total = block_sum(acc, sh);
  if (threadIdx.x == 0) *loss = total / n;
}

/* Is (v, i) a better argmax candidate than (bv, bi)? The CPU scans left to
 * right keeping the first strict maximum, so among equal values the lower
 * index wins and NaN is never chosen (it compares false), unless it stands
 * at index 0 where the scan starts: the caller handles that. */
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  if (v != v) return false;
  if (bi < 0 || bv != bv) return true;
  return v > bv || (v == bv && i < bi);
}

/* One block: *count += rows whose argmax is the label. */
__global__ void __launch_bounds__(kReduceThreads) count_correct_kernel(int n, int k, const float *scores, const int32_t *y,
                                     long long *count) {
  __shared__ long long sh[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  long long correct = 0;
  for (int s = warp; s < n; s += 32) {
    const float *r = scores + (size_t)s * k;
    float bv = 0.0f;
    int bi = -1;
    for (int j = lane; j < k; j += 32)
      if (better(r[j], j, bv, bi)) {
        bv = r[j];
        bi = j;
      }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (oi >= 0 && better(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    const float first = r[0];
    const int best = (bi < 0 || first != first) ? 0 : bi;
    if (lane == 0) correct += best == y[s];
  }
  if (lane != 0) correct = 0;
  const long long total = block_sum(correct, sh);
  if (threadIdx.x == 0) *count += total;
}

__global__ void accumulate_loss_kernel(const double *loss, int n, double *acc) {
  acc[0] = dadd_rn(acc[0], dmul_rn(*loss, (double)n));
  acc[1] = acc[1] + (double)n;
}

} // namespace

/* p, the room the CPU keeps the softmax in, is not used here: the backward
 * kernel takes exp(y) again, as it always has. */
extern "C" void pt_cuda_log_softmax_forward(int n, int k, const float *x, float *y, float *p) {
  (void)p;
  if (n <= 0 || k <= 0) return;
  log_softmax_fwd_kernel<<<(n + kRowsPerBlock - 1) / kRowsPerBlock, kThreads, 0, stream()>>>(n, k, x, y);
  PT_CUDA_CHECK_LAUNCH("log_softmax_forward");
}

extern "C" void pt_cuda_log_softmax_backward(int n, int k, const float *y, const float *p, const float *dy,
                                             float *dx) {
  (void)p;
  if (n <= 0 || k <= 0) return;
  log_softmax_bwd_kernel<<<(n + kRowsPerBlock - 1) / kRowsPerBlock, kThreads, 0, stream()>>>(n, k, y, dy, dx);
  PT_CUDA_CHECK_LAUNCH("log_softmax_backward");
}

/* The losses always launch: with n = 0 they write the CPU's 0/0 (NaN). */
extern "C" void pt_cuda_nll_loss(int n, int k, const float *lp, const int32_t *y, float *dlp, float scale,
                                 double *loss) {
  nll_kernel<<<1, kReduceThreads, 0, stream()>>>(n, k, lp, y, dlp, -scale / (float)n, loss);
  PT_CUDA_CHECK_LAUNCH("nll_loss");
}

extern "C" void pt_cuda_cross_entropy_loss(int n, int k, const float *z, const int32_t *y, float *dz, float scale,
                                           double *loss) {
  cross_entropy_kernel<<<1, kReduceThreads, 0, stream()>>>(n, k, z, y, dz, scale, loss);
  PT_CUDA_CHECK_LAUNCH("cross_entropy_loss");
}

extern "C" void pt_cuda_count_correct(int n, int k, const float *scores, const int32_t *y, int64_t *count) {
  if (n <= 0 || k <= 0) return;
  static_assert(sizeof(long long) == sizeof(int64_t), "int64 counts");
  count_correct_kernel<<<1, kReduceThreads, 0, stream()>>>(n, k, scores, y, (long long *)count);
  PT_CUDA_CHECK_LAUNCH("count_correct");
}

extern "C" void pt_cuda_accumulate_loss(const double *loss, int n, double *acc) {
  accumulate_loss_kernel<<<1, 1, 0, stream()>>>(loss, n, acc);
  PT_CUDA_CHECK_LAUNCH("accumulate_loss");
}

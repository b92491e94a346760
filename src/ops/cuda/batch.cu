/* A batch made on the device from a dataset kept there as bytes: the
 * loader's normalisation and augmentation (data/loader.c), drawn with the
 * same functions the host tests check against the loader (draws.h).
 *
 * One block per sample: thread 0 draws the sample's crop and flip (a few
 * Philox calls, sequential like pt_rng) while the block fills its
 * normalisation table, then the block writes the sample's pixels. */
#include <stdint.h>

#include "util/draws.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/ops.h"

using namespace pt_cuda;

namespace {

constexpr int kBatchThreads = 256;

struct norm_params {
  float mean[3], std[3];
};

/* images (N, c, h, w), labels (N), index (n) -> x (n, c, h, w), y (n). */
__global__ void make_batch_kernel(const uint8_t *__restrict__ images, const uint8_t *__restrict__ labels, int c,
                                  int h, int w, const int32_t *__restrict__ index, norm_params np, int crop_pad,
                                  int hflip, uint64_t key, int epoch, const pt_cuda_step_values *dyn,
                                  float *__restrict__ x, int32_t *__restrict__ y) {
  if (dyn) epoch = dyn->epoch; /* a captured step: this replay's */
  __shared__ float lut[3][256]; /* normalised value of each byte, per channel */
  __shared__ pt_augment aug;
  const int s = blockIdx.x;
  const int32_t idx = index[s];
  for (int i = threadIdx.x; i < c * 256; i += blockDim.x)
    lut[i >> 8][i & 255] = pt_normalize_byte(i & 255, np.mean[i >> 8], np.std[i >> 8]);
  if (threadIdx.x == 0) {
    aug = pt_augment_draw(key, epoch, idx, crop_pad, hflip);
    y[s] = (int32_t)labels[idx];
  }
  __syncthreads();
  const pt_augment a = aug;
  const size_t hw = (size_t)h * w, chw = (size_t)c * hw;
  const uint8_t *img = images + (size_t)idx * chw;
  float *out = x + (size_t)s * chw;
  for (size_t e = threadIdx.x; e < chw; e += blockDim.x) {
    const long long src = pt_augment_source(h, w, a, e);
    const int ch = (int)(e / hw);
    /* Padding is byte 0 of the raw image, normalised like any other. */
    out[e] = lut[ch][src < 0 ? 0 : img[src]];
  }
}

} // namespace

extern "C" void pt_cuda_make_batch(const uint8_t *images, const uint8_t *labels, int c, int h, int w,
                                   const int32_t *index, int n, const float mean[3], const float std[3], int crop_pad,
                                   int hflip, uint64_t augment_key, int epoch, float *x, int32_t *y) {
  if (n <= 0) return;
  if (c < 1 || c > 3 || h < 1 || w < 1) {
    pt_cuda_note_error("make_batch", "sample shape out of range (1..3 channels, h, w >= 1)");
    return;
  }
  norm_params np = {{0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}};
  for (int ch = 0; ch < c; ch++) {
    np.mean[ch] = mean[ch];
    np.std[ch] = std[ch];
  }
  make_batch_kernel<<<n, kBatchThreads, 0, stream()>>>(images, labels, c, h, w, index, np, crop_pad, hflip,
                                                       augment_key, epoch, pt_cuda_capture_values(), x, y);
  PT_CUDA_CHECK_LAUNCH("make_batch");
}

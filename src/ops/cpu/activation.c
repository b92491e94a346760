/* ReLU and dropout. Dropout masks come from Philox keyed by (seed, step,
 * layer, element), so they are the same for any thread count or batch split
 * and a resumed run draws the masks an uninterrupted one would. */
#include "ops/cpu/ops.h"
#include "util/philox.h"

void pt_relu_forward(size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void pt_relu_backward(size_t n, const float *y, const float *dy, float *dx) {
  for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void pt_dropout_forward(size_t n, float p, uint64_t key, uint64_t step, uint32_t layer,
                        const float *x, float *y, float *mask) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  uint32_t r[4];
  for (size_t i = 0; i < n; i += 4) {
    pt_philox4x32(key, step, ((uint64_t)layer << 40) | (i >> 2), r);
    for (size_t j = 0; j < 4 && i + j < n; j++) {
      float m = pt_u32_to_unit(r[j]) < p ? 0.0f : scale;
      mask[i + j] = m;
      y[i + j] = x[i + j] * m;
    }
  }
}

void pt_dropout_backward(size_t n, const float *mask, const float *dy, float *dx) {
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * mask[i];
}

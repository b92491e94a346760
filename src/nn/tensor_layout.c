/* Tensors between the model's order and PyTorch's: linear weights the
 * backend keeps in panels (pt_linear_panel_index) are permuted, the rest
 * copied. */
#include <string.h>

#include "nn/model.h"
#include "ops/cpu/ops.h"

static void convert(const pt_tensor_info *t, const float *src, float *dst, int to_torch) {
  if (!t->panels) {
    memcpy(dst, src, sizeof(float) * t->numel);
    return;
  }
  const int out = (int)t->shape[0], in = (int)t->shape[1];
  for (int o = 0; o < out; o++)
    for (int k = 0; k < in; k++) {
      const size_t torch = (size_t)o * in + k, mine = pt_linear_panel_index(in, out, o, k);
      dst[to_torch ? torch : mine] = src[to_torch ? mine : torch];
    }
}

void pt_tensor_to_torch(const pt_tensor_info *t, const float *src, float *dst) { convert(t, src, dst, 1); }

void pt_tensor_from_torch(const pt_tensor_info *t, const float *src, float *dst) { convert(t, src, dst, 0); }

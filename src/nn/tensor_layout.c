/* Tensors between the model's order and PyTorch's: linear weights the
 * backend keeps in panels (pt_linear_panel_index) are permuted, the rest
 * copied. */
#include <stdlib.h>
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

/* Through PyTorch's order, the one layout both models understand: the
 * two may keep linear weights in panels differently (a GPU model and a
 * CPU one). */
static pt_status copy_tensors(const pt_tensor_info *dt, const pt_tensor_info *st, int n, float *dst,
                              const float *src) {
  for (int i = 0; i < n; i++) {
    if (dt[i].numel != st[i].numel || strcmp(dt[i].name, st[i].name))
      return pt_fail(PT_ERR_ARG, "copying weights: tensor %d is %s (%zu values) here but %s (%zu) in the source", i,
                     dt[i].name, dt[i].numel, st[i].name, st[i].numel);
    float *tmp = pt_malloc(sizeof(float) * (st[i].numel ? st[i].numel : 1));
    if (!tmp) return PT_ERR_NOMEM;
    pt_tensor_to_torch(&st[i], src + st[i].offset, tmp);
    pt_tensor_from_torch(&dt[i], tmp, dst + dt[i].offset);
    free(tmp);
  }
  return PT_OK;
}

pt_status pt_model_copy_weights(pt_model *dst, const pt_model *src) {
  if (dst->nparams != src->nparams || dst->nbuffers != src->nbuffers || dst->nlayers != src->nlayers)
    return pt_fail(PT_ERR_ARG, "copying weights: model %s has %d tensors but the source %s has %d", dst->spec.name,
                   dst->nparams + dst->nbuffers, src->spec.name, src->nparams + src->nbuffers);
  PT_TRY(copy_tensors(dst->params, src->params, dst->nparams, dst->hparam, src->hparam));
  PT_TRY(copy_tensors(dst->buffers, src->buffers, dst->nbuffers, dst->hbuffer, src->hbuffer));
  for (int i = 0; i < dst->nlayers; i++) dst->layers[i].num_batches_tracked = src->layers[i].num_batches_tracked;
  pt_model_from_host(dst);
  return PT_OK;
}

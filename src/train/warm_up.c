#include "train/warm_up.h"

#include <stdint.h>

pt_status pt_train_warm_up(pt_model *m, int n) {
  const pt_backend *be = m->be;
  if (be->kind == PT_BACKEND_CPU || n <= 0) return PT_OK;
  if (n > m->max_batch) n = m->max_batch;
  const pt_layer *first = &m->layers[0];
  const size_t in = (size_t)first->in_c * first->in_h * first->in_w;
  float *x = be->alloc(sizeof(float) * (size_t)n * in);  /* (n, in) zeros */
  int32_t *y = be->alloc(sizeof(int32_t) * (size_t)n);   /* (n) class 0 */
  float *saved = m->nbuffer_total ? be->alloc(sizeof(float) * m->nbuffer_total) : NULL;
  if (!x || !y || (m->nbuffer_total && !saved)) {
    be->free(x);
    be->free(y);
    be->free(saved);
    return pt_fail(PT_ERR_NOMEM, "warming up the GPU with a batch of %d: %s", n, pt_error_message());
  }
  if (saved) be->copy(saved, m->buffer, sizeof(float) * m->nbuffer_total);
  int64_t tracked[PT_MAX_LAYERS];
  for (int i = 0; i < m->nlayers; i++) tracked[i] = m->layers[i].num_batches_tracked;
  void (*grad_ready)(void *, int) = m->grad_ready;
  pt_status (*sum_stats)(void *, double *, const double *, size_t) = m->sum_stats;
  const int training = m->training, profile = m->profile;
  const uint64_t step = m->step;
  m->grad_ready = NULL;
  m->sum_stats = NULL;
  m->profile = 0;
  m->training = 1;
  m->step = 0;

  pt_model_start_grads(m);
  pt_model_forward(m, x, n);
  (void)pt_model_loss(m, y, n, 1.0f); /* reads the loss back: the pass has run */
  pt_model_backward(m, x, n);

  m->grad_ready = grad_ready;
  m->sum_stats = sum_stats;
  m->profile = profile;
  m->training = training;
  m->step = step;
  for (int i = 0; i < m->nlayers; i++) m->layers[i].num_batches_tracked = tracked[i];
  if (saved) be->copy(m->buffer, saved, sizeof(float) * m->nbuffer_total);
  pt_status st = be->sync();
  be->free(x);
  be->free(y);
  be->free(saved);
  return st;
}

#include "train/step.h"

#include <math.h>

#include "util/timer.h"
#include "util/trace.h"

/* loss_acc NULL: the loss is read back and returned; else it is added to
 * loss_acc where the model runs, and NAN returned. */
static double micro_step(pt_model *m, const float *x, const int32_t *y, int n, uint64_t dropout_step, int first,
                         float loss_scale, pt_phase_times *ph, double *loss_acc) {
  const double ta = ph ? pt_now() : 0.0;
  m->step = dropout_step;
  if (first) pt_model_start_grads(m);
  pt_model_forward(m, x, n);
  double loss = NAN;
  if (loss_acc) {
    pt_model_loss_queue(m, y, n, loss_scale);
    m->be->accumulate_loss(m->loss_val, n, loss_acc);
  } else {
    loss = pt_model_loss(m, y, n, loss_scale);
  }
  const double tb = ph ? pt_now() : 0.0;
  pt_model_backward(m, x, n);
  if (ph) {
    ph->forward_s += tb - ta;
    ph->backward_s += pt_now() - tb;
    ph->images += n;
  }
  return loss;
}

double pt_train_micro_step(pt_model *m, const float *x, const int32_t *y, int n, uint64_t dropout_step, int first,
                           float loss_scale, pt_phase_times *ph) {
  return micro_step(m, x, y, n, dropout_step, first, loss_scale, ph, NULL);
}

void pt_train_micro_step_queued(pt_model *m, const float *x, const int32_t *y, int n, uint64_t dropout_step,
                                int first, float loss_scale, pt_phase_times *ph, double *loss_acc) {
  micro_step(m, x, y, n, dropout_step, first, loss_scale, ph, loss_acc);
}

void pt_train_update(pt_model *m, pt_optimizer *opt, float lr, pt_phase_times *ph) {
  const double tc = ph ? pt_now() : 0.0;
  /* A pipeline stage's arrays are a slice of the whole model's, which the
   * optimizer's state covers. */
  pt_optimizer_step_range(opt, m->param - m->param_offset, m->grad - m->param_offset, lr, m->param_offset,
                          m->param_offset + m->nparam_total);
  if (ph) {
    /* On a GPU the update is only queued: without this wait its time
     * would land on the next step's first layer (Adam over cifar-convnet's
     * fc1, 1.2 ms on an H100, showed as forward time, the optimizer as
     * 0.008 ms). */
    pt_model_timing_sync(m);
    const double td = pt_now();
    pt_trace_span("optimizer", "optimizer", tc, td);
    ph->optimizer_s += td - tc;
    ph->steps++;
  }
}

double pt_train_step(pt_model *m, pt_optimizer *opt, const float *x, const int32_t *y, int n, uint64_t step,
                     float lr, pt_phase_times *ph) {
  const double loss = pt_train_micro_step(m, x, y, n, step, 1, 1.0f, ph);
  if (isfinite(loss)) pt_train_update(m, opt, lr, ph);
  return loss;
}

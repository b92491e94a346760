#include "train/step.h"

#include <math.h>

#include "util/timer.h"
#include "util/trace.h"

double pt_train_step(pt_model *m, pt_optimizer *opt, const float *x, const int32_t *y, int n, uint64_t step,
                     float lr, pt_phase_times *ph) {
  const double ta = ph ? pt_now() : 0.0;
  m->step = step;
  pt_model_zero_grad(m);
  pt_model_forward(m, x, n);
  const double loss = pt_model_loss(m, y, n, 1.0f);
  if (!isfinite(loss)) return loss;
  const double tb = ph ? pt_now() : 0.0;
  pt_model_backward(m, x, n);
  const double tc = ph ? pt_now() : 0.0;
  pt_optimizer_step(opt, m->param, m->grad, lr);
  if (ph) {
    const double td = pt_now();
    pt_trace_span("optimizer", "optimizer", tc, td);
    ph->forward_s += tb - ta;
    ph->backward_s += tc - tb;
    ph->optimizer_s += td - tc;
    ph->steps++;
    ph->images += n;
  }
  return loss;
}

#include "train/evaluate.h"

pt_status pt_evaluate(pt_model *m, pt_loader *loader, pt_eval_sums *s) {
  s->loss_sum = 0.0;
  s->correct = s->count = 0;
  int was_training = m->training;
  m->training = 0;
  pt_status st = pt_loader_start_epoch(loader, 0, 0);
  while (st == PT_OK) {
    pt_batch b;
    st = pt_loader_next(loader, &b);
    if (st != PT_OK || b.n == 0) break;
    const float *out = pt_model_forward(m, b.x, b.n);
    s->loss_sum += pt_model_loss(m, b.y, b.n, 1.0f) * b.n;
    s->correct += pt_count_correct(b.n, m->num_classes, out, b.y);
    s->count += b.n;
  }
  m->training = was_training;
  return st;
}

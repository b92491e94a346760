#include "train/evaluate.h"

#include <signal.h>
#include <stdlib.h>

#include "util/stop.h"

void pt_evaluate_test_hook(long batch) {
  const char *hook = getenv("PTRAIN_TEST_STOP_IN_EVAL");
  const long stop_after = hook ? strtol(hook, NULL, 10) : 0;
  if (stop_after > 0 && batch == stop_after) pt_train_stop_request(SIGTERM);
}

pt_status pt_evaluate_batches(pt_model *m, pt_loader *loader, pt_device_data *dd, pt_eval_sums *s,
                              int stoppable) {
  s->loss_sum = 0.0;
  s->correct = s->count = 0;
  s->cut = 0;
  int was_training = m->training;
  m->training = 0;
  double sums[2];
  int64_t correct;
  /* Sums kept by a training run stopped by an error must not leak in. */
  pt_status st = pt_device_data_take_sums(dd, sums, &correct);
  if (st == PT_OK) st = pt_loader_start_epoch(loader, 0, 0);
  for (long batches = 0; st == PT_OK; batches++) {
    if (stoppable) pt_evaluate_test_hook(batches);
    pt_batch b;
    st = pt_loader_next(loader, &b);
    if (st != PT_OK || b.n == 0) break;
    if (stoppable && pt_train_stop_signal()) { /* batches were left: only then is it cut */
      s->cut = 1;
      break;
    }
    const float *x;
    const int32_t *y;
    pt_device_data_batch(dd, &b, 0, &x, &y);
    /* Loss and count stay where the model runs; one read at the end. */
    const float *out = pt_model_forward(m, x, b.n);
    pt_model_loss_queue(m, y, b.n, 1.0f);
    m->be->accumulate_loss(m->loss_val, b.n, dd->sums);
    m->be->count_correct(b.n, m->num_classes, out, y, dd->correct);
  }
  if (st == PT_OK) st = pt_device_data_take_sums(dd, sums, &correct);
  /* A device fault that a traced forward pass's wait reported (and so
   * cleared) is not seen by the download above. */
  if (st == PT_OK) st = pt_model_take_status(m);
  if (st == PT_OK) {
    s->loss_sum = sums[0];
    s->correct = correct;
    s->count = (int64_t)sums[1];
  }
  m->training = was_training;
  return st;
}

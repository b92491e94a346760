/* Evaluation on a held-out split: mean loss and accuracy with dropout off and
 * batch-norm on its running statistics. Sums are per sample, so the result
 * does not depend on how the split is cut into batches. */
#ifndef PT_TRAIN_EVALUATE_H
#define PT_TRAIN_EVALUATE_H

#include "data/loader.h"
#include "nn/model.h"
#include "train/device_data.h"

typedef struct {
  double loss_sum;  /* sum over samples */
  int64_t correct, count;
  int cut;          /* a stop request ended it early: the sums cover part of the split */
} pt_eval_sums;

/* Batches come through dd (the loader's own on the CPU); its sums are used
 * and left cleared. stoppable: a stop request (pt_train_stop_request) ends
 * it between batches, with sums->cut set, so that a batch system's
 * SIGTERM is not held up by a long evaluation until it kills the run. */
pt_status pt_evaluate_batches(pt_model *m, pt_loader *loader, pt_device_data *dd, pt_eval_sums *sums,
                              int stoppable);

/* Tests only: PTRAIN_TEST_STOP_IN_EVAL=K asks for a stop, as a signal's
 * handler would, before the K-th batch (from 0) of a stoppable
 * evaluation; call it with each batch's number. */
void pt_evaluate_test_hook(long batch);

#endif

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
} pt_eval_sums;

/* Batches come through dd (the loader's own on the CPU); its sums are used
 * and left cleared. */
pt_status pt_evaluate_batches(pt_model *m, pt_loader *loader, pt_device_data *dd, pt_eval_sums *sums);

#endif

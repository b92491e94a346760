/* One optimizer step on one batch, shared by the training loop and
 * `ptrain bench` so that what the benchmark times is what training runs. */
#ifndef PT_TRAIN_STEP_H
#define PT_TRAIN_STEP_H

#include <stdint.h>

#include "nn/model.h"
#include "optim/optimizer.h"
#include "train/profile.h"

/* zero_grad, forward, loss, backward, update at lr; step keys the dropout
 * masks. With ph, the forward (with loss), backward and optimizer phases
 * are timed into it and the batch counted. Returns the loss; a non-finite
 * loss returns before the backward pass and the update, so the weights are
 * left as they were. */
double pt_train_step(pt_model *m, pt_optimizer *opt, const float *x, const int32_t *y, int n, uint64_t step,
                     float lr, pt_phase_times *ph);

#endif

/* The pieces of an optimizer step, shared by the training loop and
 * `ptrain bench` so that what the benchmark times is what training runs. */
#ifndef PT_TRAIN_STEP_H
#define PT_TRAIN_STEP_H

#include <stdint.h>

#include "nn/model.h"
#include "optim/optimizer.h"
#include "train/profile.h"

/* One micro-batch: the gradients cleared (when first, by
 * pt_model_start_grads), forward, loss, backward, the gradients
 * accumulating into m->grad with the loss gradient scaled by
 * loss_scale (1 / micro-batches per step / workers). dropout_step keys the
 * dropout masks. With ph, forward (with the loss) and backward are timed
 * into it and the images counted. Returns the mean loss of the batch. */
double pt_train_micro_step(pt_model *m, const float *x, const int32_t *y, int n, uint64_t dropout_step, int first,
                           float loss_scale, pt_phase_times *ph);
/* The same without reading the loss back: it is added to loss_acc (two
 * doubles of the model's backend memory: loss * samples, samples), so a GPU
 * step never waits for the device. */
void pt_train_micro_step_queued(pt_model *m, const float *x, const int32_t *y, int n, uint64_t dropout_step,
                                int first, float loss_scale, pt_phase_times *ph, double *loss_acc);
/* The optimizer update at lr; with ph, timed into it and counted as a step. */
void pt_train_update(pt_model *m, pt_optimizer *opt, float lr, pt_phase_times *ph);

/* A whole step on one batch by one worker: a micro-step, then the update
 * unless the loss is not finite (the weights are then left as they were).
 * Returns the loss. */
double pt_train_step(pt_model *m, pt_optimizer *opt, const float *x, const int32_t *y, int n, uint64_t step,
                     float lr, pt_phase_times *ph);

#endif

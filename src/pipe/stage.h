/* One stage of model or pipeline parallelism: a run of the model's layers
 * on one device (a thread with its own cores, or an MPI rank), receiving
 * activations from the stage before and gradients from the stage after.
 *
 * A batch is cut into M micro-batches that flow through the stages in the
 * schedule's order. Gradients accumulate over the micro-batches, each
 * scaled by its share of the batch, so the sum is the gradient of the
 * whole batch's mean loss: with M = 1 this is plain model parallelism, and
 * for any M and schedule the parameter gradients equal one device's except
 * where batch statistics depend on the cut (batch norm normalises each
 * micro-batch on its own, as in GPipe).
 *
 * Everything is allocated when the stage is made; a step allocates nothing.
 */
#ifndef PT_PIPE_STAGE_H
#define PT_PIPE_STAGE_H

#include <stdint.h>

#include "comm/comm.h"
#include "nn/model.h"
#include "pipe/schedule.h"

typedef struct {
  pt_model *m;            /* this stage's layers, with nslots activation slots of mb samples */
  pt_comm *comm;          /* the stages of one replica: stage s is rank s */
  int stage, nstages;
  int M, nslots, mb;      /* micro-batches per batch, slots, samples per micro-batch */
  pt_pipe_schedule kind;
  size_t in_floats, out_floats; /* per sample, at the stage's input and output */
  float *xin;             /* (nslots, mb, in_floats) inputs from the stage before */
  float *act_send;        /* (M, mb, out_floats) outputs on their way to the stage after */
  float *grad_send;       /* (M, mb, in_floats) input gradients on their way back */
  float *grad_recv;       /* (mb, out_floats) */
  pt_pipe_op *ops;        /* (2M) */
  char (*labels)[16];     /* (2M) "F3", "B3": trace span names, alive as long as the stage */
  /* Measured over training batches: compute, waiting for the other stages
   * (the bubble and the transfers), and the most micro-batches alive. */
  double busy_s, wait_s, forward_s, backward_s;
  int64_t batches;
  int live, live_max;
} pt_pipe_stage;

/* Builds stage `stage` (comm->rank) of comm->size: layers [lo, hi) of whole,
 * for batches of up to batch samples in M micro-batches. */
pt_status pt_pipe_stage_init(pt_pipe_stage *P, pt_model *whole, int lo, int hi, pt_comm *comm,
                             pt_pipe_schedule kind, int M, int batch);
void pt_pipe_stage_free(pt_pipe_stage *P);

/* One training batch of n samples: x (n, input) is read on the first
 * stage, y (n) on the last; the others may pass NULL. Parameter gradients
 * accumulate into the stage's slice of m->grad, scaled by loss_scale; on
 * the last stage *loss_sum gets the sum of the samples' losses (0
 * elsewhere). The model's grad_ready hook is called only during the last
 * backward, when the gradients are complete. */
pt_status pt_pipe_train(pt_pipe_stage *P, const float *x, const int32_t *y, int n, uint64_t dropout_step,
                        float loss_scale, double *loss_sum);
/* Forward only (evaluation mode is the caller's): on the last stage, the
 * sum of losses and the count of correct predictions; 0 elsewhere. */
pt_status pt_pipe_eval(pt_pipe_stage *P, const float *x, const int32_t *y, int n, double *loss_sum,
                       int64_t *correct);
/* Activation memory of the most micro-batches that were alive at once:
 * layer outputs, masks and saved statistics, and the received inputs. */
size_t pt_pipe_peak_activation_bytes(const pt_pipe_stage *P);

#endif

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
 *
 * Two ways to hand a micro-batch over. Over MPI ranks (and CPU threads by
 * default) the bytes travel as the communicator's message. Direct, for
 * stages that are threads of one process (GPUs always; CPU threads when
 * the tests ask, PTRAIN_TEST_PIPE_DIRECT=1): only a small token travels;
 * the receiver makes its queue wait for the sender's event and copies the
 * piece device to device (cudaMemcpyPeerAsync), records its own event,
 * and acknowledges, and the sender's queue waits for that before it
 * overwrites the piece in the next batch. The host never waits for a GPU,
 * and the data never passes through host memory.
 */
#ifndef PT_PIPE_STAGE_H
#define PT_PIPE_STAGE_H

#include <stdint.h>

#include "comm/comm.h"
#include "nn/model.h"
#include "pipe/schedule.h"

/* A piece ready for the neighbour (direct hand-over). */
typedef struct {
  uint64_t offset; /* floats into the sender's send buffer */
  uint64_t floats;
  int32_t index;   /* of the sender's event, and of the acknowledgement */
  int32_t pad;
} pt_pipe_token;

/* What a stage tells its neighbours once, for direct hand-over: the
 * buffers they copy from and the events they wait for. Directions: 0,
 * activations (to the stage after); 1, gradients (to the stage before). */
typedef struct {
  const float *send[2];
  void *const *ev_sent[2];  /* (M): piece k of send[d] is written */
  void *const *ev_taken[2]; /* (M): this stage has copied the neighbour's piece k */
  int device;
} pt_pipe_peer;

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
  /* Direct hand-over (see above); all NULL otherwise. */
  int direct;
  pt_pipe_peer self, prev, next;
  void **ev_sent[2], **ev_taken[2]; /* (M) each, this stage's events */
  pt_pipe_token *tok[2], *ack[2];   /* (M) each: message bodies, alive until the sends complete */
  struct {
    int dir, index, k;              /* the piece's direction, place and micro-batch tag number */
  } *unacked;                       /* (2M) pieces sent, not yet acknowledged */
  int nunacked;
  char (*labels)[16];     /* (2M) "F3", "B3": trace span names, alive as long as the stage */
  /* Measured over training batches: compute, handing pieces on (copies
   * into the send buffers, posting the sends), waiting for the other
   * stages (the bubble and the transfers), and the most micro-batches
   * alive. busy_s = forward_s + backward_s + send_s, near enough. */
  double busy_s, wait_s, forward_s, backward_s, send_s;
  int64_t batches;
  int live, live_max;
} pt_pipe_stage;

/* Builds stage `stage` (comm->rank) of comm->size: layers [lo, hi) of whole,
 * for batches of up to batch samples in M micro-batches, its arrays in
 * whole's backend. direct: hand pieces over by reference (the stages must
 * be threads of one process, each bound to its device, the CUDA ordinal;
 * called by all stages together, as they tell each other their buffers). */
pt_status pt_pipe_stage_init(pt_pipe_stage *P, pt_model *whole, int lo, int hi, pt_comm *comm,
                             pt_pipe_schedule kind, int M, int batch, int direct, int device);
void pt_pipe_stage_free(pt_pipe_stage *P);

/* Where the last stage's losses go. On the CPU: *loss_sum (and
 * *correct), host numbers. On a GPU they stay on the device: sums (2
 * doubles: loss * samples, samples) and correct (1 int64), backend memory,
 * are added to, and read when the caller chooses. */
typedef struct {
  double loss_sum;
  int64_t correct;
  double *sums;
  int64_t *correct_dev;
} pt_pipe_sums;

/* One training batch of n samples: x (n, input) is read on the first
 * stage, y (n) on the last; the others may pass NULL (all backend
 * memory). Parameter gradients accumulate into the stage's slice of
 * m->grad, scaled by loss_scale; the last stage adds the samples' losses
 * to out (nothing elsewhere). The model's grad_ready hook is called only
 * during the last backward, when the gradients are complete. */
pt_status pt_pipe_train(pt_pipe_stage *P, const float *x, const int32_t *y, int n, uint64_t dropout_step,
                        float loss_scale, pt_pipe_sums *out);
/* Forward only (evaluation mode is the caller's): the last stage adds the
 * losses and the count of correct predictions to out. */
pt_status pt_pipe_eval(pt_pipe_stage *P, const float *x, const int32_t *y, int n, pt_pipe_sums *out);
/* Activation memory of the most micro-batches that were alive at once:
 * layer outputs, masks and saved statistics, and the received inputs. */
size_t pt_pipe_peak_activation_bytes(const pt_pipe_stage *P);

#endif

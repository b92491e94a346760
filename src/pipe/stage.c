#include "pipe/stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/timer.h"
#include "util/trace.h"

/* Message tags: micro-batch k's activations go forward as 2k, its
 * gradients come back as 2k + 1. */
#define TAG_ACT(k) (2 * (k))
#define TAG_GRAD(k) (2 * (k) + 1)
#define MAX_MICRO 16000 /* keeps the tags under MPI's guaranteed 32767 */

pt_status pt_pipe_stage_init(pt_pipe_stage *P, pt_model *whole, int lo, int hi, pt_comm *comm,
                             pt_pipe_schedule kind, int M, int batch) {
  memset(P, 0, sizeof *P);
  if (M < 1 || M > MAX_MICRO) return pt_fail(PT_ERR_ARG, "--micro-batches %d: expected 1 to %d", M, MAX_MICRO);
  if (M > batch)
    return pt_fail(PT_ERR_ARG, "--micro-batches %d is more than the batch of %d samples", M, batch);
  P->comm = comm;
  P->stage = comm->rank;
  P->nstages = comm->size;
  P->M = M;
  P->kind = kind;
  P->mb = (batch + M - 1) / M;
  P->nslots = pt_pipe_schedule_live(kind, P->nstages, P->stage, M);
  PT_TRY(pt_model_create_stage(&P->m, whole, lo, hi, P->mb, P->nslots));
  P->in_floats = pt_model_boundary_floats(whole, lo);
  P->out_floats = pt_model_boundary_floats(whole, hi);
  const size_t mb = (size_t)P->mb;
  int ok = 1;
  if (P->stage > 0)
    ok = ok && (P->xin = pt_alloc_aligned(sizeof(float) * P->nslots * mb * P->in_floats)) &&
         (P->grad_send = pt_alloc_aligned(sizeof(float) * (size_t)M * mb * P->in_floats));
  if (P->stage < P->nstages - 1)
    ok = ok && (P->act_send = pt_alloc_aligned(sizeof(float) * (size_t)M * mb * P->out_floats)) &&
         (P->grad_recv = pt_alloc_aligned(sizeof(float) * mb * P->out_floats));
  ok = ok && (P->ops = malloc(sizeof(pt_pipe_op) * 2 * (size_t)M)) &&
       (P->labels = malloc(sizeof *P->labels * 2 * (size_t)M));
  if (!ok) {
    pt_pipe_stage_free(P);
    return pt_fail(PT_ERR_NOMEM, "out of memory for pipeline stage %d's buffers", comm->rank);
  }
  for (int k = 0; k < M; k++) {
    snprintf(P->labels[2 * k], sizeof P->labels[0], "F%d", k);
    snprintf(P->labels[2 * k + 1], sizeof P->labels[0], "B%d", k);
  }
  return PT_OK;
}

void pt_pipe_stage_free(pt_pipe_stage *P) {
  pt_model_destroy(P->m);
  free(P->xin);
  free(P->grad_send);
  free(P->act_send);
  free(P->grad_recv);
  free(P->ops);
  free(P->labels);
  memset(P, 0, sizeof *P);
}

/* wait (NULL: not measured) accumulates the seconds spent waiting. */
static pt_status recv_from(pt_pipe_stage *P, float *buf, size_t floats, int src, int tag, const char *what,
                           double *wait) {
  const double t0 = pt_now();
  P->comm->what = what;
  pt_status st = pt_comm_recv(P->comm, buf, floats * sizeof(float), src, tag);
  const double t1 = pt_now();
  if (wait) *wait += t1 - t0;
  pt_trace_span("wait", "idle", t0, t1);
  return st;
}

/* Micro-batch k's rows: the batch cut in pieces of ceil(n / M). */
static int rows_of(int n, int chunk, int k) {
  const int r = n - k * chunk;
  return r < chunk ? (r > 0 ? r : 0) : chunk;
}

/* Where a slot's input from the stage before is received. */
static float *received(pt_pipe_stage *P, int slot) { return P->xin + (size_t)slot * P->mb * P->in_floats; }

/* Micro-batch k's input: the first stage's piece of x, or what was received. */
static const float *slot_input(pt_pipe_stage *P, const float *x, int k, int slot, int chunk) {
  return P->stage == 0 ? x + (size_t)k * chunk * P->in_floats : received(P, slot);
}

static pt_status run_forward(pt_pipe_stage *P, const float *x, int k, int chunk, int rows, uint64_t dropout_step) {
  const int slot = k % P->nslots;
  pt_model *m = P->m;
  if (P->stage > 0)
    PT_TRY(recv_from(P, received(P, slot), (size_t)rows * P->in_floats, P->stage - 1, TAG_ACT(k),
                     "the activations from the stage before", &P->wait_s));
  const double t0 = pt_now();
  pt_model_use_slot(m, slot);
  m->step = dropout_step * (uint64_t)P->M + (uint64_t)k;
  const float *out = pt_model_forward(m, slot_input(P, x, k, slot, chunk), rows);
  if (P->stage < P->nstages - 1) {
    float *send = P->act_send + (size_t)k * P->mb * P->out_floats;
    memcpy(send, out, sizeof(float) * (size_t)rows * P->out_floats);
    P->comm->what = "sending activations to the stage after";
    PT_TRY(pt_comm_isend(P->comm, send, sizeof(float) * (size_t)rows * P->out_floats, P->stage + 1, TAG_ACT(k)));
  }
  const double t1 = pt_now();
  P->forward_s += t1 - t0;
  pt_trace_span(P->labels[2 * k], "forward", t0, t1);
  if (++P->live > P->live_max) P->live_max = P->live;
  return PT_OK;
}

static pt_status run_backward(pt_pipe_stage *P, const float *x, const int32_t *y, int n, int k, int chunk, int rows,
                              float loss_scale, double *loss_sum) {
  const int slot = k % P->nslots;
  pt_model *m = P->m;
  const float *dy = m->dlogits;
  if (P->stage < P->nstages - 1) {
    PT_TRY(recv_from(P, P->grad_recv, (size_t)rows * P->out_floats, P->stage + 1, TAG_GRAD(k),
                     "the gradients from the stage after", &P->wait_s));
    dy = P->grad_recv;
  }
  const double t0 = pt_now();
  pt_model_use_slot(m, slot);
  if (P->stage == P->nstages - 1) {
    /* This micro-batch's share of the batch's mean loss. */
    const float scale = loss_scale * (float)rows / (float)n;
    *loss_sum += pt_model_loss(m, y + (size_t)k * chunk, rows, scale) * rows;
  }
  const float *dx = pt_model_backward_from(m, slot_input(P, x, k, slot, chunk), dy, rows, P->stage > 0);
  if (P->stage > 0) {
    float *send = P->grad_send + (size_t)k * P->mb * P->in_floats;
    memcpy(send, dx, sizeof(float) * (size_t)rows * P->in_floats);
    P->comm->what = "sending gradients to the stage before";
    PT_TRY(pt_comm_isend(P->comm, send, sizeof(float) * (size_t)rows * P->in_floats, P->stage - 1, TAG_GRAD(k)));
  }
  const double t1 = pt_now();
  P->backward_s += t1 - t0;
  pt_trace_span(P->labels[2 * k + 1], "backward", t0, t1);
  P->live--;
  return PT_OK;
}

pt_status pt_pipe_train(pt_pipe_stage *P, const float *x, const int32_t *y, int n, uint64_t dropout_step,
                        float loss_scale, double *loss_sum) {
  *loss_sum = 0.0;
  if (n < 1 || n > P->M * P->mb)
    return pt_fail(PT_ERR_ARG, "pipeline stage %d: a batch of %d samples; expected 1 to %d", P->stage, n,
                   P->M * P->mb);
  const double t_start = pt_now(), wait0 = P->wait_s;
  /* Every stage cuts the batch the same way: pieces of ceil(n / M), so a
   * short last batch may have fewer micro-batches. */
  const int chunk = (n + P->M - 1) / P->M, M = (n + chunk - 1) / chunk;
  const int nops = pt_pipe_schedule_ops(P->kind, P->nstages, P->stage, M, P->ops);
  /* The gradients are complete only after the last backward; data-parallel
   * replicas of this stage may start reducing them then, not before. */
  void (*hook)(void *, int) = P->m->grad_ready;
  pt_status st = PT_OK;
  for (int i = 0; i < nops && st == PT_OK; i++) {
    const pt_pipe_op op = P->ops[i];
    const int rows = rows_of(n, chunk, op.mb);
    if (op.forward) {
      st = run_forward(P, x, op.mb, chunk, rows, dropout_step);
    } else {
      P->m->grad_ready = i == nops - 1 ? hook : NULL;
      st = run_backward(P, x, y, n, op.mb, chunk, rows, loss_scale, loss_sum);
    }
  }
  P->m->grad_ready = hook;
  if (st != PT_OK) return st;
  const double tw = pt_now();
  P->comm->what = "the pipeline's sends at the end of the batch";
  st = pt_comm_wait_sends(P->comm);
  const double t_end = pt_now();
  P->wait_s += t_end - tw;
  P->busy_s += (t_end - t_start) - (P->wait_s - wait0);
  P->batches++;
  return st;
}

pt_status pt_pipe_eval(pt_pipe_stage *P, const float *x, const int32_t *y, int n, double *loss_sum,
                       int64_t *correct) {
  *loss_sum = 0.0;
  *correct = 0;
  /* The slots are contiguous, so a forward-only pass can use them as one
   * buffer; the last stage has the fewest, and sets the piece for all. */
  const int cap = P->mb * pt_pipe_schedule_live(P->kind, P->nstages, P->nstages - 1, P->M);
  const int ring = (P->M * P->mb) / cap; /* pieces the send buffer holds */
  pt_model *m = P->m;
  pt_model_use_slot(m, 0);
  for (int k = 0, lo = 0; lo < n; k++, lo += cap) {
    const int rows = n - lo < cap ? n - lo : cap;
    const int tag = TAG_ACT(k % MAX_MICRO);
    const float *in = P->stage == 0 ? x + (size_t)lo * P->in_floats : P->xin;
    if (P->stage > 0)
      PT_TRY(recv_from(P, P->xin, (size_t)rows * P->in_floats, P->stage - 1, tag, "the evaluation activations", NULL));
    const float *out = pt_model_forward(m, in, rows);
    if (P->stage < P->nstages - 1) {
      if (k > 0 && k % ring == 0) { /* the send buffer wraps: its old pieces must have arrived */
        P->comm->what = "sending evaluation activations";
        PT_TRY(pt_comm_wait_sends(P->comm));
      }
      float *send = P->act_send + (size_t)(k % ring) * cap * P->out_floats;
      memcpy(send, out, sizeof(float) * (size_t)rows * P->out_floats);
      P->comm->what = "sending evaluation activations";
      PT_TRY(pt_comm_isend(P->comm, send, sizeof(float) * (size_t)rows * P->out_floats, P->stage + 1, tag));
    } else {
      *loss_sum += pt_model_loss(m, y + lo, rows, 1.0f) * rows;
      *correct += pt_count_correct(rows, m->num_classes, out, y + lo);
    }
  }
  P->comm->what = "sending evaluation activations";
  return pt_comm_wait_sends(P->comm);
}

size_t pt_pipe_peak_activation_bytes(const pt_pipe_stage *P) {
  const size_t per_slot = P->m->slot_bytes + (P->stage > 0 ? sizeof(float) * P->mb * P->in_floats : 0);
  return per_slot * (size_t)(P->live_max ? P->live_max : P->nslots);
}

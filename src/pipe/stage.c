#include "pipe/stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/timer.h"
#include "util/trace.h"

/* Message tags. Bytes: micro-batch k's activations go forward as 2k, its
 * gradients come back as 2k + 1. Direct: the tokens are 4k and 4k + 1,
 * and their acknowledgements 4k + 2 and 4k + 3. */
enum { ACT = 0, GRAD = 1 };
#define MAX_MICRO 16000        /* keeps the tags under MPI's guaranteed 32767 */
#define MAX_MICRO_DIRECT 8000  /* the same with four tags per micro-batch */
static int tag_of(const pt_pipe_stage *P, int k, int dir) { return P->direct ? 4 * k + dir : 2 * k + dir; }
static int ack_tag_of(int k, int dir) { return 4 * k + 2 + dir; }
#define INFO_TAG 0 /* the neighbours' pt_pipe_peer, once, before any piece */

static pt_status alloc_events(pt_pipe_stage *P, void ***ev, int n) {
  if (!(*ev = calloc((size_t)n, sizeof **ev))) return pt_fail(PT_ERR_NOMEM, "out of memory for stage events");
  for (int i = 0; i < n; i++)
    if (!((*ev)[i] = P->m->be->event_create()))
      return pt_wrap(PT_ERR_DEVICE, "pipeline stage %d: events for handing pieces over", P->stage);
  return PT_OK;
}

static void free_events(const pt_backend *be, void **ev, int n) {
  if (!ev) return;
  for (int i = 0; i < n; i++)
    if (ev[i]) be->event_destroy(ev[i]);
  free(ev);
}

/* Direct hand-over: events and message bodies, then each stage tells its
 * neighbours where its send buffers and events are. */
static pt_status direct_init(pt_pipe_stage *P, int device) {
  const int M = P->M;
  const pt_backend *be = P->m->be;
  if (!be->event_create || !be->copy_from)
    return pt_fail(PT_ERR_STATE, "pipeline stage %d: the %s backend cannot hand pieces over directly", P->stage,
                   be->name);
  if (M > MAX_MICRO_DIRECT)
    return pt_fail(PT_ERR_ARG, "--micro-batches %d: expected 1 to %d for stages in one process", M,
                   MAX_MICRO_DIRECT);
  for (int d = 0; d < 2; d++) {
    PT_TRY(alloc_events(P, &P->ev_sent[d], M));
    PT_TRY(alloc_events(P, &P->ev_taken[d], M));
    if (!(P->tok[d] = calloc((size_t)M, sizeof *P->tok[d])) || !(P->ack[d] = calloc((size_t)M, sizeof *P->ack[d])))
      return pt_fail(PT_ERR_NOMEM, "out of memory for pipeline stage %d's tokens", P->stage);
  }
  if (!(P->unacked = malloc(sizeof *P->unacked * 2 * (size_t)M)))
    return pt_fail(PT_ERR_NOMEM, "out of memory for pipeline stage %d's tokens", P->stage);
  P->self.send[ACT] = P->act_send;
  P->self.send[GRAD] = P->grad_send;
  for (int d = 0; d < 2; d++) {
    P->self.ev_sent[d] = P->ev_sent[d];
    P->self.ev_taken[d] = P->ev_taken[d];
  }
  P->self.device = device;
  pt_comm *c = P->comm;
  c->what = "telling the neighbouring stages where this stage's pieces are";
  if (P->stage > 0) PT_TRY(pt_comm_isend(c, &P->self, sizeof P->self, P->stage - 1, INFO_TAG));
  if (P->stage < P->nstages - 1) PT_TRY(pt_comm_isend(c, &P->self, sizeof P->self, P->stage + 1, INFO_TAG));
  if (P->stage > 0) PT_TRY(pt_comm_recv(c, &P->prev, sizeof P->prev, P->stage - 1, INFO_TAG));
  if (P->stage < P->nstages - 1) PT_TRY(pt_comm_recv(c, &P->next, sizeof P->next, P->stage + 1, INFO_TAG));
  return pt_comm_wait_sends(c);
}

pt_status pt_pipe_stage_init(pt_pipe_stage *P, pt_model *whole, int lo, int hi, pt_comm *comm,
                             pt_pipe_schedule kind, int M, int batch, int direct, int device) {
  memset(P, 0, sizeof *P);
  if (M < 1 || M > MAX_MICRO) return pt_fail(PT_ERR_ARG, "--micro-batches %d: expected 1 to %d", M, MAX_MICRO);
  if (M > batch)
    return pt_fail(PT_ERR_ARG, "--micro-batches %d is more than the batch of %d samples", M, batch);
  P->comm = comm;
  P->stage = comm->rank;
  P->nstages = comm->size;
  P->M = M;
  P->kind = kind;
  P->direct = direct;
  P->mb = (batch + M - 1) / M;
  P->nslots = pt_pipe_schedule_live(kind, P->nstages, P->stage, M);
  PT_TRY(pt_model_create_stage(&P->m, whole, lo, hi, P->mb, P->nslots));
  const pt_backend *be = P->m->be;
  P->in_floats = pt_model_boundary_floats(whole, lo);
  P->out_floats = pt_model_boundary_floats(whole, hi);
  const size_t mb = (size_t)P->mb;
  int ok = 1;
  /* The backend's allocations say why they failed. */
  if (P->stage > 0)
    ok = ok && (P->xin = be->alloc(sizeof(float) * P->nslots * mb * P->in_floats)) &&
         (P->grad_send = be->alloc(sizeof(float) * (size_t)M * mb * P->in_floats));
  if (ok && P->stage < P->nstages - 1)
    ok = ok && (P->act_send = be->alloc(sizeof(float) * (size_t)M * mb * P->out_floats)) &&
         (P->grad_recv = be->alloc(sizeof(float) * mb * P->out_floats));
  pt_status st = ok ? PT_OK : pt_wrap(PT_ERR_NOMEM, "pipeline stage %d's buffers", comm->rank);
  if (st == PT_OK && (!(P->ops = malloc(sizeof(pt_pipe_op) * 2 * (size_t)M)) ||
                      !(P->labels = malloc(sizeof *P->labels * 2 * (size_t)M))))
    st = pt_fail(PT_ERR_NOMEM, "out of memory for pipeline stage %d's schedule", comm->rank);
  if (st == PT_OK && direct) st = direct_init(P, device);
  if (st != PT_OK) {
    pt_pipe_stage_free(P);
    return st;
  }
  for (int k = 0; k < M; k++) {
    snprintf(P->labels[2 * k], sizeof P->labels[0], "F%d", k);
    snprintf(P->labels[2 * k + 1], sizeof P->labels[0], "B%d", k);
  }
  return PT_OK;
}

void pt_pipe_stage_free(pt_pipe_stage *P) {
  if (P->m) {
    const pt_backend *be = P->m->be;
    be->free(P->xin);
    be->free(P->grad_send);
    be->free(P->act_send);
    be->free(P->grad_recv);
    for (int d = 0; d < 2; d++) {
      free_events(be, P->ev_sent[d], P->M);
      free_events(be, P->ev_taken[d], P->M);
      free(P->tok[d]);
      free(P->ack[d]);
    }
  }
  free(P->unacked);
  pt_model_destroy(P->m);
  free(P->ops);
  free(P->labels);
  memset(P, 0, sizeof *P);
}

/* wait (NULL: not measured) accumulates the seconds spent waiting. */
static pt_status recv_from(pt_pipe_stage *P, void *buf, size_t bytes, int src, int tag, const char *what,
                           double *wait) {
  const double t0 = pt_now();
  P->comm->what = what;
  pt_status st = pt_comm_recv(P->comm, buf, bytes, src, tag);
  const double t1 = pt_now();
  if (wait) *wait += t1 - t0;
  pt_trace_span("wait", "idle", t0, t1);
  return st;
}

/* Hands piece `index` of direction dir over: floats from src, through the
 * send buffer at offset (which stays untouched until finish_sends). */
static pt_status send_piece(pt_pipe_stage *P, int dir, size_t offset, const float *src, size_t floats, int k,
                            int index, const char *what) {
  float *buf = (dir == ACT ? P->act_send : P->grad_send) + offset;
  const int peer = dir == ACT ? P->stage + 1 : P->stage - 1;
  const size_t bytes = sizeof(float) * floats;
  const pt_backend *be = P->m->be;
  be->copy(buf, src, bytes);
  P->comm->what = what;
  if (!P->direct) return pt_comm_isend(P->comm, buf, bytes, peer, tag_of(P, k, dir));
  be->event_record(P->ev_sent[dir][index]);
  pt_pipe_token *t = &P->tok[dir][index];
  t->offset = offset;
  t->floats = floats;
  t->index = index;
  PT_TRY(pt_comm_isend(P->comm, t, sizeof *t, peer, tag_of(P, k, dir)));
  P->unacked[P->nunacked].dir = dir;
  P->unacked[P->nunacked].index = index;
  P->unacked[P->nunacked++].k = k;
  return PT_OK;
}

/* Receives micro-batch k's piece of direction dir into dst (floats, backend
 * memory). Direct: the copy is queued behind the sender's work, and
 * acknowledged once queued. */
static pt_status recv_piece(pt_pipe_stage *P, int dir, float *dst, size_t floats, int k, const char *what,
                            double *wait) {
  const int peer = dir == ACT ? P->stage - 1 : P->stage + 1;
  if (!P->direct) return recv_from(P, dst, sizeof(float) * floats, peer, tag_of(P, k, dir), what, wait);
  pt_pipe_token t;
  PT_TRY(recv_from(P, &t, sizeof t, peer, tag_of(P, k, dir), what, wait));
  if (t.floats != floats || t.index < 0 || t.index >= P->M)
    return pt_fail(PT_ERR_STATE, "pipeline stage %d: %s: a piece of %llu floats (index %d) from stage %d; "
                   "expected %zu floats", P->stage, what, (unsigned long long)t.floats, t.index, peer, floats);
  const pt_pipe_peer *from = dir == ACT ? &P->prev : &P->next;
  const pt_backend *be = P->m->be;
  be->event_wait(from->ev_sent[dir][t.index]);
  be->copy_from(dst, from->send[dir] + t.offset, from->device, sizeof(float) * floats);
  be->event_record(P->ev_taken[dir][t.index]);
  pt_pipe_token *a = &P->ack[dir][t.index];
  *a = t;
  P->comm->what = "acknowledging a piece to the stage it came from";
  return pt_comm_isend(P->comm, a, sizeof *a, peer, ack_tag_of(k, dir));
}

/* Before the send buffers are reused: every piece sent was taken (direct:
 * the neighbour acknowledged queueing its copy, and this stage's queue
 * waits for that copy) and every message was received. */
static pt_status finish_sends(pt_pipe_stage *P, const char *what) {
  const pt_backend *be = P->m->be;
  for (int i = 0; i < P->nunacked; i++) {
    const int dir = P->unacked[i].dir, index = P->unacked[i].index;
    const int peer = dir == ACT ? P->stage + 1 : P->stage - 1;
    pt_pipe_token a;
    PT_TRY(recv_from(P, &a, sizeof a, peer, ack_tag_of(P->unacked[i].k, dir), what, NULL));
    const pt_pipe_peer *to = dir == ACT ? &P->next : &P->prev;
    be->event_wait(to->ev_taken[dir][index]);
  }
  P->nunacked = 0;
  P->comm->what = what;
  return pt_comm_wait_sends(P->comm);
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

/* The last stage's losses: host numbers on the CPU, device sums on a GPU. */
static void add_loss(pt_model *m, const int32_t *y, int rows, float scale, pt_pipe_sums *out) {
  if (out->sums) {
    pt_model_loss_queue(m, y, rows, scale);
    m->be->accumulate_loss(m->loss_val, rows, out->sums);
  } else {
    out->loss_sum += pt_model_loss(m, y, rows, scale) * rows;
  }
}

/* Handing a piece on, from t0: the stage's own time, though not its
 * layers'. */
static void count_send(pt_pipe_stage *P, double t0) {
  const double t1 = pt_now();
  P->send_s += t1 - t0;
  pt_trace_span("send", "send", t0, t1);
}

static pt_status run_forward(pt_pipe_stage *P, const float *x, int k, int chunk, int rows, uint64_t dropout_step) {
  const int slot = k % P->nslots;
  pt_model *m = P->m;
  if (P->stage > 0)
    PT_TRY(recv_piece(P, ACT, received(P, slot), (size_t)rows * P->in_floats, k,
                      "the activations from the stage before", &P->wait_s));
  const double t0 = pt_now();
  pt_model_use_slot(m, slot);
  m->step = dropout_step * (uint64_t)P->M + (uint64_t)k;
  const float *out = pt_model_forward(m, slot_input(P, x, k, slot, chunk), rows);
  const double t1 = pt_now();
  P->forward_s += t1 - t0;
  pt_trace_span(P->labels[2 * k], "forward", t0, t1);
  if (P->stage < P->nstages - 1) {
    PT_TRY(send_piece(P, ACT, (size_t)k * P->mb * P->out_floats, out, (size_t)rows * P->out_floats, k, k,
                      "sending activations to the stage after"));
    count_send(P, t1);
  }
  if (++P->live > P->live_max) P->live_max = P->live;
  return PT_OK;
}

static pt_status run_backward(pt_pipe_stage *P, const float *x, const int32_t *y, int n, int k, int chunk, int rows,
                              float loss_scale, pt_pipe_sums *out) {
  const int slot = k % P->nslots;
  pt_model *m = P->m;
  const float *dy = m->dlogits;
  if (P->stage < P->nstages - 1) {
    PT_TRY(recv_piece(P, GRAD, P->grad_recv, (size_t)rows * P->out_floats, k, "the gradients from the stage after",
                      &P->wait_s));
    dy = P->grad_recv;
  }
  const double t0 = pt_now();
  pt_model_use_slot(m, slot);
  /* This micro-batch's share of the batch's mean loss. */
  if (P->stage == P->nstages - 1) add_loss(m, y + (size_t)k * chunk, rows, loss_scale * (float)rows / (float)n, out);
  const float *dx = pt_model_backward_from(m, slot_input(P, x, k, slot, chunk), dy, rows, P->stage > 0);
  const double t1 = pt_now();
  P->backward_s += t1 - t0;
  pt_trace_span(P->labels[2 * k + 1], "backward", t0, t1);
  if (P->stage > 0) {
    PT_TRY(send_piece(P, GRAD, (size_t)k * P->mb * P->in_floats, dx, (size_t)rows * P->in_floats, k, k,
                      "sending gradients to the stage before"));
    count_send(P, t1);
  }
  P->live--;
  return PT_OK;
}

pt_status pt_pipe_train(pt_pipe_stage *P, const float *x, const int32_t *y, int n, uint64_t dropout_step,
                        float loss_scale, pt_pipe_sums *out) {
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
      st = run_backward(P, x, y, n, op.mb, chunk, rows, loss_scale, out);
    }
  }
  P->m->grad_ready = hook;
  if (st != PT_OK) return st;
  const double tw = pt_now();
  st = finish_sends(P, "the pipeline's sends at the end of the batch");
  const double t_end = pt_now();
  P->wait_s += t_end - tw;
  P->busy_s += (t_end - t_start) - (P->wait_s - wait0);
  P->batches++;
  return st;
}

pt_status pt_pipe_eval(pt_pipe_stage *P, const float *x, const int32_t *y, int n, pt_pipe_sums *out) {
  /* The slots are contiguous, so a forward-only pass can use them as one
   * buffer; the last stage has the fewest, and sets the piece for all. */
  const int cap = P->mb * pt_pipe_schedule_live(P->kind, P->nstages, P->nstages - 1, P->M);
  const int ring = (P->M * P->mb) / cap; /* pieces the send buffer holds */
  const int max = P->direct ? MAX_MICRO_DIRECT : MAX_MICRO;
  pt_model *m = P->m;
  pt_model_use_slot(m, 0);
  for (int k = 0, lo = 0; lo < n; k++, lo += cap) {
    const int rows = n - lo < cap ? n - lo : cap;
    const int kt = k % max;
    const float *in = P->stage == 0 ? x + (size_t)lo * P->in_floats : P->xin;
    if (P->stage > 0)
      PT_TRY(recv_piece(P, ACT, P->xin, (size_t)rows * P->in_floats, kt, "the evaluation activations", NULL));
    const float *o = pt_model_forward(m, in, rows);
    if (P->stage < P->nstages - 1) {
      if (k > 0 && k % ring == 0) /* the send buffer wraps: its old pieces must have been taken */
        PT_TRY(finish_sends(P, "sending evaluation activations"));
      PT_TRY(send_piece(P, ACT, (size_t)(k % ring) * cap * P->out_floats, o, (size_t)rows * P->out_floats, kt,
                        k % ring, "sending evaluation activations"));
    } else {
      add_loss(m, y + lo, rows, 1.0f, out);
      if (out->correct_dev) m->be->count_correct(rows, m->num_classes, o, y + lo, out->correct_dev);
      else out->correct += pt_count_correct(rows, m->num_classes, o, y + lo);
    }
  }
  return finish_sends(P, "sending evaluation activations");
}

size_t pt_pipe_peak_activation_bytes(const pt_pipe_stage *P) {
  const size_t per_slot = P->m->slot_bytes + (P->stage > 0 ? sizeof(float) * P->mb * P->in_floats : 0);
  return per_slot * (size_t)(P->live_max ? P->live_max : P->nslots);
}

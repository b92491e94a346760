#include "train/stages.h"

#include <string.h>

#include "pipe/partition.h"
#include "util/stop.h"

pt_status pt_stages_init(pt_stages *S, pt_model *whole, pt_comm *world, int stages, const char *split,
                         pt_pipe_schedule kind, int micro, int batch, int direct, int device) {
  memset(S, 0, sizeof *S);
  if (stages < 1 || world->size % stages)
    return pt_fail(PT_ERR_ARG, "%d workers cannot form replicas of %d stages (--stages)", world->size, stages);
  S->stages = stages;
  S->replicas = world->size / stages;
  S->stage = world->rank % stages;
  S->replica = world->rank / stages;
  PT_TRY(pt_pipe_partition(whole, stages, split, S->bounds));
  if (S->replicas == 1) {
    S->pipe = world;
    PT_TRY(pt_comm_self_create(&S->peers));
    S->own_peers = 1;
  } else {
    PT_TRY(pt_comm_split(world, S->replica, S->stage, &S->pipe));
    S->own_pipe = 1;
    PT_TRY(pt_comm_split(world, S->stage, S->replica, &S->peers));
    S->own_peers = 1;
  }
  S->pipe->timeout_s = S->peers->timeout_s = world->timeout_s;
  S->dpipe = S->pipe;
  if (whole->be->kind != PT_BACKEND_CPU && S->stages > 1) {
    /* Gathering a checkpoint moves device memory, a few times a run; so
     * do the pieces between stages that are MPI ranks (not direct). */
    const size_t floats = whole->nparam_total > whole->nbuffer_total ? whole->nparam_total : whole->nbuffer_total;
    PT_TRY(pt_comm_staging_create(&S->dpipe, S->pipe, whole->be, sizeof(float) * floats + 64));
  }
  /* Direct hand-over sends tokens (host memory) through the stages' own
   * communicator; messages carry the pieces themselves, in backend memory. */
  return pt_pipe_stage_init(&S->st, whole, S->bounds[S->stage], S->bounds[S->stage + 1],
                            direct ? S->pipe : S->dpipe, kind, micro, batch, direct, device);
}

void pt_stages_free(pt_stages *S) {
  pt_pipe_stage_free(&S->st);
  if (S->dpipe != S->pipe) pt_comm_destroy(S->dpipe);
  if (S->own_pipe) pt_comm_destroy(S->pipe);
  if (S->own_peers) pt_comm_destroy(S->peers);
  memset(S, 0, sizeof *S);
}

pt_status pt_stages_evaluate(pt_stages *S, pt_loader *test, pt_device_data *dd, pt_eval_sums *ev) {
  memset(ev, 0, sizeof *ev);
  pt_model *m = S->st.m;
  const int was_training = m->training, was_profiling = m->profile;
  m->training = 0;
  m->profile = 0; /* the profile is of training steps */
  /* On a GPU the sums stay there until the end; left over from an
   * interrupted pass, they are cleared first. */
  const int on_device = m->be->kind != PT_BACKEND_CPU;
  pt_pipe_sums sums = {0};
  double dev[2];
  int64_t correct;
  if (on_device) {
    sums.sums = dd->sums;
    sums.correct_dev = dd->correct;
  }
  pt_status st = on_device ? pt_device_data_take_sums(dd, dev, &correct) : PT_OK;
  if (st == PT_OK) st = pt_loader_start_epoch(test, 0, 0);
  for (long batches = 0; st == PT_OK; batches++) {
    pt_evaluate_test_hook(batches);
    pt_batch b;
    st = pt_loader_next(test, &b);
    if (st != PT_OK || b.n == 0) break;
    /* A stop request cuts the evaluation between batches, as on one
     * device, but every stage of the replica at the same one: a stage
     * that stopped alone would leave its neighbours waiting on it. */
    double stop = pt_train_stop_signal() ? 1.0 : 0.0;
    S->pipe->what = "the agreement to cut the evaluation short";
    st = pt_comm_allreduce_f64(S->pipe, &stop, 1);
    if (st != PT_OK) break;
    if (stop > 0.0) {
      ev->cut = 1;
      break;
    }
    const float *x;
    const int32_t *y;
    pt_device_data_batch(dd, &b, 0, &x, &y);
    st = pt_pipe_eval(&S->st, x, y, b.n, &sums);
    if (S->stage == S->stages - 1) ev->count += b.n;
  }
  if (st == PT_OK && on_device) {
    st = pt_device_data_take_sums(dd, dev, &correct);
    sums.loss_sum = dev[0];
    sums.correct = correct;
  }
  if (st == PT_OK) st = pt_model_take_status(m);
  ev->loss_sum = sums.loss_sum;
  ev->correct = sums.correct;
  m->training = was_training;
  m->profile = was_profiling;
  return st;
}

pt_status pt_stages_gather(pt_stages *S, pt_model *whole, pt_optimizer *opt) {
  pt_comm *c = S->dpipe; /* the arrays are the backend's; the counts below are host numbers */
  int64_t nbt[PT_MAX_LAYERS];
  for (int i = 0; i < whole->nlayers; i++) nbt[i] = whole->layers[i].num_batches_tracked;
  c->what = "gathering the stages' parameters for the checkpoint";
  for (int s = 0; s < S->stages; s++) {
    const int lo = S->bounds[s], hi = S->bounds[s + 1];
    size_t off, len, boff, blen;
    pt_model_layer_tensors(whole, lo, hi, 0, &off, &len);
    pt_model_layer_tensors(whole, lo, hi, 1, &boff, &blen);
    if (len) {
      PT_TRY(pt_comm_bcast(c, whole->param + off, len * sizeof(float), s));
      for (int k = 0; k < opt->nstate; k++) PT_TRY(pt_comm_bcast(c, opt->state[k] + off, len * sizeof(float), s));
    }
    if (blen) PT_TRY(pt_comm_bcast(c, whole->buffer + boff, blen * sizeof(float), s));
    S->pipe->what = c->what;
    PT_TRY(pt_comm_bcast(S->pipe, nbt + lo, sizeof(int64_t) * (size_t)(hi - lo), s));
  }
  for (int i = 0; i < whole->nlayers; i++) whole->layers[i].num_batches_tracked = nbt[i];
  return PT_OK;
}

void pt_stages_print_plan(FILE *out, const pt_stages *S, const pt_model *whole) {
  for (int s = 0; s < S->stages; s++) {
    const int lo = S->bounds[s], hi = S->bounds[s + 1];
    fprintf(out, "  stage %d: layers %d-%d (%s .. %s), %.2f MFLOP/image\n", s, lo, hi - 1, whole->layers[lo].label,
            whole->layers[hi - 1].label, pt_pipe_range_flops(whole, lo, hi) / 1e6);
  }
}

enum { R_BUSY, R_WAIT, R_FWD, R_BWD, R_SEND, R_PEAK, R_LIVE, R_BATCHES, R_N };

pt_status pt_stages_report(FILE *out, pt_stages *S, pt_model *whole, int layer_times) {
  const pt_pipe_stage *P = &S->st;
  /* (stages, R_N) measurements, then (nlayers, 2) layer times; each stage
   * fills its own rows and the sum over the stages assembles the table. */
  double buf[PT_MAX_LAYERS * R_N + 2 * PT_MAX_LAYERS];
  const size_t n = (size_t)S->stages * R_N + 2 * (size_t)whole->nlayers;
  memset(buf, 0, sizeof buf);
  double *row = buf + (size_t)S->stage * R_N, *lt = buf + (size_t)S->stages * R_N;
  row[R_BUSY] = P->busy_s;
  row[R_WAIT] = P->wait_s;
  row[R_FWD] = P->forward_s;
  row[R_BWD] = P->backward_s;
  row[R_SEND] = P->send_s;
  row[R_PEAK] = (double)pt_pipe_peak_activation_bytes(P);
  row[R_LIVE] = P->live_max;
  row[R_BATCHES] = (double)P->batches;
  for (int i = 0; i < P->m->nlayers; i++) {
    lt[2 * (S->bounds[S->stage] + i)] = P->m->layers[i].fwd_ms;
    lt[2 * (S->bounds[S->stage] + i) + 1] = P->m->layers[i].bwd_ms;
  }
  S->pipe->what = "collecting the stages' measurements";
  PT_TRY(pt_comm_allreduce_f64(S->pipe, buf, n));
  if (layer_times)
    for (int i = 0; i < whole->nlayers; i++) {
      whole->layers[i].fwd_ms = lt[2 * i];
      whole->layers[i].bwd_ms = lt[2 * i + 1];
    }
  const double batches = buf[R_BATCHES] > 0 ? buf[R_BATCHES] : 1;
  double busy_sum = 0.0, step_max = 0.0;
  for (int s = 0; s < S->stages; s++) {
    const double *r = buf + (size_t)s * R_N, t = (r[R_BUSY] + r[R_WAIT]) / batches;
    busy_sum += r[R_BUSY] / batches;
    if (t > step_max) step_max = t;
  }
  S->bubble = step_max > 0 ? 1.0 - busy_sum / (S->stages * step_max) : 0.0;
  if (!out) return PT_OK;
  fprintf(out, "\nstages: %d, micro-batches %d, schedule %s (replica 0 of %d)\n", S->stages, P->M,
          pt_pipe_schedule_name(P->kind), S->replicas);
  fprintf(out, "%-6s %-8s %12s %12s %13s %12s %8s %16s\n", "stage", "layers", "fwd ms/step", "bwd ms/step",
          "send ms/step", "idle ms/step", "idle", "peak activations");
  for (int s = 0; s < S->stages; s++) {
    const double *r = buf + (size_t)s * R_N, t = (r[R_BUSY] + r[R_WAIT]) / batches;
    char layers[24];
    snprintf(layers, sizeof layers, "%d-%d", S->bounds[s], S->bounds[s + 1] - 1);
    fprintf(out, "%-6d %-8s %12.3f %12.3f %13.3f %12.3f %7.1f%% %9.2f MiB (%d micro-batch%s)\n", s, layers,
            1e3 * r[R_FWD] / batches, 1e3 * r[R_BWD] / batches, 1e3 * r[R_SEND] / batches,
            1e3 * r[R_WAIT] / batches,
            t > 0 ? 100.0 * r[R_WAIT] / batches / t : 0.0, r[R_PEAK] / (1 << 20), (int)r[R_LIVE],
            (int)r[R_LIVE] == 1 ? "" : "es");
  }
  const double bubble = S->bubble;
  /* Stages of unequal work: the slowest sets the pace for M - 1 micro-
   * batches and the others only fill and drain, so the best step is
   * ((M - 1) * max + sum) / M of the stages' busy times. */
  double busy_max = 0.0;
  for (int s = 0; s < S->stages; s++)
    if (buf[(size_t)s * R_N + R_BUSY] / batches > busy_max) busy_max = buf[(size_t)s * R_N + R_BUSY] / batches;
  const double best_step = ((P->M - 1) * busy_max + busy_sum) / P->M;
  const double uneven = best_step > 0 ? 1.0 - busy_sum / (S->stages * best_step) : 0.0;
  fprintf(out, "bubble: %.1f%% of the stages' time measured; ideal %.1f%% for equal stages, (p-1)/(m+p-1) with "
          "p=%d, m=%d; %.1f%% for these stages' unequal work\n",
          100.0 * bubble, 100.0 * pt_pipe_ideal_bubble(S->stages, P->M), S->stages, P->M, 100.0 * uneven);
  return PT_OK;
}

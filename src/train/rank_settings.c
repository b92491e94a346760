/* Rank 0's settings against every other rank's, once at start-up
 * (rank_settings.h). Every rank fills the same table, in the same order,
 * of fixed size whatever the settings: the comparison's own collectives
 * must not depend on what they compare. */
#include "train/rank_settings.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "pipe/schedule.h"

#define MAX_SETTINGS 48
#define VALUE_LEN 112

typedef struct {
  int n;
  const char *name[MAX_SETTINGS]; /* the flag, or what it is ("the training data") */
  char value[MAX_SETTINGS][VALUE_LEN];
} settings;

static void add(settings *s, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(settings *s, const char *name, const char *fmt, ...) {
  if (s->n == MAX_SETTINGS) return; /* room for fill()'s 41 and then some */
  s->name[s->n] = name;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->value[s->n], VALUE_LEN, fmt, ap);
  va_end(ap);
  s->n++;
}

/* As a person wrote it (0.01, not 0.00999999978): the shortest decimal
 * that reads back as v, read as a float where v is one (the flags are
 * read as floats, and --target-accuracy 0.6 is not the double 0.6), so
 * values that differ never print alike. */
static void add_float(settings *s, const char *name, double v) {
  const int is_float = (double)(float)v == v;
  char b[40];
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(b, sizeof b, "%.*g", digits, v);
    if (is_float ? (double)strtof(b, NULL) == v : strtod(b, NULL) == v) break;
  }
  add(s, name, "%s", b);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
#define FNV_START 0xcbf29ce484222325ull
#define FNV_FIELD(h, x) ((h) = fnv((h), &(x), sizeof(x)))

/* The layers and data preparation, field by field (not the struct's bytes:
 * padding, and the lines the layers were declared on, are no part of it). */
static uint64_t spec_hash(const pt_model_spec *sp) {
  uint64_t h = FNV_START;
  FNV_FIELD(h, sp->in_c);
  FNV_FIELD(h, sp->in_h);
  FNV_FIELD(h, sp->in_w);
  FNV_FIELD(h, sp->nlayers);
  for (int i = 0; i < sp->nlayers; i++) {
    const pt_layer_spec *l = &sp->layers[i];
    FNV_FIELD(h, l->kind);
    h = fnv(h, l->name, strlen(l->name) + 1);
    FNV_FIELD(h, l->out);
    FNV_FIELD(h, l->kernel);
    FNV_FIELD(h, l->stride);
    FNV_FIELD(h, l->padding);
    FNV_FIELD(h, l->bias);
    FNV_FIELD(h, l->p);
    FNV_FIELD(h, l->eps);
    FNV_FIELD(h, l->momentum);
  }
  FNV_FIELD(h, sp->loss);
  h = fnv(h, sp->mean, sizeof sp->mean);
  h = fnv(h, sp->std, sizeof sp->std);
  FNV_FIELD(h, sp->crop_pad);
  FNV_FIELD(h, sp->hflip);
  return h;
}

/* Sizes and labels: enough to tell two datasets (or two copies that
 * differ) apart without reading every image again. */
static void add_data(settings *s, const char *name, const pt_dataset *ds) {
  add(s, name, "%d images of %dx%dx%d, %d classes (labels hash %016llx)", ds->n, ds->c, ds->h, ds->w,
      ds->num_classes, (unsigned long long)fnv(FNV_START, ds->labels, (size_t)ds->n));
}

static const char *on(int v) { return v ? "on" : "off"; }

/* What the ranks must share. Left out, because they may differ without
 * changing what is trained or which collectives run: --threads (machines
 * differ in cores; results do not depend on it), the GPU index (each rank
 * takes its local rank's), --data-dir (node-local copies; the data
 * themselves are compared), --checkpoint-dir and --keep-checkpoints (rank
 * 0 alone writes; a resumed position is compared once read), --timeout
 * (how long this rank waits), and what only this rank prints or writes:
 * --quiet, --metrics, --trace, --profile, progress, --no-prefetch. */
static void fill(settings *s, const pt_train_config *c, const pt_train_plan *r, const pt_dataset *train,
                 const pt_dataset *test) {
  add(s, "--model", "%s", r->spec.name);
  add(s, "model spec", "%d layer%s (hash %016llx)", r->spec.nlayers, r->spec.nlayers == 1 ? "" : "s",
      (unsigned long long)spec_hash(&r->spec));
  add(s, "--dataset", "%s", r->data_name);
  add_data(s, "training data", train);
  add_data(s, "test data", test);
  add(s, "--parallel", "%s", c->parallel ? c->parallel : "none");
  add(s, "--stages", "%d", r->stages);
  add(s, "--micro-batches", "%d", r->micro);
  add(s, "--schedule", "%s", r->staged ? pt_pipe_schedule_name(r->pipe_kind) : "none");
  add(s, "--split", "%s", c->split ? c->split : "none (balanced)");
  add(s, "--device", "%s", r->backend == PT_BACKEND_CUDA ? "cuda" : "cpu");
  add(s, "--precision", "%s", c->precision ? c->precision : "fp32");
  add(s, "--epochs", "%d", c->epochs);
  if (c->max_steps) add(s, "--max-steps", "%lld", (long long)c->max_steps);
  else add(s, "--max-steps", "none");
  add(s, "--batch-size", "%d", r->batch);
  add(s, "--test-batch-size", "%d", r->test_batch);
  add(s, "--accum-steps", "%d", r->accum);
  add(s, "--optimizer", "%s", pt_opt_kind_name(r->opt.kind));
  add_float(s, "--lr", r->opt.lr);
  add_float(s, "--momentum", r->opt.momentum);
  add(s, "--nesterov", "%s", on(r->opt.nesterov));
  add_float(s, "--weight-decay", r->opt.weight_decay);
  add(s, "--scheduler", "%s", pt_sched_kind_name(r->sched));
  add_float(s, "--gamma", r->gamma);
  add(s, "--seed", "%llu", (unsigned long long)c->seed);
  add(s, "--no-shuffle", "%s", on(c->no_shuffle));
  add(s, "--no-dropout", "%s", on(c->no_dropout));
  add(s, "--drop-last", "%s", on(c->drop_last));
  /* Flushing denormals changes the bits of a rank's gradients. */
  add(s, "--keep-denormals", "%s", on(c->keep_denormals));
  add(s, "--sync-bn", "%s", on(c->sync_bn));
  /* The buckets are the gradient reductions: their sizes must match. */
  add_float(s, "--bucket-mb", c->bucket_mb);
  /* On GPUs the loss is read, with a reduction, every log interval. */
  if (r->backend == PT_BACKEND_CUDA) add(s, "--log-interval", "%d", c->log_interval);
  else add(s, "--log-interval", "any (CPU)");
  add(s, "--eval-every", "%lld", (long long)c->eval_every);
  add_float(s, "--target-accuracy", c->target_accuracy);
  /* Saves are collective (stages gather their parts first). */
  add(s, "--save-model", "%s", on(c->save_model));
  add(s, "--checkpoint-every", "%lld", (long long)c->checkpoint_every);
  add_float(s, "--checkpoint-interval", c->checkpoint_interval);
  add(s, "--exit-after-checkpoint", "%s", on(c->exit_after_checkpoint));
  add(s, "--resume", "%s", on(c->resume));
  add(s, "--init-from", "%s", c->init_from ? "given" : "none");
  /* The library's: a callback's wish to stop is agreed on with a reduction. */
  add(s, "on_epoch callback", "%s", c->on_epoch ? "set" : "none");
}

/* Every rank's table against rank 0's; tail ends the message. */
static pt_status agree(pt_comm *comm, const settings *mine, const char *tail, int *differ) {
  *differ = 0;
  if (comm->size == 1) return PT_OK;
  settings zero;
  memcpy(zero.value, mine->value, sizeof zero.value);
  comm->what = "the comparison of the ranks' settings";
  PT_TRY(pt_comm_bcast(comm, zero.value, sizeof zero.value, 0));
  int first = -1;
  for (int i = 0; i < mine->n && first < 0; i++)
    if (strcmp(mine->value[i], zero.value[i])) first = i;
  /* Which ranks differ, and in what: the lowest one is named. */
  double *at = pt_calloc((size_t)comm->size, sizeof *at);
  if (!at) return PT_ERR_NOMEM;
  at[comm->rank] = first + 1;
  pt_status st = pt_comm_allreduce_f64(comm, at, (size_t)comm->size);
  int rank = -1, which = -1, others = 0;
  for (int k = 0; st == PT_OK && k < comm->size; k++)
    if (at[k] > 0 && rank < 0) {
      rank = k;
      which = (int)at[k] - 1;
    } else if (at[k] > 0) {
      others++;
    }
  free(at);
  PT_TRY(st);
  if (rank < 0) return PT_OK;
  char theirs[VALUE_LEN];
  memcpy(theirs, mine->value[which], VALUE_LEN);
  PT_TRY(pt_comm_bcast(comm, theirs, sizeof theirs, rank));
  theirs[VALUE_LEN - 1] = 0;
  *differ = 1;
  char more[64] = "";
  if (others) snprintf(more, sizeof more, " (%d more rank%s differ%s from rank 0)", others, others == 1 ? "" : "s",
                       others == 1 ? "s" : "");
  return pt_fail(PT_ERR_ARG, "rank %d's %s is %s, rank 0's is %s: %s%s", rank, mine->name[which], theirs,
                 zero.value[which], tail, more);
}

pt_status pt_rank_settings_agree(pt_comm *comm, const pt_train_config *c, const pt_train_plan *r,
                                 const pt_dataset *train, const pt_dataset *test, int *differ) {
  settings s;
  memset(&s, 0, sizeof s);
  fill(&s, c, r, train, test);
  return agree(comm, &s, "every rank must be started with the same training flags", differ);
}

pt_status pt_rank_position_agree(pt_comm *comm, int64_t step, int epoch, int batch, int *differ) {
  settings s;
  memset(&s, 0, sizeof s);
  add(&s, "checkpoint to resume from", "at step %lld (epoch %d, batch %d)", (long long)step, epoch, batch);
  return agree(comm, &s, "every rank must see the same checkpoints in --checkpoint-dir", differ);
}

/* pt_run: a training run through the trainer (src/train), which the
 * command line's `ptrain train` drives the same way. */
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "comm/comm.h"
#include "train/config_bounds.h"
#include "util/stop.h"
#include "util/error.h"

void pt_config_defaults(pt_config *c) {
  if (!c) return;
  pt_train_config t;
  pt_train_config_defaults(&t);
  memset(c, 0, sizeof *c);
  c->epochs = t.epochs;
  c->batch_size = t.batch_size;
  c->test_batch_size = t.test_batch_size;
  c->lr = t.lr;
  c->momentum = t.momentum;
  c->weight_decay = t.weight_decay;
  c->gamma = t.gamma;
  c->seed = t.seed;
  c->threads = t.threads;
  c->shuffle = 1;
  c->dropout = 1;
  c->accum_steps = t.accum_steps;
  c->bucket_mb = t.bucket_mb;
  c->timeout_s = t.timeout_s;
  c->checkpoint_dir = t.checkpoint_dir;
  c->keep_checkpoints = t.keep_checkpoints;
  c->log_interval = t.log_interval;
  c->prefetch = t.prefetch;
}

static void to_trainer(const pt_config *p, pt_train_config *t) {
  pt_train_config_defaults(t);
  t->epochs = p->epochs;
  /* 0 (a zeroed struct) reads as -1, the preset's; other values below 1
   * are slips that the check names. */
  t->batch_size = p->batch_size == 0 ? PT_UNSET_INT : p->batch_size;
  t->test_batch_size = p->test_batch_size == 0 ? PT_UNSET_INT : p->test_batch_size;
  t->lr = p->lr;
  t->optimizer = p->optimizer;
  t->momentum = p->momentum;
  t->nesterov = p->nesterov;
  t->weight_decay = p->weight_decay;
  t->scheduler = p->scheduler;
  t->gamma = p->gamma;
  t->seed = p->seed;
  t->threads = p->threads;
  t->no_shuffle = !p->shuffle;
  t->no_dropout = !p->dropout;
  t->max_steps = p->max_steps;
  t->accum_steps = p->accum_steps;
  t->drop_last = p->drop_last;
  t->parallel = p->parallel;
  t->workers = p->workers;
  t->device = p->device;
  t->devices = p->devices;
  t->precision = p->precision;
  t->cuda_graphs = p->cuda_graphs;
  t->stages = p->stages;
  t->micro_batches = p->micro_batches;
  t->schedule = p->schedule;
  t->split = p->split;
  t->bucket_mb = p->bucket_mb;
  t->sync_bn = p->sync_bn;
  t->timeout_s = p->timeout_s;
  t->checkpoint_dir = p->checkpoint_dir ? p->checkpoint_dir : "checkpoints";
  t->save_model = p->save_model;
  t->keep_checkpoints = p->keep_checkpoints;
  t->checkpoint_every = p->checkpoint_every;
  t->checkpoint_interval = p->checkpoint_interval;
  t->exit_after_checkpoint = p->exit_after_checkpoint;
  t->resume = p->resume;
  t->init_from = p->init_from;
  t->eval_every = p->eval_every;
  t->target_accuracy = p->target_accuracy;
  t->quiet = p->quiet;
  t->progress = p->progress;
  t->log_interval = p->log_interval;
  t->metrics_path = p->metrics_path;
  t->profile = p->profile;
  t->trace_path = p->trace_path;
  t->prefetch = p->prefetch;
  t->keep_denormals = p->keep_denormals;
  t->on_step = p->on_step;
  t->on_epoch = p->on_epoch;
  t->user = p->user;
}

/* A run's result before it trained, or where it could not: the header's
 * NaN for numbers it has none of, so that no caller reads 0 as a loss or
 * an accuracy. */
static void result_none(pt_result *r) {
  memset(r, 0, sizeof *r);
  r->train_loss = r->test_loss = r->test_acc = NAN;
  r->target_seconds = NAN;
  r->target_step = -1;
}

static int is(const char *a, const char *b) { return a && !strcmp(a, b); }

/* ddp, and stages when a launcher started several processes: MPI's world,
 * started before anything a rank could fail alone, so that such a failure
 * reaches the other ranks instead of leaving them in MPI_Init for ever. */
static pt_status start_mpi(pt_run *run, const pt_config *cfg) {
  const int ddp = is(cfg->parallel, "ddp");
  const int staged = is(cfg->parallel, "model") || is(cfg->parallel, "pipeline");
  if (!ddp && !(staged && pt_comm_mpi_launched())) return PT_OK;
  if (!pt_comm_mpi_launched())
    return pt_fail(PT_ERR_ARG, "parallel \"ddp\" runs one process per rank: start them with mpirun -np N or "
                               "srun, or use \"dp\" for workers that are threads of one process");
  /* A timeout out of bounds is the checks' to name, after this. */
  const double timeout = run->cfg.timeout_s >= PT_TIMEOUT_MIN && run->cfg.timeout_s <= PT_TIMEOUT_MAX
                             ? run->cfg.timeout_s : PT_TIMEOUT_MAX;
  PT_TRY(pt_comm_mpi_create(&run->comm, timeout));
  /* mpirun counts a rank that exits without MPI_Finalize as failed; the
   * caller may not know MPI is there at all. Finalizing twice is harmless
   * (pt_comm_mpi_finalize checks). */
  static int finalize_registered;
  if (!finalize_registered && atexit(pt_comm_mpi_finalize) == 0) finalize_registered = 1;
  return PT_OK;
}

static pt_status check_run(pt_run *run, pt_net *net, const pt_data *train, const pt_data *test,
                           const pt_config *cfg) {
  if (!net || !train || !test)
    return pt_fail(PT_ERR_ARG, "pt_run_create: %s is NULL", !net ? "net" : !train ? "train" : "test");
  if (cfg->exit_after_checkpoint && !cfg->checkpoint_every && !(cfg->checkpoint_interval > 0))
    return pt_fail(PT_ERR_ARG, "exit_after_checkpoint needs checkpoint_every or checkpoint_interval, which say when "
                               "to save and stop");
  return pt_train_config_check_numbers(&run->cfg) != PT_OK ? PT_ERR_ARG : PT_OK;
}

pt_status pt_run_create(pt_net *net, const pt_data *train, const pt_data *test, const pt_config *cfg,
                        pt_run **out) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_run_create: out is NULL");
  *out = NULL;
  if (!cfg) return pt_fail(PT_ERR_ARG, "pt_run_create: cfg is NULL");
  pt_run *run = calloc(1, sizeof *run);
  if (!run) return pt_fail(PT_ERR_NOMEM, "out of memory for a run");
  run->pub = *cfg;
  to_trainer(&run->pub, &run->cfg);
  pt_status st = start_mpi(run, cfg);
  if (st == PT_OK) {
    st = check_run(run, net, train, test, cfg);
    int first, kind;
    char why[PT_ERROR_MAX];
    if (run->comm && run->comm->size > 1) {
      const pt_status agreed = pt_comm_agree_checks(run->comm, st != PT_OK, &first, &kind, why, sizeof why);
      if (agreed != PT_OK) st = agreed;
      else if (first >= 0 && first != run->comm->rank) st = pt_fail(PT_ERR_ARG, "rank %d of %d: %s", first,
                                                                     run->comm->size, why);
    }
  }
  if (st != PT_OK) {
    pt_comm_destroy(run->comm);
    free(run);
    return st;
  }
  run->net = net;
  run->train = train;
  run->test = test;
  pt_train_config *t = &run->cfg;
  t->spec = &net->spec;
  t->spec_text = net->spec_text;
  t->train_data = &train->ds;
  t->test_data = &test->ds;
  t->data_dir = train->dir;
  t->data_name = train->kind >= 0 ? pt_dataset_kind_name((pt_dataset_kind)train->kind) : "the caller's data";
  t->init_model = net->m;
  result_none(&run->result);
  *out = run;
  return PT_OK;
}

pt_status pt_run_check(const pt_net *net, const char *dataset, const pt_config *cfg, pt_comm *comm,
                       pt_train_plan *plan) {
  if (!net || !cfg) return pt_fail(PT_ERR_ARG, "pt_run_check: %s is NULL", !net ? "net" : "cfg");
  pt_train_config t;
  to_trainer(cfg, &t);
  PT_TRY(pt_train_config_check_numbers(&t));
  t.spec = &net->spec;
  t.spec_text = net->spec_text;
  t.dataset = dataset;
  t.comm = comm;
  pt_train_plan own;
  return pt_train_plan_make(&t, plan ? plan : &own);
}

/* A stop signal, the trace and MPI belong to the process: one run at a time. */
static atomic_flag training = ATOMIC_FLAG_INIT;
/* The thread that trains it, where the callbacks run. */
static _Thread_local int training_here;

int pt_run_training_here(void) { return training_here; }

static pt_status train_alone(pt_run *run);

pt_status pt_run_train(pt_run *run) {
  if (!run) return pt_fail(PT_ERR_ARG, "pt_run_train: run is NULL");
  if (run->trained) return pt_fail(PT_ERR_STATE, "this run has trained already: create another to go on");
  if (atomic_flag_test_and_set(&training))
    return pt_fail(PT_ERR_STATE, "another run is training in this process; one trains at a time");
  run->trained = 1;
  training_here = 1;
  pt_status st = train_alone(run);
  training_here = 0;
  atomic_flag_clear(&training);
  return st;
}

static pt_status train_alone(pt_run *run) {
  pt_train_config *t = &run->cfg;
  t->comm = run->comm; /* MPI's world, where pt_run_create started it */
  pt_model *final = NULL;
  t->final_model = &final;
  /* A stop requested before the run started is this run's to answer (a
   * preemption while the data loaded): it stops after its first step. The
   * request is spent once the run is over, so that the next run in the
   * process starts without it. */
  pt_train_result r;
  pt_status st = pt_train_run(t, run->pub.log, &r);
  run->stop_saved = pt_train_stop_is_saved();
  run->stop_signal = pt_train_stop_take();
  run->failed_alike = st != PT_OK && r.failed_alike;
  t->final_model = NULL;
  if (st != PT_OK) {
    pt_model_destroy(final);
    return st;
  }
  if (final) {
    pt_model_destroy(run->net->m);
    run->net->m = final;
    /* The weights now belong to this data: a save records it, and the
     * net's dataset (eval's split, predict's class names) is this one;
     * the caller's arrays are none of ours, and record none. */
    snprintf(run->net->trained_on, sizeof run->net->trained_on, "%s",
             run->train->kind >= 0 ? pt_dataset_kind_name((pt_dataset_kind)run->train->kind) : "");
  }
  pt_result *o = &run->result;
  o->epochs_done = r.epochs_done;
  o->steps = r.steps;
  o->train_loss = r.train_loss;
  o->test_loss = r.test_loss;
  o->test_acc = r.test_acc;
  o->images_per_s = r.images_per_s;
  o->seconds = r.seconds;
  o->target_seconds = r.target_seconds;
  o->target_step = r.target_step;
  o->stopped = r.stopped_by == PT_STOP_CALLBACK          ? PT_RUN_STOPPED_CALLBACK
               : r.stopped_by == PT_STOP_CHECKPOINT_EXIT ? PT_RUN_STOPPED_CHECKPOINT
               : r.stopped_by                            ? PT_RUN_STOPPED_SIGNAL
                                                         : PT_RUN_COMPLETE;
  return PT_OK;
}

const pt_result *pt_run_result(const pt_run *run) { return run ? &run->result : NULL; }

void pt_run_free(pt_run *run) {
  if (!run) return;
  pt_comm_destroy(run->comm);
  free(run);
}

void pt_request_stop(int sig) { pt_train_stop_request(sig > 0 ? sig : SIGTERM); }

pt_status pt_train(pt_net *net, const pt_data *train, const pt_data *test, const pt_config *cfg, pt_result *result) {
  pt_run *run;
  pt_status st = pt_run_create(net, train, test, cfg, &run);
  if (st != PT_OK) {
    if (result) result_none(result);
    return st;
  }
  st = pt_run_train(run);
  if (result) *result = run->result;
  pt_run_free(run);
  return st;
}

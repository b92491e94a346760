/* The training loop: epochs, evaluation, learning-rate schedule,
 * checkpoint cadence and resume. The CLI fills a pt_train_config; fields
 * left at their "unset" values take the model preset's defaults.
 */
#ifndef PT_TRAIN_TRAINER_H
#define PT_TRAIN_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "comm/comm.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "pipe/schedule.h"

#define PT_UNSET_INT (-1)
#define PT_UNSET_STR NULL
/* Floats use NAN for "unset". */

typedef struct {
  const char *model;          /* preset name */
  const char *model_file;     /* or a spec file */
  const char *dataset;        /* NULL: the preset's */
  const char *data_dir;       /* NULL: the dataset's default */
  int epochs;
  int batch_size, test_batch_size;
  float lr;
  const char *optimizer;
  float momentum;
  int nesterov;
  float weight_decay;
  const char *scheduler;
  float gamma;
  uint64_t seed;
  int threads;
  int log_interval;
  int64_t max_steps;          /* 0 = no limit */
  int no_shuffle;
  int no_dropout;             /* for equivalence tests: dropout layers pass through */
  const char *init_from;
  int save_model;
  const char *checkpoint_dir;
  int keep_checkpoints;       /* complete checkpoints kept (default 2) */
  int64_t checkpoint_every;   /* also save every N steps (0: only at epoch ends) */
  double checkpoint_interval; /* also save every this many seconds (0: no) */
  int64_t eval_every;         /* also evaluate on the test split every N steps, inside epochs (0: no) */
  double target_accuracy;     /* stop at the first evaluation with test accuracy >= this (0: no) */
  int exit_after_checkpoint;  /* stop after the first --checkpoint-every/--checkpoint-interval save (HTCondor's
                                 self-checkpointing: the job exits, its checkpoint is transferred, it restarts) */
  int resume;
  const char *metrics_path;
  int quiet;
  int progress;               /* 1: a progress bar (a terminal); 0: plain lines */
  int prefetch;
  int keep_denormals;         /* 0: flush denormal floats to zero (util/fpmode.h) */
  int profile;                /* print where the time went at the end */
  const char *trace_path;     /* write a Chrome trace of the run */
  /* Data parallel. batch_size is per worker, as in PyTorch's DDP. */
  const char *parallel;       /* NULL or "none", "dp", "ddp" */
  int workers;                /* dp: replicas, one thread each (0: from devices, else 2) */
  const char *devices;        /* dp: "cpu:0,cpu:1,..." or "cuda:0,cuda:1,..." (sets workers) */
  const char *device;         /* "cpu", "cuda", "cuda:N": where a single run or each ddp rank trains */
  const char *precision;      /* NULL or "fp32", "tf32", "bf16" (GPUs: what GEMMs and convolutions multiply in) */
  int cuda_graphs;            /* one GPU: capture the step as a CUDA graph and replay it (train/graph_step.h):
                               * 0 where the plan allows, 1 on (an error where it cannot), -1 off */
  double bucket_mb;           /* gradient bucket size (default 25) */
  int accum_steps;            /* micro-batches per optimizer step (default 1) */
  int drop_last;              /* drop the shard tail and the last incomplete batch */
  int sync_bn;                /* batch-norm statistics over all workers' batches */
  double timeout_s;           /* a collective waits this long for the other workers */
  pt_comm *comm;              /* ddp, and stages as MPI ranks: the MPI world, made by the caller */
  /* Model and pipeline parallelism (--parallel model|pipeline). */
  int stages;                 /* MPI ranks: stages per replica (0: all ranks) */
  int micro_batches;          /* pipeline: micro-batches per batch (0: 4) */
  const char *schedule;       /* pipeline: "gpipe" or "1f1b" (NULL: 1f1b) */
  const char *split;          /* layer names or indices starting stages 1.. (NULL: balance FLOPs) */
  /* The library's (src/api): the model, the data and the weights as
   * values rather than names, and callbacks. NULL: the names above. */
  const pt_model_spec *spec;  /* instead of model, model_file */
  const char *spec_text;      /* its text, recorded in checkpoints */
  const pt_dataset *train_data, *test_data; /* instead of dataset, data_dir */
  const char *data_name;      /* what to call them in the report */
  const pt_model *init_model; /* start from its weights (a CPU model of spec) unless resume or init_from */
  pt_model **final_model;     /* gets the weights the run ended with, as a new CPU model (this process's
                                 first worker's; a staged run's rank 0 only) */
  int (*on_step)(const pt_step *step, void *user);    /* nonzero: stop */
  int (*on_epoch)(const pt_epoch *epoch, void *user); /* nonzero: stop after this epoch */
  void *user;
} pt_train_config;

void pt_train_config_defaults(pt_train_config *c);

/* pt_train_result.stopped_by after a save made the run stop (exit_after_checkpoint). */
#define PT_STOP_CHECKPOINT_EXIT (-2)
/* pt_train_result.stopped_by after a callback asked to stop. */
#define PT_STOP_CALLBACK (-3)

/* What a run measured, for callers and tests. */
typedef struct {
  int epochs_done;
  int64_t steps;
  int64_t steps_run;   /* of steps, those this run took (a resumed run's steps count the checkpoint's) */
  double train_loss, test_loss, test_acc;
  double images_per_s;
  double seconds;
  double target_seconds; /* from the start of training to the evaluation that reached target_accuracy; NaN: not reached */
  int64_t target_step;
  int stopped_by; /* PT_STOP_CALLBACK, or a stop was requested (pt_train_stop_request): the signal, or -1 where it reached only
                     another worker, or PT_STOP_CHECKPOINT_EXIT after a save (exit_after_checkpoint); the run
                     wrote a checkpoint and can be resumed */
  int failed_alike; /* set on failure: every rank failed with the same message (their settings differ), so
                       none needs taking down */
} pt_train_result;

/* The hyper-parameters of a run after flags and preset defaults are merged. */
typedef struct {
  pt_model_spec spec;
  const char *spec_text;   /* the preset's or the caller's text; NULL for a spec file named by model_file */
  pt_dataset_kind dataset;
  const char *data_dir;     /* NULL: the caller's data */
  const char *data_name;    /* "fashion-mnist", or the caller's name for its data */
  int batch, test_batch, eval_batch;
  int batch_room;           /* the most samples a training batch holds: batch, or the split where smaller */
  pt_opt_config opt;
  pt_sched_kind sched;
  float gamma;
  int threads;              /* per worker */
  int world;                /* workers in all (dp: threads, ddp: ranks) */
  int local;                /* workers sharing this machine's cores */
  int cores;                /* this machine's cores online */
  int accum;
  int staged;               /* model or pipeline parallel */
  int stages, replicas;     /* world = stages * replicas */
  int micro;                /* micro-batches per batch */
  pt_pipe_schedule pipe_kind;
  pt_backend_kind backend;  /* where every worker trains */
  int devices[PT_MAX_DEVICES]; /* the device of worker i (dp), or of this run/rank ([0]) */
  int device_pinned;        /* ddp: --device cuda:N pins every rank to N (else: local rank) */
  pt_precision precision;   /* --precision (fp32 on the CPU) */
  int cuda_graphs;          /* the step is captured: asked for or allowed by the rest of the plan */
} pt_train_plan;

pt_status pt_train_plan_make(const pt_train_config *cfg, pt_train_plan *plan);
/* The numeric settings within the bounds of ptrain train's flags (NaN: the
 * preset's, where that applies); PT_ERR_ARG naming the first that is not. */
pt_status pt_train_config_check_numbers(const pt_train_config *cfg);

/* The loader settings a model spec implies: its normalisation and, when
 * augment, its training augmentation; one process (world 1). Order, seed
 * and prefetch are left to the caller. */
void pt_train_loader_config(const pt_model_spec *spec, int batch, int augment, pt_loader_config *lc);

/* Whether the model takes the images of ds (the which split of data_name)
 * and has an output for each of its labels; PT_ERR_ARG saying which not,
 * with hint after the shapes. */
pt_status pt_train_check_fit(const pt_model_spec *spec, const pt_dataset *ds, const char *data_name,
                             const char *which, const char *hint);
/* Whether the training split of n samples gives each replica a batch of
 * the plan's: with drop_last, one smaller than the batch gives none. */
pt_status pt_train_check_batches(const pt_train_plan *r, int drop_last, int64_t n);

pt_status pt_train_run(const pt_train_config *cfg, FILE *out, pt_train_result *result);

/* Loads a model spec from a preset name or a spec file (exactly one given). */
pt_status pt_train_load_spec(const char *model, const char *model_file, pt_model_spec *spec);

#endif

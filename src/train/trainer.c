/* The training loop. Everything a run needs is allocated before the first
 * step (model activations, loader buffers, optimizer state), so the steady
 * state allocates nothing. Each epoch: set the learning rate from the
 * schedule, train over this epoch's batches, evaluate on the test split,
 * report, checkpoint. A run stopped by --max-steps checkpoints its exact
 * position, and --resume continues from it bit for bit: data order,
 * augmentation and dropout are functions of (seed, epoch, step), and the
 * optimizer state travels in the checkpoint.
 */
#include "train/trainer.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "io/metrics.h"
#include "io/progress.h"
#include "nn/presets.h"
#include "ops/cpu/isa/cpu_level.h"
#include "ops/cpu/ops.h"
#include "pipe/partition.h"
#include "comm/comm.h"
#include "cuda/device.h"
#include "train/checkpoint.h"
#include "train/checkpoint_lock.h"
#include "util/stop.h"
#include "train/evaluate.h"
#include "train/gpu_watch.h"
#include "train/graph_step.h"
#include "train/grad_sync.h"
#include "train/profile.h"
#include "train/rank_settings.h"
#include "train/stages.h"
#include "train/warm_up.h"
#include "train/step.h"
#include "util/cores.h"
#include "util/fpmode.h"
#include "util/notice.h"
#include "util/philox.h"
#include "util/timer.h"
#include "util/trace.h"

/* Evaluation batches are cut to keep activation memory under this; results
 * do not depend on the cut (sums are per sample). */
#define EVAL_ACTIVATION_BUDGET (512u << 20)

void pt_train_config_defaults(pt_train_config *c) {
  memset(c, 0, sizeof *c);
  c->epochs = 1;
  c->batch_size = c->test_batch_size = PT_UNSET_INT;
  c->lr = c->momentum = c->weight_decay = c->gamma = NAN;
  c->seed = 1;
  c->threads = 0;
  c->log_interval = 10;
  c->checkpoint_dir = "checkpoints";
  c->keep_checkpoints = 2;
  c->prefetch = 1;
  c->bucket_mb = 25.0;
  c->accum_steps = 1;
  c->timeout_s = 300.0;
}

/* "cpu:0,cpu:1,..." or "cuda:0,cuda:1,..." -> the number of devices and,
 * into r, their kind and indices; all of one kind, each named once except
 * where gpu_repeats allows a GPU twice (stages may share one). */
static pt_status parse_devices(const char *list, int *count, pt_train_plan *r, int gpu_repeats) {
  int n = 0;
  unsigned char seen[PT_MAX_DEVICES] = {0};
  const char *p = list;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char dev[64];
    if (len == 0 || len >= sizeof dev)
      return pt_fail(PT_ERR_ARG, "--devices '%s': expected a list like cpu:0,cpu:1 or cuda:0,cuda:1", list);
    memcpy(dev, p, len);
    dev[len] = 0;
    pt_backend_kind kind;
    int k;
    PT_TRY(pt_device_parse(dev, "--devices", &kind, &k));
    if (n > 0 && kind != r->backend)
      return pt_fail(PT_ERR_ARG, "--devices '%s': mixes CPU and CUDA devices; name devices of one kind", list);
    if (seen[k] && !(gpu_repeats && kind == PT_BACKEND_CUDA))
      return pt_fail(PT_ERR_ARG, "--devices: %s is named twice", dev);
    seen[k] = 1;
    r->backend = kind;
    r->devices[n++] = k;
    p += len + (e ? 1 : 0);
    if (e && !*p) return pt_fail(PT_ERR_ARG, "--devices '%s': a trailing comma", list);
  }
  if (n == 0) return pt_fail(PT_ERR_ARG, "--devices: empty list; expected cpu:0,cpu:1,... or cuda:0,cuda:1,...");
  *count = n;
  return PT_OK;
}

pt_status pt_train_load_spec(const char *model, const char *model_file, pt_model_spec *spec) {
  if (model && model_file) return pt_fail(PT_ERR_ARG, "give either --model or --model-file, not both");
  if (model_file) return pt_spec_parse_file(model_file, spec);
  return pt_preset_spec(model ? model : "mnist-cnn", spec);
}

/* torch.optim's defaults, as PyTorch 2.15 has them (SGD's 0.001; older
 * releases had none for SGD). */
static float torch_default_lr(pt_opt_kind k) {
  switch (k) {
    case PT_OPT_ADAM:
    case PT_OPT_ADAMW:
    case PT_OPT_SGD: return 0.001f;
    case PT_OPT_ADADELTA: return 1.0f;
  }
  return 0.001f;
}

/* The ranks this one's CPUs are shared with (comm.h): what the cores a
 * process may use are divided among for its threads. */
static int cpu_sharers(const pt_comm *comm) { return comm->cpu_sharers > 0 ? comm->cpu_sharers : comm->local_size; }

/* --parallel model and pipeline: stages are the --devices of this process
 * (threads), or the ranks of an MPI launch, stages * replicas of them. */
static pt_status plan_stages(const pt_train_config *c, pt_train_plan *r, int pipeline, int *local) {
  r->staged = 1;
  r->micro = 1;
  r->pipe_kind = PT_PIPE_GPIPE;
  if (pipeline) {
    r->micro = c->micro_batches > 0 ? c->micro_batches : 4;
    r->pipe_kind = PT_PIPE_1F1B;
    if (c->schedule) PT_TRY(pt_pipe_schedule_parse(c->schedule, &r->pipe_kind));
  } else if (c->micro_batches > 1 || c->schedule) {
    return pt_fail(PT_ERR_ARG, "--micro-batches and --schedule are for --parallel pipeline; --parallel model "
                               "runs each batch whole");
  }
  if (c->workers > 0) return pt_fail(PT_ERR_ARG, "--workers is for --parallel dp; stages are --devices");
  if (c->accum_steps > 1)
    return pt_fail(PT_ERR_ARG, "--accum-steps with --parallel %s: micro-batches already accumulate gradients "
                               "(--micro-batches)", pipeline ? "pipeline" : "model");
  if (c->sync_bn) return pt_fail(PT_ERR_ARG, "--sync-bn is for data parallelism (dp, ddp), not model stages");
  if (c->comm) { /* MPI: one stage per rank */
    if (c->devices)
      return pt_fail(PT_ERR_ARG, "--devices names this process's devices; under mpirun or srun every rank is a "
                                 "stage (--stages S makes replicas of S stages)");
    r->world = c->comm->size;
    r->stages = c->stages > 0 ? c->stages : r->world;
    if (r->world % r->stages)
      return pt_fail(PT_ERR_ARG, "--stages %d: the %d ranks cannot form whole replicas of %d stages", r->stages,
                     r->world, r->stages);
    r->replicas = r->world / r->stages;
    *local = cpu_sharers(c->comm);
  } else {
    int n;
    /* Stages are threads here, each on its device; two may share a GPU,
     * each with its own stream. */
    PT_TRY(parse_devices(c->devices ? c->devices : "cpu:0,cpu:1", &n, r, 1));
    if (c->stages > 0 && c->stages != n)
      return pt_fail(PT_ERR_ARG, "--stages %d but --devices names %d devices", c->stages, n);
    r->world = r->stages = *local = n;
    r->replicas = 1;
  }
  if (r->micro > r->batch)
    return pt_fail(PT_ERR_ARG, "--micro-batches %d is more than the batch size %d", r->micro, r->batch);
  return PT_OK;
}

/* Why this run's step cannot be captured as a CUDA graph, into why;
 * 0 where it can. */
static int graph_refusal(const pt_train_config *c, const pt_train_plan *r, char *why, size_t size) {
  if (r->backend != PT_BACKEND_CUDA)
    snprintf(why, size, "--cuda-graphs is for a GPU (--device cuda); the CPU runs its ops as they come");
  else if (r->staged || r->world > 1)
    snprintf(why, size, "--cuda-graphs captures the step of one GPU; dp, ddp and stages are not captured");
  else if (r->accum > 1)
    snprintf(why, size, "--cuda-graphs captures whole optimizer steps; not with --accum-steps %d", r->accum);
  else if (c->profile || c->trace_path)
    snprintf(why, size, "--cuda-graphs runs the step as one launch; --profile and --trace time each layer, so they "
                        "need it off");
  else return 0;
  return 1;
}

pt_status pt_train_check_fit(const pt_model_spec *s, const pt_dataset *ds, const char *data_name,
                             const char *which, const char *hint) {
  if (ds->c != s->in_c || ds->h != s->in_h || ds->w != s->in_w)
    return pt_fail(PT_ERR_ARG, "model %s takes %dx%dx%d input but the %s images of %s are %dx%dx%d%s", s->name,
                   s->in_c, s->in_h, s->in_w, which, data_name, ds->c, ds->h, ds->w, hint);
  pt_model_summary sum;
  PT_TRY(pt_model_summarize(s, &sum));
  char what[160];
  snprintf(what, sizeof what, "the %s split of %s", which, data_name);
  return pt_dataset_check_classes(ds, sum.classes, s->name, what);
}

pt_status pt_train_check_batches(const pt_train_plan *r, int drop_last, int64_t n) {
  /* The sampler drops the split's tail to a multiple of the replicas, and
   * each replica its last short batch; without --drop-last it pads. */
  const int64_t shard = n / r->replicas;
  if (drop_last && shard < r->batch)
    return pt_fail(PT_ERR_ARG, "no training batch: %lld samples per worker with --drop-last and batch %d; give a "
                   "smaller --batch-size or leave out --drop-last", (long long)shard, r->batch);
  return PT_OK;
}

/* The trace replaces its file whole, at the end: the metrics that
 * --metrics appended there would be lost. */
static pt_status check_outputs(const pt_train_config *c) {
  struct stat a, b;
  if (c->metrics_path && c->trace_path &&
      (!strcmp(c->metrics_path, c->trace_path) || (stat(c->metrics_path, &a) == 0 && stat(c->trace_path, &b) == 0 &&
                                                    a.st_dev == b.st_dev && a.st_ino == b.st_ino)))
    return pt_fail(PT_ERR_ARG, "--metrics and --trace name the same file, %s: the trace, written at the end, would "
                   "replace the metrics; give them two", c->trace_path);
  return PT_OK;
}

pt_status pt_train_plan_make(const pt_train_config *c, pt_train_plan *r) {
  memset(r, 0, sizeof *r);
  PT_TRY(check_outputs(c));
  if (c->spec) {
    r->spec = *c->spec;
    r->spec_text = c->spec_text;
  } else {
    PT_TRY(pt_train_load_spec(c->model, c->model_file, &r->spec));
    const pt_preset *p = c->model_file ? NULL : pt_preset_find(c->model ? c->model : "mnist-cnn");
    r->spec_text = p ? p->text : NULL;
  }
  const pt_train_defaults *d = &r->spec.defaults;
  if (c->train_data) {
    if (!c->test_data) return pt_fail(PT_ERR_ARG, "training data but no test data: give the split to evaluate on");
    r->data_name = c->data_name ? c->data_name : "the caller's data";
    r->data_dir = c->data_dir; /* where they were read from, for the report; NULL: arrays */
  } else {
    PT_TRY(pt_dataset_kind_parse(c->dataset ? c->dataset : d->dataset, &r->dataset));
    r->data_dir = c->data_dir ? c->data_dir : pt_dataset_default_dir(r->dataset);
    r->data_name = pt_dataset_kind_name(r->dataset);
  }
  r->batch = c->batch_size != PT_UNSET_INT ? c->batch_size : d->batch;
  r->test_batch = c->test_batch_size != PT_UNSET_INT ? c->test_batch_size : d->test_batch;
  pt_opt_kind kind;
  PT_TRY(pt_opt_kind_parse(c->optimizer ? c->optimizer : d->optimizer, &kind));
  pt_opt_config_defaults(&r->opt, kind);
  /* The preset's learning rate was tuned for its optimizer; with another
   * optimizer, PyTorch's default for that one is the better start. */
  int preset_opt = !c->optimizer || !strcmp(c->optimizer, d->optimizer);
  /* A spec that names an optimizer but no rate gets PyTorch's default for
   * it, as --optimizer does (Adam at SGD's 0.01 once). */
  const float spec_lr = !isnan(d->lr) ? d->lr : kind == PT_OPT_SGD ? PT_SPEC_SGD_LR : torch_default_lr(kind);
  r->opt.lr = !isnan(c->lr) ? c->lr : preset_opt ? spec_lr : torch_default_lr(kind);
  r->opt.momentum = !isnan(c->momentum) ? c->momentum : preset_opt ? d->momentum : 0.0f;
  if (!isnan(c->weight_decay)) r->opt.weight_decay = c->weight_decay;
  else if (preset_opt && d->weight_decay > 0) r->opt.weight_decay = d->weight_decay;
  r->opt.nesterov = c->nesterov;
  if (kind != PT_OPT_SGD && (c->nesterov || (!isnan(c->momentum) && c->momentum > 0)))
    return pt_fail(PT_ERR_ARG, "--momentum and --nesterov apply to --optimizer sgd, not %s", pt_opt_kind_name(kind));
  /* A spec's defaults keep the same rule: its parser refuses a momentum
   * beside another default optimizer, naming the lines, and another
   * --optimizer than the spec's takes no momentum from it (above). */
  PT_TRY(pt_opt_config_check(&r->opt));
  PT_TRY(pt_sched_kind_parse(c->scheduler ? c->scheduler : d->scheduler, &r->sched));
  if (!isnan(c->gamma) && r->sched != PT_SCHED_STEP)
    return pt_fail(PT_ERR_ARG, "--gamma applies to --scheduler step, not %s", pt_sched_kind_name(r->sched));
  r->gamma = !isnan(c->gamma) ? c->gamma : d->gamma;
  const char *par = c->parallel ? c->parallel : "none";
  int local = 1; /* workers sharing this machine's cores */
  r->world = 1;
  if (!strcmp(par, "dp")) {
    int n = c->workers > 0 ? c->workers : 2;
    if (c->devices) {
      PT_TRY(parse_devices(c->devices, &n, r, 0));
      if (c->workers > 0 && c->workers != n)
        return pt_fail(PT_ERR_ARG, "--workers %d but --devices names %d devices", c->workers, n);
    }
    r->world = local = n;
  } else if (!strcmp(par, "ddp")) {
    if (!c->comm) return pt_fail(PT_ERR_ARG, "--parallel ddp: no communicator (the caller makes the MPI world)");
    if (c->workers > 0 || c->devices)
      return pt_fail(PT_ERR_ARG, "--workers and --devices are for --parallel dp; under ddp the launcher starts "
                                 "one process per rank (mpirun -np N)");
    r->world = c->comm->size;
    local = cpu_sharers(c->comm);
  } else if (!strcmp(par, "model") || !strcmp(par, "pipeline")) {
    PT_TRY(plan_stages(c, r, !strcmp(par, "pipeline"), &local));
  } else if (strcmp(par, "none")) {
    return pt_fail(PT_ERR_ARG, "--parallel %s: expected none, dp, ddp, model or pipeline", par);
  } else if (c->workers > 1 || c->devices) {
    return pt_fail(PT_ERR_ARG, "--workers and --devices need --parallel dp, model or pipeline");
  } else if (c->sync_bn) {
    return pt_fail(PT_ERR_ARG, "--sync-bn pools batch-norm statistics over --parallel dp or ddp workers; this run "
                               "has one");
  }
  if (c->device) {
    if (c->devices)
      return pt_fail(PT_ERR_ARG, "--device names the one device of a run or rank; --devices lists a dp run's "
                                 "devices: give one of them");
    int k;
    PT_TRY(pt_device_parse_one(c->device, "--device", &r->backend, &k));
    /* Under mpirun each rank is a stage on its GPU; in one process the
     * stages' GPUs are listed. */
    if (r->staged && r->backend != PT_BACKEND_CPU && !c->comm)
      return pt_fail(PT_ERR_ARG, "--device %s with --parallel %s: name the stages' devices with --devices "
                                 "cuda:0,cuda:1 (stages may share a GPU: cuda:0,cuda:0)", c->device, par);
    if (r->staged && r->backend != PT_BACKEND_CPU && r->replicas > 1)
      return pt_fail(PT_ERR_ARG, "--stages %d of %d ranks on GPUs: %d replicas of the stages would sum their "
                                 "gradients between GPUs, which is not built for stages; run one replica "
                                 "(--stages %d)", r->stages, r->world, r->replicas, r->world);
    if (!strcmp(par, "dp")) {
      if (r->backend != PT_BACKEND_CPU)
        return pt_fail(PT_ERR_ARG, "--device %s with --parallel dp: list the GPUs with --devices cuda:0,cuda:1,...",
                       c->device);
    } else {
      r->devices[0] = k;
      /* Under ddp every rank takes the GPU its local rank points to
       * (setup_worker); an explicit index pins every rank to that one. */
      r->device_pinned = strchr(c->device, ':') != NULL;
    }
  }
  r->precision = PT_PRECISION_FP32;
  if (c->precision && strcmp(c->precision, "fp32")) {
    if (!strcmp(c->precision, "tf32")) r->precision = PT_PRECISION_TF32;
    else if (!strcmp(c->precision, "bf16")) r->precision = PT_PRECISION_BF16;
    else return pt_fail(PT_ERR_ARG, "--precision %s: expected fp32, tf32 or bf16", c->precision);
    if (r->backend != PT_BACKEND_CUDA)
      return pt_fail(PT_ERR_ARG, "--precision %s is for GPUs (--device cuda, or cuda devices in --devices); "
                                 "the CPU computes in fp32", c->precision);
  }
  if (!r->staged && (c->stages || c->micro_batches || c->schedule || c->split))
    return pt_fail(PT_ERR_ARG, "--stages, --micro-batches, --schedule and --split are for --parallel model or pipeline");
  if (r->staged) {
    /* The stages' layers, from the shapes alone: a --split that names no
     * layer, or more stages than layers, is said before any data is read. */
    pt_model *shapes;
    PT_TRY(pt_model_shapes(&shapes, &r->spec));
    int bounds[PT_MAX_LAYERS + 1];
    const pt_status st = pt_pipe_partition(shapes, r->stages, c->split, bounds);
    free(shapes);
    PT_TRY(st);
  }
  const int cores = pt_cores_usable();
  r->threads = c->threads > 0 ? c->threads : (int)(cores / local > 0 ? cores / local : 1);
  r->local = local;
  r->cores = cores;
  r->accum = c->accum_steps > 0 ? c->accum_steps : 1;
  if (c->bucket_mb <= 0) return pt_fail(PT_ERR_ARG, "--bucket-mb %g: expected a positive size", c->bucket_mb);
  if (!r->staged) r->replicas = r->world;
  /* Measured faster on every preset and the same bits, so a run that can
   * capture its step does; asked for explicitly, what stops it is an error. */
  char no_graph[160];
  if (c->cuda_graphs >= 0 && !graph_refusal(c, r, no_graph, sizeof no_graph)) r->cuda_graphs = 1;
  else if (c->cuda_graphs > 0) return pt_fail(PT_ERR_ARG, "%s", no_graph);
  if (c->no_dropout)
    for (int i = 0; i < r->spec.nlayers; i++)
      if (r->spec.layers[i].kind == PT_L_DROPOUT) r->spec.layers[i].p = 0.0f;
  return PT_OK;
}

void pt_train_loader_config(const pt_model_spec *spec, int batch, int augment, pt_loader_config *lc) {
  memset(lc, 0, sizeof *lc);
  lc->batch_size = batch;
  lc->world = 1;
  memcpy(lc->mean, spec->mean, sizeof lc->mean);
  memcpy(lc->std, spec->std, sizeof lc->std);
  if (augment) {
    lc->crop_pad = spec->crop_pad;
    lc->hflip = spec->hflip;
  }
}

static int eval_batch_for(const pt_model_spec *spec, int batch, int test_batch) {
  pt_model_summary sum;
  if (pt_model_summarize(spec, &sum) != PT_OK) return batch;
  size_t fit = EVAL_ACTIVATION_BUDGET / (4 * (sum.activation_floats ? sum.activation_floats : 1));
  int eb = test_batch;
  if ((size_t)eb > fit) eb = (int)fit;
  return eb < batch ? batch : eb;
}

/* One worker: a replica of the model with its own shard of the data. A run
 * without data parallelism is one worker in a world of one. */
typedef struct {
  const pt_train_config *cfg;
  const pt_train_plan *r;
  const pt_dataset *train_ds, *test_ds;
  pt_comm *comm;           /* every worker: host memory (loss and evaluation sums) */
  pt_comm *dcomm;          /* the model's memory (gradients, weights): comm itself on the CPU */
  pt_comm *dcomm_own;      /* dcomm when this worker made it (host staging) */
  const pt_backend *be;    /* where this worker trains */
  int device;              /* its CUDA ordinal */
  pt_device_data train_dd, test_dd; /* batches in the backend's memory */
  pt_gpu_watch watch;      /* rank 0 on GPUs: utilisation and memory of this process's GPUs */
  int rank;
  int data_rank, world;    /* this worker's shard of the data, of world (replicas) */
  pt_loader *train, *test;
  pt_model *whole;         /* all parameters, gradients and buffers */
  pt_model *model;         /* what this worker runs: whole, or its stage of it */
  pt_stages stages;        /* model and pipeline parallelism (r->staged) */
  pt_optimizer opt;
  pt_grad_sync sync;
  pt_metrics *metrics;
  FILE *out;              /* rank 0's report; NULL on the other ranks */
  pt_train_result result;
  int caller;              /* runs on the caller's thread: the callbacks are called here */
  /* GPUs: host waits for the device during the epoch's training, and the
   * loss reads among them (metrics: a steady-state step waits for nothing). */
  uint64_t epoch_waits[2];
  int64_t loss_reads;
  pt_graph_step graphs;    /* --cuda-graphs: the step captured and replayed */
  int64_t epoch_graph_steps;
  int graphs_noted;        /* the note saying why the steps went back to eager was printed */
  int cb_stop;             /* a callback asked to stop */
  pt_checkpoint_lock lock; /* rank 0, the writer: the checkpoint directory's */
  pt_checkpoint_skipped damaged; /* generations the resume skipped: not counted when pruning */
  int lock_tried;          /* taken, or found unsupported and said so */
  /* --quiet: the latest epoch line not printed, for a run that stops
   * before its last epoch (--max-steps, a target, a signal) to end with it */
  char quiet_line[512];
  pt_status status;
  char error[PT_ERROR_MAX]; /* a dp worker's failure, for the main thread */
} worker_t;

/* Whether the run writes checkpoints other than on a signal. A resumed
 * run does, as --save-model: it continues a checkpointed run, and without
 * its own saves a second --resume would do its work again. */
static int saves_checkpoints(const pt_train_config *c) {
  return c->save_model || c->resume || c->checkpoint_every || c->checkpoint_interval > 0;
}

/* The writer's hold on the checkpoint directory, for the whole run. */
static pt_status lock_checkpoint_dir(worker_t *W) {
  if (W->lock_tried) return PT_OK;
  const pt_train_config *c = W->cfg;
  int unsupported;
  char why[256];
  PT_TRY(pt_checkpoint_lock_take(c->checkpoint_dir, &W->lock, &unsupported, why, sizeof why));
  W->lock_tried = 1;
  if (unsupported && W->out && !c->quiet)
    fprintf(W->out, "warning: %s cannot be locked (%s; an NFS mount without locks?): nothing keeps a second run "
                    "from writing checkpoints there too\n", c->checkpoint_dir, why);
  return PT_OK;
}

/* Called after the trace is written (its events point at layer labels),
 * on the main thread: device memory is freed by pointer from any thread. */
static void worker_free(worker_t *W) {
  pt_loader_destroy(W->train);
  pt_loader_destroy(W->test);
  pt_stages_free(&W->stages); /* zeroed, or made by pt_stages_init */
  pt_graph_step_free(&W->graphs, W->be);
  pt_device_data_free(&W->train_dd);
  pt_device_data_free(&W->test_dd);
  pt_model_destroy(W->whole);
  pt_optimizer_free(&W->opt);
  pt_comm_destroy(W->dcomm_own);
  pt_gpu_watch_close(&W->watch);
  if (W->metrics) pt_metrics_close(W->metrics);
  pt_checkpoint_lock_release(&W->lock);
}

/* This worker's shard of a split, with the run's seed and prefetch. */
static void worker_loader_config(const worker_t *W, int batch, int augment, pt_loader_config *lc) {
  pt_train_loader_config(&W->r->spec, batch, augment, lc);
  lc->seed = W->cfg->seed;
  /* The prefetch thread pays where it has a core of its own. Where the
   * compute threads take every core it only took turns with them (fmnist-
   * mlp, 2 threads on 2 cores: 0.107 ms a step waiting for data, a fifth of
   * the step), and the pool's own threads prepare each batch instead, a
   * share of its samples each, between steps. */
  lc->prefetch = W->cfg->prefetch && W->r->threads * W->r->local < W->r->cores;
  lc->parallel = pt_parallel;
  lc->rank = W->data_rank;
  lc->world = W->world;
  /* On a GPU the batch is made from the indices on the device (device_data.c). */
  lc->indices_only = W->r->backend != PT_BACKEND_CPU;
}

/* On a GPU the few sums come to the host and go through the host
 * communicator (model.c says why that pause is accepted). The download
 * waits for the thread's stream, which may hold NCCL's reductions: that
 * wait is bounded by --timeout first, so a dead peer ends in an error. */
static pt_status sum_bn_stats(void *ctx, double *host, const double *buf, size_t n) {
  worker_t *W = ctx;
  W->comm->what = W->dcomm->what = "the synchronised batch-norm statistics";
  if (host != buf) {
    PT_TRY(pt_comm_nccl_sync(W->dcomm));
    PT_TRY(W->be->download(host, buf, n * sizeof *host));
  }
  return pt_comm_allreduce_f64(W->comm, host, n);
}

/* The communicator for a GPU worker's device memory: NCCL (a dp worker's
 * comes made, from its group), or host staging over the host communicator
 * where NCCL cannot run (ranks sharing a GPU, or a build without NCCL). */
static pt_status make_device_comm(worker_t *W) {
  if (W->dcomm != W->comm) return PT_OK; /* dp: the group's */
  char why[512] = "no NCCL in this build";
  if (pt_comm_nccl_available() && !strcmp(W->comm->ops->name, "mpi")) {
    int shared = 0;
    PT_TRY(pt_comm_nccl_create(&W->dcomm_own, W->comm, W->device, W->cfg->timeout_s, &shared, why, sizeof why));
    if (W->dcomm_own) {
      W->dcomm = W->dcomm_own;
      return PT_OK;
    }
  } else if (pt_comm_nccl_available()) {
    snprintf(why, sizeof why, "NCCL could not start for these GPUs");
  }
  const pt_model *m = W->whole;
  /* The largest buffer a collective moves: all parameters (the initial
   * broadcast, or one bucket), the batch-norm statistics, a few sums. */
  const size_t floats = m->nparam_total > m->nbuffer_total ? m->nparam_total : m->nbuffer_total;
  const size_t bytes = sizeof(float) * floats + 64;
  if (W->out && !W->cfg->quiet)
    fprintf(W->out, "warning: gradients between GPUs go through host memory (%s): correct but slower\n", why);
  PT_TRY(pt_comm_staging_create(&W->dcomm_own, W->comm, W->be, bytes));
  W->dcomm = W->dcomm_own;
  return PT_OK;
}

static pt_status setup_worker(worker_t *W) {
  const pt_train_config *c = W->cfg;
  const pt_train_plan *r = W->r;
  if (pt_ops_set_threads(r->threads))
    return pt_fail(PT_ERR_STATE, "cannot start %d threads (--threads)", r->threads);
  const pt_model_spec *s = &r->spec;
  const pt_backend *be = r->backend == PT_BACKEND_CPU ? pt_backend_cpu() : pt_backend_cuda();
  if (!be) return pt_wrap(PT_ERR_DEVICE, "training on cuda:%d", W->device);
  PT_TRY(pt_backend_bind(be, W->device));
  W->be = be;
  if (r->precision != PT_PRECISION_FP32) {
    if (!be->set_precision)
      return pt_fail(PT_ERR_ARG, "--precision %s: the %s backend computes in fp32 only", W->cfg->precision, be->name);
    PT_TRY(be->set_precision(r->precision));
  }
  if (!W->dcomm) W->dcomm = W->comm;
  /* Stages keep activations in their own models; the whole model then
   * only holds the parameters, with activations for one sample. */
  const int max_batch = r->staged ? 1 : r->batch_room > r->eval_batch ? r->batch_room : r->eval_batch;
  PT_TRY(pt_model_create_on(&W->whole, s, max_batch, be));
  if (be->kind != PT_BACKEND_CPU && W->world > 1) PT_TRY(make_device_comm(W));
  W->model = W->whole;
  pt_model_init(W->whole, c->seed);
  if (c->init_model && !c->resume && !c->init_from) PT_TRY(pt_model_copy_weights(W->whole, c->init_model));
  /* Each replica sees other samples, so it draws its own dropout masks. */
  if (W->data_rank > 0)
    W->whole->dropout_key = pt_rng_key(c->seed + (uint64_t)W->data_rank * 0x9E3779B97F4A7C15ull, PT_RNG_DROPOUT);
  PT_TRY(pt_optimizer_init_on(&W->opt, &r->opt, W->whole->nparam_total, be));
  pt_comm *grad_comm = W->dcomm;
  if (r->staged) {
    /* Stages that are threads of one process hand GPU memory over
     * directly; the tests ask for the same on the CPU, where it must give
     * the same bits as passing messages. */
    const char *force = getenv("PTRAIN_TEST_PIPE_DIRECT");
    const int direct = !strcmp(W->comm->ops->name, "threads") &&
                       (be->kind != PT_BACKEND_CPU || (force && !strcmp(force, "1")));
    /* Sized for the batches there will be (the plan held the micro-batches to --batch-size). */
    PT_TRY(pt_stages_init(&W->stages, W->whole, W->comm, r->stages, c->split, r->pipe_kind, r->micro,
                          r->batch_room > r->micro ? r->batch_room : r->micro, direct, W->device));
    if (!direct && be->kind != PT_BACKEND_CPU && W->out && !c->quiet)
      fprintf(W->out, "warning: activations and gradients between the stages' GPUs go through host memory (MPI "
                      "ranks; NCCL's send and receive are not built): correct but slower\n");
    /* One replica: the stages are the world, and their communicator for
     * backend memory (host staging on GPUs) also carries the initial
     * broadcast. */
    if (W->stages.replicas == 1) W->dcomm = W->stages.dpipe;
    W->model = W->stages.st.m;
    grad_comm = W->stages.peers;
  }

  pt_loader_config lc;
  worker_loader_config(W, r->batch, 1, &lc);
  lc.shuffle = !c->no_shuffle;
  lc.drop_last = c->drop_last;
  PT_TRY(pt_loader_create(&W->train, W->train_ds, &lc));
  PT_TRY(pt_device_data_init(&W->train_dd, be, W->train_ds, &lc, r->batch_room));
  pt_graph_step_init(&W->graphs, r->cuda_graphs);
  if (pt_loader_num_batches(W->train) == 0) /* pt_train_check_batches said so before */
    return pt_fail(PT_ERR_STATE, "no training batch: %d samples per worker with batch %d",
                   pt_loader_num_samples(W->train), r->batch);
  worker_loader_config(W, r->eval_batch, 0, &lc);
  lc.uneven = 1;
  PT_TRY(pt_loader_create(&W->test, W->test_ds, &lc));
  PT_TRY(pt_device_data_init(&W->test_dd, be, W->test_ds, &lc, r->eval_batch));
  if (W->rank == 0) {
    if (c->metrics_path) PT_TRY(pt_metrics_open(c->metrics_path, 1, &W->metrics));
    /* Before the directory is created: --resume of a mistyped one says so
     * (with --init-from, none there yet is how a job starts). */
    if (c->resume && !c->init_from) PT_TRY(pt_checkpoint_present(c->checkpoint_dir));
    if (saves_checkpoints(c)) {
      PT_TRY(pt_checkpoint_prepare_dir(c->checkpoint_dir));
      PT_TRY(lock_checkpoint_dir(W));
      /* After the lock: a live run there is named as such, not as
       * generations of another run. */
      if (!c->resume) PT_TRY(pt_checkpoint_fresh_ok(c->checkpoint_dir));
    }
  }
  if (c->sync_bn && W->world > 1) {
    W->model->sum_stats = sum_bn_stats;
    W->model->sum_stats_ctx = W;
  }
  return pt_grad_sync_init(&W->sync, W->model, grad_comm, c->bucket_mb);
}

static void print_header(const worker_t *W) {
  const pt_train_plan *r = W->r;
  const pt_model *m = W->whole;
  FILE *out = W->out;
  fprintf(out, "ptrain %s: %s (%zu parameters, %.1f MFLOP/image forward), %s%s%s (%d train, %d test); %s, %s kernels\n",
          PT_VERSION, m->spec.name, m->nparam_total, pt_model_flops(m) / 1e6, r->data_name,
          r->data_dir ? " from " : "", r->data_dir ? r->data_dir : "", W->train_ds->n, W->test_ds->n, pt_cpu_model(), pt_cpu_level_name(pt_cpu_level_current()));
  fprintf(out, "optimizer %s lr %g", pt_opt_kind_name(r->opt.kind), r->opt.lr);
  if (r->opt.momentum > 0) fprintf(out, " momentum %g%s", r->opt.momentum, r->opt.nesterov ? " nesterov" : "");
  if (r->opt.weight_decay > 0) fprintf(out, " weight decay %g", r->opt.weight_decay);
  fprintf(out, ", scheduler %s", pt_sched_kind_name(r->sched));
  if (r->sched == PT_SCHED_STEP) fprintf(out, " gamma %g", r->gamma);
  fprintf(out, ", batch %d, %d thread%s, seed %llu%s\n", r->batch, r->threads, r->threads == 1 ? "" : "s",
          (unsigned long long)W->cfg->seed,
          r->precision == PT_PRECISION_TF32   ? ", precision tf32 (GEMMs and convolutions)"
          : r->precision == PT_PRECISION_BF16 ? ", precision bf16 (GEMMs and convolutions multiply in bf16, sum in fp32)"
                                              : "");
  if (r->staged) {
    const int mpi = !strcmp(W->comm->ops->name, "mpi");
    fprintf(out, "%s parallel: %d stage%s (%s)", r->micro > 1 ? "pipeline" : "model", r->stages,
            r->stages == 1 ? "" : "s", mpi ? "MPI ranks" : "threads of this process");
    if (r->replicas > 1) fprintf(out, " x %d data-parallel replicas", r->replicas);
    if (r->micro > 1)
      fprintf(out, ", %d micro-batches of %d, schedule %s", r->micro, W->stages.st.mb,
              pt_pipe_schedule_name(r->pipe_kind));
    fprintf(out, "\n");
    pt_stages_print_plan(out, &W->stages, W->whole);
  } else if (W->world > 1 || r->accum > 1) {
    const char *how = W->comm->ops->name;
    fprintf(out, "data parallel: %d %s (%s), batch %d per worker", W->world,
            strcmp(how, "mpi") ? "workers" : "ranks", strcmp(how, "mpi") ? "threads of this process" : "MPI",
            r->batch);
    if (r->accum > 1) fprintf(out, " x %d accumulation steps", r->accum);
    fprintf(out, " = global batch %d; gradient buckets of %g MB\n", r->batch * W->world * r->accum,
            W->cfg->bucket_mb);
  }
  /* More threads than cores on this machine (workers or stages, each with
   * --threads): they take turns, and a step is slower than with fewer;
   * said, as the tutorials' lesson that more workers need not be faster. */
  const int busy = r->threads * r->local;
  if (busy > r->cores && r->backend == PT_BACKEND_CPU) {
    fprintf(out, "note: ");
    if (r->local > 1)
      fprintf(out, "%d %s x %d thread%s", r->local, r->staged ? "stages" : "workers", r->threads,
              r->threads == 1 ? "" : "s");
    else
      fprintf(out, "%d threads", r->threads);
    fprintf(out, " on %d core%s: they take turns on the cores, and each step is slower than with no more threads "
                 "than cores\n", r->cores, r->cores == 1 ? "" : "s");
  }
  fflush(out);
}

/* The float a person wrote as that decimal (0.85, not 0.8500000238). */
static double as_written(float v) {
  char b[32];
  snprintf(b, sizeof b, "%.7g", v);
  return strtod(b, NULL);
}

/* pos as the end of epoch, its training done and its evaluation not: the
 * resumed run makes that evaluation, and reports the epoch, again. */
static void before_evaluation(pt_train_position *pos, int epoch, int nb, double loss_sum, int64_t samples,
                              double seconds) {
  pos->next_epoch = epoch;
  pos->next_batch = nb;
  pos->epoch_loss_sum = loss_sum;
  pos->epoch_samples = samples;
  pos->epoch_seconds = seconds;
}

/* Whether an evaluation meets --target-accuracy. */
static int target_met(const pt_train_config *c, const pt_eval_sums *ev) {
  return c->target_accuracy > 0 && ev->count && (double)ev->correct / ev->count >= c->target_accuracy;
}

/* With --eval-every or --target-accuracy: every evaluation as a metrics
 * line, against the wall-clock seconds since training started (what time
 * to accuracy is measured in), and a line when the target is first met.
 * Returns through *hit whether this evaluation met the target. */
static pt_status report_eval(worker_t *W, int epoch, int64_t step, double train_loss, const pt_eval_sums *ev,
                             double seconds, int *hit) {
  const pt_train_config *c = W->cfg;
  const double acc = ev->count ? (double)ev->correct / ev->count : NAN;
  *hit = target_met(c, ev);
  if (W->rank != 0) return PT_OK; /* rank 0 reports; every rank has the same sums */
  if (*hit && !c->quiet && W->out)
    fprintf(W->out, "target accuracy %g reached: test accuracy %.4f at step %lld, %.1f s into training\n",
            as_written((float)c->target_accuracy), acc, (long long)step, seconds);
  if (!W->metrics) return PT_OK;
  pt_metrics_begin(W->metrics, "eval");
  pt_metrics_int(W->metrics, "epoch", epoch);
  pt_metrics_int(W->metrics, "step", step);
  pt_metrics_num(W->metrics, "seconds", seconds);
  pt_metrics_num(W->metrics, "train_loss", train_loss);
  pt_metrics_num(W->metrics, "test_loss", ev->count ? ev->loss_sum / ev->count : NAN);
  pt_metrics_num(W->metrics, "test_acc", acc);
  PT_TRY(pt_metrics_end(W->metrics));
  if (!*hit) return PT_OK;
  pt_metrics_begin(W->metrics, "target");
  pt_metrics_num(W->metrics, "accuracy", as_written((float)c->target_accuracy));
  pt_metrics_bool(W->metrics, "reached", 1);
  pt_metrics_int(W->metrics, "step", step);
  pt_metrics_num(W->metrics, "seconds", seconds);
  return pt_metrics_end(W->metrics);
}

static pt_status report_epoch(worker_t *W, int epoch, int64_t step, double train_loss, const pt_eval_sums *ev,
                              double ips, double seconds, float lr, int partial) {
  const pt_train_config *c = W->cfg;
  double test_loss = ev->count ? ev->loss_sum / ev->count : NAN;
  double acc = ev->count ? (double)ev->correct / ev->count : NAN;
  if (W->out) {
    char line[sizeof W->quiet_line];
    snprintf(line, sizeof line,
             "epoch %d/%d%s: train loss %.4f, test loss %.4f, test accuracy %.4f (%lld/%lld), %.0f img/s, %.1f s, lr %g\n",
             epoch, c->epochs, partial ? " (stopped early)" : "", train_loss, test_loss, acc, (long long)ev->correct,
             (long long)ev->count, ips, seconds, lr);
    W->quiet_line[0] = 0;
    if (!c->quiet || epoch == c->epochs) {
      fputs(line, W->out);
      fflush(W->out);
    } else {
      memcpy(W->quiet_line, line, sizeof line);
    }
  }
  if (!W->metrics) return PT_OK;
  pt_metrics *mt = W->metrics;
  pt_metrics_begin(mt, "epoch");
  pt_metrics_int(mt, "epoch", epoch);
  pt_metrics_int(mt, "step", step);
  pt_metrics_num(mt, "train_loss", train_loss);
  pt_metrics_num(mt, "test_loss", test_loss);
  pt_metrics_num(mt, "test_acc", acc);
  pt_metrics_num(mt, "images_per_s", ips);
  pt_metrics_num(mt, "seconds", seconds);
  /* The float lr as the decimal a person wrote (0.01, not 0.009999999776). */
  char lrs[32];
  snprintf(lrs, sizeof lrs, "%.7g", lr);
  pt_metrics_num(mt, "lr", strtod(lrs, NULL));
  if (W->world > 1) pt_metrics_int(mt, "workers", W->world);
  pt_gpu_watch_metrics(&W->watch, mt);
  if (W->be->host_waits) {
    pt_metrics_int(mt, "gpu_syncs", (int64_t)W->epoch_waits[0]);
    pt_metrics_int(mt, "gpu_ahead_waits", (int64_t)W->epoch_waits[1]);
    pt_metrics_int(mt, "gpu_loss_reads", W->loss_reads);
  }
  if (W->r->cuda_graphs) pt_metrics_int(mt, "graph_steps", W->epoch_graph_steps);
  if (partial) pt_metrics_bool(mt, "partial", 1);
  return pt_metrics_end(mt);
}

/* Where training continues: the checkpoint's position, mapped to this run's
 * world size. All workers' batch s together cover positions
 * [s * global_batch, (s + 1) * global_batch) of the epoch's order, whatever
 * the world size, so a position counted in samples carries over. */
static pt_status resume_position(worker_t *W, pt_train_position *pos) {
  const pt_train_config *c = W->cfg;
  char which[2600];
  PT_TRY(pt_checkpoint_resume(c->checkpoint_dir, W->whole, &W->opt, pos, which, sizeof which, &W->damaged));
  if (pos->seed != c->seed)
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed used seed %llu; resume with --seed %llu",
                   c->checkpoint_dir, (unsigned long long)pos->seed, (unsigned long long)pos->seed);
  if (pos->world == W->world && pos->batch_size != W->r->batch)
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed used batch size %d; resume with --batch-size %d",
                   c->checkpoint_dir, pos->batch_size, pos->batch_size);
  /* What else the data position and the steps mean: another order, another
   * number of batches a step, or other data would continue elsewhere. */
  if (pos->shuffle >= 0 && pos->shuffle != !c->no_shuffle)
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed %s; resume %s --no-shuffle", c->checkpoint_dir,
                   pos->shuffle ? "drew each epoch's order" : "kept the dataset's order (--no-shuffle)",
                   pos->shuffle ? "without" : "with");
  if (pos->accum > 0 && pos->accum != W->r->accum)
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed used --accum-steps %d; resume with --accum-steps %d",
                   c->checkpoint_dir, pos->accum, pos->accum);
  if (pos->dataset[0] && strcmp(pos->dataset, W->r->data_name))
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed trained on %s, not %s; resume with the same data",
                   c->checkpoint_dir, pos->dataset, W->r->data_name);
  /* The same name, other files (another --data-dir): each epoch's order
   * is a permutation of the split, and would be of another one. */
  if (pos->train_samples >= 0 && pos->train_samples != W->train_ds->n)
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed trained on %lld %s images, this one has %d; resume with "
                   "the same data (--data-dir)", c->checkpoint_dir, (long long)pos->train_samples, W->r->data_name,
                   W->train_ds->n);
  const int64_t old_global = (int64_t)pos->batch_size * pos->world, new_global = (int64_t)W->r->batch * W->world;
  int64_t done = (int64_t)pos->next_batch * old_global;
  if (old_global != new_global && done > 0) pos->next_batch = (int)(done / new_global);
  if (pos->next_batch > pt_loader_num_batches(W->train))
    return pt_fail(PT_ERR_FORMAT, "%s: the training state is at batch %d of an epoch of %d: past its end", which,
                   pos->next_batch, pt_loader_num_batches(W->train));
  /* The position in this run's batches, where training goes on: the
   * checkpoint's batch counts the old run's, of another size. */
  /* Damaged generations skipped are said even under --quiet: a checkpoint
   * lost is not a progress line. */
  const int say = W->out && (!c->quiet || W->damaged.n > 0);
  if (say && pos->next_batch == pt_loader_num_batches(W->train)) {
    /* A stop request cut the epoch's evaluation short: it is made again. */
    fprintf(W->out, "resuming from %s at the end of epoch %d, before its evaluation (step %lld)", which,
            pos->next_epoch + 1, (long long)pos->step);
  } else if (say) {
    fprintf(W->out, "resuming from %s at epoch %d, batch %d of %d (step %lld)", which, pos->next_epoch + 1,
            pos->next_batch, pt_loader_num_batches(W->train), (long long)pos->step);
  }
  if (say) {
    /* Another worker count may take another batch (to keep the global
     * batch, say): both global batches are said, so a change is seen. */
    if (pos->world != W->world)
      fprintf(W->out, "; the run had %d worker%s at batch %d (a global batch of %lld), this one has %d at %d (%lld)",
              pos->world, pos->world == 1 ? "" : "s", pos->batch_size, (long long)old_global, W->world, W->r->batch,
              (long long)new_global);
    fprintf(W->out, "\n");
  }
  if (old_global != new_global && done % new_global && W->out)
    fprintf(W->out, "note: the epoch had reached sample %lld; with a global batch of %lld it continues at %lld\n",
            (long long)done, (long long)new_global, (long long)pos->next_batch * new_global);
  pos->batch_size = W->r->batch;
  pos->world = W->world;
  pos->shuffle = !c->no_shuffle;
  pos->accum = W->r->accum;
  snprintf(pos->dataset, sizeof pos->dataset, "%s", W->r->data_name);
  pos->train_samples = W->train_ds->n;
  return PT_OK;
}

/* Rank 0's weights and batch-norm statistics everywhere, as DDP starts. */
static pt_status sync_initial_state(worker_t *W) {
  pt_model *m = W->whole;
  W->dcomm->what = "the broadcast of rank 0's initial parameters";
  PT_TRY(pt_comm_bcast(W->dcomm, m->param, m->nparam_total * sizeof(float), 0));
  if (m->nbuffer_total) PT_TRY(pt_comm_bcast(W->dcomm, m->buffer, m->nbuffer_total * sizeof(float), 0));
  return PT_OK;
}

static pt_status evaluate_all(worker_t *W, pt_eval_sums *ev) {
  pt_model *m = W->model;
  /* Batch-norm running statistics come from rank 0, as DDP's buffer
   * broadcast makes them; each rank's own would differ by its shard. A
   * stage takes them from the same stage of replica 0. */
  pt_comm *bn_comm = W->r->staged ? W->stages.peers : W->dcomm;
  if (m->nbuffer_total) {
    bn_comm->what = "the broadcast of rank 0's batch-norm statistics";
    PT_TRY(pt_comm_bcast(bn_comm, m->buffer, m->nbuffer_total * sizeof(float), 0));
  }
  if (W->r->staged) {
    PT_TRY(pt_stages_evaluate(&W->stages, W->test, &W->test_dd, ev));
  } else {
    PT_TRY(pt_comm_nccl_sync(W->dcomm)); /* bounded, before evaluation reads the device */
    m->profile = 0; /* the profile is of training steps */
    PT_TRY(pt_evaluate_batches(m, W->test, &W->test_dd, ev, 1));
    m->profile = W->cfg->profile;
  }
  /* A worker's evaluation cut short by a stop request cuts every one's:
   * the sums of part of the split are no result. */
  double sums[4] = {ev->loss_sum, (double)ev->correct, (double)ev->count, ev->cut};
  W->comm->what = "the evaluation sums";
  PT_TRY(pt_comm_allreduce_f64(W->comm, sums, 4));
  ev->loss_sum = sums[0];
  ev->correct = (int64_t)sums[1];
  ev->count = (int64_t)sums[2];
  ev->cut = sums[3] > 0;
  return PT_OK;
}

/* A batch through this worker's pipeline stage. Only the last stage knows
 * the loss; the others add nothing to the sums every worker adds up. */
static pt_status staged_micro_step(worker_t *W, const pt_batch *batch, int epoch, uint64_t dropout_step,
                                   float scale, double *stats, pt_phase_times *ph, int64_t step) {
  pt_pipe_stage *P = &W->stages.st;
  const double f0 = P->forward_s, b0 = P->backward_s, w0 = P->wait_s, s0 = P->send_s;
  P->comm->step = step;
  pt_model_zero_grad(W->model);
  const float *x;
  const int32_t *y;
  pt_device_data_batch(&W->train_dd, batch, epoch, &x, &y);
  /* On a GPU the loss stays there, with the other workers' way of keeping it. */
  const int on_device = W->be->kind != PT_BACKEND_CPU;
  pt_pipe_sums sums = {.sums = on_device ? W->train_dd.sums : NULL};
  PT_TRY(pt_pipe_train(P, x, y, batch->n, dropout_step, scale, &sums));
  if (!on_device && W->stages.stage == W->stages.stages - 1) {
    stats[0] += sums.loss_sum;
    stats[1] += batch->n;
  }
  if (ph) {
    ph->forward_s += P->forward_s - f0;
    ph->backward_s += P->backward_s - b0;
    /* handing pieces on, and waiting for the other stages, the bubble included */
    ph->comm_s += (P->send_s - s0) + (P->wait_s - w0);
    ph->images += batch->n;
  }
  return PT_OK;
}

/* This worker's part of what all workers agree on with the loss: v[0],
 * whether it was asked to stop; v[1], whether rank 0's clock says a
 * --checkpoint-interval save is due; v[2], whether a callback asked to
 * stop. Summed over the workers, nonzero
 * means yes for all. */
static void agreement(const worker_t *W, double last_save, double v[3]) {
  v[0] = pt_train_stop_signal() ? 1.0 : 0.0;
  v[1] = W->rank == 0 && W->cfg->checkpoint_interval > 0 && pt_now() - last_save >= W->cfg->checkpoint_interval;
  v[2] = W->cb_stop ? 1.0 : 0.0;
}

/* printf's %g writes a NaN with its sign bit as "-nan", which reads as a
 * value; the name alone says what happened. */
static const char *non_finite_name(double v) { return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

/* A loss that went bad at the run's very first step came before any
 * update: the learning rate is not the cause, the starting weights are
 * (--init-from's, or an initialisation the model's scale overflows). */
static pt_status loss_went_bad(const worker_t *W, double loss, int epoch, int64_t step, float lr) {
  if (step == 0)
    return pt_fail(PT_ERR_STATE, "loss is %s at the first step, before any update: the starting weights%s%s%s give it, "
                   "not the learning rate", non_finite_name(loss), W->cfg->init_from ? " (--init-from " : "",
                   W->cfg->init_from ? W->cfg->init_from : "", W->cfg->init_from ? ")" : "");
  /* step counts the steps before this one: this is step + 1, as the
   * metrics and the log count them */
  return pt_fail(PT_ERR_STATE, "loss became %s at epoch %d, step %lld: lower the learning rate (now %g)",
                 non_finite_name(loss), epoch + 1, (long long)step + 1, lr);
}

/* A GPU worker's losses since the last read: summed over every worker,
 * added to the epoch's sums, and checked. A loss that went bad is caught
 * here rather than at its step, so up to a log interval of updates ran
 * with it; the run stops all the same, naming the step it was seen at.
 * With them travel whether any worker was asked to stop (*stop) and
 * whether rank 0 finds a --checkpoint-interval save due (*save_due). */

static pt_status flush_device_loss(worker_t *W, int epoch, int64_t step, float lr, double *loss_sum,
                                   int64_t *samples, int *stop, int *save_due, int *cb_stop, double last_save) {
  double sums[5];
  int64_t unused;
  W->loss_reads++;
  /* The stream holds NCCL's reductions: a dead peer must end in an error
   * after --timeout, not in a wait without end. */
  PT_TRY(pt_comm_nccl_sync(W->dcomm));
  PT_TRY(pt_device_data_take_sums(&W->train_dd, sums, &unused));
  W->comm->what = "the loss allreduce";
  W->comm->step = step;
  agreement(W, last_save, sums + 2);
  PT_TRY(pt_comm_allreduce_f64(W->comm, sums, 5));
  if (stop) *stop = sums[2] > 0.0;
  if (save_due) *save_due = sums[3] > 0.0;
  if (cb_stop) *cb_stop = sums[4] > 0.0;
  if (!isfinite(sums[0])) {
    /* Read once per log interval: a bad loss in the run's first interval
     * may have come before any update, from the starting weights. */
    const int first = step <= (W->cfg->log_interval > 0 ? W->cfg->log_interval : 10);
    const char *from = W->cfg->init_from;
    return pt_fail(PT_ERR_STATE, "loss became %s at epoch %d, by step %lld: lower the learning rate (now %g)%s%s%s%s",
                   non_finite_name(sums[0]), epoch + 1, (long long)step, lr,
                   first ? ", or, this early, check the starting weights" : "", first && from ? " (--init-from " : "",
                   first && from ? from : "", first && from ? ")" : "");
  }
  *loss_sum += sums[0];
  *samples += (int64_t)sums[1];
  return PT_OK;
}

/* Writes a checkpoint at pos. Every worker calls it, together: a staged
 * model's parts are gathered first; rank 0 writes. */
static pt_status save_checkpoint(worker_t *W, const pt_train_position *pos) {
  const pt_train_config *c = W->cfg;
  if (W->r->staged) PT_TRY(pt_stages_gather(&W->stages, W->whole, &W->opt));
  if (W->rank != 0) return PT_OK;
  const double tk = pt_now();
  if (!W->lock_tried) { /* a run that saves only when signalled */
    PT_TRY(pt_checkpoint_prepare_dir(c->checkpoint_dir));
    PT_TRY(lock_checkpoint_dir(W));
    PT_TRY(pt_checkpoint_fresh_ok(c->checkpoint_dir));
  }
  PT_TRY(pt_comm_nccl_sync(W->dcomm));
  PT_TRY(pt_model_to_host(W->whole));
  PT_TRY(pt_optimizer_to_host(&W->opt));
  PT_TRY(pt_checkpoint_save(c->checkpoint_dir, W->whole, &W->opt, pos, W->r->spec_text, c->keep_checkpoints,
                            &W->damaged));
  /* A damaged generation of this step was just replaced by a sound one,
   * which counts toward --keep-checkpoints from now on. */
  int k = 0;
  for (int i = 0; i < W->damaged.n; i++)
    if (W->damaged.step[i] != pos->step) W->damaged.step[k++] = W->damaged.step[i];
  W->damaged.n = k;
  pt_trace_span("checkpoint", "io", tk, pt_now());
  return PT_OK;
}

/* The --eval-every evaluations inside an epoch. */
typedef struct {
  double seconds;         /* spent in them: not training, the rate leaves it out */
  pt_eval_sums step_ev;   /* the latest, and its step: a run that stops right after */
  int64_t step_ev_at;     /* it (--max-steps) ends the epoch with it rather than evaluate twice */
  int target_hit;         /* one met --target-accuracy: */
  pt_eval_sums hit_ev;    /* that one */
} epoch_evals;

/* The --eval-every evaluation at step, on every worker together, the
 * epoch's training loss so far being loss_sum over samples. A stop request
 * that cuts it short sets *signalled, and nothing is reported (the run
 * stops at this step, and the checkpoint there comes before this
 * evaluation); meeting --target-accuracy sets *stopped. */
static pt_status eval_in_epoch(worker_t *W, int epoch, int64_t step, double loss_sum, int64_t samples, double t_run,
                               epoch_evals *E, int *signalled, int *stopped) {
  const double train_loss = samples ? loss_sum / (double)samples : NAN;
  pt_eval_sums ev = {0};
  const double te0 = pt_now();
  PT_TRY(evaluate_all(W, &ev));
  W->model->training = 1;
  const double te1 = pt_now();
  pt_trace_span("evaluate", "eval", te0, te1);
  E->seconds += te1 - te0;
  if (ev.cut) {
    *signalled = 1;
    return PT_OK;
  }
  int hit = 0;
  PT_TRY(report_eval(W, epoch + 1, step, train_loss, &ev, pt_now() - t_run, &hit));
  E->step_ev = ev;
  E->step_ev_at = step;
  if (hit) {
    E->target_hit = *stopped = 1;
    E->hit_ev = ev;
    W->result.target_seconds = pt_now() - t_run;
    W->result.target_step = step;
  }
  return PT_OK;
}

static pt_status train_loop(worker_t *W) {
  const pt_train_config *c = W->cfg;
  const pt_train_plan *r = W->r;
  pt_model *m = W->model;
  pt_comm *comm = W->comm;
  pt_train_result *res = &W->result;
  res->target_seconds = NAN;
  res->target_step = -1;
  pt_train_position pos = {0};
  pos.seed = c->seed;
  pos.batch_size = r->batch;
  pos.world = W->world;
  pos.shuffle = !c->no_shuffle;
  pos.accum = r->accum;
  snprintf(pos.dataset, sizeof pos.dataset, "%s", r->data_name);
  pos.train_samples = W->train_ds->n;
  /* With both, a checkpoint wins and init_from starts the run only where
   * there is none yet: the same command then starts a job and continues
   * it after a requeue or an eviction. */
  int resume = c->resume;
  if (resume && c->init_from) {
    /* Rank 0 decides for all: ranks that saw the directory differently
     * (node-local disks, a cache) would otherwise start from different
     * steps. One told to resume that finds nothing says so. */
    int32_t none_yet = W->rank == 0 && pt_checkpoint_none_yet(c->checkpoint_dir);
    if (W->comm && W->comm->size > 1) PT_TRY(pt_comm_bcast(W->comm, &none_yet, sizeof none_yet, 0));
    if (none_yet) {
      resume = 0;
      if (W->out && !c->quiet)
        fprintf(W->out, "no checkpoint in %s yet: starting from %s (--init-from)\n", c->checkpoint_dir, c->init_from);
    }
  }
  if (resume) {
    PT_TRY(resume_position(W, &pos));
    PT_TRY(pt_rank_position_agree(W->comm, pos.step, pos.next_epoch + 1, pos.next_batch, &res->failed_alike));
  } else if (c->init_from) {
    const pt_status st = pt_checkpoint_load_weights(c->init_from, W->whole, NULL, 0);
    if (st != PT_OK) return pt_wrap(st, "--init-from");
  }
  PT_TRY(sync_initial_state(W));
  const int64_t first_step = pos.step;
  /* What a run that trains nothing (a resume past its end) reports: the
   * checkpoint's epochs and steps, and no loss nor accuracy of its own. */
  res->epochs_done = pos.next_epoch;
  res->steps = pos.step;
  res->train_loss = res->test_loss = res->test_acc = NAN;
  if (pos.next_epoch >= c->epochs && W->out && !c->quiet)
    fprintf(W->out, "nothing to train: the checkpoint has %d epoch%s; ask for more with --epochs\n", pos.next_epoch,
            pos.next_epoch == 1 ? "" : "s");
  else if (c->max_steps && pos.step >= c->max_steps && !pos.eval_due && W->out && !c->quiet)
    fprintf(W->out, "nothing to train: the checkpoint has %lld step%s; ask for more with --max-steps\n",
            (long long)pos.step, pos.step == 1 ? "" : "s");
  const int nb = pt_loader_num_batches(W->train);
  const int64_t ns = pt_loader_num_samples(W->train); /* this worker's, padded like every worker's */
  const int K = r->accum;
  const double t_run = pt_now();
  /* Single-stage runs only: a stage's pass needs its neighbours. */
  if (!r->staged) PT_TRY(pt_train_warm_up(m, r->batch_room));
  pt_phase_times ph;
  pt_profile_reset(m, &ph);
  m->profile = c->profile;
  const int timing = c->profile || pt_trace_enabled();
  /* On a GPU the loss stays on the device and is read every log interval,
   * so a step never waits for the device; the CPU reads it every step. */
  const int on_device = W->be->kind != PT_BACKEND_CPU;
  const int flush_every = c->log_interval > 0 ? c->log_interval : 10;
  if (on_device && W->rank == 0) {
    /* dp and stages: every GPU of this process, once each; otherwise
     * this worker's one. */
    int gpus[PT_MAX_DEVICES], ngpus = 0;
    const int local_gpus = W->comm->size > 1 && !strcmp(W->comm->ops->name, "threads");
    const int listed = local_gpus ? (r->staged ? r->stages : W->world) : 1;
    for (int i = 0; i < listed && ngpus < (int)(sizeof gpus / sizeof gpus[0]); i++) {
      const int d = local_gpus ? r->devices[i] : W->device;
      int seen = 0;
      for (int j = 0; j < ngpus; j++) seen |= gpus[j] == d;
      if (!seen) gpus[ngpus++] = d;
    }
    PT_TRY(pt_gpu_watch_open(&W->watch, gpus, ngpus, c->quiet ? NULL : W->out));  /* NULL out: metrics only */
  }
  char gpu_line[160];
  /* --checkpoint-interval: rank 0's clock decides, and the decision
   * travels with the loss, so every worker saves at the same step. */
  double last_save = pt_now();
  const int saving = saves_checkpoints(c);
  int64_t saved_step = -1; /* a stop right after a save inside the epoch writes nothing new */
  int64_t samples_total = 0;
  double train_seconds_total = 0.0;
  for (int epoch = pos.next_epoch; epoch < c->epochs; epoch++) {
    if (c->max_steps && pos.step >= c->max_steps && !(pos.eval_due && epoch == pos.next_epoch)) break;
    const float lr = pt_sched_lr(r->sched, r->opt.lr, r->gamma, epoch, c->epochs);
    int b = epoch == pos.next_epoch ? pos.next_batch : 0;
    if (b > nb) b = nb;
    double loss_sum = b ? pos.epoch_loss_sum : 0.0, prior_seconds = b ? pos.epoch_seconds : 0.0;
    int64_t samples = b ? pos.epoch_samples : 0, fresh = 0;
    PT_TRY(pt_loader_start_epoch(W->train, epoch, b));
    pt_progress prog;
    pt_progress_start(&prog, c->quiet || !W->out ? NULL : stderr, c->progress, c->log_interval, epoch + 1,
                      c->epochs, nb);
    m->training = 1;
    uint64_t waits0[2] = {0, 0};
    if (W->be->host_waits) W->be->host_waits(waits0);
    W->loss_reads = 0;
    const int64_t graph_steps0 = W->graphs.replays;
    const double t0 = pt_now();
    epoch_evals E = {.step_ev_at = -1};
    int stopped = 0, signalled = 0, save_due = 0, ckpt_exit = 0, cb_stopped = 0;
    int64_t queued = 0; /* global samples whose loss is still on the device */
    /* Resumed inside the epoch at a step of --eval-every: every save inside
     * an epoch comes before its step's evaluation (a stop request may have
     * cut that evaluation short), so it is made now, as the straight run
     * made it. */
    if (b > 0 && b < nb && pos.step == first_step && c->eval_every && pos.step % c->eval_every == 0 &&
        !pos.evaluated) {
      PT_TRY(eval_in_epoch(W, epoch, pos.step, loss_sum, samples, t_run, &E, &signalled, &stopped));
    }
    while (b < nb && !signalled && !E.target_hit) {
      if (c->max_steps && pos.step >= c->max_steps) {
        stopped = 1;
        break;
      }
      /* One optimizer step over k micro-batches; the epoch's last step may
       * have fewer, and its last micro-batch fewer samples. Its loss is the
       * mean over the step's samples, as one large batch's would be: each
       * micro-batch counts by its share of them, not as 1/k. */
      const int k = nb - b < K ? nb - b : K;
      const int64_t step_end = (int64_t)(b + k) * r->batch;
      const int64_t step_n = (step_end < ns ? step_end : ns) - (int64_t)b * r->batch;
      /* loss * samples, samples, then agreement(): this worker's, then
       * every worker's summed */
      double stats[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
      const double ta = timing ? pt_now() : 0.0;
      const double comm0 = W->sync.wait_s;
      int graphed = 0; /* the step, update included, ran as a CUDA graph */
      for (int j = 0; j < k; j++, b++) {
        pt_batch batch;
        const double tw = timing ? pt_now() : 0.0;
        PT_TRY(pt_loader_next(W->train, &batch));
        if (batch.n == 0) return pt_fail(PT_ERR_STATE, "the loader ended epoch %d early at batch %d", epoch + 1, b);
        const double tf = timing ? pt_now() : 0.0;
        if (timing) {
          pt_trace_span("wait for data", "data", tw, tf);
          ph.data_s += tf - tw;
        }
        W->sync.active = j == k - 1 && W->world > 1;
        const uint64_t dropout_step = (uint64_t)pos.step * (uint64_t)K + (uint64_t)j;
        /* Both integers are exact in float: full steps get 1/(world k), bit for bit. */
        const float scale = (float)batch.n / (float)((int64_t)W->world * step_n);
        if (W->r->staged) {
          PT_TRY(staged_micro_step(W, &batch, epoch, dropout_step, scale, stats, timing ? &ph : NULL, pos.step));
          if (on_device) queued += (int64_t)batch.n * W->world;
          continue;
        }
        if (W->graphs.on && k == 1 && !timing) {
          PT_TRY(pt_graph_step_run(&W->graphs, m, &W->opt, &W->train_dd, &batch, r->batch_room, epoch, dropout_step,
                                   scale, lr, &graphed));
          if (graphed) {
            queued += (int64_t)batch.n * W->world;
            continue;
          }
        }
        const float *x;
        const int32_t *y;
        pt_device_data_batch(&W->train_dd, &batch, epoch, &x, &y);
        if (on_device) {
          pt_train_micro_step_queued(m, x, y, batch.n, dropout_step, j == 0, scale, timing ? &ph : NULL,
                                     W->train_dd.sums);
          /* Every worker's shard has as many samples (the sampler pads). */
          queued += (int64_t)batch.n * W->world;
          continue;
        }
        const double loss = pt_train_micro_step(m, x, y, batch.n, dropout_step, j == 0, scale,
                                                timing ? &ph : NULL);
        stats[0] += loss * batch.n;
        stats[1] += batch.n;
      }
      PT_TRY(pt_model_take_status(m));
      comm->step = W->dcomm->step = pos.step;
      comm->what = "the loss allreduce";
      /* Read once, after the step's work: every worker then acts on the
       * sum, so all stop after the same step. */
      agreement(W, last_save, stats + 2);
      const double t_sums = W->r->staged ? pt_now() : 0.0;
      if (!on_device) PT_TRY(pt_comm_iallreduce_f64(comm, stats, 5));
      PT_TRY(pt_grad_sync_finish(&W->sync));
      /* The loss sums travel on the world communicator. Finishing the
       * gradients finished them too when the gradients share it; a stage's
       * gradients travel among its replicas only. Nothing pending: no-op. */
      PT_TRY(pt_comm_wait_all(comm));
      if (W->r->staged) {
        /* A stage done with its schedule waits here for the others to end
         * theirs (the last stage for the first's backward passes): idle
         * time of the step, which the stage table and the bubble count. */
        const double waited = pt_now() - t_sums;
        W->stages.st.wait_s += waited;
        if (timing) ph.comm_s += waited;
      }
      /* Every worker sees the same sums, so all stop together here. */
      if (!isfinite(stats[0])) return loss_went_bad(W, stats[0], epoch, pos.step, lr);
      if (!graphed) pt_train_update(m, &W->opt, lr, timing ? &ph : NULL);
      if (W->graphs.why_off[0] && !W->graphs_noted) {
        W->graphs_noted = 1;
        if (W->out) fprintf(W->out, "note: CUDA graphs: the steps run one kernel at a time: %s\n", W->graphs.why_off);
      }
      if (timing) {
        ph.comm_s += W->sync.wait_s - comm0; /* what overlaps backward counts there */
        ph.total_s += pt_now() - ta;
      }
      pos.step++;
      loss_sum += stats[0];
      samples += (int64_t)stats[1];
      fresh += (int64_t)stats[1];
      if (on_device) {
        fresh += queued;
        /* At the batches the progress log prints (b, not the step: they
         * differ with --accum-steps and after the first epoch), so the
         * line shows this epoch's loss rather than 0/0 or a stale one. */
        /* One GPU stops after the step it was asked in; several agree at
         * the next flush, with the loss. */
        int stop = W->comm->size == 1 && pt_train_stop_signal();
        int every = c->checkpoint_every && pos.step % c->checkpoint_every == 0;
        if (b % flush_every == 0 || b >= nb || (c->max_steps && pos.step >= c->max_steps) || stop || every)
          PT_TRY(flush_device_loss(W, epoch, pos.step, lr, &loss_sum, &samples, &stop, &save_due, &cb_stopped,
                                   last_save));
        queued = 0;
        signalled = stop;
      } else {
        signalled = stats[2] > 0.0;
        save_due = stats[3] > 0.0;
        cb_stopped = stats[4] > 0.0;
      }
      /* --checkpoint-every, --checkpoint-interval: a save inside the epoch
       * (its end saves anyway); a stop on a signal saves below */
      if (!signalled && b < nb && (save_due || (c->checkpoint_every && pos.step % c->checkpoint_every == 0))) {
        pt_train_position at = pos;
        at.evaluated = 0; /* a save inside the epoch comes before its step's evaluation */
        at.next_epoch = epoch;
        at.next_batch = b;
        at.epoch_loss_sum = loss_sum;
        at.epoch_samples = samples;
        at.epoch_seconds = prior_seconds + (pt_now() - t0 - E.seconds);
        PT_TRY(save_checkpoint(W, &at));
        last_save = pt_now();
        saved_step = pos.step;
        /* Every worker made this save (the decision travelled with the
         * loss), so every worker stops here too. */
        if (c->exit_after_checkpoint && !(c->max_steps && pos.step >= c->max_steps)) signalled = ckpt_exit = 1;
      }
      save_due = 0;
      /* --eval-every: the step count decides, the same on every worker, and
       * evaluate_all is collective; so is the stop at the target. */
      if (!signalled && b < nb && c->eval_every && pos.step % c->eval_every == 0) {
        if (c->target_accuracy > 0) pt_progress_finish(&prog); /* its "reached" line, not on the bar's */
        PT_TRY(eval_in_epoch(W, epoch, pos.step, loss_sum, samples, t_run, &E, &signalled, &stopped));
      }
      double dt = pt_now() - t0 - E.seconds;
      if (W->watch.nv) {
        pt_gpu_watch_line(&W->watch, gpu_line, sizeof gpu_line);
        pt_progress_set_extra(&prog, gpu_line);
      }
      /* A backend's warning (a fallback to a slower path) as soon as it is
       * raised, on a line of its own: a progress bar's line is cleared
       * first, and drawn again by the update. */
      if (W->out && pt_notice_pending()) {
        pt_progress_finish(&prog);
        pt_notice_flush(W->out);
      }
      pt_progress_update(&prog, b, pos.step, loss_sum / (double)samples, dt > 0 ? fresh / dt : 0.0);
      if (W->caller && c->on_step && !W->cb_stop) {
        const pt_step info = {.epoch = epoch + 1, .step = pos.step, .batch = b, .batches = nb,
                              .loss = samples ? loss_sum / (double)samples : NAN, .lr = lr,
                              .images_per_s = dt > 0 ? fresh / dt : 0.0};
        W->cb_stop = c->on_step(&info, c->user) != 0;
        /* Alone, the run stops at once; several workers agree on it with the next step's loss. */
        if (W->cb_stop && W->world == 1 && !r->staged) cb_stopped = 1;
      }
      if (cb_stopped) stopped = 1;
      if (signalled || E.target_hit || cb_stopped) break;
    }
    if (on_device)
      PT_TRY(flush_device_loss(W, epoch, pos.step, lr, &loss_sum, &samples, NULL, NULL, NULL, last_save));
    if (W->be->host_waits) {
      uint64_t w[2];
      W->be->host_waits(w);
      W->epoch_waits[0] = w[0] - waits0[0];
      W->epoch_waits[1] = w[1] - waits0[1];
    }
    W->epoch_graph_steps = W->graphs.replays - graph_steps0;
    pt_progress_finish(&prog);
    const double train_s = pt_now() - t0 - E.seconds; /* the evaluations inside it left out */
    samples_total += fresh;
    train_seconds_total += train_s;
    pos.next_epoch = b < nb ? epoch : epoch + 1;
    pos.next_batch = b < nb ? b : 0;
    pos.epoch_loss_sum = b < nb ? loss_sum : 0.0;
    pos.epoch_samples = b < nb ? samples : 0;
    pos.epoch_seconds = b < nb ? prior_seconds + train_s : 0.0;
    /* Stopped on a signal within the epoch: the time left before SIGKILL
     * goes to the checkpoint, not to an evaluation (the resumed run
     * evaluates the whole epoch at its end). */
    int target_hit = E.target_hit;
    const int skip_eval = (signalled || target_hit) && b < nb;
    const int evaluated = E.step_ev_at == pos.step;
    pt_eval_sums ev = evaluated ? E.step_ev : (pt_eval_sums){0};
    if (!skip_eval && !evaluated) {
      const double te0 = pt_now();
      PT_TRY(evaluate_all(W, &ev));
      pt_trace_span("evaluate", "eval", te0, pt_now());
    }
    /* A stop request cut the evaluation short (a batch system's SIGTERM
     * may leave less time than evaluating a large model on a CPU takes):
     * nothing is reported from part of the test split, and the checkpoint
     * is of the epoch's end before its evaluation, which the resumed run
     * makes again, epoch line and all. */
    const int eval_cut = ev.cut;
    if (eval_cut) {
      signalled = 1;
      if (b == nb) before_evaluation(&pos, epoch, nb, loss_sum, samples, prior_seconds + train_s);
    }
    /* A resumed epoch's rate is the whole epoch's, as its seconds are (the
     * parts added up): the line's images_per_s x seconds is its images,
     * also for an epoch resumed only for its evaluation. */
    double ips = prior_seconds > 0 ? samples / (prior_seconds + train_s) : fresh > 0 && train_s > 0 ? fresh / train_s
                                                                                                    : 0.0;
    double train_loss = samples ? loss_sum / (double)samples : NAN;
    /* A run that met its target inside the epoch ends with that epoch's
     * line too, from the evaluation that met it: readers of the epoch
     * lines (ptrain plot) and the epoch callback see where it ended. */
    const pt_eval_sums *line_ev = !skip_eval && !eval_cut ? &ev : target_hit && b < nb ? &E.hit_ev : NULL;
    /* A metrics line that cannot be written (a full disk under --metrics)
     * ends the run, but after the checkpoint the epoch makes, whose
     * directory may have room: the error is said once it is written. */
    pt_status reported = PT_OK;
    char report_error[PT_ERROR_MAX] = "";
    if (W->rank == 0 && line_ev)
      reported = report_epoch(W, epoch + 1, pos.step, train_loss, line_ev, ips, prior_seconds + train_s, lr, b < nb);
    if (!skip_eval && !evaluated && !eval_cut && (c->eval_every || c->target_accuracy > 0)) {
      int hit;
      if (reported == PT_OK) reported = report_eval(W, epoch + 1, pos.step, train_loss, &ev, pt_now() - t_run, &hit);
      else hit = target_met(c, &ev);
      if (hit) {
        target_hit = stopped = 1;
        res->target_seconds = pt_now() - t_run;
        res->target_step = pos.step;
      }
    }
    /* The checkpoint is then of the epoch before its evaluation, as after
     * a cut one: the resumed run makes it again, and writes its lines. */
    if (reported != PT_OK) {
      snprintf(report_error, sizeof report_error, "%s", pt_error_message());
      if (b == nb) before_evaluation(&pos, epoch, nb, loss_sum, samples, prior_seconds + train_s);
    }
    /* One agreement after the epoch, every worker together: whether the
     * epoch callback asked to stop (v[0]), and whether a signal came after
     * the epoch's last step, during its evaluation (v[1]): after the run's
     * last step no step follows to carry it, and its message promised a
     * checkpoint. Read after the callback, which may ask for a stop. */
    double v[2] = {0.0, 0.0};
    const int callback = c->on_epoch && line_ev;
    if (callback && W->caller) {
      const pt_epoch info = {.epoch = epoch + 1, .step = pos.step, .train_loss = train_loss,
                             .test_loss = line_ev->count ? line_ev->loss_sum / line_ev->count : NAN,
                             .test_acc = line_ev->count ? (double)line_ev->correct / line_ev->count : NAN,
                             .images_per_s = ips,
                             .seconds = prior_seconds + train_s, .lr = lr};
      v[0] = c->on_epoch(&info, c->user) != 0;
    }
    if (callback || !signalled) {
      v[1] = !signalled && pt_train_stop_signal() ? 1.0 : 0.0;
      W->comm->what = "the agreement to stop after the epoch";
      PT_TRY(pt_comm_allreduce_f64(W->comm, v, 2));
    }
    if (v[0] > 0.0) cb_stopped = stopped = 1;
    if (v[1] > 0.0) signalled = 1;
    if (cb_stopped) res->stopped_by = PT_STOP_CALLBACK;
    /* Ended at --max-steps with no line to end the run: a signal cut its
     * evaluation (or came before it), inside the epoch or at its end. The
     * resume to the same --max-steps makes it. */
    pos.eval_due = c->max_steps && pos.step >= c->max_steps && (!line_ev || reported != PT_OK);
    /* This step's --eval-every evaluation, made and written inside the
     * epoch before the run ended there: not to be made again on resume. */
    pos.evaluated = b < nb && E.step_ev_at == pos.step && reported == PT_OK;
    if ((saving || signalled) && (saved_step != pos.step || pos.eval_due || pos.evaluated)) {
      PT_TRY(save_checkpoint(W, &pos));
      /* With exit_after_checkpoint the interval runs from the start of
       * training, not from the last epoch's end: short epochs would otherwise
       * keep the interval save, and the exit, from ever coming. */
      if (!c->exit_after_checkpoint) last_save = pt_now();
      saved_step = pos.step;
    }
    /* The checkpoint of this step is written (rank 0 writes it): a signal
     * that came meanwhile is said with that, not as a lost checkpoint. */
    if (reported != PT_OK && saved_step == pos.step && W->rank == 0) pt_train_stop_saved();
    if (reported != PT_OK)
      return pt_fail(reported, "%s%s", report_error,
                     saved_step == pos.step ? "; the epoch's checkpoint is written: --resume goes on from it, "
                                              "its lines written again, once the metrics file can be" : "");
    res->epochs_done = epoch + 1;
    res->train_loss = train_loss;
    /* A target met inside the epoch: that evaluation is the run's last. */
    const pt_eval_sums *last = target_hit && skip_eval ? &E.hit_ev : &ev;
    res->test_loss = last->count && !eval_cut ? last->loss_sum / last->count : NAN;
    res->test_acc = last->count && !eval_cut ? (double)last->correct / last->count : NAN;
    if (signalled) {
      /* Rank 0 alone writes the checkpoint, and reaches here only with it
       * written: its word lets every rank's second Ctrl-C exit 85, not
       * claim it sooner (dp's threads share the flag) nor deny it. */
      int32_t written = 1;
      W->comm->what = "the word that the checkpoint is written";
      PT_TRY(pt_comm_bcast(W->comm, &written, sizeof written, 0));
      pt_train_stop_saved();
      res->stopped_by = ckpt_exit ? PT_STOP_CHECKPOINT_EXIT : pt_train_stop_signal() ? pt_train_stop_signal() : -1;
      break;
    }
    if (stopped || b < nb) break;
  }
  if (W->quiet_line[0]) { /* --quiet, and the run ended before its last epoch */
    fputs(W->quiet_line, W->out);
    fflush(W->out);
    W->quiet_line[0] = 0;
  }
  if (W->r->staged) PT_TRY(pt_stages_report(c->quiet ? NULL : W->out, &W->stages, W->whole, c->profile));
  if (c->profile && W->out)
    pt_profile_print(W->out, W->r->staged ? W->whole : m, &ph, W->r->staged ? W->r->replicas : W->r->world,
                     W->r->staged ? W->r->stages : 1);
  if (c->profile && W->metrics) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* ru_maxrss in KiB on Linux */
    PT_TRY(pt_profile_metrics(W->metrics, &ph, W->r->staged ? W->r->replicas : W->r->world,
                              W->r->staged ? W->stages.bubble : NAN, (double)ru.ru_maxrss / 1024.0));
  }
  if (!c->quiet && W->out) pt_gpu_watch_summary(&W->watch, W->out);
  if (c->target_accuracy > 0 && !isfinite(res->target_seconds) && W->rank == 0 && !res->stopped_by) {
    if (!c->quiet && W->out)
      fprintf(W->out, "target accuracy %g not reached in %lld steps\n", as_written((float)c->target_accuracy),
              (long long)pos.step);
    if (W->metrics) {
      pt_metrics_begin(W->metrics, "target");
      pt_metrics_num(W->metrics, "accuracy", as_written((float)c->target_accuracy));
      pt_metrics_bool(W->metrics, "reached", 0);
      pt_metrics_int(W->metrics, "step", pos.step);
      PT_TRY(pt_metrics_end(W->metrics));
    }
  }
  /* Collective: every stage's parameters into every worker's whole model. */
  if (c->final_model && W->r->staged) PT_TRY(pt_stages_gather(&W->stages, W->whole, &W->opt));
  res->steps = pos.step;
  res->steps_run = pos.step - first_step;
  res->seconds = pt_now() - t_run;
  res->images_per_s = train_seconds_total > 0 ? samples_total / train_seconds_total : 0.0;
  return PT_OK;
}

/* The weights a run ended with, as a CPU model of their own for the
 * caller (a staged run's parts were gathered by train_loop). */
static pt_status take_final_model(worker_t *W, pt_model **out) {
  *out = NULL;
  PT_TRY(pt_comm_nccl_sync(W->dcomm));
  PT_TRY(pt_model_to_host(W->whole));
  pt_model *m;
  PT_TRY(pt_model_create(&m, &W->r->spec, 1));
  pt_status st = pt_model_copy_weights(m, W->whole);
  if (st != PT_OK) {
    pt_model_destroy(m);
    return st;
  }
  *out = m;
  return PT_OK;
}

static pt_status run_worker(worker_t *W) {
  pt_status st = setup_worker(W);
  if (st == PT_OK && W->out && !W->cfg->quiet) print_header(W);
  if (st == PT_OK) st = train_loop(W);
  return st;
}

/* Stops the other workers: through the host communicator, and through
 * NCCL too, whose kernels would otherwise wait for this worker until the
 * timeout. */
static void abort_worker(worker_t *W, const char *why) {
  if (W->dcomm && W->dcomm != W->comm) pt_comm_abort(W->dcomm, why);
  pt_comm_abort(W->comm, why);
}

/* A dp worker's thread. Its failure is recorded and announced to the
 * others, which then stop instead of waiting for it. */
static void *dp_worker_main(void *arg) {
  worker_t *W = arg;
  char name[32];
  snprintf(name, sizeof name, "%s %d", W->r->staged ? "stage" : "worker", W->rank);
  pt_trace_thread_name(name);
  W->status = run_worker(W);
  if (W->status != PT_OK) {
    snprintf(W->error, sizeof W->error, "%s", pt_error_message());
    abort_worker(W, W->error);
  }
  pt_ops_set_threads(1);
  /* The thread's stream and handles; a fault in its last queued work is
   * this worker's failure too. */
  if (W->be && pt_backend_unbind(W->be) != PT_OK && W->status == PT_OK) {
    W->status = PT_ERR_DEVICE;
    snprintf(W->error, sizeof W->error, "%s", pt_error_message());
  }
  return NULL;
}

typedef struct {
  pt_train_plan r;
  pt_dataset own_train, own_test;   /* loaded here, unless the caller gave them */
  const pt_dataset *train_ds, *test_ds;
} shared_t;

static pt_status load_shared(const pt_train_config *c, shared_t *S) {
  pt_train_plan *r = &S->r;
  PT_TRY(pt_train_plan_make(c, r));
  if (c->train_data) {
    S->train_ds = c->train_data;
    S->test_ds = c->test_data;
  } else {
    PT_TRY(pt_dataset_load(&S->own_train, r->dataset, r->data_dir, 1));
    PT_TRY(pt_dataset_load(&S->own_test, r->dataset, r->data_dir, 0));
    S->train_ds = &S->own_train;
    S->test_ds = &S->own_test;
  }
  const pt_model_spec *s = &r->spec;
  /* The test split too: its labels index the outputs when it is evaluated. */
  for (int i = 0; i < 2; i++)
    PT_TRY(pt_train_check_fit(s, i ? S->test_ds : S->train_ds, r->data_name, i ? "test" : "training",
                              c->train_data ? "" : " (use --dataset)"));
  PT_TRY(pt_train_check_batches(r, c->drop_last, S->train_ds->n));
  /* Each worker evaluates 1/world of the test split, so its share of the
   * evaluation batch is enough; results do not depend on the cut. */
  /* A batch larger than the split (allowed, as PyTorch's DataLoader
   * allows it) holds the split: memory for the batch asked would be
   * gigabytes spent on nothing, or an out-of-memory kill. */
  r->batch_room = r->batch < S->train_ds->n ? r->batch : S->train_ds->n;
  r->eval_batch = eval_batch_for(s, r->batch_room, (r->test_batch + r->replicas - 1) / r->replicas);
  return PT_OK;
}

/* Runs the workers this process holds: all of them for dp (rank 0 on the
 * calling thread), this rank's one for ddp, the only one otherwise. */
static pt_status run_workers(const pt_train_config *c, shared_t *S, FILE *out, worker_t *W, int nlocal,
                             pt_comm_local_group *group, pt_comm_nccl_group *ngroup, pt_comm *comm) {
  for (int i = 0; i < nlocal; i++) {
    W[i] = (worker_t){.cfg = c, .r = &S->r, .train_ds = S->train_ds, .test_ds = S->test_ds, .caller = i == 0};
    W[i].comm = group ? pt_comm_local_get(group, i) : comm;
    W[i].comm->timeout_s = c->timeout_s;
    W[i].rank = W[i].comm->rank;
    W[i].world = S->r.replicas;
    W[i].data_rank = S->r.staged ? W[i].rank / S->r.stages : W[i].rank;
    W[i].out = W[i].rank == 0 ? out : NULL;
    W[i].device = group ? S->r.devices[i] : S->r.devices[0];
    W[i].dcomm = ngroup ? pt_comm_nccl_get(ngroup, i) : NULL;
    if (W[i].dcomm) W[i].dcomm->timeout_s = c->timeout_s;
  }
  if (!group && S->r.backend == PT_BACKEND_CUDA && comm->size > 1 && !S->r.device_pinned) {
    /* ddp: a rank's GPU follows its local rank (Open MPI's or Slurm's),
     * among the GPUs CUDA_VISIBLE_DEVICES leaves visible. */
    int ngpus = 0;
    char why[256] = "";
    PT_TRY(pt_cuda_device_count(&ngpus, why, sizeof why));
    if (ngpus < 1) return pt_fail(PT_ERR_DEVICE, "--device cuda: rank %d sees no GPU: %s", comm->rank, why);
    W[0].device = pt_comm_local_gpu(comm->local_rank, ngpus);
  }
  pthread_t tids[1024];
  int started = 0;
  pt_status st = PT_OK;
  for (int i = 1; i < nlocal; i++, started++)
    if (pthread_create(&tids[i], NULL, dp_worker_main, &W[i])) {
      st = pt_fail(PT_ERR_STATE, "cannot start the thread of worker %d", i);
      pt_comm_abort(W[0].comm, pt_error_message());
      break;
    }
  if (st == PT_OK) {
    W[0].status = run_worker(&W[0]);
    if (W[0].status != PT_OK) {
      snprintf(W[0].error, sizeof W[0].error, "%s", pt_error_message());
      /* A failure every rank shares is no rank's to announce. */
      if (!W[0].result.failed_alike) abort_worker(&W[0], W[0].error);
    }
  }
  for (int i = 1; i <= started; i++) pthread_join(tids[i], NULL);
  if (st != PT_OK) return st;
  /* The first failure that was a worker's own, not an echo of another's. */
  int culprit = -1;
  for (int i = 0; i < nlocal && culprit < 0; i++)
    if (W[i].status != PT_OK && W[i].status != PT_ERR_COMM) culprit = i;
  for (int i = 0; i < nlocal && culprit < 0; i++)
    if (W[i].status != PT_OK) culprit = i;
  if (culprit < 0) return PT_OK;
  return pt_fail(W[culprit].status, "%s", W[culprit].error);
}

pt_status pt_train_run(const pt_train_config *cfg, FILE *out, pt_train_result *result) {
  pt_train_result local;
  if (!result) result = &local;
  memset(result, 0, sizeof *result);
  if (cfg->epochs < 1) return pt_fail(PT_ERR_ARG, "--epochs %d: expected at least 1", cfg->epochs);
  PT_TRY(pt_cpu_check_env());
  if (cfg->accum_steps < 1) return pt_fail(PT_ERR_ARG, "--accum-steps %d: expected at least 1", cfg->accum_steps);
  if (!(cfg->timeout_s > 0)) return pt_fail(PT_ERR_ARG, "--timeout %g: expected seconds > 0", cfg->timeout_s);
  const int staged = cfg->parallel && (!strcmp(cfg->parallel, "model") || !strcmp(cfg->parallel, "pipeline"));
  /* MPI ranks, or workers that are threads of this process */
  const int ddp = cfg->comm && (staged || (cfg->parallel && !strcmp(cfg->parallel, "ddp")));
  const int dp = !ddp && (staged || (cfg->parallel && !strcmp(cfg->parallel, "dp")));
  /* Tracing starts first so the loader threads name their tracks. Its
   * PT_TRACE_MAX_EVENTS spans hold about 40,000 steps of a 10-layer model. */
  char trace_path[4200] = "";
  if (cfg->trace_path) {
    snprintf(trace_path, sizeof trace_path, "%s", cfg->trace_path);
    if (ddp && cfg->comm && cfg->comm->size > 1) {
      /* One file per rank: trace.json -> trace.rank1.json */
      const char *dot = strrchr(cfg->trace_path, '.');
      int stem = dot && !strchr(dot, '/') ? (int)(dot - cfg->trace_path) : (int)strlen(cfg->trace_path);
      snprintf(trace_path, sizeof trace_path, "%.*s.rank%d%s", stem, cfg->trace_path, cfg->comm->rank,
               cfg->trace_path + stem);
    }
    PT_TRY(pt_trace_check_path(trace_path));
    /* A test hook: a small buffer, so that a short run fills it. */
    const char *test_hook = getenv("PTRAIN_TEST_TRACE_MAX");
    const int test_max = test_hook ? atoi(test_hook) : 0;
    PT_TRY(pt_trace_start(test_max > 0 ? (size_t)test_max : PT_TRACE_MAX_EVENTS));
    char track[32] = "trainer";
    if (dp) snprintf(track, sizeof track, staged ? "stage 0" : "worker 0");
    if (ddp && cfg->comm) snprintf(track, sizeof track, "rank %d", cfg->comm->rank);
    pt_trace_thread_name(track);
  }
  /* Denormals flushed for the run unless asked to keep them; the caller's
   * mode comes back at the end (nothing returns early from here on). */
  const int flushing = pt_fp_set_flush(!cfg->keep_denormals);
  shared_t S;
  memset(&S, 0, sizeof S);
  pt_comm *self = NULL;
  pt_comm_local_group *group = NULL;
  worker_t *W = NULL;
  int nlocal = 1;
  pt_status st = load_shared(cfg, &S);
  pt_comm_nccl_group *ngroup = NULL;
  /* Before any collective whose shape the settings decide. */
  if (st == PT_OK && ddp && cfg->comm->size > 1)
    st = pt_rank_settings_agree(cfg->comm, cfg, &S.r, S.train_ds, S.test_ds, &result->failed_alike);
  if (st == PT_OK && dp) {
    nlocal = S.r.world;
    st = pt_comm_local_group_create(&group, nlocal, cfg->timeout_s);
    /* GPUs of one process reduce through NCCL; without it, each worker
     * falls back to host staging over the threads group (make_device_comm). */
    if (st == PT_OK && S.r.backend == PT_BACKEND_CUDA && !S.r.staged && pt_comm_nccl_available())
      st = pt_comm_nccl_group_create(&ngroup, nlocal, S.r.devices, cfg->timeout_s);
  } else if (st == PT_OK && !ddp) {
    st = pt_comm_self_create(&self);
  }
  if (st == PT_OK) {
    W = calloc((size_t)nlocal, sizeof *W);
    if (!W) st = pt_fail(PT_ERR_NOMEM, "out of memory for %d workers", nlocal);
  }
  if (st == PT_OK) st = run_workers(cfg, &S, out, W, nlocal, group, ngroup, ddp ? cfg->comm : self);
  if (st == PT_OK) *result = W[0].result;
  else if (W && W[0].result.failed_alike) result->failed_alike = 1;
  if (st == PT_OK && cfg->final_model) st = take_final_model(&W[0], cfg->final_model);
  const int rank0 = !ddp || cfg->comm->rank == 0;
  /* Raised after the last step (an evaluation's): before the summary. */
  if (rank0 && out) pt_notice_flush(out);
  if (st == PT_OK && !cfg->quiet && rank0 && out && result->steps_run == 0) {
    /* A resume with nothing left to do: no time, no rate to report. */
    fprintf(out, "done: nothing left to train at step %lld%s%s\n", (long long)result->steps,
            saves_checkpoints(cfg) ? ", checkpoint in " : "", saves_checkpoints(cfg) ? cfg->checkpoint_dir : "");
  } else if (st == PT_OK && !cfg->quiet && rank0 && out) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    /* The seconds are the run's, evaluations included; the rate is the
     * training's alone, as the epoch lines give it. A resumed run's steps
     * are counted from the start, and the ones it ran said apart. */
    char ran[64] = "";
    if (result->steps_run != result->steps)
      snprintf(ran, sizeof ran, " (%lld in this run)", (long long)result->steps_run);
    fprintf(out, "done: %lld step%s%s in %.1f s, %.0f img/s while training, peak memory %.0f MiB%s%s\n",
            (long long)result->steps, result->steps == 1 ? "" : "s", ran, result->seconds, result->images_per_s,
            ru.ru_maxrss / 1024.0,
            saves_checkpoints(cfg) ? ", checkpoint in " : "", saves_checkpoints(cfg) ? cfg->checkpoint_dir : "");
  }
  /* Before the workers are freed: trace events point at the models' layer labels. */
  if (cfg->trace_path) {
    size_t dropped = 0;
    pt_status ts = pt_trace_finish(trace_path, &dropped);
    if (st == PT_OK) st = ts;
    if (ts == PT_OK && !cfg->quiet && rank0 && out)
      fprintf(out, "trace written to %s (open in Perfetto or chrome://tracing)\n", trace_path);
    /* A full buffer drops the run's last spans: said, or the trace would
     * pass for the whole run's. */
    if (ts == PT_OK && dropped && out)
      fprintf(out, "note: %s holds the run's first spans, as many as it has room for; the %zu after them were left "
                   "out (trace fewer steps, with --max-steps, to see them all)\n", trace_path, dropped);
  }
  const pt_backend *main_be = W ? W[0].be : NULL; /* bound on this thread by worker 0 */
  for (int i = 0; W && i < nlocal; i++) worker_free(&W[i]);
  if (main_be) {
    const pt_status ust = pt_backend_unbind(main_be);
    if (st == PT_OK) st = ust;
  }
  free(W);
  pt_comm_nccl_group_destroy(ngroup);
  pt_comm_local_group_destroy(group);
  pt_comm_destroy(self);
  pt_dataset_free(&S.own_train);
  pt_dataset_free(&S.own_test);
  pt_fp_set_flush(flushing);
  return st;
}

/* ptrain train's flags and the checks between them (train_args.h). Flags
 * are named as in pytorch/examples/mnist where they exist there, so users
 * type them by habit. */
#include "cli/train_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "data/dataset.h"
#include "nn/presets.h"
#include "optim/optimizer.h"
#include "train/config_bounds.h"

#define BIG PT_COUNT_MAX
#define MAX_FLAGS 64

/* The table over a's fields, into out; the number of flags. */
static int table(pt_train_args *a, pt_arg *out) {
  const pt_arg t[] = {
      {"--model", ARG_STR, &a->model, 0, 0, NULL, "NAME", "model preset (ptrain models lists them; default mnist-cnn)"},
      {"--model-file", ARG_STR, &a->model_file, 0, 0, NULL, "SPEC", "model spec file (docs/models.md)"},
      {"--dataset", ARG_CHOICE, &a->dataset, 0, 0, PT_DATASET_NAMES, "NAME",
       "fashion-mnist, mnist or cifar10 (default: the preset's)"},
      {"--data-dir", ARG_STR, &a->data_dir, 0, 0, NULL, "DIR", "where the dataset files are"},
      {"--epochs", ARG_INT, &a->c.epochs, 1, PT_EPOCHS_MAX, NULL, "N", "total epochs, counting resumed ones (default 1)"},
      {"--batch-size", ARG_INT, &a->c.batch_size, 1, PT_BATCH_MAX, NULL, "N",
       "training batch size, per worker under dp and ddp (default: the preset's)"},
      {"--test-batch-size", ARG_INT, &a->c.test_batch_size, 1, PT_BATCH_MAX, NULL, "N", "evaluation batch size"},
      {"--lr", ARG_FLOAT, &a->c.lr, 0, PT_LR_MAX, NULL, "X", "learning rate (default: the preset's)"},
      {"--optimizer", ARG_CHOICE, &a->c.optimizer, 0, 0, PT_OPT_NAMES, "NAME", "sgd, adam, adamw or adadelta"},
      {"--momentum", ARG_FLOAT, &a->c.momentum, 0, PT_MOMENTUM_MAX, NULL, "X", "SGD momentum"},
      {"--nesterov", ARG_FLAG, &a->c.nesterov, 0, 0, NULL, NULL, "Nesterov momentum (SGD)"},
      {"--weight-decay", ARG_FLOAT, &a->c.weight_decay, 0, PT_WEIGHT_DECAY_MAX, NULL, "X", "L2 penalty (AdamW: decoupled; default 0.01 there)"},
      {"--scheduler", ARG_CHOICE, &a->c.scheduler, 0, 0, PT_SCHED_NAMES, "NAME", "per-epoch schedule: step, cosine, none"},
      {"--gamma", ARG_FLOAT, &a->c.gamma, 0, 1, NULL, "X", "StepLR decay per epoch (default 0.7; --scheduler step)"},
      {"--seed", ARG_U64, &a->c.seed, 0, 0, NULL, "N", "random seed (default 1)"},
      {"--threads", ARG_INT, &a->c.threads, 1, PT_THREADS_MAX, NULL, "N", "CPU threads per worker (default: the cores this process may use, divided among the workers that share them)"},
      {"--log-interval", ARG_INT, &a->c.log_interval, 1, PT_LOG_INTERVAL_MAX, NULL, "N", "batches between log lines (default 10; micro-batches with --accum-steps)"},
      {"--max-steps", ARG_I64, &a->c.max_steps, 1, BIG, NULL, "N", "stop after N optimizer steps in all"},
      {"--no-shuffle", ARG_FLAG, &a->no_shuffle, 0, 0, NULL, NULL, "keep the dataset's order"},
      {"--no-dropout", ARG_FLAG, &a->no_dropout, 0, 0, NULL, NULL, "turn dropout layers off"},
      {"--init-from", ARG_STR, &a->c.init_from, 0, 0, NULL, "FILE", "start from these weights (.safetensors, e.g. from PyTorch); with --resume, only where no checkpoint is there yet"},
      {"--save-model", ARG_FLAG, &a->c.save_model, 0, 0, NULL, NULL, "checkpoint after every epoch and at the end"},
      {"--checkpoint-dir", ARG_STR, &a->c.checkpoint_dir, 0, 0, NULL, "DIR", "checkpoint directory (default checkpoints)"},
      {"--resume", ARG_FLAG, &a->c.resume, 0, 0, NULL, NULL,
       "continue from the newest complete checkpoint in --checkpoint-dir, checkpointing as --save-model does"},
      {"--keep-checkpoints", ARG_INT, &a->c.keep_checkpoints, 1, PT_KEEP_CHECKPOINTS_MAX, NULL, "K", "complete checkpoints kept (default 2)"},
      {"--checkpoint-every", ARG_I64, &a->c.checkpoint_every, 1, BIG, NULL, "N", "also checkpoint every N steps, inside epochs"},
      {"--checkpoint-interval", ARG_FLOAT, &a->ckpt_interval, 1, PT_CHECKPOINT_INTERVAL_MAX, NULL, "SECONDS",
       "also checkpoint every SECONDS of training, inside epochs"},
      {"--eval-every", ARG_I64, &a->c.eval_every, 1, BIG, NULL, "N",
       "also evaluate on the test split every N steps, inside epochs (with --metrics: an \"eval\" line each)"},
      {"--target-accuracy", ARG_FLOAT, &a->target_acc, 0, 1, NULL, "A",
       "stop at the first evaluation whose test accuracy is at least A (time to accuracy)"},
      {"--exit-after-checkpoint", ARG_FLAG, &a->c.exit_after_checkpoint, 0, 0, NULL, NULL,
       "exit with status 85 after the first --checkpoint-every/--checkpoint-interval save (HTCondor's "
       "checkpoint_exit_code: run again with --resume)"},
      {"--metrics", ARG_STR, &a->c.metrics_path, 0, 0, NULL, "FILE", "append one JSON object per epoch"},
      {"--quiet", ARG_FLAG, &a->c.quiet, 0, 0, NULL, NULL, "print only the final epoch's line and errors"},
      {"--no-prefetch", ARG_FLAG, &a->no_prefetch, 0, 0, NULL, NULL,
       "prepare batches on the training threads between steps (the default where they take every core)"},
      {"--keep-denormals", ARG_FLAG, &a->c.keep_denormals, 0, 0, NULL, NULL,
       "compute with denormal floats as IEEE 754 asks (default: flush them to zero, which is faster)"},
      {"--profile", ARG_FLAG, &a->c.profile, 0, 0, NULL, NULL, "print time per layer and per phase at the end"},
      {"--trace", ARG_STR, &a->c.trace_path, 0, 0, NULL, "FILE", "write a Chrome trace (Perfetto, chrome://tracing)"},
      {"--parallel", ARG_CHOICE, &a->c.parallel, 0, 0, "none|dp|ddp|model|pipeline", "HOW",
       "none; dp: workers are threads of this process; ddp: one process per rank (mpirun, srun); model: "
       "layers split over --devices (or ranks); pipeline: the same with micro-batches"},
      {"--workers", ARG_INT, &a->c.workers, 1, PT_WORKERS_MAX, NULL, "N",
       "dp: replicas, each a thread with its own --threads (default 2)"},
      {"--device", ARG_STR, &a->c.device, 0, 0, NULL, "DEV",
       "cpu (default), cuda or cuda:N: where the run trains; under ddp each rank takes the GPU of its local rank"},
      {"--devices", ARG_STR, &a->c.devices, 0, 0, NULL, "LIST",
       "dp: one worker per device (cpu:0,cpu:1 or cuda:0,cuda:1); model, pipeline: one stage per device, "
       "stages may share a GPU (default cpu:0,cpu:1)"},
      {"--precision", ARG_CHOICE, &a->c.precision, 0, 0, "fp32|tf32|bf16", "P",
       "GPUs: fp32 (default); tf32, TF32 tensor-core math in GEMMs and convolutions, as PyTorch's allow_tf32; "
       "bf16, GEMMs and convolutions multiply in bf16 and sum in fp32"},
      {"--cuda-graphs", ARG_FLAG, &a->cuda_graphs, 0, 0, NULL, NULL,
       "one GPU: capture the training step once as a CUDA graph and replay it, one launch a step, the same "
       "results (the default where the run allows it; with this flag, an error where it does not)"},
      {"--no-cuda-graphs", ARG_FLAG, &a->no_cuda_graphs, 0, 0, NULL, NULL,
       "one GPU: launch the step's kernels one at a time"},
      {"--split", ARG_STR, &a->c.split, 0, 0, NULL, "LAYERS",
       "model, pipeline: first layers of stages 2.. by name or index (default: balance FLOPs)"},
      {"--micro-batches", ARG_INT, &a->c.micro_batches, 1, PT_MICRO_BATCHES_MAX, NULL, "M", "pipeline: micro-batches per batch (default 4)"},
      {"--schedule", ARG_CHOICE, &a->c.schedule, 0, 0, "gpipe|1f1b", "NAME", "pipeline: gpipe or 1f1b (default 1f1b)"},
      {"--stages", ARG_INT, &a->c.stages, 1, PT_STAGES_MAX, NULL, "S",
       "model, pipeline under mpirun: ranks per replica (default: all ranks)"},
      {"--bucket-mb", ARG_FLOAT, &a->bucket_mb, PT_BUCKET_MB_MIN, PT_BUCKET_MB_MAX, NULL, "MB", "gradient bucket size (default 25)"},
      {"--accum-steps", ARG_INT, &a->c.accum_steps, 1, PT_ACCUM_STEPS_MAX, NULL, "K", "micro-batches per optimizer step (default 1)"},
      {"--drop-last", ARG_FLAG, &a->c.drop_last, 0, 0, NULL, NULL, "drop the shard tail and the last incomplete batch"},
      {"--sync-bn", ARG_FLAG, &a->c.sync_bn, 0, 0, NULL, NULL, "batch-norm statistics over all workers' batches"},
      {"--timeout", ARG_FLOAT, &a->timeout_s, PT_TIMEOUT_MIN, PT_TIMEOUT_MAX, NULL, "S", "seconds to wait for the other workers (default 300)"},
  };
  const int n = (int)(sizeof t / sizeof t[0]);
  _Static_assert(sizeof t / sizeof t[0] <= MAX_FLAGS, "MAX_FLAGS is too small for train's flags");
  memcpy(out, t, sizeof t);
  return n;
}

static void defaults(pt_train_args *a) {
  memset(a, 0, sizeof *a);
  pt_config_defaults(&a->c);
  /* Below every flag's range: a value still negative after parsing was
   * not given, and takes pt_config's default. */
  a->bucket_mb = -1.0f;
  a->timeout_s = -1.0f;
}

static const char USAGE[] = "ptrain train [options]";
static const char ABOUT[] = "Train a model on one device (the CPU, or a GPU with --device cuda), or in parallel on "
                            "several (--parallel).\nUnset options take the preset's defaults\n"
                            "(ptrain models NAME shows them).";

void pt_train_args_print_help(void) {
  pt_train_args a;
  pt_arg t[MAX_FLAGS];
  defaults(&a);
  pt_args_print_help(USAGE, ABOUT, t, table(&a, t));
}

int pt_train_args_parse(int argc, char **argv, int from, pt_train_args *a, int *help) {
  defaults(a);
  pt_arg t[MAX_FLAGS];
  const int n = table(a, t);
  int rc = pt_args_parse("train", t, n, argc, argv, from, help, NULL, 0, NULL);
  if (rc || *help) return rc;
  if (a->model && a->model_file) {
    fprintf(stderr, "ptrain train: --model and --model-file: give one, not both (see 'ptrain train --help')\n");
    return PT_USAGE_ERROR;
  }
  if (a->model && !pt_preset_find(a->model)) return pt_cli_unknown_model("train", a->model);
  if (a->c.exit_after_checkpoint && !a->c.checkpoint_every && !(a->ckpt_interval > 0)) {
    fprintf(stderr, "ptrain train: --exit-after-checkpoint needs --checkpoint-every N or --checkpoint-interval "
                    "SECONDS, which say when to save and exit (see 'ptrain train --help')\n");
    return PT_USAGE_ERROR;
  }
  if (a->cuda_graphs && a->no_cuda_graphs) {
    fprintf(stderr, "ptrain train: --cuda-graphs and --no-cuda-graphs contradict each other; give one\n");
    return PT_USAGE_ERROR;
  }
  /* One process training alone waits for no one and sums no gradients:
   * a slip in a job script (a missing --parallel) should not pass as a
   * setting that took effect. */
  const int alone = !a->c.parallel || !strcmp(a->c.parallel, "none");
  if (alone && (a->bucket_mb >= 0 || a->timeout_s >= 0)) {
    fprintf(stderr, "ptrain train: %s is for runs with several workers (--parallel dp, ddp, model or pipeline); this "
                    "run has one\n", a->bucket_mb >= 0 ? "--bucket-mb" : "--timeout");
    return PT_USAGE_ERROR;
  }
  a->c.cuda_graphs = a->cuda_graphs ? 1 : a->no_cuda_graphs ? -1 : 0;
  a->c.prefetch = !a->no_prefetch;
  a->c.shuffle = !a->no_shuffle;
  a->c.dropout = !a->no_dropout;
  if (a->bucket_mb >= 0) a->c.bucket_mb = a->bucket_mb;
  a->c.checkpoint_interval = a->ckpt_interval;
  a->c.target_accuracy = a->target_acc;
  if (a->timeout_s >= 0) a->c.timeout_s = a->timeout_s;
  return 0;
}

int pt_train_args_has(char **v, int n, const char *flag) {
  const size_t len = strlen(flag);
  for (int i = 0; i < n; i++)
    if (!strncmp(v[i], flag, len) && (v[i][len] == 0 || v[i][len] == '=')) return 1;
  return 0;
}

int pt_train_args_check(const char *cmd, const char *const *pre, int npre, char **train, int ntrain,
                        pt_train_args *ta) {
  const int n = 2 + npre + ntrain;
  char **v = malloc(sizeof *v * (size_t)(n + 1));
  if (!v) {
    pt_fail(PT_ERR_NOMEM, "out of memory");
    return pt_cli_fail(cmd);
  }
  v[0] = "ptrain";
  v[1] = "train";
  for (int i = 0; i < npre; i++) v[2 + i] = (char *)pre[i];
  for (int i = 0; i < ntrain; i++) v[2 + npre + i] = train[i];
  v[n] = NULL;
  int help;
  const int rc = pt_train_args_parse(n, v, 2, ta, &help);
  free(v);
  if (rc) {
    fprintf(stderr, "ptrain %s: the arguments after '--' are ptrain train's, and it refuses them (above)\n", cmd);
    return PT_USAGE_ERROR;
  }
  if (help) {
    fprintf(stderr, "ptrain %s: --help after '--': the runs would print train's help and train nothing (see "
                    "'ptrain %s --help')\n", cmd, cmd);
    return PT_USAGE_ERROR;
  }
  return 0;
}


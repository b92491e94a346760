/* ptrain train: flags named as in pytorch/examples/mnist where they exist
 * there, so users type them by habit. The run goes through the library's
 * API (include/ptrain.h): the flags fill a pt_config. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "comm/comm.h"
#include "train/stop.h"

#define BIG 9.2e18

/* SIGTERM (Slurm's time limit and preemption, HTCondor's eviction),
 * SIGINT (Ctrl-C) and SIGUSR1 (sbatch --signal): finish the step, write a
 * checkpoint, exit PT_EXIT_CHECKPOINTED. A second Ctrl-C quits at once;
 * the checkpoint being written is then the old one still (files are
 * replaced by rename). Only async-signal-safe calls here. */
static void on_stop_signal(int sig) {
  const int n = pt_train_stop_request(sig);
  if (n > 1 && sig == SIGINT) _exit(128 + SIGINT);
  if (n == 1) {
    static const char msg[] = "\nptrain: signal received: stopping after this step to write a checkpoint "
                              "(Ctrl-C again quits at once)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
  }
}

static void catch_stop_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; /* the loader's reads and the collectives go on */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
}

int pt_cmd_train(int argc, char **argv) {
  pt_config c;
  pt_config_defaults(&c);
  const char *model = NULL, *model_file = NULL, *dataset = NULL, *data_dir = NULL;
  int no_prefetch = 0, no_shuffle = 0, no_dropout = 0, cuda_graphs = 0, no_cuda_graphs = 0;
  float target_acc = 0;
  float bucket_mb = (float)c.bucket_mb, timeout_s = (float)c.timeout_s, ckpt_interval = 0.0f;
  const pt_arg flags[] = {
      {"--model", ARG_STR, &model, 0, 0, NULL, "NAME", "model preset (ptrain models lists them; default mnist-cnn)"},
      {"--model-file", ARG_STR, &model_file, 0, 0, NULL, "SPEC", "model spec file (docs/models.md)"},
      {"--dataset", ARG_CHOICE, &dataset, 0, 0, "fashion-mnist|mnist|cifar10", "NAME",
       "fashion-mnist, mnist or cifar10 (default: the preset's)"},
      {"--data-dir", ARG_STR, &data_dir, 0, 0, NULL, "DIR", "where the dataset files are"},
      {"--epochs", ARG_INT, &c.epochs, 1, 100000, NULL, "N", "total epochs, counting resumed ones (default 1)"},
      {"--batch-size", ARG_INT, &c.batch_size, 1, 1 << 20, NULL, "N", "training batch size (default: the preset's)"},
      {"--test-batch-size", ARG_INT, &c.test_batch_size, 1, 1 << 20, NULL, "N", "evaluation batch size"},
      {"--lr", ARG_FLOAT, &c.lr, 0, 1e3, NULL, "X", "learning rate (default: the preset's)"},
      {"--optimizer", ARG_CHOICE, &c.optimizer, 0, 0, "sgd|adam|adamw|adadelta", "NAME", "sgd, adam, adamw or adadelta"},
      {"--momentum", ARG_FLOAT, &c.momentum, 0, 0.999999, NULL, "X", "SGD momentum"},
      {"--nesterov", ARG_FLAG, &c.nesterov, 0, 0, NULL, NULL, "Nesterov momentum (SGD)"},
      {"--weight-decay", ARG_FLOAT, &c.weight_decay, 0, 1, NULL, "X", "L2 penalty (AdamW: decoupled; default 0.01 there)"},
      {"--scheduler", ARG_CHOICE, &c.scheduler, 0, 0, "step|cosine|none", "NAME", "per-epoch schedule: step, cosine, none"},
      {"--gamma", ARG_FLOAT, &c.gamma, 0, 1, NULL, "X", "StepLR decay per epoch (default 0.7)"},
      {"--seed", ARG_U64, &c.seed, 0, BIG, NULL, "N", "random seed (default 1)"},
      {"--threads", ARG_INT, &c.threads, 1, 1024, NULL, "N", "CPU threads (default: all cores)"},
      {"--log-interval", ARG_INT, &c.log_interval, 1, 1 << 30, NULL, "N", "steps between log lines (default 10)"},
      {"--max-steps", ARG_I64, &c.max_steps, 1, BIG, NULL, "N", "stop after N optimizer steps in all"},
      {"--no-shuffle", ARG_FLAG, &no_shuffle, 0, 0, NULL, NULL, "keep the dataset's order"},
      {"--no-dropout", ARG_FLAG, &no_dropout, 0, 0, NULL, NULL, "turn dropout layers off"},
      {"--init-from", ARG_STR, &c.init_from, 0, 0, NULL, "FILE", "start from these weights (.safetensors, e.g. from PyTorch)"},
      {"--save-model", ARG_FLAG, &c.save_model, 0, 0, NULL, NULL, "checkpoint after every epoch and at the end"},
      {"--checkpoint-dir", ARG_STR, &c.checkpoint_dir, 0, 0, NULL, "DIR", "checkpoint directory (default checkpoints)"},
      {"--resume", ARG_FLAG, &c.resume, 0, 0, NULL, NULL,
       "continue from the newest complete checkpoint in --checkpoint-dir, checkpointing as --save-model does"},
      {"--keep-checkpoints", ARG_INT, &c.keep_checkpoints, 1, 1000000, NULL, "K", "complete checkpoints kept (default 2)"},
      {"--checkpoint-every", ARG_I64, &c.checkpoint_every, 1, BIG, NULL, "N", "also checkpoint every N steps, inside epochs"},
      {"--checkpoint-interval", ARG_FLOAT, &ckpt_interval, 1, 1e9, NULL, "SECONDS",
       "also checkpoint every SECONDS of training, inside epochs"},
      {"--eval-every", ARG_I64, &c.eval_every, 1, BIG, NULL, "N",
       "also evaluate on the test split every N steps, inside epochs (with --metrics: an \"eval\" line each)"},
      {"--target-accuracy", ARG_FLOAT, &target_acc, 0, 1, NULL, "A",
       "stop at the first evaluation whose test accuracy is at least A (time to accuracy)"},
      {"--exit-after-checkpoint", ARG_FLAG, &c.exit_after_checkpoint, 0, 0, NULL, NULL,
       "exit with status 85 after the first --checkpoint-every/--checkpoint-interval save (HTCondor's "
       "checkpoint_exit_code: run again with --resume)"},
      {"--metrics", ARG_STR, &c.metrics_path, 0, 0, NULL, "FILE", "append one JSON object per epoch"},
      {"--quiet", ARG_FLAG, &c.quiet, 0, 0, NULL, NULL, "print only the final epoch's line and errors"},
      {"--no-prefetch", ARG_FLAG, &no_prefetch, 0, 0, NULL, NULL,
       "prepare batches on the training threads between steps (the default where they take every core)"},
      {"--keep-denormals", ARG_FLAG, &c.keep_denormals, 0, 0, NULL, NULL,
       "compute with denormal floats as IEEE 754 asks (default: flush them to zero, which is faster)"},
      {"--profile", ARG_FLAG, &c.profile, 0, 0, NULL, NULL, "print time per layer and per phase at the end"},
      {"--trace", ARG_STR, &c.trace_path, 0, 0, NULL, "FILE", "write a Chrome trace (Perfetto, chrome://tracing)"},
      {"--parallel", ARG_CHOICE, &c.parallel, 0, 0, "none|dp|ddp|model|pipeline", "HOW",
       "none; dp: workers are threads of this process; ddp: one process per rank (mpirun, srun); model: "
       "layers split over --devices (or ranks); pipeline: the same with micro-batches"},
      {"--workers", ARG_INT, &c.workers, 1, 1024, NULL, "N", "dp: replicas, one thread each (default 2)"},
      {"--device", ARG_STR, &c.device, 0, 0, NULL, "DEV",
       "cpu (default), cuda or cuda:N: where the run trains; under ddp each rank takes the GPU of its local rank"},
      {"--devices", ARG_STR, &c.devices, 0, 0, NULL, "LIST",
       "dp: one worker per device (cpu:0,cpu:1 or cuda:0,cuda:1); model, pipeline: one stage per device, "
       "stages may share a GPU (default cpu:0,cpu:1)"},
      {"--precision", ARG_CHOICE, &c.precision, 0, 0, "fp32|tf32|bf16", "P",
       "GPUs: fp32 (default); tf32, TF32 tensor-core math in GEMMs and convolutions, as PyTorch's allow_tf32; "
       "bf16, GEMMs and convolutions multiply in bf16 and sum in fp32"},
      {"--cuda-graphs", ARG_FLAG, &cuda_graphs, 0, 0, NULL, NULL,
       "one GPU: capture the training step once as a CUDA graph and replay it, one launch a step, the same "
       "results (the default where the run allows it; with this flag, an error where it does not)"},
      {"--no-cuda-graphs", ARG_FLAG, &no_cuda_graphs, 0, 0, NULL, NULL,
       "one GPU: launch the step's kernels one at a time"},
      {"--split", ARG_STR, &c.split, 0, 0, NULL, "LAYERS",
       "model, pipeline: first layers of stages 2.. by name or index (default: balance FLOPs)"},
      {"--micro-batches", ARG_INT, &c.micro_batches, 1, 16000, NULL, "M", "pipeline: micro-batches per batch (default 4)"},
      {"--schedule", ARG_CHOICE, &c.schedule, 0, 0, "gpipe|1f1b", "NAME", "pipeline: gpipe or 1f1b (default 1f1b)"},
      {"--stages", ARG_INT, &c.stages, 1, 1024, NULL, "S",
       "model, pipeline under mpirun: ranks per replica (default: all ranks)"},
      {"--bucket-mb", ARG_FLOAT, &bucket_mb, 0.001, 1e6, NULL, "MB", "gradient bucket size (default 25)"},
      {"--accum-steps", ARG_INT, &c.accum_steps, 1, 1 << 20, NULL, "K", "micro-batches per optimizer step (default 1)"},
      {"--drop-last", ARG_FLAG, &c.drop_last, 0, 0, NULL, NULL, "drop the shard tail and the last incomplete batch"},
      {"--sync-bn", ARG_FLAG, &c.sync_bn, 0, 0, NULL, NULL, "batch-norm statistics over all workers' batches"},
      {"--timeout", ARG_FLOAT, &timeout_s, 0.1, 1e7, NULL, "S", "seconds to wait for the other workers (default 300)"},
  };
  const int n = (int)(sizeof flags / sizeof flags[0]);
  int help;
  int rc = pt_args_parse("train", flags, n, argc, argv, 2, &help, NULL, 0, NULL);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain train [options]",
                       "Train a model on one CPU device, or in parallel on several (--parallel).\nUnset options take the preset's defaults\n"
                       "(ptrain models NAME shows them).",
                       flags, n);
    return 0;
  }
  if (model && model_file) {
    fprintf(stderr, "ptrain train: --model and --model-file: give one, not both (see 'ptrain train --help')\n");
    return PT_USAGE_ERROR;
  }
  if (c.resume && c.init_from) {
    fprintf(stderr, "ptrain train: --resume and --init-from: give one, not both (see 'ptrain train --help')\n");
    return PT_USAGE_ERROR;
  }
  if (c.exit_after_checkpoint && !c.checkpoint_every && !(ckpt_interval > 0)) {
    fprintf(stderr, "ptrain train: --exit-after-checkpoint needs --checkpoint-every N or --checkpoint-interval "
                    "SECONDS, which say when to save and exit (see 'ptrain train --help')\n");
    return PT_USAGE_ERROR;
  }
  if (cuda_graphs && no_cuda_graphs) {
    fprintf(stderr, "ptrain train: --cuda-graphs and --no-cuda-graphs contradict each other; give one\n");
    return PT_USAGE_ERROR;
  }
  c.cuda_graphs = cuda_graphs ? 1 : no_cuda_graphs ? -1 : 0;
  c.prefetch = !no_prefetch;
  c.shuffle = !no_shuffle;
  c.dropout = !no_dropout;
  c.bucket_mb = bucket_mb;
  c.checkpoint_interval = ckpt_interval;
  c.target_accuracy = target_acc;
  c.timeout_s = timeout_s;
  c.progress = isatty(fileno(stderr));
  const int ddp = c.parallel && !strcmp(c.parallel, "ddp");
  const int staged = c.parallel && (!strcmp(c.parallel, "model") || !strcmp(c.parallel, "pipeline"));
  if (!ddp && !staged && pt_comm_mpi_launched()) {
    fprintf(stderr,
            "ptrain train: error: started by a launcher (mpirun or srun) as one of several processes, but without "
            "--parallel ddp (or model, pipeline) every process would train alone and write the same files; add "
            "--parallel ddp\n");
    return PT_USAGE_ERROR;
  }
  if (ddp && !pt_comm_mpi_available()) {
    pt_comm *none;
    pt_comm_mpi_create(&none, c.timeout_s); /* fails, saying what to install */
    pt_cli_fail("train");
    return PT_USAGE_ERROR;
  }
  if (ddp && !pt_comm_mpi_launched()) {
    fprintf(stderr, "ptrain train: error: --parallel ddp runs one process per rank; start them with a launcher:\n"
                    "  mpirun -np 2 ptrain train --parallel ddp ...   (one machine or a hostfile)\n"
                    "  srun --mpi=pmix ptrain train --parallel ddp ... (inside a Slurm job)\n"
                    "or use --parallel dp --workers N for workers that are threads of one process\n");
    return PT_USAGE_ERROR;
  }
  /* The MPI world first, so that a rank failing to load its data takes the
   * others down at once instead of leaving them waiting. Stages are MPI
   * ranks when a launcher started several processes. */
  pt_comm *comm = NULL;
  if ((ddp || (staged && pt_comm_mpi_launched())) && pt_comm_mpi_create(&comm, c.timeout_s) != PT_OK)
    return pt_cli_fail("train");
  c.log = stdout; /* rank 0 reports */
  pt_net *net = NULL;
  pt_data *train = NULL, *test = NULL;
  pt_run *run = NULL;
  pt_status st = model_file ? pt_net_spec_file(model_file, &net) : pt_net_preset(model ? model : "mnist-cnn", &net);
  if (st == PT_OK) st = pt_data_load(dataset ? dataset : pt_net_dataset(net), data_dir, PT_TRAIN, &train);
  if (st == PT_OK) st = pt_data_load(dataset ? dataset : pt_net_dataset(net), data_dir, PT_TEST, &test);
  if (st == PT_OK) st = pt_run_create(net, train, test, &c, &run);
  if (st == PT_OK) {
    run->comm = comm; /* the run's from here on */
    comm = NULL;
  }
  catch_stop_signals();
  if (st == PT_OK) st = pt_run_train(run);
  rc = 0;
  if (st != PT_OK) {
    rc = pt_cli_fail("train");
    /* The other ranks wait on this one: take them down rather than let them hang. */
    pt_comm *world = run ? run->comm : comm;
    if (world) pt_comm_abort(world, pt_error_message());
  }
  const int rank0 = !run || !run->comm || !run->comm->rank; /* rank 0 speaks for all */
  pt_comm_destroy(comm);
  pt_result r = {0};
  if (st == PT_OK) r = *pt_run_result(run);
  pt_run_free(run);
  pt_data_free(train);
  pt_data_free(test);
  pt_net_free(net);
  pt_comm_mpi_finalize();
  if (rc) return rc;
  if (r.stopped == PT_RUN_STOPPED_CHECKPOINT) {
    if (rank0)
      fprintf(stderr, "ptrain: checkpointed after step %lld in %s/ (--exit-after-checkpoint; exit status %d: continue with --resume)\n",
              (long long)r.steps, c.checkpoint_dir, PT_EXIT_CHECKPOINTED);
    return PT_EXIT_CHECKPOINTED;
  }
  if (r.stopped == PT_RUN_STOPPED_SIGNAL) {
    const int sig = pt_train_stop_signal(); /* 0: the signal reached another worker */
    if (rank0)
      fprintf(stderr,
              "ptrain: stopped by %s after step %lld; checkpoint in %s/ (exit status %d: resume with --resume)\n",
              sig > 0 ? strsignal(sig) : "a signal to another worker", (long long)r.steps,
              c.checkpoint_dir, PT_EXIT_CHECKPOINTED);
    return PT_EXIT_CHECKPOINTED;
  }
  return 0;
}

/* ptrain scale: runs a model in every configuration of a sweep and says,
 * with the measurements, whether parallelism pays (src/scale/). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/job_request.h"
#include "cli/train_args.h"
#include "comm/comm.h"
#include "cuda/device.h"
#include "io/metrics.h"
#include "nn/presets.h"
#include "ops/cpu/isa/cpu_level.h"
#include "pipe/partition.h"
#include "scale/scale.h"
#include "train/trainer.h"
#include "util/cores.h"

/* mpirun on PATH, into out; 0 when there is none. */
static int find_on_path(const char *name, char *out, size_t len) {
  const char *path = getenv("PATH");
  if (!path) return 0;
  while (*path) {
    const size_t n = strcspn(path, ":");
    snprintf(out, len, "%.*s/%s", (int)n, path, name);
    if (n && access(out, X_OK) == 0) return 1;
    path += n;
    if (*path) path++;
  }
  return 0;
}

static void fmt_ms(char *buf, size_t len, double ms, double step) {
  if (!isfinite(ms) || !(step > 0)) snprintf(buf, len, "-");
  else snprintf(buf, len, "%.0f%%", 100.0 * ms / step);
}

static void print_table(FILE *f, const pt_scale_config *c, int n, double target) {
  fprintf(f, "%-9s %7s %7s %12s %-9s %10s %8s %6s %6s %6s %6s %9s", "strategy", "workers", "threads",
          "batch (each)", "optimizer", "images/s", "speed-up", "eff.", "comm", "data", "bubble", "peak MiB");
  if (target > 0) fprintf(f, " %10s", "s to target");
  fputc('\n', f);
  for (int i = 0; i < n; i++) {
    const pt_scale_config *x = &c[i];
    char batch[32], ips[24] = "-", sp[16] = "-", eff[16] = "-", comm[16] = "-", data[16] = "-", bub[16] = "-",
                    mem[16] = "-";
    if (x->batch > 0 && x->worker_batch > 0) snprintf(batch, sizeof batch, "%d (%d)", x->batch, x->worker_batch);
    else if (x->batch > 0) snprintf(batch, sizeof batch, "%d (-)", x->batch);
    else snprintf(batch, sizeof batch, "model's");
    if (x->ran) {
      snprintf(ips, sizeof ips, "%.0f", x->images_per_s);
      if (isfinite(x->speedup)) snprintf(sp, sizeof sp, "%.2fx", x->speedup);
      if (isfinite(x->efficiency)) snprintf(eff, sizeof eff, "%.0f%%", 100.0 * x->efficiency);
      fmt_ms(comm, sizeof comm, x->comm_ms, x->ms_per_step);
      fmt_ms(data, sizeof data, x->data_ms, x->ms_per_step);
      if (isfinite(x->bubble)) snprintf(bub, sizeof bub, "%.0f%%", 100.0 * x->bubble);
      if (isfinite(x->peak_rss_mb)) snprintf(mem, sizeof mem, "%.0f", x->peak_rss_mb);
    }
    fprintf(f, "%-9s %7d %7d %12s %-9s %10s %8s %6s %6s %6s %6s %9s", pt_scale_strategy_name(x->strategy),
            x->workers, x->threads, batch, x->optimizer ? x->optimizer : "model's", ips, sp, eff, comm, data, bub,
            mem);
    if (target > 0) {
      if (x->ran && isfinite(x->target_s)) fprintf(f, " %10.1f", x->target_s);
      else fprintf(f, " %10s", "-");
    }
    if (x->ran && x->rough) fputs("  rough", f); /* its verdict says why */
    fputc('\n', f);
  }
}

/* Where an output of the sweep (flag: --json, a file; --report, a
 * directory) will go, checked before the sweep runs: found unwritable
 * only at the end, minutes of measurements would be lost. */
static pt_status check_output(const char *flag, const char *path, int want_dir) {
  struct stat sb;
  if (stat(path, &sb) == 0) {
    if (!want_dir && S_ISDIR(sb.st_mode)) return pt_fail(PT_ERR_ARG, "%s %s: a directory; expected a file", flag, path);
    if (want_dir && !S_ISDIR(sb.st_mode)) return pt_fail(PT_ERR_ARG, "%s %s: not a directory; expected one", flag, path);
    if (access(path, W_OK)) return pt_fail_errno(PT_ERR_IO, "%s %s: cannot write there", flag, path);
    return PT_OK;
  }
  char parent[PATH_MAX];
  snprintf(parent, sizeof parent, "%s", path);
  size_t len = strlen(parent);
  while (len > 1 && parent[len - 1] == '/') parent[--len] = 0; /* "out/" is "out" */
  char *slash = strrchr(parent, '/');
  if (!slash) snprintf(parent, sizeof parent, ".");
  else if (slash == parent) parent[1] = 0;
  else *slash = 0;
  if (stat(parent, &sb) || !S_ISDIR(sb.st_mode))
    return pt_fail(PT_ERR_ARG, "%s %s: %s is not a directory, so %s cannot be made there", flag, path, parent, path);
  if (access(parent, W_OK)) return pt_fail_errno(PT_ERR_IO, "%s %s: cannot write in %s", flag, path, parent);
  return PT_OK;
}

static pt_status write_json(const char *path, const char *model, int cores, const pt_scale_config *c, int n,
                            const char *rec) {
  pt_metrics *m;
  PT_TRY(pt_metrics_open(path, 0, &m));
  pt_metrics_begin(m, "machine");
  pt_metrics_str(m, "model", model);
  pt_metrics_str(m, "cpu", pt_cpu_model());
  pt_metrics_str(m, "cpu_level", pt_cpu_level_name(pt_cpu_level_current()));
  pt_metrics_int(m, "cores", cores);
  pt_metrics_str(m, "ptrain", PT_VERSION);
  pt_status st = pt_metrics_end(m);
  for (int i = 0; i < n && st == PT_OK; i++) {
    const pt_scale_config *x = &c[i];
    pt_metrics_begin(m, "config");
    pt_metrics_str(m, "strategy", pt_scale_strategy_name(x->strategy));
    pt_metrics_int(m, "workers", x->workers);
    pt_metrics_int(m, "threads", x->threads);
    if (x->batch > 0) pt_metrics_int(m, "batch", x->batch);
    if (x->worker_batch > 0) pt_metrics_int(m, "worker_batch", x->worker_batch);
    if (x->optimizer) pt_metrics_str(m, "optimizer", x->optimizer);
    pt_metrics_bool(m, "ran", x->ran);
    if (!x->ran) {
      pt_metrics_str(m, "why", x->why);
    } else {
      pt_metrics_num(m, "images_per_s", x->images_per_s);
      pt_metrics_num(m, "ms_per_step", x->ms_per_step);
      pt_metrics_int(m, "steps_measured", x->steps_measured);
      pt_metrics_num(m, "data_ms", x->data_ms);
      pt_metrics_num(m, "forward_ms", x->forward_ms);
      pt_metrics_num(m, "backward_ms", x->backward_ms);
      pt_metrics_num(m, "optimizer_ms", x->optimizer_ms);
      pt_metrics_num(m, "comm_ms", x->comm_ms);
      pt_metrics_num(m, "other_ms", x->other_ms);
      pt_metrics_num(m, "bubble", x->bubble);
      pt_metrics_num(m, "peak_rss_mb", x->peak_rss_mb);
      pt_metrics_num(m, "speedup", x->speedup);
      pt_metrics_num(m, "efficiency", x->efficiency);
      pt_metrics_bool(m, "rough", x->rough);
      if (x->rough) pt_metrics_str(m, "rough_why", x->rough_why);
      if (x->curve_n) {
        pt_metrics_num(m, "target_seconds", x->target_s);
        pt_metrics_int(m, "evaluations", x->curve_n);
      }
    }
    pt_metrics_str(m, "verdict", x->verdict);
    st = pt_metrics_end(m);
  }
  if (st == PT_OK) {
    pt_metrics_begin(m, "recommendation");
    pt_metrics_str(m, "text", rec);
    st = pt_metrics_end(m);
  }
  pt_status cl = pt_metrics_close(m);
  return st != PT_OK ? st : cl;
}

/* --collect DIR: the sweep's arguments from DIR/sweep.args, run again in
 * this process with --gather, which reads DIR/results instead of running. */
static int collect_sweep(const char *dir, const char *report, const char *json) {
  char path[PATH_MAX], line[4096], *args[256], res[PATH_MAX];
  snprintf(path, sizeof path, "%.4000s/sweep.args", dir);
  snprintf(res, sizeof res, "%.4000s/results", dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "ptrain scale: error: cannot open %s: %s (expected a directory written by --jobscript --write)\n",
            path, strerror(errno));
    return 1;
  }
  int n = 0;
  args[n++] = "ptrain";
  args[n++] = "scale";
  args[n++] = "--gather";
  args[n++] = "--results";
  args[n++] = res;
  if (report) args[n++] = "--report", args[n++] = (char *)report;
  if (json) args[n++] = "--json", args[n++] = (char *)json;
  int rc = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (n == 255 || !(args[n] = strdup(line))) {
      fprintf(stderr, "ptrain scale: error: %s: more arguments than fit\n", path);
      rc = 1;
      break;
    }
    n++;
  }
  fclose(f);
  const int first = 5 + (report ? 2 : 0) + (json ? 2 : 0);
  if (!rc) rc = pt_cmd_scale(n, args);
  for (int i = first; i < n; i++) free(args[i]);
  return rc;
}

/* The training arguments after "--", before anything runs: refused where
 * train would refuse them (else every configuration fails, after the
 * sweep), and where they would override what the sweep sets for each run
 * (a row would then be labelled with a configuration it did not run). */
static int check_train_args(char **train, int ntrain, const char *model, const char *model_file,
                            int optimizers_given) {
  static const struct {
    const char *flag, *instead; /* instead: scale's own flag for it, if any */
  } swept[] = {
      {"--model", "--model"},
      {"--model-file", "--model-file"},
      {"--device", "--device"},
      {"--devices", "--device"},
      {"--threads", "--threads"},
      {"--batch-size", "--batch-sizes"},
      {"--optimizer", "--optimizers"},
      {"--parallel", "--strategies"},
      {"--workers", "--workers"},
      {"--max-steps", "--steps and --warmup"},
      {"--epochs", "--target-epochs"},
      {"--target-accuracy", "--target-accuracy"},
      {"--eval-every", "--eval-every"},
      {"--profile", NULL},
      {"--metrics", NULL},
      {"--quiet", NULL},
      {"--checkpoint-dir", NULL},
      {"--resume", NULL},
  };
  for (size_t i = 0; i < sizeof swept / sizeof swept[0]; i++)
    if (pt_train_args_has(train, ntrain, swept[i].flag) &&
        (optimizers_given || strcmp(swept[i].flag, "--optimizer"))) { /* without --optimizers, the runs' own */
      fprintf(stderr, "ptrain scale: %s after '--': the sweep sets it for every run%s%s (see 'ptrain scale --help')\n",
              swept[i].flag, swept[i].instead ? "; give scale's own " : "", swept[i].instead ? swept[i].instead : "");
      return PT_USAGE_ERROR;
    }
  /* Scale's own flag, said as scale's, not as train refusing what came
   * after '--'. */
  if (model && !model_file && !pt_preset_find(model)) return pt_cli_unknown_model("scale", model);
  const char *pre[2] = {model_file ? "--model-file" : "--model", model_file ? model_file : model ? model : "mnist-cnn"};
  pt_train_args ta;
  return pt_train_args_check("scale", pre, 2, train, ntrain, &ta);
}

/* The flags of the submission itself, which the tasks' sweep.args leaves
 * out: --jobscript, --write, --force, --sbatch and --submit. */
static int submission_flag(const char *a) {
  static const char *const names[] = {"--jobscript", "--write", "--force", "--sbatch", "--submit"};
  const size_t len = strcspn(a, "=");
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (strlen(names[k]) == len && !strncmp(a, names[k], len)) return 1;
  return 0;
}

/* What the submissions write themselves (pt_scale_write_jobs), and what
 * would undo them, which --sbatch and --submit must not write (see
 * job_request.h). */
#define SWEEP_WHY "the submission sets it from the sweep's configurations"
#define PLACE_WHY "each task reads sweep.args and writes results/ in the submission's directory"
static const pt_job_sbatch_owned kSweepSbatch[] = {
    {"--job-name", 'J', SWEEP_WHY},       {"--array", 'a', SWEEP_WHY},
    {"--ntasks", 'n', SWEEP_WHY},         {"--ntasks-per-node", 0, SWEEP_WHY},
    {"--nodes", 'N', SWEEP_WHY},          {"--cpus-per-task", 'c', SWEEP_WHY},
    {"--gres", 0, SWEEP_WHY},             {"--gpus", 'G', SWEEP_WHY},
    {"--gpus-per-node", 0, SWEEP_WHY},    {"--gpus-per-task", 0, SWEEP_WHY},
    {"--gpus-per-socket", 0, SWEEP_WHY},  {"--ntasks-per-gpu", 0, SWEEP_WHY},
    {"--output", 'o', PLACE_WHY},         {"--chdir", 'D', PLACE_WHY},
};
static const pt_job_submit_owned kSweepSubmit[] = {
    {"universe", "JobUniverse", SWEEP_WHY},
    {"executable", "Cmd", SWEEP_WHY},
    {"arguments", "Args", SWEEP_WHY},
    {"initialdir", "Iwd", PLACE_WHY},
    {"should_transfer_files", "ShouldTransferFiles", PLACE_WHY},
    {"request_cpus", "RequestCpus", SWEEP_WHY},
    {"request_gpus", "RequestGpus", SWEEP_WHY},
    {"request_memory", "RequestMemory", SWEEP_WHY},
    {"output", "Out", PLACE_WHY},
    {"error", "Err", SWEEP_WHY},
    {"log", "UserLog", SWEEP_WHY},
    {"queue", NULL, SWEEP_WHY},
    /* the variables the queue line takes from tasks.txt, which override a line's */
    {"task", NULL, SWEEP_WHY},
    {"cpus", NULL, SWEEP_WHY},
    {"gpus", NULL, SWEEP_WHY},
    {"memory", NULL, SWEEP_WHY},
};

/* --sbatch goes with --jobscript slurm, --submit with htcondor. */
static int check_job_lines(const char *jobscript, const pt_arg_strs *sbatch, const pt_arg_strs *submit) {
  const int slurm = jobscript && !strcmp(jobscript, "slurm"), condor = jobscript && !slurm;
  if (sbatch->n && !slurm) return pt_cli_usage("scale", "--sbatch goes with --jobscript slurm");
  if (submit->n && !condor) return pt_cli_usage("scale", "--submit goes with --jobscript htcondor");
  int rc = 0;
  for (int i = 0; !rc && i < sbatch->n; i++)
    rc = pt_job_check_sbatch("scale", sbatch->v[i], kSweepSbatch, sizeof kSweepSbatch / sizeof kSweepSbatch[0]);
  for (int i = 0; !rc && i < submit->n; i++)
    rc = pt_job_check_submit("scale", submit->v[i], kSweepSubmit, sizeof kSweepSubmit / sizeof kSweepSubmit[0]);
  return rc;
}

/* A configuration's request_memory, in whole GB, at least 2: each worker's
 * estimate (pt_job_estimate: a replica, its batch and its optimizer's
 * state) times the workers, which share one job. 4GB where the model
 * cannot be summarized. */
static int request_memory_gb(const pt_model_spec *spec, const pt_scale_config *c) {
  char dataset[32];
  const pt_job_run run = {NULL, NULL, NULL, c->optimizer, NAN, c->worker_batch, 0, 0, 0};
  const pt_job_need need = pt_job_estimate_spec(spec, &run, dataset, sizeof dataset);
  if (need.memory_mib <= 0) return 4;
  const double mib = need.memory_mib * (c->workers > 0 ? c->workers : 1);
  const int gb = (int)((mib + 1023.0) / 1024.0);
  return gb > 2 ? gb : 2;
}

int pt_cmd_scale(int argc, char **argv) {
  const char *model = NULL, *model_file = NULL, *data_dir = NULL, *device = NULL, *json = NULL, *report = NULL;
  const char *jobscript = NULL, *write_dir = NULL, *results = NULL, *collect = NULL;
  pt_arg_strs sbatch = {.n = 0}, submit = {.n = 0};
  int task = -1, gather = 0, force = 0;
  const char *workers = "1,2,4", *strategies = "none,dp,ddp,pipeline", *threads = "1", *batches = NULL,
             *optimizers = NULL, *batch_kind = "global";
  int steps = 30, warm = 5, target_epochs = 10, eval_every = 100;
  float time_limit = 600, target = 0;
  const pt_arg flags[] = {
      {"--model", ARG_STR, &model, 0, 0, NULL, "NAME", "model preset (default mnist-cnn)"},
      {"--model-file", ARG_STR, &model_file, 0, 0, NULL, "SPEC", "model spec file"},
      {"--data-dir", ARG_STR, &data_dir, 0, 0, NULL, "DIR", "where the dataset files are"},
      {"--workers", ARG_STR, &workers, 0, 0, NULL, "LIST", "worker counts to try (default 1,2,4)"},
      {"--strategies", ARG_STR, &strategies, 0, 0, NULL, "LIST",
       "of none, dp, ddp, pipeline (default all; one worker is always run, as the baseline)"},
      {"--threads", ARG_STR, &threads, 0, 0, NULL, "LIST", "threads per worker to try (default 1)"},
      {"--batch-sizes", ARG_STR, &batches, 0, 0, NULL, "LIST", "batch sizes to try (default: the model's)"},
      {"--batch", ARG_CHOICE, &batch_kind, 0, 0, "global|per-worker", "KIND",
       "global: the workers share each batch (default); per-worker: each takes a whole one"},
      {"--optimizers", ARG_STR, &optimizers, 0, 0, NULL, "LIST", "of sgd, adam, adamw, adadelta (default: the model's)"},
      {"--device", ARG_STR, &device, 0, 0, NULL, "DEV", "cpu or cuda (default cpu)"},
      {"--steps", ARG_INT, &steps, 2, 1 << 20, NULL, "N", "steps measured per configuration, at least (default 30)"},
      {"--warmup", ARG_INT, &warm, 1, 1 << 20, NULL, "N", "steps of the short run subtracted from the long (default 5)"},
      {"--time-limit", ARG_FLOAT, &time_limit, 1, 1e6, NULL, "SECONDS", "per run; a slower run fails (default 600)"},
      {"--target-accuracy", ARG_FLOAT, &target, 0, 1, NULL, "A",
       "also train each configuration until the test accuracy reaches A, and judge them on that time"},
      {"--target-epochs", ARG_INT, &target_epochs, 1, 100000, NULL, "E", "at most E epochs for it (default 10)"},
      {"--eval-every", ARG_INT, &eval_every, 1, 1 << 30, NULL, "N", "evaluating every N steps for it (default 100)"},
      {"--json", ARG_STR, &json, 0, 0, NULL, "FILE", "write every measurement as JSON lines"},
      {"--jobscript", ARG_CHOICE, &jobscript, 0, 0, "slurm|htcondor", "KIND",
       "write the sweep as one submission (a Slurm job array, an HTCondor cluster) into --write DIR"},
      {"--write", ARG_STR, &write_dir, 0, 0, NULL, "DIR", "with --jobscript: where the submission goes"},
      {"--force", ARG_FLAG, &force, 0, 0, NULL, NULL,
       "with --jobscript: replace the sweep --write DIR holds, removing its results"},
      {"--sbatch", ARG_STRS, &sbatch, 0, 0, NULL, "OPTION",
       "with --jobscript slurm: one more #SBATCH line, as --partition=gpu or --time=01:00:00; may be repeated"},
      {"--submit", ARG_STRS, &submit, 0, 0, NULL, "LINE",
       "with --jobscript htcondor: one more submit-file line, KEY = VALUE; may be repeated"},
      {"--collect", ARG_STR, &collect, 0, 0, NULL, "DIR", "the report of a submitted sweep, from DIR's results"},
      {"--task", ARG_INT, &task, 0, 1 << 20, NULL, "I", "(run by the submission) measure configuration I only"},
      {"--results", ARG_STR, &results, 0, 0, NULL, "DIR", "(with --task) where its result goes"},
      {"--gather", ARG_FLAG, &gather, 0, 0, NULL, NULL, "(used by --collect) read the results instead of running"},
      {"--report", ARG_STR, &report, 0, 0, NULL, "DIR",
       "write DIR/report.md, DIR/speedup.png and .svg and DIR/scale.jsonl"},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  /* Training arguments after "--" go to every run. */
  int split = argc;
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--")) {
      split = i;
      break;
    }
  int help;
  int rc = pt_args_parse("scale", flags, nf, split, argv, 2, &help, NULL, 0, NULL);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain scale [options] [-- TRAIN_ARGS]",
                       "Train a model in every configuration of a sweep (strategies x workers x threads x\n"
                       "batch sizes x optimizers), each for real and twice, and report its steady-state\n"
                       "images/s, where each step's time goes, its speed-up over one worker, and in plain\n"
                       "words whether the parallelism pays, with a recommendation for this machine.",
                       flags, nf);
    return 0;
  }
  if (model && model_file) {
    fprintf(stderr, "ptrain scale: --model and --model-file: give one, not both (see 'ptrain scale --help')\n");
    return PT_USAGE_ERROR;
  }
  const char *name = model_file ? model_file : model ? model : "mnist-cnn";
  /* --collect makes the report of a sweep written before, whose settings
   * are its sweep.args': the flags that would set them again here, or
   * run it, would be ignored. */
  const struct {
    int given;
    const char *flag;
  } sweep_flags[] = {
      {model != NULL, "--model"},
      {model_file != NULL, "--model-file"},
      {data_dir != NULL, "--data-dir"},
      {strcmp(workers, "1,2,4") != 0, "--workers"},
      {strcmp(strategies, "none,dp,ddp,pipeline") != 0, "--strategies"},
      {strcmp(threads, "1") != 0, "--threads"},
      {batches != NULL, "--batch-sizes"},
      {strcmp(batch_kind, "global") != 0, "--batch"},
      {optimizers != NULL, "--optimizers"},
      {device != NULL, "--device"},
      {steps != 30, "--steps"},
      {warm != 5, "--warmup"},
      {time_limit != 600, "--time-limit"},
      {target > 0, "--target-accuracy"},
      {target_epochs != 10, "--target-epochs"},
      {eval_every != 100, "--eval-every"},
      {jobscript != NULL, "--jobscript"},
      {write_dir != NULL, "--write"},
      {force, "--force"},
      {sbatch.n > 0, "--sbatch"},
      {submit.n > 0, "--submit"},
      {task >= 0, "--task"},
      {results != NULL, "--results"},
      {gather, "--gather"},
      {split < argc, "TRAIN_ARGS after '--'"},
  };
  const char *ignored = NULL;
  for (size_t i = 0; collect && !ignored && i < sizeof sweep_flags / sizeof sweep_flags[0]; i++)
    if (sweep_flags[i].given) ignored = sweep_flags[i].flag;
  if (collect && ignored) {
    fprintf(stderr, "ptrain scale: %s with --collect: the sweep's settings are those it was written with (%s/sweep.args); "
                    "--collect takes --report and --json only\n", ignored, collect);
    return PT_USAGE_ERROR;
  }
  if (collect) return collect_sweep(collect, report, json);
  /* A submission's report is made by --collect, where its results are. */
  if (jobscript && (report || json)) {
    fprintf(stderr, "ptrain scale: %s with --jobscript: the sweep's report is made once its tasks have ended, by "
                    "ptrain scale --collect DIR %s\n", report ? "--report" : "--json", report ? "--report DIR" : "--json FILE");
    return PT_USAGE_ERROR;
  }
  char **train = argv + split + (split < argc);
  if ((rc = check_train_args(train, split < argc ? argc - split - 1 : 0, model, model_file, optimizers != NULL)))
    return rc;
  if (jobscript && !write_dir) {
    fprintf(stderr, "ptrain scale: --jobscript needs --write DIR, where the submission goes\n");
    return PT_USAGE_ERROR;
  }
  if (force && !jobscript) {
    fprintf(stderr, "ptrain scale: --force replaces a submission: it goes with --jobscript and --write DIR\n");
    return PT_USAGE_ERROR;
  }
  if ((rc = check_job_lines(jobscript, &sbatch, &submit))) return rc;
  if ((task >= 0 || gather) != (results != NULL) || (task >= 0 && gather)) {
    fprintf(stderr, "ptrain scale: --task I (or --gather) and --results DIR go together, and not --task with --gather\n");
    return PT_USAGE_ERROR;
  }
  if (task < 0 && ((json && check_output("--json", json, 0) != PT_OK) ||
                    (report && check_output("--report", report, 1) != PT_OK)))
    return pt_cli_fail("scale");
  /* Before the measurement, which the result would otherwise not keep. */
  struct stat rs;
  if (task >= 0 && (stat(results, &rs) || (!S_ISDIR(rs.st_mode) && (errno = ENOTDIR)) ||
                    access(results, W_OK | X_OK))) {
    pt_fail_errno(PT_ERR_IO, "--results %s: expected a directory to write the task's result in", results);
    return pt_cli_fail("scale");
  }
  pt_scale_sweep sw = {.per_worker = !strcmp(batch_kind, "per-worker")};
  if (pt_scale_parse_strategies(strategies, &sw) != PT_OK ||
      pt_scale_parse_ints("--workers", workers, 1, 1024, sw.workers, &sw.nworkers) != PT_OK ||
      pt_scale_parse_ints("--threads", threads, 1, 1024, sw.threads, &sw.nthreads) != PT_OK ||
      (batches && pt_scale_parse_ints("--batch-sizes", batches, 1, 1 << 20, sw.batches, &sw.nbatches) != PT_OK)) {
    fprintf(stderr, "ptrain scale: %s\n", pt_error_message());
    return PT_USAGE_ERROR;
  }
  /* The model's own batch, when none is given, so that it can be split. */
  pt_model_spec spec;
  if (pt_train_load_spec(model, model_file, &spec) != PT_OK) return pt_cli_fail("scale");
  if (!batches) {
    sw.batches[0] = spec.defaults.batch > 0 ? spec.defaults.batch : 64;
    sw.nbatches = 1;
  }
  sw.max_stages = pt_pipe_max_stages(&spec);
  sw.noptimizers = 0;
  if (optimizers && pt_scale_parse_optimizers(optimizers, &sw) != PT_OK) {
    fprintf(stderr, "ptrain scale: %s\n", pt_error_message());
    return PT_USAGE_ERROR;
  }
  if (!sw.noptimizers) sw.optimizers[sw.noptimizers++] = NULL;

  long cores = pt_cores_usable();
  char self[PATH_MAX], mpirun[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    fprintf(stderr, "ptrain scale: error: cannot find this program (/proc/self/exe) to run the configurations\n");
    return 1;
  }
  self[len] = 0;
  const int have_mpi = pt_comm_mpi_available() && find_on_path("mpirun", mpirun, sizeof mpirun);
  pt_scale_config *cfg;
  int n;
  int gpus = -1;
  char gpu_why[256] = "";
  if (device && strcmp(device, "cpu")) {
    if (strncmp(device, "cuda", 4)) {
      fprintf(stderr, "ptrain scale: --device: expected cpu or cuda, got '%s'\n", device);
      return PT_USAGE_ERROR;
    }
    if (pt_cuda_device_count(&gpus, gpu_why, sizeof gpu_why) != PT_OK) gpus = 0;
  }
  if (pt_scale_expand(&sw, (int)cores, have_mpi, gpus, gpu_why, &cfg, &n) != PT_OK) return pt_cli_fail("scale");

  if (jobscript) {
    /* the sweep's own arguments, without the submission's */
    char **keep = malloc(sizeof *keep * (size_t)argc);
    int nk = 0;
    for (int i = 2; keep && i < argc; i++) {
      if (i < split && submission_flag(argv[i])) {
        i += !strchr(argv[i], '=') && strcmp(argv[i], "--force"); /* and its value */
        continue;
      }
      keep[nk++] = argv[i];
    }
    char abs_dir[PATH_MAX];
    pt_status st = keep ? PT_OK : pt_fail(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK && mkdir(write_dir, 0755) && errno != EEXIST)
      st = pt_fail_errno(PT_ERR_IO, "cannot create %s", write_dir);
    if (st == PT_OK && !realpath(write_dir, abs_dir)) st = pt_fail_errno(PT_ERR_IO, "%s", write_dir);
    int *memory_gb = malloc(sizeof *memory_gb * (size_t)n);
    if (st == PT_OK && !memory_gb) st = pt_fail(PT_ERR_NOMEM, "out of memory");
    for (int i = 0; st == PT_OK && i < n; i++) memory_gb[i] = request_memory_gb(&spec, &cfg[i]);
    const pt_scale_job_extra extra = {sbatch.v, sbatch.n, submit.v, submit.n, memory_gb};
    if (st == PT_OK) st = pt_scale_write_jobs(abs_dir, jobscript, self, keep, nk, cfg, n, gpus >= 0, force, &extra);
    free(memory_gb);
    free(keep);
    free(cfg);
    if (st != PT_OK) return pt_cli_fail("scale");
    printf("wrote %s/%s for %d configurations; submit from there with %s, then: ptrain scale --collect %s\n",
           abs_dir, !strcmp(jobscript, "slurm") ? "scale.sbatch" : "scale.sub", n,
           !strcmp(jobscript, "slurm") ? "sbatch scale.sbatch" : "condor_submit scale.sub", abs_dir);
    return 0;
  }
  if (gather) {
    char path[PATH_MAX];
    for (int i = 0; i < n; i++) {
      snprintf(path, sizeof path, "%.4000s/task-%d.jsonl", results, i);
      if (cfg[i].runnable && pt_scale_result_read(path, i, name, &cfg[i]) != PT_OK) {
        free(cfg);
        return pt_cli_fail("scale");
      }
      if (!cfg[i].runnable) cfg[i].bubble = cfg[i].target_s = NAN;
    }
  }
  pt_scale_adopt_orphans();
  if (!gather) pt_scale_catch_signals();
  /* The runs' files, where TMPDIR says (a job's own scratch), else /tmp. */
  const char *tmp_root = getenv("TMPDIR");
  if (!tmp_root || !*tmp_root) tmp_root = "/tmp";
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%.4000s/ptrain-scale-XXXXXX", tmp_root);
  if (!mkdtemp(tmp)) {
    free(cfg);
    fprintf(stderr, "ptrain scale: error: cannot make a temporary directory in %s: %s\n", tmp_root, strerror(errno));
    return 1;
  }
  pt_scale_runner r = {.self = self, .mpirun = have_mpi ? mpirun : NULL, .model = model, .model_file = model_file,
                       .data_dir = data_dir, .device = device, .train_args = argv + split + (split < argc),
                       .ntrain_args = split < argc ? argc - split - 1 : 0, .steps_short = warm,
                       .steps_long = warm + steps, .time_limit_s = time_limit, .tmp_dir = tmp,
                       .target_accuracy = target, .target_epochs = target_epochs, .eval_every = eval_every};
  if (gather)
    printf("ptrain scale: %s: %d configurations, collected from %s\n", name, n, results);
  else
    printf("ptrain scale: %s on %s (%ld cores, %s kernels): %d configurations, each run for %d and %d steps "
           "(more where those take under %.2g s)\n",
           name, pt_cpu_model(), cores, pt_cpu_level_name(pt_cpu_level_current()), n, r.steps_short, r.steps_long,
           PT_SCALE_MIN_MEASURED_S);
  /* Other processes on the cores, before any run of the sweep's: their
   * share of the cores shows in the figures as slower workers or longer
   * communication, which the verdicts would otherwise blame on ptrain. */
  double load[1];
  if (!gather && getloadavg(load, 1) == 1 && load[0] > 0.5 * (double)cores)
    printf("note: the load average was %.1f on %ld cores before the sweep: other processes take cores from its "
           "runs, and the figures below may show them rather than the configurations\n",
           load[0], cores);
  fflush(stdout);
  if (task >= n) {
    fprintf(stderr, "ptrain scale: --task %d: the sweep has configurations 0 to %d\n", task, n - 1);
    rmdir(tmp);
    free(cfg);
    return PT_USAGE_ERROR;
  }
  for (int i = 0; i < n && !gather && !pt_scale_stop_signal(); i++) {
    if (task >= 0 && i != task) continue;
    pt_scale_run(&r, &cfg[i]);
    fprintf(stderr, "  %-9s %d x %d threads: %s\n", pt_scale_strategy_name(cfg[i].strategy), cfg[i].workers,
            cfg[i].threads, cfg[i].ran ? "measured" : cfg[i].why);
  }
  /* The runs' logs and metrics, and the checkpoint of a ddp run a time
   * limit stopped (its ranks were waited for). */
  if (pt_scale_remove_tree(tmp) != 0) fprintf(stderr, "ptrain scale: warning: could not remove %s\n", tmp);
  const int sig = pt_scale_stop_signal();
  if (sig) { /* nothing to judge nor write: a task's missing result says it did not finish */
    int measured = 0;
    for (int i = 0; i < n; i++) measured += cfg[i].ran;
    fprintf(stderr, "ptrain scale: stopped by %s with %d of %d configurations measured; no recommendation\n",
            strsignal(sig), measured, n);
    free(cfg);
    return 128 + sig;
  }
  if (task >= 0) { /* one configuration of a submitted sweep: its result for --collect */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%.4000s/task-%d.jsonl", results, task);
    cfg[task].cores = (int)cores; /* the verdict weighs threads against this machine's cores, not --collect's */
    const pt_status st = pt_scale_result_write(path, task, name, &cfg[task]);
    if (st == PT_OK) printf("task %d: %s; result in %s\n", task, cfg[task].ran ? "measured" : cfg[task].why, path);
    /* A run that failed is the task's failure too, for the batch system to
     * show (its result says why); a configuration skipped by design is not. */
    const int failed = cfg[task].runnable && !cfg[task].ran;
    free(cfg);
    return st != PT_OK ? pt_cli_fail("scale") : failed ? 1 : 0;
  }
  char rec[1600];
  pt_scale_judge(cfg, n, (int)cores, target, rec, sizeof rec);
  printf("\n");
  print_table(stdout, cfg, n, target);
  printf("\n");
  for (int i = 0; i < n; i++) printf("- %s\n", cfg[i].verdict);
  printf("\nrecommendation for %s on %s: %s\n", name, gather ? "the machines its tasks ran on" : "this machine", rec);
  int failed = 0;
  if (json && write_json(json, name, (int)cores, cfg, n, rec) != PT_OK) failed = pt_cli_fail("scale");
  if (report) { /* even where --json failed: the measurements survive somewhere */
    char title[512], jpath[PATH_MAX];
    if (gather)
      snprintf(title, sizeof title, "%s, collected from %.400s", name, results);
    else
      snprintf(title, sizeof title, "%s on %s (%ld cores, %s kernels)", name, pt_cpu_model(), cores,
               pt_cpu_level_name(pt_cpu_level_current()));
    /* "--report out/" names the same directory as "out": no "out//report.md" in what is printed */
    int rl = (int)strlen(report);
    while (rl > 1 && report[rl - 1] == '/') rl--;
    snprintf(jpath, sizeof jpath, "%.*s/scale.jsonl", rl < 4000 ? rl : 4000, report);
    if (pt_scale_report(report, title, cfg, n, target, rec) != PT_OK || write_json(jpath, name, (int)cores, cfg, n, rec) != PT_OK)
      failed = pt_cli_fail("scale");
    else
      printf("report: %.*s/report.md (speedup.png, speedup.svg, scale.jsonl)\n", rl, report);
  }
  int any = 0;
  for (int i = 0; i < n; i++) any |= cfg[i].ran;
  free(cfg);
  if (!any) {
    fprintf(stderr, "ptrain scale: error: no configuration ran (the reasons are above)\n");
    return 1;
  }
  return failed;
}

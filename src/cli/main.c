/* ptrain: the command-line entry point, a dispatcher over subcommands. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nn/presets.h"
#include "ops/cpu/isa/cpu_level.h"
#include "util/error.h"

int pt_cli_fail(const char *cmd) {
  fprintf(stderr, "ptrain %s: error: %s\n", cmd, pt_error_message());
  return 1;
}

int pt_cli_usage_fail(const char *cmd) {
  fprintf(stderr, "ptrain %s: %s (see 'ptrain %s --help')\n", cmd, pt_error_message(), cmd);
  return PT_USAGE_ERROR;
}

int pt_cli_usage(const char *cmd, const char *fmt, ...) {
  /* One write: under mpirun every rank says it, into one stream. */
  char what[12288]; /* paths of PATH_MAX, more than once */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  fprintf(stderr, "ptrain %s: %s (see 'ptrain %s --help')\n", cmd, what, cmd);
  return PT_USAGE_ERROR;
}

int pt_cli_check_model(const char *cmd, const char *model, const char *model_file) {
  /* --model takes a preset's name or a spec file's path (pt_net_load) */
  if (model && !pt_preset_find(model) && access(model, F_OK)) return pt_cli_unknown_model(cmd, model);
  /* pt_net_load takes a name that is no file for a preset's: say that the file is missing. */
  if (model_file && access(model_file, F_OK)) {
    pt_fail_errno(PT_ERR_IO, "cannot open model file %s", model_file);
    return pt_cli_fail(cmd);
  }
  return 0;
}

/* train names a spec file with --model-file; eval, predict and models take
 * its path where a preset's name goes, so a name with a slash or a dot was
 * most likely meant as a file that is not there. */
int pt_cli_unknown_model(const char *cmd, const char *name) {
  char presets[256] = "";
  size_t used = 0;
  for (int i = 0; i < pt_preset_count() && used < sizeof presets; i++)
    used += (size_t)snprintf(presets + used, sizeof presets - used, "%s%s", i ? ", " : "", pt_preset_at(i)->name);
  const int train = !strcmp(cmd, "train") || !strcmp(cmd, "scale"); /* the commands with --model-file */
  if (!train && (strchr(name, '/') || strchr(name, '.')))
    fprintf(stderr, "ptrain %s: %s: no such model spec file, and no preset of that name (presets: %s)\n", cmd, name,
            presets);
  else
    fprintf(stderr, "ptrain %s: unknown model '%s' (expected one of: %s; %s) (see 'ptrain %s --help')\n", cmd, name,
            presets, train ? "or --model-file FILE" : "or a model spec file's path", cmd);
  return PT_USAGE_ERROR;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: ptrain COMMAND [options]\n\n"
          "Train the tutorials' neural networks in parallel, from one CPU core up.\n\n"
          "commands:\n"
          "  train        train a model (ptrain train --help for every flag)\n"
          "  eval         evaluate a checkpoint on the test split\n"
          "  predict      classify images (PNG, JPEG, IDX, CIFAR-10) with a checkpoint\n"
          "  models       list the model presets, or print one's spec\n"
          "  info         show the build, the devices and the datasets found\n"
          "  data fetch   download and verify a dataset\n"
          "  bench        measure training throughput, or the SGEMM rate\n"
          "  jobscript    print a Slurm or HTCondor script that runs train on a cluster\n"
          "  scale        run a model in many parallel configurations: does parallelism pay?\n"
          "  plot         draw the training curves of runs' --metrics files side by side\n\n"
          "  --help       show this help\n"
          "  --version    show the version\n\n"
          "Quick start: ptrain train --model mnist-cnn --epochs 1\n");
}

/* OpenBLAS starts a thread per core when it is loaded, before main, and
 * each allocates its buffers there; ptrain multiplies on threads of its
 * own and keeps the BLAS at one (gemm.c), so they only idle. Under an
 * address-space or data limit (ulimit -v or -d, as some batch systems
 * set) their allocation fails, and OpenBLAS 0.3.21 retries it for ever:
 * the process then hangs at exit, joining them. OPENBLAS_NUM_THREADS=1
 * keeps them from starting, but is read only as the library loads; so,
 * under such a limit and unless the user set it, it is set and the
 * program started again in place (the same pid, argv and descriptors),
 * once. Only then: the restart costs some 20 ms, and under qemu-user
 * (the tests' other CPUs) it would leave the emulator. */
static int memory_limited(void) {
  struct rlimit as, data;
  return (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
         (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
}

static void blas_single_threaded(char **argv) {
  if (getenv("OPENBLAS_NUM_THREADS") || !memory_limited()) return;
  /* The file itself, not /proc/self/exe, whose name the process would
   * take (ps, pgrep and top would show "exe"). */
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0 || (size_t)len >= sizeof self - 1) return;
  self[len] = 0;
  if (setenv("OPENBLAS_NUM_THREADS", "1", 1)) return;
  execv(self, argv);
  /* Not restarted: go on as before. */
  unsetenv("OPENBLAS_NUM_THREADS");
}

static int run_command(int argc, char **argv);

/* What a command prints to standard output is often its result: a spec
 * (models NAME > spec.txt), a JSON line, a job script. Output that could
 * not be written whole, to a full disk or a closed descriptor, is a failure
 * said on standard error, never exit status 0. */
static int finish_output(const char *cmd, int rc) {
  errno = 0;
  const int flushed = fflush(stdout) == 0;
  if (flushed && !ferror(stdout)) return rc;
  /* A line-buffered stream failed at an earlier line: errno is gone. */
  fprintf(stderr, "ptrain%s%s: error: writing to standard output: %s; what it printed is incomplete\n",
          cmd ? " " : "", cmd ? cmd : "", !flushed && errno ? strerror(errno) : "a write failed");
  return rc ? rc : 1;
}

int main(int argc, char **argv) {
  return finish_output(argc >= 2 && argv[1][0] != '-' ? argv[1] : NULL, run_command(argc, argv));
}

static int run_command(int argc, char **argv) {
  blas_single_threaded(argv);
  /* A file-size limit (ulimit -f, a batch system's) would otherwise kill
   * the program mid-write, silently, leaving a temporary file; ignored, the
   * write fails with EFBIG and goes the way of a full disk: a message
   * naming the file, the temporary file removed, exit 1. */
  signal(SIGXFSZ, SIG_IGN);
  /* A job's log (Slurm's, by default) takes standard output and standard
   * error into one file: full buffering there would put each report line
   * after the progress and messages printed later. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    usage(stderr);
    return PT_USAGE_ERROR;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("ptrain %s\n", PT_VERSION);
    return 0;
  }
  /* PTRAIN_CPU names the kernels' instruction-set level; a bad one ends
   * the program here, before any command runs */
  if (pt_cpu_check_env() != PT_OK) {
    fprintf(stderr, "ptrain: error: %s\n", pt_error_message());
    return PT_USAGE_ERROR;
  }
  if (!strcmp(cmd, "train")) return pt_cmd_train(argc, argv);
  if (!strcmp(cmd, "eval")) return pt_cmd_eval(argc, argv);
  if (!strcmp(cmd, "predict")) return pt_cmd_predict(argc, argv);
  if (!strcmp(cmd, "models")) return pt_cmd_models(argc, argv);
  if (!strcmp(cmd, "info")) return pt_cmd_info(argc, argv);
  if (!strcmp(cmd, "data")) return pt_cmd_data(argc, argv);
  if (!strcmp(cmd, "bench")) return pt_cmd_bench(argc, argv);
  if (!strcmp(cmd, "jobscript")) return pt_cmd_jobscript(argc, argv);
  if (!strcmp(cmd, "scale")) return pt_cmd_scale(argc, argv);
  if (!strcmp(cmd, "plot")) return pt_cmd_plot(argc, argv);
  static const char *const commands[] = {"train", "eval",  "predict",   "models", "info",
                                          "data",  "bench", "jobscript", "scale",  "plot"};
  const char *near = pt_args_suggest(cmd, commands, (int)(sizeof commands / sizeof commands[0]));
  if (near) {
    fprintf(stderr, "ptrain: unknown command '%s': did you mean %s? (see ptrain --help)\n", cmd, near);
    return PT_USAGE_ERROR;
  }
  fprintf(stderr,
          "ptrain: unknown command '%s' (expected train, eval, predict, models, info, data, bench, jobscript, scale or plot; see ptrain --help)\n",
          cmd);
  return PT_USAGE_ERROR;
}

/* A sweep as one submission: a Slurm job array or an HTCondor cluster,
 * each task running one configuration (ptrain scale --task I), and
 * ptrain scale --collect gathering their results into the same report. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scale/scale.h"

/* s in single quotes for bash, quotes inside made safe. */
static void put_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++)
    if (*s == '\'') fputs("'\\''", f);
    else fputc(*s, f);
  fputc('\'', f);
}

static pt_status close_checked(FILE *f, const char *path) {
  if (ferror(f) | fclose(f)) return pt_fail_errno(PT_ERR_IO, "cannot write %s", path);
  return PT_OK;
}

/* The task-I.jsonl and task-I.out files of a sweep being replaced. */
static pt_status remove_results(const char *results) {
  DIR *d = opendir(results);
  if (!d) return pt_fail_errno(PT_ERR_IO, "cannot read %s", results);
  char names[256][64];
  int n = 0;
  struct dirent *e;
  /* Listed, then removed: removing while reading may skip entries. */
  for (;;) {
    while (n < 256 && (e = readdir(d)))
      if (!strncmp(e->d_name, "task-", 5) && strlen(e->d_name) < sizeof names[0]) snprintf(names[n++], 64, "%s", e->d_name);
    if (n == 0) break;
    for (int i = 0; i < n; i++) {
      char path[4400];
      snprintf(path, sizeof path, "%s/%s", results, names[i]);
      if (unlink(path) && errno != ENOENT) {
        closedir(d);
        return pt_fail_errno(PT_ERR_IO, "cannot remove %s", path);
      }
    }
    n = 0;
    rewinddir(d);
  }
  closedir(d);
  return PT_OK;
}

pt_status pt_scale_write_jobs(const char *dir, const char *kind, const char *self, char **args, int nargs,
                              const pt_scale_config *c, int n, int gpu, int force, const pt_scale_job_extra *x) {
  const int slurm = !strcmp(kind, "slurm");
  if (!slurm && strcmp(kind, "htcondor")) return pt_fail(PT_ERR_ARG, "--jobscript: expected slurm or htcondor, got '%s'", kind);
  /* Checked before anything is written: a refusal leaves DIR as it was. */
  for (int i = 0; i < nargs; i++)
    if (strchr(args[i], '\n'))
      return pt_fail(PT_ERR_ARG, "argument %d has a line break, which sweep.args cannot hold", i + 1);
  char path[4200];
  snprintf(path, sizeof path, "%s/sweep.args", dir);
  if (!force && access(path, F_OK) == 0)
    return pt_fail(PT_ERR_IO, "%s already holds a sweep (%s): give another --write DIR, or --force to replace it "
                              "and remove its results", dir, path);
  /* Files of the names a sweep writes, with no sweep: the user's own. */
  static const char *const ours[] = {"scale.sbatch", "scale.sub", "scale-task.sh", "tasks.txt"};
  for (size_t i = 0; !force && i < sizeof ours / sizeof ours[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, ours[i]);
    if (access(path, F_OK) == 0)
      return pt_fail(PT_ERR_IO, "%s already holds %s, which the sweep would write over: give another --write DIR, "
                                "or --force to replace it", dir, path);
  }
  if (mkdir(dir, 0755) && errno != EEXIST) return pt_fail_errno(PT_ERR_IO, "cannot create %s", dir);
  snprintf(path, sizeof path, "%s/results", dir);
  if (mkdir(path, 0755) && errno != EEXIST) return pt_fail_errno(PT_ERR_IO, "cannot create %s", path);
  PT_TRY(remove_results(path));
  /* A sweep replaced by one for the other scheduler: its files go too, so
   * that none is left to submit with the old configurations. */
  static const char *const slurm_files[] = {"scale.sbatch", NULL},
                           *const condor_files[] = {"scale.sub", "scale-task.sh", "tasks.txt", NULL};
  for (const char *const *other = slurm ? condor_files : slurm_files; *other; other++) {
    snprintf(path, sizeof path, "%s/%s", dir, *other);
    if (unlink(path) && errno != ENOENT) return pt_fail_errno(PT_ERR_IO, "cannot remove %s", path);
  }
  /* The sweep's own arguments, one a line: every task and --collect expand
   * the same configurations from them, in the same order. */
  snprintf(path, sizeof path, "%s/sweep.args", dir);
  FILE *f = fopen(path, "w");
  if (!f) return pt_fail_errno(PT_ERR_IO, "cannot write %s", path);
  for (int i = 0; i < nargs; i++) fprintf(f, "%s\n", args[i]);
  PT_TRY(close_checked(f, path));
  int most_cpus = 1, most_gpus = 0;
  for (int i = 0; i < n; i++) {
    const int cpus = c[i].workers * c[i].threads;
    if (cpus > most_cpus) most_cpus = cpus;
    if (gpu && c[i].workers > most_gpus) most_gpus = c[i].workers;
  }
  if (slurm) {
    snprintf(path, sizeof path, "%s/scale.sbatch", dir);
    if (!(f = fopen(path, "w"))) return pt_fail_errno(PT_ERR_IO, "cannot write %s", path);
    fprintf(f,
            "#!/bin/bash\n"
            "# ptrain scale as a Slurm job array: one task per configuration. Submit from\n"
            "# this directory with 'sbatch scale.sbatch'; when every task has ended,\n"
            "# 'ptrain scale --collect .' makes the report. A job array asks the same of\n"
            "# every task, so each asks for what the largest configuration needs.\n"
            "#SBATCH --job-name=ptrain-scale\n"
            "#SBATCH --array=0-%d\n"
            "#SBATCH --ntasks=1\n"
            "#SBATCH --cpus-per-task=%d\n",
            n - 1, most_cpus);
    if (most_gpus) fprintf(f, "#SBATCH --gres=gpu:%d\n", most_gpus);
    fprintf(f, "#SBATCH --output=results/task-%%a.out\n");
    for (int i = 0; i < x->nsbatch; i++) fprintf(f, "#SBATCH %s\n", x->sbatch[i]);
    fprintf(f,
            "set -euo pipefail\n"
            "mapfile -t args < sweep.args\n"
            "exec ");
    put_quoted(f, self);
    fprintf(f, " scale --task \"$SLURM_ARRAY_TASK_ID\" --results results \"${args[@]}\"\n");
    PT_TRY(close_checked(f, path));
    return PT_OK;
  }
  /* HTCondor: one job per configuration, each with its own request */
  snprintf(path, sizeof path, "%s/tasks.txt", dir);
  if (!(f = fopen(path, "w"))) return pt_fail_errno(PT_ERR_IO, "cannot write %s", path);
  for (int i = 0; i < n; i++)
    fprintf(f, "%d %d %d %dGB\n", i, c[i].workers * c[i].threads, gpu ? c[i].workers : 0,
            x->memory_gb ? x->memory_gb[i] : 4);
  PT_TRY(close_checked(f, path));
  snprintf(path, sizeof path, "%s/scale-task.sh", dir);
  if (!(f = fopen(path, "w"))) return pt_fail_errno(PT_ERR_IO, "cannot write %s", path);
  fprintf(f, "#!/bin/bash\n# One configuration of the sweep: ptrain scale --task $1.\nset -euo pipefail\n"
             "mapfile -t args < sweep.args\nexec ");
  put_quoted(f, self);
  fprintf(f, " scale --task \"$1\" --results results \"${args[@]}\"\n");
  PT_TRY(close_checked(f, path));
  chmod(path, 0755);
  snprintf(path, sizeof path, "%s/scale.sub", dir);
  if (!(f = fopen(path, "w"))) return pt_fail_errno(PT_ERR_IO, "cannot write %s", path);
  fprintf(f,
          "# ptrain scale as an HTCondor cluster: one job per configuration, each asking\n"
          "# for its own cores, GPUs and memory. Submit from this directory with\n"
          "# 'condor_submit scale.sub' (the directory must be on a filesystem the\n"
          "# execute machines share); when every job has ended, 'ptrain scale\n"
          "# --collect .' makes the report.\n"
          "universe       = vanilla\n"
          "executable     = scale-task.sh\n"
          "arguments      = $(task)\n"
          "initialdir     = %s\n"
          "should_transfer_files = NO\n"
          "request_cpus   = $(cpus)\n",
          dir);
  if (gpu) fprintf(f, "request_gpus   = $(gpus)\n");
  fprintf(f,
          "request_memory = $(memory)\n"
          "output         = results/task-$(task).out\n"
          "error          = results/task-$(task).err\n"
          "log            = scale.log\n");
  for (int i = 0; i < x->nsubmit; i++) fprintf(f, "%s\n", x->submit[i]);
  fprintf(f, "queue task, cpus, gpus, memory from tasks.txt\n");
  return close_checked(f, path);
}

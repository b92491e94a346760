/* ptrain jobscript: print a batch script that runs ptrain train on a
 * cluster. It writes text and submits nothing, so it works on a laptop as
 * well as on a login node, and the user can read and edit the script
 * before handing it to sbatch or condor_submit. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/job_request.h"
#include "cli/train_args.h"
#include "io/atomic_file.h"
#include "util/error.h"
#include "util/list.h"

#define PT_JOB_CKPT_DIR "checkpoints"
/* HTCondor brings each job's checkpoints back to the submit directory: a
 * name of its own keeps a second job submitted from there from writing over
 * (or mixing its steps into) the first's. The submit file expands the job's
 * ID and hands the name to the wrapper, so a restart keeps it. */
#define PT_JOB_CONDOR_DIR PT_JOB_CKPT_DIR "-$(Cluster).$(Process)"

/* Writes s as one bash word that expands to exactly s. Arguments with
 * control characters use $'...', so no quoted word ever spans two lines and
 * the same text can also stand in a comment. */
static void put_word(FILE *f, const char *s) {
  size_t n = strlen(s);
  if (n && strspn(s, pt_job_safe_word) == n) {
    fputs(s, f);
    return;
  }
  int ctrl = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p < 0x20 || *p == 0x7f) ctrl = 1;
  if (!ctrl) {
    fputc('\'', f);
    for (const char *p = s; *p; p++) {
      if (*p == '\'') fputs("'\\''", f);
      else fputc(*p, f);
    }
    fputc('\'', f);
    return;
  }
  fputs("$'", f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '\\' || *p == '\'') fprintf(f, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", f);
    else if (*p == '\t') fputs("\\t", f);
    else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
    else fputc(*p, f);
  }
  fputc('\'', f);
}

static void put_words(FILE *f, char **v, int n) {
  for (int i = 0; i < n; i++) {
    fputc(' ', f);
    put_word(f, v[i]);
  }
}

/* The command line that produced a script, as a comment, so the script says
 * how to make it again. */
static void put_origin(FILE *f, int argc, char **argv) {
  fputs("# written by: ptrain", f);
  put_words(f, argv + 1, argc - 1);
  fputc('\n', f);
}

static int all_digits(const char *s, size_t n) {
  if (!n) return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

/* The GPUs of a --gres value, gpu:G or gpu:TYPE:G; 0 where it is not
 * one. */
static int gres_gpus(const char *v) {
  if (strncmp(v, "gpu:", 4)) return 0;
  const char *count = strrchr(v, ':') + 1;
  if (count != v + 4) { /* a type: a name, not a number (gpu:2:3 is a slip) */
    const size_t tlen = (size_t)(count - 1 - (v + 4));
    if (!tlen || memchr(v + 4, ':', tlen) || all_digits(v + 4, tlen)) return 0;
  }
  if (!all_digits(count, strlen(count)) || strlen(count) > 4) return 0;
  const int g = atoi(count);
  return g <= 1024 ? g : 0;
}

/* The #SBATCH options the script writes itself, and those that would
 * undo what it does (see job_request.h). */
#define REQUEUE_WHY "the script writes it itself, for ptrain's checkpoint and requeue before the time limit (see --signal-lead)"
#define GPU_WHY "GPUs are asked for with --gpus-per-node or --gres, which also put the run on them"
static const pt_job_sbatch_owned kSbatchOwn[] = {
    {"--job-name", 'J', "the script writes it itself; give it with --job-name"},
    {"--nodes", 'N', "the script writes it itself; give it with --nodes"},
    {"--ntasks-per-node", 0, "the script writes it itself; give it with --ntasks-per-node"},
    {"--ntasks", 'n', "the script writes --ntasks-per-node; give --nodes and --ntasks-per-node"},
    {"--cpus-per-task", 'c', "the script writes it itself; give it with --cpus-per-task"},
    /* sbatch's other spellings and requests of the same things */
    {"--tasks-per-node", 0, "sbatch reads it as --ntasks-per-node, which the script writes itself; give it with "
                            "--ntasks-per-node"},
    {"--cpus-per-gpu", 0, "the script gives each task its CPUs with --cpus-per-task"},
    {"--tres-per-task", 0, "CPUs and GPUs are asked for with --cpus-per-task and --gpus-per-node or --gres, which "
                           "the script also hands to its tasks"},
    {"--gpus-per-node", 0, GPU_WHY},
    {"--gpus", 'G', GPU_WHY},
    {"--gpus-per-task", 0, GPU_WHY},
    {"--gpus-per-socket", 0, GPU_WHY},
    {"--ntasks-per-gpu", 0, GPU_WHY},
    {"--gres", 0, GPU_WHY},
    {"--time", 't', "the script writes it itself; give it with --time"},
    {"--partition", 'p', "the script writes it itself; give it with --partition"},
    {"--output", 'o', "the script writes it itself; give it with --output"},
    {"--error", 'e', "the script writes it itself; give it with --error"},
    {"--signal", 0, REQUEUE_WHY},
    {"--requeue", 0, REQUEUE_WHY},
    {"--no-requeue", 0, REQUEUE_WHY},
    {"--open-mode", 0, REQUEUE_WHY},
};

/* The commands the submit file sets itself, by their submit names and
 * their job attributes' (a +Name or MY.Name line sets those directly). */
#define CHECKPOINT_WHY "the submit file sets it itself, for ptrain's checkpoints"
#define WRAPPER_WHY "the submit file runs the wrapper, ptrain.sh; give TRAIN_ARGS after '--'"
#define NAME_WHY "the submit file sets it itself; give it with --name"
static const pt_job_submit_owned kSubmitOwn[] = {
    {"universe", "JobUniverse", CHECKPOINT_WHY},
    {"executable", "Cmd", WRAPPER_WHY},
    {"arguments", "Args", WRAPPER_WHY},
    {"batch_name", "JobBatchName", NAME_WHY},
    {"log", "UserLog", NAME_WHY},
    {"output", "Out", NAME_WHY},
    {"error", "Err", NAME_WHY},
    {"request_cpus", "RequestCpus", "the submit file sets it itself; give it with --cpus"},
    {"request_memory", "RequestMemory", "the submit file sets it itself; give it with --memory"},
    {"request_disk", "RequestDisk", "the submit file sets it itself; give it with --disk"},
    {"request_gpus", "RequestGpus", "the submit file sets it itself; give it with --gpus"},
    {"should_transfer_files", "ShouldTransferFiles", CHECKPOINT_WHY},
    {"transfer_input_files", "TransferInput", "the submit file sets it itself; give it with --transfer-input"},
    {"preserve_relative_paths", "PreserveRelativePaths",
     "the wrapper finds the files sent with the job under their last names"},
    {"checkpoint_exit_code", "CheckpointExitCode",
     "the submit file sets it itself; its interval is --checkpoint-interval"},
    {"transfer_checkpoint_files", "TransferCheckpoint", CHECKPOINT_WHY},
    {"transfer_output_files", "TransferOutput", CHECKPOINT_WHY},
    {"transfer_output_remaps", "TransferOutputRemaps", CHECKPOINT_WHY},
    {"checkpoint_destination", "CheckpointDestination", CHECKPOINT_WHY},
    {"when_to_transfer_output", "WhenToTransferOutput", CHECKPOINT_WHY},
    {"queue", NULL, CHECKPOINT_WHY},
    {"kill_sig", "KillSig", "ptrain checkpoints on the SIGTERM that an eviction sends, and another signal would end "
                            "it without one"},
    {"initialdir", "Iwd", "the submit file runs the wrapper and sends its files from the directory it is in"},
    {"transfer_executable", "TransferExecutable", WRAPPER_WHY},
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The seconds of HH:MM:SS or D-HH:MM:SS, the two forms whose meaning no
 * one misreads (Slurm takes a bare number as minutes); 0 for anything
 * else, and for no time at all. */
static long time_seconds(const char *t) {
  const char *dash = strchr(t, '-');
  long days = 0;
  const char *hms = t;
  if (dash) {
    if (!all_digits(t, (size_t)(dash - t)) || dash - t > 4) return 0;
    days = strtol(t, NULL, 10);
    hms = dash + 1;
  }
  const char *c1 = strchr(hms, ':');
  const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (!c1 || !c2 || strchr(c2 + 1, ':')) return 0;
  size_t hl = (size_t)(c1 - hms);
  if (!all_digits(hms, hl) || hl > 6 || (dash && hl > 2)) return 0; /* Slurm takes 1-2:00:00 too */
  if (!all_digits(c1 + 1, 2) || c2 - c1 != 3 || !all_digits(c2 + 1, 2) || strlen(c2 + 1) != 2) return 0;
  long h = strtol(hms, NULL, 10), m = strtol(c1 + 1, NULL, 10), s = strtol(c2 + 1, NULL, 10);
  if (m > 59 || s > 59 || (dash && h > 23)) return 0;
  return ((days * 24 + h) * 60 + m) * 60 + s;
}

/* The ptrain the script runs: this very binary unless told otherwise, by
 * absolute path, because a batch job's PATH is not the user's shell's. */
static int ptrain_path(const char *given, char *buf, size_t size) {
  if (given) {
    snprintf(buf, size, "%s", given);
    return 0;
  }
  ssize_t n = readlink("/proc/self/exe", buf, size - 1);
  if (n < 0 || (size_t)n >= size - 1) {
    pt_fail_errno(PT_ERR_IO, "cannot find this program's path in /proc/self/exe (give --ptrain PATH)");
    return 1;
  }
  buf[n] = 0;
  return 0;
}

/* Flags of the other scheduler get a pointed message instead of "unknown
 * flag", since that is the likely mistake. */
static int foreign_flag(const char *cmd, const pt_arg *mine, int nmine, const pt_arg *other, int nother,
                        const char *other_name, int argc, char **argv, int from) {
  for (int i = from; i < argc; i++) {
    if (strncmp(argv[i], "--", 2)) continue;
    size_t len = strcspn(argv[i], "=");
    int ours = 0, theirs = 0, takes_value = 0;
    for (int k = 0; k < nmine; k++)
      if (strlen(mine[k].name) == len && !strncmp(mine[k].name, argv[i], len))
        ours = 1, takes_value = mine[k].type != ARG_FLAG;
    /* The value of ours (--sbatch --gpus=2) is not a flag. */
    if (ours && takes_value && !argv[i][len]) {
      i++;
      continue;
    }
    for (int k = 0; k < nother; k++)
      if (strlen(other[k].name) == len && !strncmp(other[k].name, argv[i], len)) theirs = 1;
    if (!ours && theirs) {
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), argv[i]);
      return pt_cli_usage(cmd, "%s applies to %s, not %s", name, other_name, cmd + strlen("jobscript "));
    }
  }
  return 0;
}

/* GPUs asked for, and no --device(s) among the training arguments: the
 * words that put the run on them. One process per GPU (ddp) takes
 * "--device cuda"; dp, model and pipeline in one process take the list,
 * "--devices cuda:0,cuda:1" (two stages share a lone GPU). */
typedef struct {
  int add;
  const char *flag;
  char value[160];
} gpu_device;

typedef struct {
  int nodes, ntasks, gpus, cpus;
  int signal_lead; /* seconds before the time limit that ptrain is told to checkpoint */
  int local;       /* workers in one task, each with --threads (dp's replicas, model's stages), else 1 */
  int no_save_model, force;
  gpu_device dev; /* what the script adds to put the run on the GPUs asked for */
  const char *time, *partition, *output, *error, *job_name, *mpi, *ptrain, *write_file;
  const char *gres;   /* gpu[:TYPE]:G, written instead of --gpus-per-node */
  pt_arg_strs sbatch; /* more #SBATCH lines */
} slurm_opts;

/* The default --signal-lead: time for the step in progress and a
 * checkpoint of the larger models on a slow shared disk. */
#define PT_JOB_SIGNAL_LEAD 120

/* The value of flag among the training arguments, as "--flag V" or
 * "--flag=V" (the last one given, as train takes it), or fallback. */
static const char *train_arg_value(char **v, int n, const char *flag, const char *fallback) {
  const size_t len = strlen(flag);
  const char *value = fallback;
  for (int i = 0; i < n; i++) {
    if (!strcmp(v[i], flag) && i + 1 < n) value = v[i + 1];
    else if (!strncmp(v[i], flag, len) && v[i][len] == '=') value = v[i] + len + 1;
  }
  return value;
}

typedef struct {
  int gpus, cpus, force, checkpoint_interval;
  int ranks;     /* processes: ddp's mpirun -np, or 1 */
  int local;     /* workers in one process, each with --threads (as slurm_opts') */
  gpu_device dev; /* as slurm_opts' */
  const char *memory, *disk, *name, *transfer_input, *write_dir, *ptrain;
  const char *resume_from; /* an earlier job's checkpoint directory, sent with the job */
  pt_arg_strs submit;      /* more submit-file lines, KEY = VALUE */
} condor_opts;

/* path's length without its trailing slashes, which on a directory in
 * transfer_input_files would send its contents only ("/" stays). */
static size_t without_trailing_slashes(const char *path) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  return n;
}

/* The name an input file or directory has in the sandbox: its last
 * component (HTCondor drops the path); len excludes trailing slashes. */
static const char *sandbox_name(const char *path, size_t *len) {
  const size_t n = without_trailing_slashes(path);
  const char *name = path;
  for (size_t i = 0; i < n; i++)
    if (path[i] == '/') name = path + i + 1;
  *len = (size_t)(path + n - name);
  return name;
}

/* request_memory or request_disk: without the flag (*given NULL), the
 * estimate in whole GB, at least floor_gb (a job that asks for too little
 * is held, or killed, on the execute machine, after its wait in the
 * queue); a size given below the estimate is said, and written with its
 * unit (see pt_job_size_text). */
static void size_request(const char **given, const char *flag, const char *what, double need, long floor_gb,
                         const pt_train_args *ta, char out[32]) {
  const char *model = ta->model_file ? ta->model_file : ta->model ? ta->model : "mnist-cnn";
  if (!*given) {
    const long gb = need > floor_gb * 1024.0 ? (long)((need + 1023.0) / 1024.0) : floor_gb;
    snprintf(out, 32, "%ldGB", gb);
    *given = out;
    return;
  }
  if (need > pt_job_size_mib(*given))
    fprintf(stderr, "ptrain jobscript: note: %s %s is less than %s is estimated to %s (%.1f GB); HTCondor may hold "
                    "or kill the job\n",
            flag, *given, model, what, need / 1024.0);
  pt_job_size_text(*given, out, 32);
  *given = out;
}

/* A relative data directory is looked for in the job's sandbox, where
 * only what --transfer-input names arrives (a directory by its last
 * name). MNIST and CIFAR-10 default to data/mnist and data/cifar10 there;
 * Fashion-MNIST to Debian's package first, which an execute machine may
 * have. Said, not refused: the machines may share a file system. */
static void note_data_transfer(const condor_opts *co, const pt_train_args *ta, const char *dataset) {
  const char *dir = ta->data_dir;
  char fallback[48];
  if (!dir && (!strcmp(dataset, "mnist") || !strcmp(dataset, "cifar10"))) {
    snprintf(fallback, sizeof fallback, "data/%s", dataset);
    dir = fallback;
  }
  if (!dir || dir[0] == '/') return;
  const size_t first = strcspn(dir, "/"); /* the sandbox entry the directory lies in */
  for (const char *e = co->transfer_input; e && *e;) {
    char entry[PATH_MAX];
    const size_t len = strcspn(e, ",");
    snprintf(entry, sizeof entry, "%.*s", (int)len, e);
    size_t nlen;
    const char *name = sandbox_name(entry, &nlen);
    if (nlen == first && !strncmp(name, dir, first)) return;
    e += len;
    if (*e == ',') e++;
  }
  fprintf(stderr, "ptrain jobscript: note: the job reads %s from %s in its sandbox, and --transfer-input brings "
                  "no '%.*s' there: add --transfer-input DIR (and --data-dir with DIR's last name), or give "
                  "--data-dir an absolute path the execute machines share\n",
          dataset[0] ? dataset : "its data", dir, (int)first, dir);
}

/* What --transfer-input and --resume-from send must arrive in the sandbox
 * under names of their own, and a checkpoint directory only through
 * --resume-from: sent as input, the wrapper would not look at it, and the
 * job would train from the start. (A --transfer-input directory written
 * with a trailing slash sends what it holds, under names not known here.) */
static int check_sandbox_names(const char *cmd, const condor_opts *co) {
  struct {
    const char *s; /* within co's strings */
    size_t len;
  } names[64]; /* the sandbox names so far */
  int n = 0;
  for (int from = 0; from < 2; from++) {
    const char *list = from ? co->resume_from : co->transfer_input;
    const char *flag = from ? "--resume-from" : "--transfer-input";
    for (const char *e = list; e && *e;) {
      char entry[PATH_MAX];
      const char *start = e;
      const size_t elen = from ? strlen(e) : strcspn(e, ",");
      snprintf(entry, sizeof entry, "%.*s", (int)elen, e);
      e += elen;
      if (*e == ',') e++;
      size_t len;
      const char *name = sandbox_name(entry, &len);
      char base[PATH_MAX];
      snprintf(base, sizeof base, "%.*s", (int)len, name);
      if (from && (strchr(entry, ',') || !len || !strcmp(base, ".") || !strcmp(base, "..") || base[0] == '-'))
        return pt_cli_usage(cmd, "--resume-from '%s': expected one directory, as checkpoints-77.0", entry);
      if (!from && (!strcmp(base, PT_JOB_CKPT_DIR) || !strncmp(base, PT_JOB_CKPT_DIR "-", sizeof PT_JOB_CKPT_DIR)))
        return pt_cli_usage(cmd, "--transfer-input '%s': a job's checkpoints are continued with --resume-from %s; "
                                 "sent as input, the job would train from the start", entry, entry);
      if (!from && elen > 1 && entry[elen - 1] == '/') continue;
      for (int k = 0; k < n; k++)
        if (names[k].len == len && !strncmp(names[k].s, base, len))
          return pt_cli_usage(cmd, "%s '%s': another file sent with the job arrives in the sandbox as '%s' too",
                              flag, entry, base);
      if (n < (int)COUNT(names)) names[n].s = start + (name - entry), names[n++].len = len;
    }
  }
  return 0;
}

static void print_help(const pt_arg *slurm, int ns, const pt_arg *condor, int nc) {
  printf(
      "usage: ptrain jobscript slurm|htcondor [options] -- TRAIN_ARGS\n\n"
      "Print a batch script that runs 'ptrain train TRAIN_ARGS' on a cluster; it submits\n"
      "nothing. Save it and submit it with sbatch, or condor_submit. TRAIN_ARGS are\n"
      "checked as ptrain train checks them (no files are read): what train would\n"
      "refuse is refused here, with train's message. Arguments are shell-quoted, so\n"
      "TRAIN_ARGS reach ptrain train unchanged.\n\n"
      "slurm: an sbatch script that runs one ptrain process per task with srun,\n"
      "'ptrain train --parallel ddp' when there is more than one task (nodes x\n"
      "tasks per node), each with --threads from SLURM_CPUS_PER_TASK. The log goes\n"
      "to the --output file, one per job id. Before the time limit (--signal-lead,\n"
      "at most half of --time) and on preemption ptrain checkpoints and exits 85;\n"
      "the script requeues the job, which resumes from the newest checkpoint. It\n"
      "passes --save-model, so the finished job keeps its final weights.\n\n"
      "slurm options:\n");
  pt_args_print_options(slurm, ns);
  printf(
      "\nhtcondor: a submit file (ptrain.sub) and the wrapper it runs (ptrain.sh),\n"
      "printed one after the other under '# ---- file: NAME ----' lines, or written\n"
      "with --write. The run saves checkpoints to\n"
      "'" PT_JOB_CONDOR_DIR "', after the job's ID, which HTCondor\n"
      "sends back on exit and keeps when the job is evicted; a job restarted with a\n"
      "checkpoint there continues with --resume, and a new job continues a finished\n"
      "one's with --resume-from DIR (relative to the submit directory; a DIR with no\n"
      "checkpoint ends the job with status 1). With --gpus above 1 it starts one\n"
      "process per GPU: mpirun -np G ptrain train --parallel ddp. Data must travel\n"
      "with the job: --transfer-input /data/fashion-mnist -- --data-dir fashion-mnist\n\n"
      "htcondor options:\n");
  pt_args_print_options(condor, nc);
  printf("  %-28s %s\n\n", "--help", "show this help");
  printf(
      "examples:\n"
      "  ptrain jobscript slurm --nodes 2 --ntasks-per-node 4 --cpus-per-task 8 --time 02:00:00 --write job.sh \\\n"
      "      -- --model mnist-cnn --epochs 10 && sbatch job.sh\n"
      "  ptrain jobscript htcondor --cpus 4 --memory 4GB --transfer-input data/mnist --write job \\\n"
      "      -- --model mnist-cnn --dataset mnist --data-dir mnist --epochs 10\n");
}

/* Without --save-model a job that finishes keeps only its last
 * time-limit checkpoint: the trained weights are lost, and a resubmission
 * trains again from there. */
static int adds_save_model(const slurm_opts *o, char **train, int ntrain) {
  return !o->no_save_model && !pt_train_args_has(train, ntrain, "--save-model");
}

static void emit_slurm(FILE *f, const slurm_opts *o, const char *ptrain, int argc, char **argv, char **train,
                       int ntrain) {
  int tasks = o->nodes * o->ntasks;
  fputs("#!/bin/bash\n", f);
  fprintf(f, "#SBATCH --job-name=%s\n", o->job_name);
  fprintf(f, "#SBATCH --nodes=%d\n", o->nodes);
  fprintf(f, "#SBATCH --ntasks-per-node=%d\n", o->ntasks);
  if (o->cpus) fprintf(f, "#SBATCH --cpus-per-task=%d\n", o->cpus);
  if (o->gres) fprintf(f, "#SBATCH --gres=%s\n", o->gres);
  else if (o->gpus) fprintf(f, "#SBATCH --gpus-per-node=%d\n", o->gpus);
  if (o->time) fprintf(f, "#SBATCH --time=%s\n", o->time);
  if (o->partition) fprintf(f, "#SBATCH --partition=%s\n", o->partition);
  fprintf(f, "#SBATCH --output=%s\n", o->output);
  if (o->error) fprintf(f, "#SBATCH --error=%s\n", o->error);
  /* Before the time limit (and on preemption, which sends SIGTERM) ptrain
   * checkpoints and exits 85; the script then requeues the job, which
   * resumes. The log of every run goes to the same file. */
  fprintf(f, "#SBATCH --signal=USR1@%d\n", o->signal_lead);
  fputs("#SBATCH --requeue\n#SBATCH --open-mode=append\n", f);
  for (int i = 0; i < o->sbatch.n; i++) fprintf(f, "#SBATCH %s\n", o->sbatch.v[i]);
  put_origin(f, argc, argv);
  fputs("set -euo pipefail\n\n", f);
  fputs("# Slurm sets SLURM_CPUS_PER_TASK only when --cpus-per-task is given, and\n"
        "# gives one CPU per task otherwise: use what the job was given, no more.\n"
        "cpus=${SLURM_CPUS_PER_TASK:-1}\n",
        f);
  if (o->local > 1)
    fprintf(f, "# %d workers in the task, each with --threads: they share its CPUs.\n"
               "threads=$((cpus / %d > 0 ? cpus / %d : 1))\n", o->local, o->local, o->local);
  else
    fputs("threads=$cpus\n", f);
  fputs("export OMP_NUM_THREADS=$threads\n", f);
  if (o->local > 1)
    fprintf(f, "echo \"ptrain job ${SLURM_JOB_ID:-?} on ${SLURM_JOB_NODELIST:-?}: ${SLURM_NTASKS:-1} task(s), %d workers "
               "of $threads thread(s) each\"\n\n", o->local);
  else
    fputs("echo \"ptrain job ${SLURM_JOB_ID:-?} on ${SLURM_JOB_NODELIST:-?}: ${SLURM_NTASKS:-1} task(s), $threads "
          "thread(s) each\"\n\n",
          f);
  /* Without a --checkpoint-dir of the user's, each job keeps its own under
   * its ID, which a requeue keeps: a new submission (another batch size,
   * another optimizer, as the tutorials' exercises have it) once resumed
   * the last job's checkpoint, and trained nothing or was refused. */
  const int own_dir = pt_train_args_has(train, ntrain, "--checkpoint-dir");
  if (own_dir)
    fputs("# A checkpoint from an earlier run of this job (requeued, or preempted),\n"
          "# or of another in the same --checkpoint-dir: continue from it.\n"
          "ckpt=",
          f);
  else
    fputs("# This job's checkpoints, apart from other jobs': a requeue (time limit,\n"
          "# preemption) keeps the job ID and resumes from them; a new submission\n"
          "# starts afresh. (No ID outside Slurm: this shell's.)\n"
          "ckpt=" PT_JOB_CKPT_DIR "/job-${SLURM_JOB_ID:-$$}",
          f);
  if (own_dir) put_word(f, train_arg_value(train, ntrain, "--checkpoint-dir", PT_JOB_CKPT_DIR));
  fputs("\nset --\n", f);
  if (!own_dir) fputs("set -- --checkpoint-dir \"$ckpt\"\n", f);
  fputs("# A checkpoint is a directory step-N, published whole. (A glob, not\n"
        "# compgen -G: the quoted directory is no pattern, whatever its characters.)\n"
        "has_checkpoint=\n"
        "for step in \"$ckpt\"/step-*; do [[ -e $step ]] && has_checkpoint=1 && break; done\n"
        "if [[ -n $has_checkpoint ]]; then\n"
        "  echo \"resuming from the newest checkpoint in $ckpt/ (restart ${SLURM_RESTART_COUNT:-0})\"\n"
        "  set -- \"$@\" --resume\n"
        "fi\n"
        "rc=0\n",
        f);
  if (tasks > 1)
    fputs("# Once a task ends, the others get a minute to end too (--wait=60), or\n"
          "# they would wait for a dead one until ptrain's --timeout. Not\n"
          "# --kill-on-bad-exit: the first rank to exit 85 would have the others\n"
          "# killed as they exit too, and srun would give 137, not 85: no requeue.\n",
          f);
  /* From Slurm 22.05 to 23.02 srun does not take --cpus-per-task from
   * sbatch: a task would get one CPU for all its threads. */
  fputs("srun --cpus-per-task=\"$cpus\"", f);
  if (tasks > 1) fputs(" --kill-on-bad-exit=0 --wait=60", f);
  if (tasks > 1 && strcmp(o->mpi, "default")) fprintf(f, " --mpi=%s", o->mpi);
  fputc(' ', f);
  put_word(f, ptrain);
  fputs(" train", f);
  if (tasks > 1) fputs(" --parallel ddp", f);
  if (o->dev.add) fprintf(f, " %s %s", o->dev.flag, o->dev.value);
  if (!pt_train_args_has(train, ntrain, "--threads")) fputs(" --threads \"$threads\"", f);
  if (adds_save_model(o, train, ntrain)) fputs(" --save-model", f);
  put_words(f, train, ntrain);
  fputs(" \"$@\" || rc=$?\n", f);
  fputs("# 85: ptrain was signalled (time limit near, preemption), checkpointed\n"
        "# and stopped; the job goes back to the queue and resumes from there.\n"
        "if [[ $rc == 85 && -n ${SLURM_JOB_ID:-} ]]; then\n"
        "  echo \"ptrain checkpointed before the end; requeueing job $SLURM_JOB_ID\"\n"
        "  scontrol requeue \"$SLURM_JOB_ID\"\n"
        "  exit 0\n"
        "fi\n"
        "if [[ $rc == 0 && -f $ckpt/model.safetensors ]]; then\n"
        "  echo \"trained weights: $ckpt/model.safetensors\"\n"
        "fi\n"
        "exit $rc\n",
        f);
}

static void emit_condor_sub(FILE *f, const condor_opts *o, int argc, char **argv) {
  fputs("# HTCondor submit file for a ptrain training run: condor_submit ptrain.sub\n", f);
  put_origin(f, argc, argv);
  fprintf(f,
          "universe                = vanilla\n"
          "executable              = ptrain.sh\n"
          "# The job's own checkpoint directory, named after its ID.\n"
          "arguments               = " PT_JOB_CONDOR_DIR "\n"
          "batch_name              = %s\n"
          "log                     = %s-$(Cluster).log\n"
          "output                  = %s-$(Cluster).$(Process).out\n"
          "error                   = %s-$(Cluster).$(Process).err\n"
          "request_cpus            = %d\n"
          "request_memory          = %s\n"
          "request_disk            = %s\n",
          o->name, o->name, o->name, o->name, o->cpus, o->memory, o->disk);
  if (o->gpus) fprintf(f, "request_gpus            = %d\n", o->gpus);
  fputs("should_transfer_files   = YES\n", f);
  const size_t from_len = o->resume_from ? without_trailing_slashes(o->resume_from) : 0;
  if (o->transfer_input || o->resume_from)
    fprintf(f, "transfer_input_files    = %s%s%.*s\n", o->transfer_input ? o->transfer_input : "",
            o->transfer_input && o->resume_from ? "," : "", (int)from_len, o->resume_from ? o->resume_from : "");
  fputs("# Self-checkpointing: every --checkpoint-interval ptrain writes a checkpoint\n"
        "# and exits 85; HTCondor then copies the checkpoint directory to the submit\n"
        "# node and starts ptrain.sh again in the same sandbox, which resumes. A job\n"
        "# evicted, or whose machine dies, restarts elsewhere from the last copy.\n"
        "checkpoint_exit_code    = 85\n"
        "transfer_checkpoint_files = " PT_JOB_CONDOR_DIR "\n"
        "# The checkpoints also come back at the end, and on an eviction announced\n"
        "# by SIGTERM, on which ptrain checkpoints the step it is in.\n"
        "transfer_output_files   = " PT_JOB_CONDOR_DIR "\n"
        "when_to_transfer_output = ON_EXIT_OR_EVICT\n",
        f);
  for (int i = 0; i < o->submit.n; i++) fprintf(f, "%s\n", o->submit.v[i]);
  fputs("queue\n", f);
}

static void emit_condor_wrapper(FILE *f, const condor_opts *o, const char *ptrain, int argc, char **argv,
                                char **train, int ntrain) {
  /* The job's CPUs shared among its ranks (one per GPU) or the workers of
   * its one process (dp's replicas, model's stages). */
  const int share = o->ranks > 1 ? o->ranks : o->local;
  const int threads = o->cpus / share > 0 ? o->cpus / share : 1;
  fputs("#!/bin/bash\n"
        "# Runs ptrain train in the HTCondor job's sandbox.\n",
        f);
  put_origin(f, argc, argv);
  fputs("set -euo pipefail\n\n", f);
  fputs("# This job's checkpoints, apart from those of other jobs submitted from the\n"
        "# same directory: the submit file names them after the job's ID, which a\n"
        "# restart keeps. (Run by hand, without that argument: " PT_JOB_CKPT_DIR ".)\n"
        "ckpt=${1:-" PT_JOB_CKPT_DIR "}\n"
        "# HTCondor holds a job whose transfer_output_files are missing, so the\n"
        "# directory must exist even if the job ends before its first checkpoint.\n"
        "mkdir -p -- \"$ckpt\"\n"
        "# A checkpoint is a directory step-N published whole (or, from earlier\n"
        "# versions, the pair of files): one is there when HTCondor restarts an\n"
        "# evicted job, and ptrain takes the newest complete one.\n"
        "# (A glob, not compgen -G: the quoted directory is no pattern.)\n"
        "has_checkpoint() {\n"
        "  local step\n"
        "  for step in \"$1\"/step-*; do [[ -e $step ]] && return 0; done\n"
        "  [[ -f $1/state.safetensors && -f $1/model.safetensors ]]\n"
        "}\n",
        f);
  if (o->resume_from) {
    size_t len;
    const char *name = sandbox_name(o->resume_from, &len);
    char from[PATH_MAX];
    snprintf(from, sizeof from, "%.*s", (int)len, name);
    fputs("# The run this job continues (--resume-from), sent with it: its checkpoints\n"
          "# become this job's, unless the job has its own already (a restart).\n"
          "from=",
          f);
    put_word(f, from);
    /* Copied, not moved: run by hand beside the earlier job's directory,
     * the wrapper leaves it as it was. */
    fputs("\n"
          "if ! has_checkpoint \"$ckpt\"; then\n"
          "  if ! has_checkpoint \"$from\"; then\n"
          "    echo \"ptrain.sh: $from (--resume-from) holds no checkpoint to continue from\" >&2\n"
          "    exit 1\n"
          "  fi\n"
          "  cp -a -- \"$from/.\" \"$ckpt/\"\n"
          "fi\n",
          f);
  }
  fputs("set -- --checkpoint-dir \"$ckpt\"\n"
        "if has_checkpoint \"$ckpt\"; then\n"
        "  echo \"resuming from the checkpoint in $ckpt/\"\n"
        "  set -- \"$@\" --resume\n"
        "fi\n",
        f);
  fprintf(f, "export OMP_NUM_THREADS=%d\n\n", threads);
  if (o->ranks > 1)
    fprintf(f,
            "# Open MPI's mpirun ends with status 1 when it is signalled itself, whatever\n"
            "# its ranks did, but passes SIGUSR1 on to them and ends with their status:\n"
            "# an eviction's SIGTERM goes to the ranks as SIGUSR1, they checkpoint, and\n"
            "# their 85 is this job's.\n"
            "# Each rank unbound (--bind-to none): Open MPI would pin each of 2 ranks\n"
            "# to one core, where its --threads would take turns.\n"
            "mpirun -np %d --bind-to none ",
            o->ranks);
  else
    fputs("exec ", f);
  put_word(f, ptrain);
  fputs(" train", f);
  if (o->ranks > 1) fputs(" --parallel ddp", f);
  if (o->dev.add) fprintf(f, " %s %s", o->dev.flag, o->dev.value);
  if (!pt_train_args_has(train, ntrain, "--threads")) fprintf(f, " --threads %d", threads);
  fputs(" --save-model --exit-after-checkpoint", f);
  if (!pt_train_args_has(train, ntrain, "--checkpoint-interval") &&
      !pt_train_args_has(train, ntrain, "--checkpoint-every"))
    fprintf(f, " --checkpoint-interval %d", o->checkpoint_interval);
  fputs(" \"$@\"", f);
  put_words(f, train, ntrain);
  if (o->ranks > 1)
    fputs(" &\n"
          "pid=$!\n"
          "trap 'interrupted=1; kill -USR1 \"$pid\" 2>/dev/null || true' TERM USR1\n"
          "while :; do # a trap ends a wait early: wait again for mpirun's own status\n"
          "  interrupted=0 status=0\n"
          "  wait \"$pid\" || status=$?\n"
          "  ((interrupted && status > 128)) || exit \"$status\"\n"
          "done",
          f);
  fputc('\n', f);
}

/* path with the given text, in a temporary file beside it, written and
 * synced: a full disk shows here, before anything is published. */
static pt_status stage_file(const char *path, const char *text, size_t len, mode_t mode, pt_atomic_file **out) {
  PT_TRY(pt_atomic_file_open(path, out));
  pt_status st = pt_atomic_file_write(*out, text, len);
  if (st == PT_OK) st = pt_atomic_file_set_mode(*out, mode);
  if (st == PT_OK) st = pt_atomic_file_sync(*out);
  if (st != PT_OK) {
    pt_atomic_file_abort(*out);
    *out = NULL;
  }
  return st;
}

/* Puts a staged file in place; an existing one only with force, so a
 * second run never silently replaces an edited script. */
static pt_status publish(pt_atomic_file *h, const char *path, int force) {
  const pt_status st = force ? pt_atomic_file_commit(h) : pt_atomic_file_commit_new(h);
  if (st != PT_OK && !force && pt_error_errno() == EEXIST)
    return pt_fail(PT_ERR_IO, "%s exists (give --force to replace it)", path);
  return st;
}

/* The script on standard output. Where that is a regular file (ptrain
 * jobscript ... > job.sh) a write that fails part-way, on a full disk,
 * takes the file back to what it held before: a script cut short could
 * still run, and do something else than asked. */
static pt_status write_stdout(const char *text, size_t len) {
  struct stat sb;
  off_t before = -1;
  if (fflush(stdout) == 0 && fstat(STDOUT_FILENO, &sb) == 0 && S_ISREG(sb.st_mode)) {
    const int fl = fcntl(STDOUT_FILENO, F_GETFL);
    /* Only where the script goes at the end: '>' and '>>', not '1<>'. */
    if (fl >= 0 && ((fl & O_APPEND) || lseek(STDOUT_FILENO, 0, SEEK_CUR) == sb.st_size)) before = sb.st_size;
  }
  size_t done = 0;
  while (done < len) {
    const ssize_t w = write(STDOUT_FILENO, text + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      const pt_status st = pt_fail_errno(PT_ERR_IO, "writing the script to standard output");
      if (before >= 0 && ftruncate(STDOUT_FILENO, before) != 0)
        fprintf(stderr, "ptrain jobscript: warning: standard output holds a script cut short: remove it\n");
      return st;
    }
    done += (size_t)w;
  }
  return PT_OK;
}

/* dp, model and pipeline: one process on all of the job's GPUs. */
static int in_one_process(const char *par) {
  return par && (!strcmp(par, "dp") || !strcmp(par, "model") || !strcmp(par, "pipeline"));
}

/* The workers one process runs, each with --threads: dp's replicas
 * (--workers, else one per --devices entry, else 2), and model's and
 * pipeline's stages (--devices, 2 by default); 1 for one worker or ddp. */
static int local_workers(const pt_train_args *ta) {
  if (!in_one_process(ta->c.parallel)) return 1;
  if (!strcmp(ta->c.parallel, "dp") && ta->c.workers > 0) return ta->c.workers;
  return ta->c.devices ? pt_list_count(ta->c.devices) : 2;
}

/* The device words for gpus GPUs (see gpu_device); 0, or a usage error.
 * Added where GPUs are asked for and the training arguments name no
 * device: without them ptrain trains on the CPU while the job holds (and
 * is billed for) its GPUs. Each rank then takes the GPU of its local rank
 * among those the scheduler made visible. */
static int plan_device(const char *cmd, const char *ask, int gpus, char **train, int ntrain, gpu_device *d) {
  memset(d, 0, sizeof *d);
  d->add = gpus > 0 && !pt_train_args_has(train, ntrain, "--device") && !pt_train_args_has(train, ntrain, "--devices");
  if (!d->add) return 0;
  const char *par = train_arg_value(train, ntrain, "--parallel", NULL);
  if (!in_one_process(par)) {
    d->flag = "--device";
    snprintf(d->value, sizeof d->value, "cuda");
    return 0;
  }
  if (gpus == 1 && !strcmp(par, "dp"))
    return pt_cli_usage(cmd, "--parallel dp after '--' with %s: one GPU has no replicas to split the batch over; "
                            "ask for 2 or more", ask);
  d->flag = "--devices";
  const int n = gpus == 1 ? 2 : gpus; /* stages on a lone GPU share it */
  size_t used = 0;
  for (int i = 0; i < n && used < sizeof d->value; i++)
    used += (size_t)snprintf(d->value + used, sizeof d->value - used, "%scuda:%d", i ? "," : "", gpus == 1 ? 0 : i);
  if (used >= sizeof d->value)
    return pt_cli_usage(cmd, "%s: too many GPUs to list for --parallel %s in one process", ask, par);
  return 0;
}

/* A CPU device chosen while GPUs are asked for is refused rather than
 * followed: the GPUs would sit idle for the whole job. */
static int check_gpu_device(const char *cmd, const char *ask, int gpus, const pt_train_args *ta) {
  const char *flag = ta->c.device ? "--device" : "--devices", *dev = ta->c.device ? ta->c.device : ta->c.devices;
  if (gpus <= 0 || !dev || strncmp(dev, "cpu", 3)) return 0;
  return pt_cli_usage(cmd, "%s %s after '--' but %s asks for GPUs: the job would hold them and train on the CPU; "
                          "leave out %.*s, or %s %s",
                     flag, dev, ask, (int)strcspn(ask, " "), ask, flag, dev);
}

/* The GPUs of a node the run trains on: one a rank (ranks_per_node of
 * them, each taking its local rank's), or the distinct GPUs of one
 * process's --devices; one where --device names it by number, which every
 * rank then takes. */
static int gpus_used(const pt_train_args *ta, int ranks_per_node) {
  if (ta->c.devices) {
    int distinct = 0;
    for (const char *a = ta->c.devices;; a++) {
      const size_t n = strcspn(a, ",");
      int seen = 0; /* an entry before this one, the same (stages sharing a GPU) */
      for (const char *b = ta->c.devices; b < a && !seen; b += strcspn(b, ",") + 1)
        seen = strcspn(b, ",") == n && !strncmp(a, b, n);
      distinct += !seen && !strncmp(a, "cuda", 4);
      a += n;
      if (!*a) break;
    }
    return distinct;
  }
  if (ta->c.device && strchr(ta->c.device, ':')) return 1;
  return ranks_per_node;
}

/* GPUs that the job would hold and leave idle: said, not refused (a
 * request may have reasons of its own, as a node taken whole). */
static void note_idle_gpus(const char *ask, int gpus, const pt_train_args *ta, int ranks_per_node) {
  const int used = gpus_used(ta, ranks_per_node);
  if (gpus <= 0 || used >= gpus) return;
  if (ta->c.device && strchr(ta->c.device, ':') && ranks_per_node > 1)
    fprintf(stderr, "ptrain jobscript: note: --device %s after '--' puts every one of the %d ranks of a node on that "
                    "GPU, and %d of the %d that %s asks for sit idle; leave out --device to give each rank its own\n",
            ta->c.device, ranks_per_node, gpus - used, gpus, ask);
  else
    fprintf(stderr, "ptrain jobscript: note: %s asks for %d GPUs a node, and the run trains on %d: %d sit idle "
                    "(a rank takes one GPU; dp, model and pipeline take their --devices)\n",
            ask, gpus, used, gpus - used);
}

static int run_slurm(const slurm_opts *o, const char *ptrain, int argc, char **argv, char **train, int ntrain) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) {
    pt_fail(PT_ERR_NOMEM, "out of memory");
    return pt_cli_fail("jobscript");
  }
  emit_slurm(f, o, ptrain, argc, argv, train, ntrain);
  if (fclose(f) != 0) {
    free(text);
    pt_fail(PT_ERR_NOMEM, "out of memory");
    return pt_cli_fail("jobscript");
  }
  pt_status st;
  if (o->write_file) {
    pt_atomic_file *h;
    st = stage_file(o->write_file, text, len, 0755, &h);
    if (st == PT_OK) st = publish(h, o->write_file, o->force);
    if (st == PT_OK) printf("wrote %s; submit with: sbatch %s\n", o->write_file, o->write_file);
  } else {
    st = write_stdout(text, len);
  }
  free(text);
  return st == PT_OK ? 0 : pt_cli_fail("jobscript");
}

static int run_condor(const condor_opts *o, const char *ptrain, int argc, char **argv, char **train, int ntrain) {
  char *sub = NULL, *sh = NULL;
  size_t nsub = 0, nsh = 0;
  FILE *fs = open_memstream(&sub, &nsub), *fw = open_memstream(&sh, &nsh);
  if (!fs || !fw) {
    if (fs) fclose(fs);
    if (fw) fclose(fw);
    free(sub);
    free(sh);
    pt_fail(PT_ERR_NOMEM, "out of memory");
    return pt_cli_fail("jobscript");
  }
  emit_condor_sub(fs, o, argc, argv);
  emit_condor_wrapper(fw, o, ptrain, argc, argv, train, ntrain);
  int bad = fclose(fs) != 0;
  bad |= fclose(fw) != 0;
  pt_status st = bad ? pt_fail(PT_ERR_NOMEM, "out of memory") : PT_OK;
  if (st == PT_OK && !o->write_dir) {
    static const char m1[] = "# ---- file: ptrain.sub ----\n", m2[] = "# ---- file: ptrain.sh ----\n";
    char *all = malloc(sizeof m1 + nsub + sizeof m2 + nsh);
    if (!all) {
      st = pt_fail(PT_ERR_NOMEM, "out of memory");
    } else {
      size_t at = 0;
      memcpy(all + at, m1, sizeof m1 - 1), at += sizeof m1 - 1;
      memcpy(all + at, sub, nsub), at += nsub;
      memcpy(all + at, m2, sizeof m2 - 1), at += sizeof m2 - 1;
      memcpy(all + at, sh, nsh), at += nsh;
      st = write_stdout(all, at);
      free(all);
    }
  } else if (st == PT_OK) {
    char psub[PATH_MAX], psh[PATH_MAX];
    snprintf(psub, sizeof psub, "%s/ptrain.sub", o->write_dir);
    snprintf(psh, sizeof psh, "%s/ptrain.sh", o->write_dir);
    const int made = mkdir(o->write_dir, 0777) == 0;
    if (!made && errno != EEXIST) st = pt_fail_errno(PT_ERR_IO, "%s", o->write_dir);
    /* Both checked first, so a refusal leaves no half-written pair. */
    if (st == PT_OK && !o->force && (access(psub, F_OK) == 0 || access(psh, F_OK) == 0))
      st = pt_fail(PT_ERR_IO, "%s exists (give --force to replace it)", access(psub, F_OK) == 0 ? psub : psh);
    /* Both written and synced before either is put in place: a full disk
     * leaves neither, rather than a submit file without its script. */
    pt_atomic_file *hsub = NULL, *hsh = NULL;
    if (st == PT_OK) st = stage_file(psub, sub, nsub, 0644, &hsub);
    if (st == PT_OK) st = stage_file(psh, sh, nsh, 0755, &hsh);
    if (st == PT_OK) {
      st = publish(hsub, psub, o->force);
      hsub = NULL;
    }
    if (st == PT_OK) {
      st = publish(hsh, psh, o->force);
      hsh = NULL;
      /* The script appeared under us (the check above passed): take back
       * the submit file this run created, so no half pair is left. */
      if (st != PT_OK && !o->force) unlink(psub);
    }
    pt_atomic_file_abort(hsub);
    pt_atomic_file_abort(hsh);
    if (st != PT_OK && made) rmdir(o->write_dir); /* the directory this run made, left empty */
    if (st == PT_OK) printf("wrote %s and %s; submit with: cd %s && condor_submit ptrain.sub\n", psub, psh, o->write_dir);
  }
  free(sub);
  free(sh);
  return st == PT_OK ? 0 : pt_cli_fail("jobscript");
}

int pt_cmd_jobscript(int argc, char **argv) {
  slurm_opts so = {.nodes = 1, .output = "ptrain-%j.out", .job_name = "ptrain", .mpi = "pmix"};
  condor_opts co = {.cpus = 1, .name = "ptrain", .checkpoint_interval = 1800}; /* .memory: sized below */
  char memory[32], disk[32];
  /* Both tables, whichever the scheduler: each one's flags get a pointed
   * message when given to the other, and --help shows both. */
  const pt_arg sflags[] = {
      {"--nodes", ARG_INT, &so.nodes, 1, 100000, NULL, "N", "machines (default 1)"},
      {"--gpus-per-node", ARG_INT, &so.gpus, 0, 1024, NULL, "G",
       "GPUs on each machine (default 0: CPU only); the run gets --device cuda unless TRAIN_ARGS choose a GPU"},
      {"--gres", ARG_STR, &so.gres, 0, 0, NULL, "GRES",
       "gpu:G or gpu:TYPE:G, the GPUs as a generic resource instead (#SBATCH --gres), for clusters that want it so"},
      {"--ntasks-per-node", ARG_INT, &so.ntasks, 1, 4096, NULL, "T",
       "ptrain processes per machine (default: G, one per GPU, else 1)"},
      {"--cpus-per-task", ARG_INT, &so.cpus, 1, 4096, NULL, "C",
       "cores per process, its --threads (default: Slurm's, one)"},
      {"--time", ARG_STR, &so.time, 0, 0, NULL, "HH:MM:SS", "time limit, HH:MM:SS or D-HH:MM:SS"},
      {"--signal-lead", ARG_INT, &so.signal_lead, 1, 65535, NULL, "SECONDS",
       "signal ptrain this long before the time limit to checkpoint and requeue, at most half of --time "
       "(default 120)"},
      {"--partition", ARG_STR, &so.partition, 0, 0, NULL, "P", "partition (default: the cluster's)"},
      {"--output", ARG_STR, &so.output, 0, 0, NULL, "PATTERN", "log file, %j is the job id (default ptrain-%j.out)"},
      {"--error", ARG_STR, &so.error, 0, 0, NULL, "PATTERN",
       "error log file, %j is the job id (default: the --output file)"},
      {"--job-name", ARG_STR, &so.job_name, 0, 0, NULL, "NAME", "job name (default ptrain)"},
      {"--mpi", ARG_STR, &so.mpi, 0, 0, NULL, "TYPE",
       "srun --mpi for more than one task (default pmix; 'default': the cluster's)"},
      {"--sbatch", ARG_STRS, &so.sbatch, 0, 0, NULL, "OPTION",
       "one more #SBATCH line, as --account=proj or --qos=high; may be repeated"},
      {"--ptrain", ARG_STR, &so.ptrain, 0, 0, NULL, "PATH", "ptrain on the compute nodes (default: this one)"},
      {"--no-save-model", ARG_FLAG, &so.no_save_model, 0, 0, NULL, NULL,
       "leave out the --save-model the script adds (the final weights are then not kept)"},
      {"--write", ARG_STR, &so.write_file, 0, 0, NULL, "FILE",
       "write the script to FILE, whole or not at all, instead of standard output"},
      {"--force", ARG_FLAG, &so.force, 0, 0, NULL, NULL, "with --write: replace an existing FILE"},
  };
  const pt_arg cflags[] = {
      {"--gpus", ARG_INT, &co.gpus, 0, 64, NULL, "G",
       "request_gpus (default 0: CPU only); the run gets --device cuda unless TRAIN_ARGS choose a GPU"},
      {"--cpus", ARG_INT, &co.cpus, 1, 4096, NULL, "C",
       "request_cpus, and ptrain's --threads (with --gpus G, C/G per rank; default 1)"},
      {"--memory", ARG_STR, &co.memory, 0, 0, NULL, "SIZE",
       "request_memory, e.g. 4GB or 512MB (default: what the model will hold, at least 2GB)"},
      {"--disk", ARG_STR, &co.disk, 0, 0, NULL, "SIZE",
       "request_disk, e.g. 8GB (default: what the checkpoints and data will take, at least 1GB)"},
      {"--name", ARG_STR, &co.name, 0, 0, NULL, "NAME", "batch name and log file prefix (default ptrain)"},
      {"--checkpoint-interval", ARG_INT, &co.checkpoint_interval, 1, 100000000, NULL, "SECONDS",
       "checkpoint, exit 85 and have HTCondor save the checkpoint this often (default 1800)"},
      {"--transfer-input", ARG_STR, &co.transfer_input, 0, 0, NULL, "FILES",
       "comma-separated files and directories to send with the job"},
      {"--resume-from", ARG_STR, &co.resume_from, 0, 0, NULL, "DIR",
       "continue the run whose checkpoints an earlier job brought back (its checkpoints-CLUSTER.PROC), "
       "sent with the job; raise --epochs (or --max-steps) in TRAIN_ARGS"},
      {"--submit", ARG_STRS, &co.submit, 0, 0, NULL, "LINE",
       "one more submit-file line, KEY = VALUE, as 'requirements = (Memory > 8192)'; may be repeated"},
      {"--write", ARG_STR, &co.write_dir, 0, 0, NULL, "DIR", "write DIR/ptrain.sub and DIR/ptrain.sh"},
      {"--force", ARG_FLAG, &co.force, 0, 0, NULL, NULL, "with --write: replace existing files"},
      {"--ptrain", ARG_STR, &co.ptrain, 0, 0, NULL, "PATH", "ptrain on the execute nodes (default: this one)"},
  };
  const int ns = (int)(sizeof sflags / sizeof sflags[0]);
  const int nc = (int)(sizeof cflags / sizeof cflags[0]);

  if (argc < 3) {
    fprintf(stderr, "ptrain jobscript: missing scheduler (expected slurm or htcondor; see 'ptrain jobscript --help')\n");
    return PT_USAGE_ERROR;
  }
  const char *sched = argv[2];
  if (!strcmp(sched, "--help") || !strcmp(sched, "-h")) {
    print_help(sflags, ns, cflags, nc);
    return 0;
  }
  int slurm = !strcmp(sched, "slurm");
  if (!slurm && strcmp(sched, "htcondor")) {
    fprintf(stderr, "ptrain jobscript: unknown scheduler '%s' (expected slurm or htcondor; see 'ptrain jobscript --help')\n",
            sched);
    return PT_USAGE_ERROR;
  }
  const char *cmd = slurm ? "jobscript slurm" : "jobscript htcondor";

  /* Everything after "--" belongs to ptrain train, never to this parser. */
  int dd = 3;
  while (dd < argc && strcmp(argv[dd], "--")) dd++;
  int rc = slurm ? foreign_flag(cmd, sflags, ns, cflags, nc, "htcondor", dd, argv, 3)
                 : foreign_flag(cmd, cflags, nc, sflags, ns, "slurm", dd, argv, 3);
  if (rc) return rc;
  int help;
  rc = slurm ? pt_args_parse(cmd, sflags, ns, dd, argv, 3, &help, NULL, 0, NULL)
             : pt_args_parse(cmd, cflags, nc, dd, argv, 3, &help, NULL, 0, NULL);
  if (rc) return rc;
  if (help) {
    print_help(sflags, ns, cflags, nc);
    return 0;
  }
  if (dd == argc)
    return pt_cli_usage(cmd, "missing '--' and the training arguments after it");
  char **train = argv + dd + 1;
  int ntrain = argc - dd - 1;

  const char *ptrain_given;
  pt_train_args ta;
  if (slurm) {
    const long limit = so.time ? time_seconds(so.time) : 0;
    if (so.time && limit <= 0)
      return pt_cli_usage(cmd, "--time: expected HH:MM:SS or D-HH:MM:SS, more than zero, got '%s'", so.time);
    const int lead_given = so.signal_lead > 0;
    if (!lead_given) so.signal_lead = PT_JOB_SIGNAL_LEAD;
    /* Slurm signals the lead before the limit (up to a minute earlier
     * still): a lead near the limit signals ptrain as it starts, and each
     * run checkpoints, requeues and is signalled again, without end. */
    if (limit && 2L * so.signal_lead > limit)
      return pt_cli_usage(cmd,
                         "--signal-lead %d%s: expected at most half the time limit, --time %s (%ld s), so at most "
                         "%ld s; a lead that long has Slurm signal ptrain as soon as it starts, and the job "
                         "requeues without end",
                         so.signal_lead, lead_given ? "" : " (the default)", so.time, limit, limit / 2);
    /* Within the half, the minute's slack may still leave a run little or
     * no time before its signal: said, as the short test jobs want it. */
    if (limit && limit - so.signal_lead - 60 < so.signal_lead) {
      const long earliest = limit - so.signal_lead - 60;
      if (earliest > 0)
        fprintf(stderr, "ptrain jobscript: note: Slurm may signal up to a minute before --signal-lead %d, so as early "
                        "as %ld s into a run of --time %s: each run may train that little before it checkpoints\n",
                so.signal_lead, earliest, so.time);
      else
        fprintf(stderr, "ptrain jobscript: note: Slurm may signal up to a minute before --signal-lead %d, so as soon "
                        "as a run of --time %s starts: it may checkpoint and requeue before training a step\n",
                so.signal_lead, so.time);
    }
    if (so.force && !so.write_file) return pt_cli_usage(cmd, "--force: expected together with --write FILE");
    if ((rc = pt_job_check_token(cmd, "--partition", so.partition)) || (rc = pt_job_check_token(cmd, "--output", so.output)) ||
        (rc = pt_job_check_token(cmd, "--error", so.error)) || (rc = pt_job_check_token(cmd, "--job-name", so.job_name)) ||
        (rc = pt_job_check_token(cmd, "--mpi", so.mpi)) || (rc = pt_job_check_token(cmd, "--gres", so.gres)))
      return rc;
    for (int i = 0; i < so.sbatch.n; i++)
      if ((rc = pt_job_check_sbatch(cmd, so.sbatch.v[i], kSbatchOwn, COUNT(kSbatchOwn)))) return rc;
    if (so.gres) {
      if (so.gpus)
        return pt_cli_usage(cmd, "--gres and --gpus-per-node both ask for GPUs: give one");
      if (!(so.gpus = gres_gpus(so.gres)))
        return pt_cli_usage(cmd, "--gres: expected gpu:G or gpu:TYPE:G with G from 1 to 1024, got '%s'", so.gres);
    }
    if (pt_train_args_has(train, ntrain, "--resume"))
      return pt_cli_usage(cmd, "--resume after '--': the script adds it when a checkpoint is there");
    if (so.no_save_model && pt_train_args_has(train, ntrain, "--save-model"))
      return pt_cli_usage(cmd, "--no-save-model and --save-model after '--' contradict each other: give one");
    /* dp, model and pipeline run in one task with the node's GPUs; ddp,
     * and a run without --parallel, take one task per GPU. */
    const int one_task = in_one_process(train_arg_value(train, ntrain, "--parallel", NULL));
    if (!so.ntasks) so.ntasks = so.gpus > 0 && !one_task ? so.gpus : 1;
    const int tasks = so.nodes * so.ntasks;
    if (tasks > 1 && pt_train_args_has(train, ntrain, "--parallel"))
      return pt_cli_usage(cmd, "--parallel after '--': with %d tasks the script passes --parallel ddp itself%s", tasks,
                         one_task ? "; dp, model and pipeline run in one task: --nodes 1 --ntasks-per-node 1" : "");
    char ask[64];
    if (so.gres) snprintf(ask, sizeof ask, "--gres %s", so.gres);
    else snprintf(ask, sizeof ask, "--gpus-per-node %d", so.gpus);
    if ((rc = plan_device(cmd, ask, so.gpus, train, ntrain, &so.dev))) return rc;
    const char *pre[6];
    int npre = 0;
    if (tasks > 1) pre[npre++] = "--parallel", pre[npre++] = "ddp";
    if (so.dev.add) pre[npre++] = so.dev.flag, pre[npre++] = so.dev.value;
    if (adds_save_model(&so, train, ntrain)) pre[npre++] = "--save-model";
    if ((rc = pt_train_args_check(cmd, pre, npre, train, ntrain, &ta))) return rc;
    if ((rc = check_gpu_device(cmd, ask, so.gpus, &ta))) return rc;
    so.local = local_workers(&ta);
    note_idle_gpus(ask, so.gpus, &ta, so.ntasks);
    if (tasks == 1 && ta.c.parallel && !strcmp(ta.c.parallel, "ddp"))
      return pt_cli_usage(cmd, "--parallel ddp after '--': one task has no other ranks; ask for more with --nodes or "
                              "--ntasks-per-node, and the script passes --parallel ddp itself");
    ptrain_given = so.ptrain;
  } else {
    if (co.memory && !pt_job_valid_size(co.memory))
      return pt_cli_usage(cmd, "--memory: expected a size such as 4GB, 512MB or 2048 (MB), up to 1 PiB, got '%s'",
                         co.memory);
    if (co.disk && !pt_job_valid_size(co.disk))
      return pt_cli_usage(cmd, "--disk: expected a size such as 8GB, 512MB or 2048 (MB), up to 1 PiB, got '%s'",
                         co.disk);
    for (int i = 0; i < co.submit.n; i++)
      if ((rc = pt_job_check_submit(cmd, co.submit.v[i], kSubmitOwn, COUNT(kSubmitOwn)))) return rc;
    if ((rc = pt_job_check_token(cmd, "--name", co.name)) || (rc = pt_job_check_token(cmd, "--transfer-input", co.transfer_input)) ||
        (rc = pt_job_check_token(cmd, "--resume-from", co.resume_from)))
      return rc;
    if ((rc = check_sandbox_names(cmd, &co))) return rc;
    /* An empty entry is a slip (HTCondor would be asked to transfer nothing by name). */
    if (co.transfer_input && pt_list_has_empty(co.transfer_input))
      return pt_cli_usage(cmd, "--transfer-input '%s': an empty entry; expected FILE[,FILE...]", co.transfer_input);
    if (co.force && !co.write_dir) return pt_cli_usage(cmd, "--force: expected together with --write DIR");
    if (pt_train_args_has(train, ntrain, "--checkpoint-dir"))
      return pt_cli_usage(cmd, "--checkpoint-dir after '--': the job keeps checkpoints in '%s', which HTCondor "
                              "transfers", PT_JOB_CONDOR_DIR);
    if (pt_train_args_has(train, ntrain, "--resume"))
      return pt_cli_usage(cmd, "--resume after '--': the wrapper adds it when a checkpoint is there");
    /* dp, model and pipeline: one process with the job's GPUs; else one
     * rank per GPU under ddp. */
    const int one_process = in_one_process(train_arg_value(train, ntrain, "--parallel", NULL));
    if (co.gpus > 1 && pt_train_args_has(train, ntrain, "--parallel") && !one_process)
      return pt_cli_usage(cmd, "--parallel after '--': with --gpus %d the wrapper passes --parallel ddp itself (dp, "
                              "model and pipeline run in one process on the job's GPUs)", co.gpus);
    co.ranks = co.gpus > 1 && !one_process ? co.gpus : 1;
    /* As the wrapper runs it, its own flags included. */
    char interval[16];
    snprintf(interval, sizeof interval, "%d", co.checkpoint_interval);
    char ask[32];
    snprintf(ask, sizeof ask, "--gpus %d", co.gpus);
    if ((rc = plan_device(cmd, ask, co.gpus, train, ntrain, &co.dev))) return rc;
    const char *pre[12];
    int npre = 0;
    if (co.ranks > 1) pre[npre++] = "--parallel", pre[npre++] = "ddp";
    if (co.dev.add) pre[npre++] = co.dev.flag, pre[npre++] = co.dev.value;
    pre[npre++] = "--save-model";
    pre[npre++] = "--checkpoint-dir";
    pre[npre++] = PT_JOB_CKPT_DIR;
    pre[npre++] = "--exit-after-checkpoint";
    if (!pt_train_args_has(train, ntrain, "--checkpoint-interval") &&
        !pt_train_args_has(train, ntrain, "--checkpoint-every"))
      pre[npre++] = "--checkpoint-interval", pre[npre++] = interval;
    if ((rc = pt_train_args_check(cmd, pre, npre, train, ntrain, &ta))) return rc;
    if ((rc = check_gpu_device(cmd, ask, co.gpus, &ta))) return rc;
    note_idle_gpus(ask, co.gpus, &ta, co.ranks);
    if (co.gpus <= 1 && ta.c.parallel && !strcmp(ta.c.parallel, "ddp"))
      return pt_cli_usage(cmd, "--parallel ddp after '--': one process has no other ranks; ask for --gpus 2 or more, "
                              "and the wrapper passes --parallel ddp itself");
    char dataset[32];
    const pt_job_run run = {ta.model, ta.model_file, ta.dataset, ta.c.optimizer, ta.c.momentum,
                            ta.c.batch_size, ta.c.test_batch_size, ta.c.keep_checkpoints, co.resume_from != NULL};
    const pt_job_need need = pt_job_estimate(&run, dataset, sizeof dataset);
    /* Every ddp rank, and every dp replica, holds the model; the disk
     * holds rank 0's checkpoints only. */
    co.local = local_workers(&ta);
    const int dp = ta.c.parallel && !strcmp(ta.c.parallel, "dp");
    const int replicas = co.ranks > 1 ? co.ranks : dp ? co.local : 1;
    size_request(&co.memory, "--memory", "hold (weights, gradients, optimizer state, a batch's activations, the data)",
                 need.memory_mib * replicas, 2, &ta, memory);
    size_request(&co.disk, "--disk", "write (its checkpoints, final weights and data)", need.disk_mib, 1, &ta, disk);
    note_data_transfer(&co, &ta, dataset);
    ptrain_given = co.ptrain;
  }

  char ptrain[PATH_MAX];
  if (ptrain_path(ptrain_given, ptrain, sizeof ptrain)) return pt_cli_fail("jobscript");
  /* The "wrote" line, to a full disk too, is an error: main checks. */
  return slurm ? run_slurm(&so, ptrain, argc, argv, train, ntrain) : run_condor(&co, ptrain, argc, argv, train, ntrain);
}

/* ptrain train: the run goes through the library's API (include/ptrain.h):
 * the flags (train_args.c) fill a pt_config. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/train_args.h"
#include "comm/comm.h"
#include "train/trainer.h"
#include "util/stop.h"
#include "util/error.h"

/* SIGTERM (Slurm's time limit and preemption, HTCondor's eviction),
 * SIGINT (Ctrl-C) and SIGUSR1 (sbatch --signal): finish the step, write a
 * checkpoint, exit PT_EXIT_CHECKPOINTED. A second Ctrl-C quits at once;
 * the checkpoint being written is then the old one still (files are
 * replaced by rename). Only async-signal-safe calls here. */
/* Whether a progress bar may be on stderr's current line: the message
 * then starts a line of its own. Set before the handler is installed. */
static volatile sig_atomic_t bar_on_stderr;
/* One process still starting (reading the model and the data): a signal
 * then ends the start, and there is no step to checkpoint. */
static volatile sig_atomic_t starting_alone;

static void say(const char *msg, size_t len) {
  ssize_t w = write(STDERR_FILENO, msg, len);
  (void)w;
}

static void on_stop_signal(int sig) {
  const int n = pt_train_stop_request(sig);
  if (n > 1 && sig == SIGINT) {
    static const char quit[] = "\nptrain: Ctrl-C again: quitting now, without a checkpoint of this step\n",
                      done[] = "\nptrain: Ctrl-C again: quitting now; the checkpoint is written (exit status 85: resume with --resume)\n";
    /* Written already: the status says so, as the first Ctrl-C's would
     * have, so a requeue that looks for 85 resumes it. */
    if (pt_train_stop_is_saved()) {
      say(done, sizeof done - 1);
      _exit(PT_EXIT_CHECKPOINTED);
    }
    say(quit, sizeof quit - 1);
    _exit(128 + SIGINT);
  }
  if (n == 1 && starting_alone) {
    static const char msg[] = "ptrain: signal received: stopping before training begins\n";
    say(msg, sizeof msg - 1);
  } else if (n == 1) {
    static const char msg[] = "\nptrain: signal received: stopping after this step to write a checkpoint",
                      ctrl_c[] = " (Ctrl-C again quits at once)";
    say(bar_on_stderr ? msg : msg + 1, bar_on_stderr ? sizeof msg - 1 : sizeof msg - 2);
    if (sig == SIGINT) say(ctrl_c, sizeof ctrl_c - 1);
    say("\n", 1);
  }
}

/* Whether the start-up goes on: a signal before training in one process
 * ends it at the next stage. Ranks of an MPI world go on instead: one
 * leaving alone would leave the others waiting, and the request, kept
 * until the run answers it, stops them all after the first step,
 * checkpointed. */
static int starting(pt_status st, const pt_comm *comm) { return st == PT_OK && (comm || !pt_train_stop_signal()); }

static void catch_stop_signals(int progress) {
  bar_on_stderr = progress;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; /* the loader's reads and the collectives go on */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
}

/* The status a signal after the run ends the process with (set before
 * the handler is installed). */
static volatile sig_atomic_t late_status;

static void on_late_signal(int sig) {
  (void)sig;
  static const char stopped[] =
      "\nptrain: signal while exiting: the run stopped with its checkpoint written (exit status 85: resume with "
      "--resume)\n",
                    finished[] = "\nptrain: signal while exiting: the run had finished (exit status 0)\n";
  if (late_status == PT_EXIT_CHECKPOINTED) say(stopped, sizeof stopped - 1);
  else say(finished, sizeof finished - 1);
  _exit(late_status);
}

/* Once the run is over there is no step to finish nor checkpoint to
 * write: a signal then ends the process at once, so that a batch system's
 * SIGTERM ends one that hangs while tearing down (in a library's exit
 * handlers) rather than only printing a promise. It ends with the status
 * the run earned: 85 where it stopped checkpointed, which a requeue looks
 * for, 0 where it finished (its weights saved); the default action's 130
 * or 143 would say the checkpoint is the one before, or that the job
 * failed. status < 0 (a run that failed): the default action. */
static void release_stop_signals(int status) {
  fflush(NULL); /* what was printed stays, whatever comes */
  late_status = status;
  void (*late)(int) = status >= 0 ? on_late_signal : SIG_DFL;
  signal(SIGTERM, late);
  signal(SIGINT, late);
  signal(SIGUSR1, late);
}

/* After the model and the flags are checked, before the data is read:
 * whether every rank passed. A rank that failed alone (its flags, its
 * model file) would otherwise leave the others waiting for it in the first
 * collective until --timeout. Where some failed, the lowest of them says
 * why, for all; every rank then stops with its status (the usage error's
 * 2, else 1). *said: 1 where another rank says it, 2 where this one
 * does (and no rank needs taking down). Fails
 * only where the ranks cannot agree (one is dead, or hangs). */
static pt_status checks_agreed(pt_comm *comm, pt_status *st, int *usage, int *said) {
  int first, kind;
  const pt_status agreed = pt_comm_agree_checks(comm, *st == PT_OK ? 0 : *usage ? 1 : 2, &first, &kind, NULL, 0);
  if (first >= 0 && first != comm->rank) {
    *said = 1;
    *usage = kind == 1;
    if (*st == PT_OK) *st = *usage ? PT_ERR_ARG : PT_ERR_COMM;
  } else if (first >= 0) {
    *said = 2; /* by this rank, for all: no abort needed, every rank stops */
    if (comm->rank) {
      char why[PT_ERROR_MAX];
      snprintf(why, sizeof why, "%s", pt_error_message());
      pt_fail(*st, "rank %d: %s", comm->rank, why);
    }
  }
  return agreed;
}

int pt_cmd_train(int argc, char **argv) {
  pt_train_args ta;
  int help;
  int rc = pt_train_args_parse(argc, argv, 2, &ta, &help);
  if (rc) return rc;
  if (help) {
    pt_train_args_print_help();
    return 0;
  }
  pt_config c = ta.c;
  const char *model = ta.model, *model_file = ta.model_file, *dataset = ta.dataset, *data_dir = ta.data_dir;
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
  if (ddp && pt_comm_mpi_launcher_ranks() == 1) {
    fprintf(stderr, "ptrain train: error: --parallel ddp with 1 rank: there is no other to sum gradients with; start "
                    "at least 2 (mpirun -np 2 ...), or train without --parallel\n");
    return PT_USAGE_ERROR;
  }
  if (ddp && !pt_comm_mpi_launched()) {
    fprintf(stderr, "ptrain train: error: --parallel ddp runs one process per rank; start them with a launcher:\n"
                    "  mpirun -np 2 ptrain train --parallel ddp ...   (one machine or a hostfile)\n"
                    "  srun --mpi=pmix ptrain train --parallel ddp ... (inside a Slurm job)\n"
                    "or use --parallel dp --workers N for workers that are threads of one process\n");
    return PT_USAGE_ERROR;
  }
  /* Before the slow start-up (MPI, the model, the data): a preemption then
   * must still end with the status a requeueing script looks for, not the
   * default action's 143. */
  starting_alone = !ddp && !pt_comm_mpi_launched();
  catch_stop_signals(c.progress && !c.quiet);
  /* The MPI world first, so that a rank failing to load its data takes the
   * others down at once instead of leaving them waiting. Stages are MPI
   * ranks when a launcher started several processes. */
  pt_comm *comm = NULL;
  if ((ddp || (staged && pt_comm_mpi_launched())) && pt_comm_mpi_create(&comm, c.timeout_s) != PT_OK)
    return pt_cli_fail("train");
  if (comm) catch_stop_signals(c.progress && !c.quiet); /* again: MPI_Init may have put handlers of its own */
  c.log = stdout; /* rank 0 reports */
  pt_net *net = NULL;
  pt_data *train = NULL, *test = NULL;
  pt_run *run = NULL;
  pt_status st = model_file ? pt_net_spec_file(model_file, &net) : pt_net_preset(model ? model : "mnist-cnn", &net);
  /* Settings that do not fit together or the model are usage errors, and
   * said before the data is read; what goes wrong from here on is not. */
  int usage = 0;
  pt_train_plan plan;
  if (st == PT_OK) usage = (st = pt_run_check(net, dataset, &c, comm, &plan)) == PT_ERR_ARG;
  /* Stages of one replica sum no gradients between workers: a bucket size
   * there would be a setting that took no effect. */
  if (st == PT_OK && plan.staged && plan.replicas == 1 && ta.bucket_mb >= 0) {
    st = pt_fail(PT_ERR_ARG, "--bucket-mb sizes the gradient buckets that data-parallel replicas sum; these %d "
                 "stages are one replica (under mpirun, --stages S below the ranks makes replicas)", plan.stages);
    usage = 1;
  }
  int said = 0; /* all ranks stop at the checks: 1 another rank says why, 2 this one */
  if (comm && comm->size > 1 && checks_agreed(comm, &st, &usage, &said) != PT_OK) {
    /* A rank that did not answer: MPI_Finalize would wait for it too. */
    pt_cli_fail("train");
    pt_comm_abort(comm, pt_error_message());
    pt_comm_destroy(comm); /* where the communicator cannot abort */
    pt_net_free(net);
    pt_comm_mpi_finalize();
    return 1;
  }
  if (starting(st, comm)) st = pt_data_load(dataset ? dataset : pt_net_dataset(net), data_dir, PT_TRAIN, &train);
  if (starting(st, comm)) st = pt_data_load(dataset ? dataset : pt_net_dataset(net), data_dir, PT_TEST, &test);
  if (starting(st, comm)) {
    /* A dataset the model cannot take is a flag that does not fit, though
     * it shows only once the images are there. */
    int mc, mh, mw;
    pt_net_shape(net, &mc, &mh, &mw, NULL);
    for (int split = 0; split < 2 && st == PT_OK; split++) {
      const pt_data *d = split ? test : train;
      const pt_dataset *ds = &d->ds;
      const pt_dataset_kind kind = (pt_dataset_kind)d->kind;
      const char *name = pt_dataset_kind_name(kind), *which = split ? "test" : "training";
      /* Images not of the dataset's own size are files that are not what
       * their names say (damaged, or another dataset's), not a flag. */
      const int usual_c = kind == PT_DS_CIFAR10 ? 3 : 1, usual_hw = kind == PT_DS_CIFAR10 ? 32 : 28;
      const int fits = ds->c == mc && ds->h == mh && ds->w == mw;
      if (!fits && (ds->c != usual_c || ds->h != usual_hw || ds->w != usual_hw)) {
        st = pt_fail(PT_ERR_FORMAT, "the %s %s images in %s are %dx%dx%d, where %s's are %dx%dx%d: those files "
                     "are not %s's", name, which, d->dir ? d->dir : "the data directory", ds->c, ds->h, ds->w, name,
                     usual_c, usual_hw, usual_hw, name);
      } else if (!fits) {
        st = pt_fail(PT_ERR_ARG, "model %s takes %dx%dx%d input but the %s images are %dx%dx%d (%s)",
                     pt_net_name(net), mc, mh, mw, name, ds->c, ds->h, ds->w,
                     dataset ? "--dataset names a dataset the model cannot take" : "use --dataset");
        usage = 1;
      } else {
        /* Labels past the model's outputs: the same misfit, said as early
         * (the shapes fit: train's check of the two says only that). */
        usage = (st = pt_train_check_fit(&net->spec, ds, name, which, "")) != PT_OK;
      }
    }
    /* A batch the split cannot fill with --drop-last: a flag again. */
    if (st == PT_OK) usage = (st = pt_train_check_batches(&plan, c.drop_last, train->ds.n)) != PT_OK;
  }
  if (starting(st, comm)) st = pt_run_create(net, train, test, &c, &run);
  const int stopped_early = st == PT_OK && !starting(st, comm);
  if (st == PT_OK && run) {
    run->comm = comm; /* the run's from here on */
    comm = NULL;
  }
  starting_alone = 0; /* from here a signal stops after a step, checkpointed */
  if (st == PT_OK && !stopped_early) st = pt_run_train(run);
  const int stopped = st == PT_OK && run ? pt_run_result(run)->stopped : PT_RUN_COMPLETE;
  release_stop_signals(stopped_early || stopped == PT_RUN_STOPPED_SIGNAL || stopped == PT_RUN_STOPPED_CHECKPOINT
                           ? PT_EXIT_CHECKPOINTED
                       : st == PT_OK && stopped == PT_RUN_COMPLETE ? 0
                                                                   : -1);
  rc = 0;
  if (st != PT_OK && usage) {
    rc = said == 1 ? PT_USAGE_ERROR : pt_cli_usage_fail("train"); /* every rank knows, and stops alike */
  } else if (st != PT_OK && said) {
    rc = said == 1 ? 1 : pt_cli_fail("train");
  } else if (st != PT_OK && run && run->failed_alike) {
    /* Ranks started with different flags: every rank has the same message,
     * and rank 0 says it for all. */
    if (!run->comm || !run->comm->rank) pt_cli_fail("train");
    rc = PT_USAGE_ERROR;
  } else if (st != PT_OK && run && run->stop_signal > 0 && run->stop_saved) {
    /* The checkpoint written, then an error (a metrics line that could
     * not be written), which says so: 1, and the signal said with it. */
    fprintf(stderr, "ptrain train: error: after %s: %s\n", strsignal(run->stop_signal), pt_error_message());
    rc = 1;
  } else if (st != PT_OK && run && run->stop_signal > 0) {
    /* The signal's message promised a checkpoint: say that there is none,
     * and exit 1, not 85, on which a requeueing script would resume. */
    fprintf(stderr, "ptrain train: error: no checkpoint written after %s: %s\n", strsignal(run->stop_signal),
            pt_error_message());
    rc = 1;
    pt_comm *world = run->comm;
    if (world) pt_comm_abort(world, pt_error_message());
  } else if (st != PT_OK) {
    rc = pt_cli_fail("train");
    /* The other ranks wait on this one: take them down rather than let them hang. */
    pt_comm *world = run ? run->comm : comm;
    if (world) pt_comm_abort(world, pt_error_message());
  }
  const int rank0 = !run || !run->comm || !run->comm->rank; /* rank 0 speaks for all */
  pt_comm_destroy(comm);
  pt_result r = {0};
  if (st == PT_OK && !stopped_early) r = *pt_run_result(run);
  const int sig = stopped_early ? pt_train_stop_signal() : run ? run->stop_signal : 0;
  pt_run_free(run);
  pt_data_free(train);
  pt_data_free(test);
  pt_net_free(net);
  /* The closing line before MPI_Finalize, which the ranks pass together:
   * once past it, a rank exiting 85 first has mpirun kill the others,
   * rank 0 before it said where the checkpoint is. */
  if (!rc && stopped_early) {
    fprintf(stderr,
            "ptrain: stopped by %s before training began; nothing to checkpoint (exit status %d: run it again; "
            "the checkpoints in %s/, if any, are as they were)\n",
            strsignal(sig), PT_EXIT_CHECKPOINTED, c.checkpoint_dir);
    rc = PT_EXIT_CHECKPOINTED;
  } else if (!rc && r.stopped == PT_RUN_STOPPED_CHECKPOINT) {
    if (rank0)
      fprintf(stderr, "ptrain: checkpointed after step %lld in %s/ (--exit-after-checkpoint; exit status %d: continue with --resume)\n",
              (long long)r.steps, c.checkpoint_dir, PT_EXIT_CHECKPOINTED);
    rc = PT_EXIT_CHECKPOINTED;
  } else if (!rc && r.stopped == PT_RUN_STOPPED_SIGNAL) {
    /* sig 0: the signal reached another worker */
    if (rank0)
      fprintf(stderr,
              "ptrain: stopped by %s after step %lld; checkpoint in %s/ (exit status %d: resume with --resume)\n",
              sig > 0 ? strsignal(sig) : "a signal to another worker", (long long)r.steps,
              c.checkpoint_dir, PT_EXIT_CHECKPOINTED);
    rc = PT_EXIT_CHECKPOINTED;
  }
  fflush(stderr);
  pt_comm_mpi_finalize();
  return rc;
}

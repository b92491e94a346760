/* ptrain scale: does parallelism pay for this model on this machine?
 *
 * A sweep (strategies x workers x threads x batch sizes x optimizers) is
 * expanded into configurations (sweep.c); each one runs for real as a
 * child `ptrain train` (under mpirun for ddp) twice, for a few steps and
 * for more, and the difference of the two runs' --profile lines is its
 * steady state: start-up, loading and the first steps cancel (run.c).
 * Each configuration is then compared with one worker at the same threads,
 * batch and optimizer, and judged in plain words (verdict.c).
 */
#ifndef PT_SCALE_SCALE_H
#define PT_SCALE_SCALE_H

#include <stddef.h>

#include "util/error.h"

typedef enum { PT_SCALE_NONE, PT_SCALE_DP, PT_SCALE_DDP, PT_SCALE_PIPELINE } pt_scale_strategy;

const char *pt_scale_strategy_name(pt_scale_strategy s);

#define PT_SCALE_MAX_LIST 16
#define PT_SCALE_MAX_CURVE 256 /* evaluations kept per configuration */

/* What to sweep; every list has at least one entry. */
typedef struct {
  pt_scale_strategy strategies[4];
  int nstrategies;
  int workers[PT_SCALE_MAX_LIST], nworkers;
  int threads[PT_SCALE_MAX_LIST], nthreads;
  int batches[PT_SCALE_MAX_LIST], nbatches; /* 0: the model's own */
  const char *optimizers[PT_SCALE_MAX_LIST]; /* NULL: the model's own */
  int noptimizers;
  int per_worker; /* batches are per worker (each worker keeps it); else global (split among workers) */
  int max_stages; /* pipeline: the model's layers that a stage can hold alone (0: no bound known) */
} pt_scale_sweep;

/* One configuration and, once run, what it measured. */
typedef struct {
  pt_scale_strategy strategy;
  int workers, threads;
  int batch;            /* global: all workers' samples in one step (0: the model's own) */
  int worker_batch;     /* what each worker's --batch-size is (0: the model's own) */
  const char *optimizer; /* NULL: the model's own */
  int runnable;         /* 0: skipped, why says why */
  int ran;              /* measured */
  char why[640];        /* why it was skipped or failed */
  /* steady state, from the two runs' difference */
  double images_per_s, ms_per_step;
  double data_ms, forward_ms, backward_ms, optimizer_ms, comm_ms, other_ms;
  double bubble;        /* pipelines: the stages' idle share; NaN otherwise */
  double peak_rss_mb;   /* of rank 0's process, the longer run */
  int steps_measured;   /* the difference of the two runs' steps (more than --steps where those took too little time) */
  int cores;            /* usable where it ran (a submitted task's machine); 0: the judging machine's */
  int rough;            /* the figures are not to be trusted (trust.c): rough_why says why */
  char rough_why[400];
  /* against the baseline (one worker, same threads, batch, optimizer) */
  int baseline;         /* index of the baseline configuration, or -1 */
  double speedup, efficiency;
  /* with a target accuracy: the third run's evaluations and the time to it */
  double target_s;      /* seconds from the start of training to the target; NaN: not reached */
  int curve_n;
  double curve_t[PT_SCALE_MAX_CURVE], curve_loss[PT_SCALE_MAX_CURVE], curve_acc[PT_SCALE_MAX_CURVE];
  char verdict[1200];
} pt_scale_config;

/* Splits "1,2,4" into out (at most PT_SCALE_MAX_LIST positive integers in
 * [lo, hi]); fails naming flag and the bad entry. */
pt_status pt_scale_parse_ints(const char *flag, const char *text, int lo, int hi, int *out, int *n);
/* "none,dp,ddp,pipeline"; each list refuses empty entries, a trailing
 * comma and an entry given twice. */
pt_status pt_scale_parse_strategies(const char *text, pt_scale_sweep *sw);
/* "sgd,adam": sw->optimizers point to static names. */
pt_status pt_scale_parse_optimizers(const char *text, pt_scale_sweep *sw);

/* The configurations of sw (malloc'd, *n of them). cores: this machine's;
 * have_mpi: mpirun and an MPI build are there; gpus: -1 for a CPU sweep,
 * else the GPUs there are (gpu_why: why none, where 0). Configurations
 * that cannot run are kept, runnable 0, with the reason. */
pt_status pt_scale_expand(const pt_scale_sweep *sw, int cores, int have_mpi, int gpus, const char *gpu_why,
                          pt_scale_config **out, int *n);

/* How a configuration's child runs. */
typedef struct {
  const char *self;        /* this ptrain */
  const char *mpirun;      /* for ddp */
  const char *model, *model_file, *data_dir, *device;
  char **train_args;       /* passed through to every run */
  int ntrain_args;
  int steps_short, steps_long; /* the two runs' --max-steps */
  double time_limit_s;     /* a run that takes longer is stopped and the configuration marked failed */
  double target_accuracy;  /* > 0: a third run trains until the test accuracy reaches it */
  int target_epochs;       /* at most this many epochs for it */
  int eval_every;          /* evaluating every this many steps */
  const char *tmp_dir;     /* for the runs' metrics and logs */
} pt_scale_runner;

/* Runs c twice and fills its measurements; a failed run marks c with the
 * child's last error line rather than failing the sweep. */
void pt_scale_run(const pt_scale_runner *r, pt_scale_config *c);
/* Makes this process the subreaper of the runs' processes: ranks that
 * outlive their mpirun (ended past --time-limit) become its children, for
 * pt_scale_run to wait for or kill before the next configuration. */
void pt_scale_adopt_orphans(void);
/* SIGINT, SIGTERM and SIGHUP end the sweep: the run under way is ended
 * (its ranks waited for, as past --time-limit), and pt_scale_run returns
 * with the configuration not measured. pt_scale_stop_signal says which
 * came (0: none). */
void pt_scale_catch_signals(void);
int pt_scale_stop_signal(void);
/* Removes path and everything under it; 0 when all is gone. */
int pt_scale_remove_tree(const char *path);

/* The phases of a step, in this order: waiting for data, forward,
 * backward, optimizer, communication, other. */
#define PT_SCALE_NPHASES 6
/* Splits a step of ms_per_step into its phases (out_ms, ms each) from the
 * seconds the two runs spent in each (short_s, long_s) and the difference
 * of their steps: the differences per step where none is negative, else
 * the longer run's shares of ms_per_step. They add up to the step either
 * way (phases.c says why). */
void pt_scale_phases(const double short_s[PT_SCALE_NPHASES], const double long_s[PT_SCALE_NPHASES], double steps,
                     double ms_per_step, double out_ms[PT_SCALE_NPHASES]);

/* Whether measurements can be trusted (trust.c). A sweep's figures are
 * differences of short runs on a machine that may be busy; where the noise
 * can outweigh what is measured, the configuration is "rough": its verdict
 * says so instead of judging, and no recommendation rests on it. */
#define PT_SCALE_MIN_MEASURED_S 0.25 /* the measured steps' seconds, all together, at least */
#define PT_SCALE_MAX_EFFICIENCY 1.10 /* above: faster than the workers can make it */
#define PT_SCALE_SOONER 1.10 /* time to accuracy: more workers must reach it this much sooner */

typedef enum {
  PT_SCALE_STEADY,       /* the difference of the runs is the steady state */
  PT_SCALE_ROUGH_SHORT,  /* a difference, but of too little time to outweigh the noise */
  PT_SCALE_ROUGH_NO_DIFF /* the longer run took no longer: its own figures, start-up included */
} pt_scale_steadiness;

/* The two runs' totals: seconds, images and steps of their profile lines. */
typedef struct {
  double seconds, images;
  int steps;
} pt_scale_totals;

/* How far the difference of the runs shorter and longer can be trusted;
 * the reason, where not, into why (empty otherwise). */
pt_scale_steadiness pt_scale_steadiness_of(const pt_scale_totals *shorter, const pt_scale_totals *longer, char *why,
                                           size_t len);
/* How many steps to measure for PT_SCALE_MIN_MEASURED_S twice over, at the
 * rate the two runs showed, at most PT_SCALE_MAX_STEPS_FACTOR times the
 * steps asked for: measured, when those were enough, or when the runs
 * show no rate to go by. */
#define PT_SCALE_MAX_STEPS_FACTOR 100
int pt_scale_steps_for(const pt_scale_totals *shorter, const pt_scale_totals *longer, int measured);

/* 1 where a speed-up over one worker is more than workers workers can
 * give (efficiency above PT_SCALE_MAX_EFFICIENCY): noise, not speed; the
 * reason into why. 0 otherwise, why empty. */
int pt_scale_impossible_speedup(double speedup, int workers, char *why, size_t len);

/* Speed-ups, efficiencies and each configuration's verdict, then the one
 * line recommendation into rec. cores: this machine's; target: the
 * accuracy the time-to-accuracy runs aimed at (0: none), which then decides
 * the recommendation. */
void pt_scale_judge(pt_scale_config *c, int n, int cores, double target, char *rec, size_t rec_len);

/* One configuration's result as a file (ptrain scale --task), and back
 * (--collect): a missing file leaves c not run with the reason; a file of
 * another configuration, or of the same one of another sweep (another
 * model, batch or optimizer), is an error. model: the sweep's preset or
 * spec file. */
pt_status pt_scale_result_write(const char *path, int index, const char *model, const pt_scale_config *c);
pt_status pt_scale_result_read(const char *path, int index, const char *model, pt_scale_config *c);

/* What a submission adds to its scheduler's requests: more #SBATCH lines
 * (slurm), more submit-file lines (htcondor), and each configuration's
 * request_memory in GB (htcondor; NULL: 4GB each). */
typedef struct {
  const char *const *sbatch;
  int nsbatch;
  const char *const *submit;
  int nsubmit;
  const int *memory_gb; /* [n] */
} pt_scale_job_extra;

/* The submission of a sweep as one cluster job: DIR/sweep.args (the
 * sweep's arguments, one a line), and for slurm DIR/scale.sbatch (a job
 * array, one task per configuration, each asking for the most any needs),
 * for htcondor DIR/scale.sub, DIR/scale-task.sh and DIR/tasks.txt (one
 * job per configuration with its own request_cpus, request_gpus and
 * request_memory). A DIR that already holds a sweep is refused unless
 * force, which also removes that sweep's results: --collect would report
 * them as this one's. */
pt_status pt_scale_write_jobs(const char *dir, const char *kind, const char *self, char **args, int nargs,
                              const pt_scale_config *c, int n, int gpu, int force, const pt_scale_job_extra *x);

/* DIR/speedup.png and .svg (speed-up against workers, one line per
 * strategy and setting, and the ideal), and DIR/report.md embedding the
 * chart, with the table, the verdicts and the recommendation. */
pt_status pt_scale_report(const char *dir, const char *title, const pt_scale_config *c, int n, double target,
                          const char *rec);

#endif

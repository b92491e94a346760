/* Running one configuration for real: `ptrain train` as a child process
 * (under mpirun for ddp), twice, and its steady state from the difference
 * of the two runs' --profile metrics lines. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "scale/scale.h"
#include "train/config_bounds.h"
#include "util/timer.h"

extern char **environ;

typedef struct {
  double images, seconds, data_s, forward_s, backward_s, optimizer_s, comm_s, other_s, bubble, peak_rss_mb;
  int steps;
} profile_line;

static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The last "profile" line of a metrics file; 0 when there is none. The
 * per-step times become totals, so that two runs can be subtracted. */
static int read_profile(const char *path, profile_line *p) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[8192];
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    cJSON *o = cJSON_Parse(line);
    const cJSON *ev = o ? cJSON_GetObjectItemCaseSensitive(o, "event") : NULL;
    if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "profile")) {
      const double steps = num(o, "steps");
      p->steps = (int)steps;
      p->images = num(o, "images");
      p->seconds = num(o, "seconds");
      p->data_s = num(o, "data_ms") * steps / 1e3;
      p->forward_s = num(o, "forward_ms") * steps / 1e3;
      p->backward_s = num(o, "backward_ms") * steps / 1e3;
      p->optimizer_s = num(o, "optimizer_ms") * steps / 1e3;
      p->comm_s = num(o, "comm_ms") * steps / 1e3;
      p->other_s = num(o, "other_ms") * steps / 1e3;
      p->bubble = num(o, "bubble");
      p->peak_rss_mb = num(o, "peak_rss_mb");
      found = steps > 0 && isfinite(p->seconds);
    }
    cJSON_Delete(o);
  }
  fclose(f);
  return found;
}

/* The "eval" lines and the "target" line of a run to a target accuracy. */
static void read_curve(const char *path, pt_scale_config *c) {
  c->curve_n = 0;
  c->target_s = NAN;
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    cJSON *o = cJSON_Parse(line);
    const cJSON *ev = o ? cJSON_GetObjectItemCaseSensitive(o, "event") : NULL;
    if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "eval") && c->curve_n < PT_SCALE_MAX_CURVE) {
      c->curve_t[c->curve_n] = num(o, "seconds");
      c->curve_loss[c->curve_n] = num(o, "test_loss");
      c->curve_acc[c->curve_n] = num(o, "test_acc");
      c->curve_n++;
    } else if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "target") &&
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "reached"))) {
      c->target_s = num(o, "seconds");
    }
    cJSON_Delete(o);
  }
  fclose(f);
}

/* The last line of the child's log that says what went wrong. */
static void last_error(const char *log, char *out, size_t len) {
  FILE *f = fopen(log, "r");
  snprintf(out, len, "it failed without a message");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (strcasestr(line, "error") || strstr(line, "ptrain train:") || strstr(line, "failed"))
      snprintf(out, len, "%.560s", line);
  }
  fclose(f);
}

/* A child's argv: the sweep's own words (at most FIXED_WORDS, of which
 * at most 12 numbers) and then every TRAIN_ARGS word, all of them. */
#define FIXED_WORDS 64
typedef struct {
  const char **v; /* FIXED_WORDS + TRAIN_ARGS + 1 */
  int n, cap;
  char nums[12][24];
  int nnums;
} argv_buf;

static void add(argv_buf *a, const char *s) {
  assert(a->n < a->cap); /* sized for every word run_once adds */
  a->v[a->n++] = s;
}
static void add_int(argv_buf *a, int x) {
  assert(a->nnums < 12);
  snprintf(a->nums[a->nnums], sizeof a->nums[0], "%d", x);
  add(a, a->nums[a->nnums++]);
}

/* Ranks that outlive their mpirun: this process is their subreaper
 * (pt_scale_adopt_orphans), so they become its children. Waits for them
 * (a SIGTERM'd rank is writing the checkpoint its signal asked for, into
 * the sweep's temporary directory) until deadline, then kills the rest:
 * none may write there after the sweep has removed it, nor take the cores
 * from the next configuration. */
static void reap_orphans(double deadline) {
  for (;;) {
    const pid_t p = waitpid(-1, NULL, WNOHANG);
    if (p < 0) return; /* ECHILD: none left */
    if (p > 0) continue;
    if (pt_now() >= deadline) break;
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  /* Past the deadline: this process's children, from /proc. */
  DIR *d = opendir("/proc");
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char path[300], line[512];
    const long pid = strtol(e->d_name, NULL, 10);
    if (pid <= 0) continue;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    const char *close_paren = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
    fclose(f);
    long ppid = 0;
    if (close_paren && sscanf(close_paren + 1, " %*c %ld", &ppid) == 1 && ppid == (long)getpid())
      kill((pid_t)pid, SIGKILL);
  }
  if (d) closedir(d);
  while (waitpid(-1, NULL, 0) > 0) {
  }
}

void pt_scale_adopt_orphans(void) { prctl(PR_SET_CHILD_SUBREAPER, 1); }

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) {
  if (!stop_signal) stop_signal = sig;
}

void pt_scale_catch_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

int pt_scale_stop_signal(void) { return stop_signal; }

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int pt_scale_remove_tree(const char *path) {
  if (access(path, F_OK) != 0 && errno == ENOENT) return 0;
  return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Ends a run past --time-limit. mpirun is asked with SIGTERM, which it
 * passes to its ranks before it exits: killed outright, it would leave
 * them running (each rank is in a process group of its own), taking the
 * cores from the next configuration measured. A plain run is killed. */
static void end_run(pid_t pid, int via_mpirun, int *status) {
  kill(pid, via_mpirun ? SIGTERM : SIGKILL);
  const double t0 = pt_now();
  int reaped = 0;
  while (via_mpirun && pt_now() - t0 < 10.0 && !reaped) {
    reaped = waitpid(pid, status, WNOHANG) == pid;
    struct timespec ts = {0, 20000000};
    if (!reaped) nanosleep(&ts, NULL);
  }
  if (!reaped) {
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
  }
  if (via_mpirun) reap_orphans(t0 + 10.0);
}

/* One child run of c for steps steps, metrics into metrics, output into
 * log. Returns 0 when it exited 0 in time; else fills why. */
static int run_once(const pt_scale_runner *r, const pt_scale_config *c, int steps, const char *metrics,
                    const char *log, char *why, size_t why_len) {
  char acc[32];
  argv_buf a = {.cap = FIXED_WORDS + r->ntrain_args};
  a.v = calloc((size_t)a.cap + 1, sizeof *a.v);
  if (!a.v) {
    snprintf(why, why_len, "out of memory for its command line");
    return 1;
  }
  if (c->strategy == PT_SCALE_DDP) {
    add(&a, r->mpirun);
    add(&a, "-np");
    add_int(&a, c->workers);
    /* Open MPI refuses root and more ranks than cores unless told; both
     * are what a sweep on a small machine does on purpose. */
    if (geteuid() == 0) add(&a, "--allow-run-as-root");
    add(&a, "--oversubscribe");
  }
  add(&a, r->self);
  add(&a, "train");
  if (r->model_file) {
    add(&a, "--model-file");
    add(&a, r->model_file);
  } else if (r->model) {
    add(&a, "--model");
    add(&a, r->model);
  }
  if (r->data_dir) {
    add(&a, "--data-dir");
    add(&a, r->data_dir);
  }
  const int gpu = r->device && !strncmp(r->device, "cuda", 4);
  if (r->device && !(gpu && (c->strategy == PT_SCALE_DP || c->strategy == PT_SCALE_PIPELINE))) {
    add(&a, "--device");
    add(&a, r->device);
  }
  add(&a, "--threads");
  add_int(&a, c->threads);
  if (c->worker_batch > 0) {
    add(&a, "--batch-size");
    add_int(&a, c->worker_batch);
  }
  if (c->optimizer) {
    add(&a, "--optimizer");
    add(&a, c->optimizer);
  }
  char devices[512] = "";
  switch (c->strategy) {
    case PT_SCALE_NONE: break;
    case PT_SCALE_DP:
      add(&a, "--parallel");
      add(&a, "dp");
      if (r->device && !strncmp(r->device, "cuda", 4)) { /* dp on GPUs: one worker per device */
        size_t used = 0;
        for (int i = 0; i < c->workers && used < sizeof devices; i++)
          used += (size_t)snprintf(devices + used, sizeof devices - used, "%scuda:%d", i ? "," : "", i);
        add(&a, "--devices");
        add(&a, devices);
      } else {
        add(&a, "--workers");
        add_int(&a, c->workers);
      }
      break;
    case PT_SCALE_DDP:
      add(&a, "--parallel");
      add(&a, "ddp");
      break;
    case PT_SCALE_PIPELINE: {
      add(&a, "--parallel");
      add(&a, "pipeline");
      add(&a, "--devices");
      size_t used = 0;
      const char *kind = r->device && !strncmp(r->device, "cuda", 4) ? "cuda" : "cpu";
      for (int i = 0; i < c->workers && used < sizeof devices; i++)
        used += (size_t)snprintf(devices + used, sizeof devices - used, "%s%s:%d", i ? "," : "", kind, i);
      add(&a, devices);
      break;
    }
  }
  if (steps > 0) {
    add(&a, "--max-steps");
    add_int(&a, steps);
    /* Epochs enough for the steps on any model and data set: the model's
     * default would end a long measurement at its last epoch. */
    add(&a, "--epochs");
    add_int(&a, PT_EPOCHS_MAX);
    add(&a, "--profile");
  } else { /* the run to the target accuracy */
    snprintf(acc, sizeof acc, "%g", r->target_accuracy);
    add(&a, "--target-accuracy");
    add(&a, acc);
    add(&a, "--epochs");
    add_int(&a, r->target_epochs);
    add(&a, "--eval-every");
    add_int(&a, r->eval_every);
  }
  add(&a, "--quiet");
  add(&a, "--metrics");
  add(&a, metrics);
  /* A directory of its own, empty: a run's checkpoints (TRAIN_ARGS may
   * ask for --save-model or --checkpoint-every) would make the next run
   * in it refuse to start over another run's. */
  char ckdir[4200];
  snprintf(ckdir, sizeof ckdir, "%s/checkpoints", r->tmp_dir);
  add(&a, "--checkpoint-dir");
  add(&a, ckdir);
  for (int i = 0; i < r->ntrain_args; i++) add(&a, r->train_args[i]);
  a.v[a.n] = NULL;

  unlink(metrics);
  if (pt_scale_remove_tree(ckdir) != 0) {
    snprintf(why, why_len, "cannot empty %.150s for its checkpoints: %s", ckdir, strerror(errno));
    free(a.v);
    return 1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  const int rc = posix_spawnp(&pid, a.v[0], &fa, NULL, (char *const *)a.v, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) snprintf(why, why_len, "cannot start %s: %s", a.v[0], strerror(rc));
  free(a.v);
  if (rc) return 1;
  const double t0 = pt_now();
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      snprintf(why, why_len, "lost its run: %s", strerror(errno));
      return 1;
    }
    if (stop_signal) {
      end_run(pid, c->strategy == PT_SCALE_DDP, &status);
      snprintf(why, why_len, "stopped by %s", strsignal(stop_signal));
      return 1;
    }
    if (pt_now() - t0 > r->time_limit_s) {
      end_run(pid, c->strategy == PT_SCALE_DDP, &status);
      if (steps > 0)
        snprintf(why, why_len, "a run of %d steps took more than %.0f s (--time-limit)", steps, r->time_limit_s);
      else
        snprintf(why, why_len, "the run to accuracy %g took more than %.0f s (--time-limit)", r->target_accuracy,
                 r->time_limit_s);
      return 1;
    }
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  if (c->strategy == PT_SCALE_DDP) reap_orphans(pt_now() + 10.0); /* ranks that outlived mpirun */
  /* Ctrl-C reaches the run too, which may have ended first (85, with a
   * checkpoint): the sweep's stop, not the run's failure. */
  if (stop_signal) {
    snprintf(why, why_len, "stopped by %s", strsignal(stop_signal));
    return 1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    char msg[561];
    last_error(log, msg, sizeof msg);
    if (WIFSIGNALED(status))
      snprintf(why, why_len, "its run died on signal %d: %s", WTERMSIG(status), msg);
    else
      snprintf(why, why_len, "its run exited %d: %s", WEXITSTATUS(status), msg);
    return 1;
  }
  return 0;
}

/* One run of a given length and the profile line it wrote; 1 with c->why
 * said where it failed. */
static int measure(const pt_scale_runner *r, pt_scale_config *c, int steps, const char *metrics, const char *log,
                   profile_line *p) {
  if (run_once(r, c, steps, metrics, log, c->why, sizeof c->why)) return 1;
  if (read_profile(metrics, p)) return 0;
  snprintf(c->why, sizeof c->why, "its run of %d steps wrote no profile line to %.150s", steps, metrics);
  return 1;
}

void pt_scale_run(const pt_scale_runner *r, pt_scale_config *c) {
  c->ran = 0;
  c->rough = 0;
  c->rough_why[0] = 0;
  c->bubble = NAN;
  if (!c->runnable) return;
  char metrics[2][4200], log[4200];
  profile_line p[2];
  const int steps[2] = {r->steps_short, r->steps_long};
  for (int i = 0; i < 2; i++) {
    snprintf(metrics[i], sizeof metrics[i], "%s/run%d.jsonl", r->tmp_dir, i);
    snprintf(log, sizeof log, "%s/run%d.log", r->tmp_dir, i);
    if (measure(r, c, steps[i], metrics[i], log, &p[i])) return;
  }
  /* Runs so short that noise (a busy machine, a slow first step) makes the
   * longer one no longer: its own figures, start-up included. Either way
   * short runs are marked rough, with the reason. */
  pt_scale_totals t0 = {p[0].seconds, p[0].images, p[0].steps}, t1 = {p[1].seconds, p[1].images, p[1].steps};
  pt_scale_steadiness steady = pt_scale_steadiness_of(&t0, &t1, c->rough_why, sizeof c->rough_why);
  /* Too little time measured (a small model's steps take a millisecond):
   * the longer run again, with as many steps as the steps measured need
   * for twice the minimum at the rate just seen, so a sweep of any model
   * measures enough without the user sizing --steps for each. */
  const int more = pt_scale_steps_for(&t0, &t1, r->steps_long - r->steps_short);
  if (steady == PT_SCALE_ROUGH_SHORT && more > r->steps_long - r->steps_short) {
    if (measure(r, c, r->steps_short + more, metrics[1], log, &p[1])) return;
    t1 = (pt_scale_totals){p[1].seconds, p[1].images, p[1].steps};
    steady = pt_scale_steadiness_of(&t0, &t1, c->rough_why, sizeof c->rough_why);
  }
  c->rough = steady != PT_SCALE_STEADY;
  if (steady == PT_SCALE_ROUGH_NO_DIFF) memset(&p[0], 0, sizeof p[0]);
  c->steps_measured = p[1].steps - p[0].steps;
  const double ds = p[1].seconds - p[0].seconds, di = p[1].images - p[0].images;
  const double dn = (double)(p[1].steps - p[0].steps);
  if (!(ds > 0) || !(di > 0) || !(dn > 0)) {
    snprintf(c->why, sizeof c->why, "its run measured nothing (%.3f s, %.0f images): raise --steps", ds, di);
    return;
  }
  c->images_per_s = di / ds;
  c->ms_per_step = 1e3 * ds / dn;
  const double s0[PT_SCALE_NPHASES] = {p[0].data_s, p[0].forward_s, p[0].backward_s,
                                       p[0].optimizer_s, p[0].comm_s, p[0].other_s};
  const double s1[PT_SCALE_NPHASES] = {p[1].data_s, p[1].forward_s, p[1].backward_s,
                                       p[1].optimizer_s, p[1].comm_s, p[1].other_s};
  double ms[PT_SCALE_NPHASES];
  pt_scale_phases(s0, s1, dn, c->ms_per_step, ms);
  c->data_ms = ms[0];
  c->forward_ms = ms[1];
  c->backward_ms = ms[2];
  c->optimizer_ms = ms[3];
  c->comm_ms = ms[4];
  c->other_ms = ms[5];
  c->bubble = p[1].bubble;
  c->peak_rss_mb = p[1].peak_rss_mb;
  c->ran = 1;
  c->why[0] = 0;
  c->target_s = NAN;
  if (r->target_accuracy > 0) {
    char m3[4200];
    snprintf(m3, sizeof m3, "%s/run2.jsonl", r->tmp_dir);
    snprintf(log, sizeof log, "%s/run2.log", r->tmp_dir);
    char why[sizeof c->why];
    if (run_once(r, c, 0, m3, log, why, sizeof why)) {
      snprintf(c->why, sizeof c->why, "the run to the target accuracy: %.560s", why);
      return; /* measured, but without a time to accuracy; the verdict says why */
    }
    read_curve(m3, c);
  }
}

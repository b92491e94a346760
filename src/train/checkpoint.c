/* Checkpoint files; see checkpoint.h for the layout and the atomicity
 * argument. Metadata values are strings (safetensors allows nothing else),
 * so numbers are printed with enough digits to round-trip. */
#include "train/checkpoint.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include "data/dataset.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "nn/spec_compare.h"

#define META_FMT_VERSION "1"
/* Both files carry a CRC-32 of their own bytes (safetensors.h): a
 * generation whose bytes changed after the save is skipped like a
 * truncated one, and eval and predict refuse it, rather than train or
 * answer with damaged weights. */
#define CRC_KEY "ptrain.crc32"

static pt_status mkdir_p(const char *dir) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
    return pt_fail(PT_ERR_ARG, "checkpoint directory path too long: %s", dir);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) && errno != EEXIST)
      return pt_fail_errno(PT_ERR_IO, "cannot create %s, for the checkpoint directory %s", buf, dir);
    *p = '/';
  }
  if (mkdir(buf, 0755) && errno != EEXIST)
    return pt_fail_errno(PT_ERR_IO, "cannot create the checkpoint directory %s (--checkpoint-dir)", buf);
  struct stat st;
  if (stat(buf, &st) || !S_ISDIR(st.st_mode))
    return pt_fail(PT_ERR_IO, "the checkpoint directory %s (--checkpoint-dir) exists and is not a directory", buf);
  return PT_OK;
}

pt_status pt_checkpoint_prepare_dir(const char *dir) {
  PT_TRY(mkdir_p(dir));
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/.ptrain-write-test.%d", dir, (int)getpid());
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return pt_fail_errno(PT_ERR_IO, "checkpoint directory %s is not writable", dir);
  close(fd);
  unlink(probe);
  return PT_OK;
}

/* Tensors the model keeps in panels are written in PyTorch's order from a
 * copy: *scratch points into room for them all (room_for), which lives
 * until the file is written. */
static pt_status add_tensor(pt_st_writer *w, const char *name, const pt_tensor_info *t, const float *data,
                            float **scratch) {
  if (t->panels) {
    pt_tensor_to_torch(t, data, *scratch);
    data = *scratch;
    *scratch += t->numel;
  }
  return pt_st_writer_add(w, name, PT_ST_F32, t->ndim, t->shape, data);
}

/* Room for copies tensors of each parameter kept in panels. */
static pt_status room_for(const pt_model *m, int copies, float **room) {
  size_t n = 0;
  for (int i = 0; i < m->nparams; i++)
    if (m->params[i].panels) n += m->params[i].numel;
  *room = NULL;
  if (!n || !copies) return PT_OK;
  if (!(*room = malloc(sizeof(float) * n * (size_t)copies)))
    return pt_fail(PT_ERR_NOMEM, "checkpoint: out of memory for %zu floats of weights", n * (size_t)copies);
  return PT_OK;
}

static pt_status meta_i64(pt_st_writer *w, const char *key, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRId64, v);
  return pt_st_writer_meta(w, key, buf);
}

static pt_status meta_num(pt_st_writer *w, const char *key, double v) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.17g", v);
  return pt_st_writer_meta(w, key, buf);
}

/* dataset: what the weights were trained on, recorded where it is one of
 * ours (eval's test split and predict's class names follow it); NULL or
 * the caller's arrays: none. */
static pt_status write_model(const char *path, const pt_model *m, const char *spec_text, const char *dataset,
                             const char *id) {
  float *room;
  PT_TRY(room_for(m, 1, &room));
  pt_st_writer *w = pt_st_writer_new();
  if (!w) {
    free(room);
    return PT_ERR_NOMEM;
  }
  pt_status st = PT_OK;
  float *scratch = room;
  /* num_batches_tracked is an int64 scalar per batch-norm layer in PyTorch's state_dict */
  int64_t nbt[PT_MAX_LAYERS];
  for (int i = 0; i < m->nparams && st == PT_OK; i++)
    st = add_tensor(w, m->params[i].name, &m->params[i], m->hparam + m->params[i].offset, &scratch);
  for (int i = 0; i < m->nbuffers && st == PT_OK; i++)
    st = add_tensor(w, m->buffers[i].name, &m->buffers[i], m->hbuffer + m->buffers[i].offset, &scratch);
  for (int i = 0; i < m->nlayers && st == PT_OK; i++) {
    const pt_layer *L = &m->layers[i];
    if (L->spec.kind != PT_L_BATCHNORM2D) continue;
    char name[PT_NAME_LEN + 32];
    snprintf(name, sizeof name, "%s.num_batches_tracked", L->spec.name);
    nbt[i] = L->num_batches_tracked;
    st = pt_st_writer_add(w, name, PT_ST_I64, 0, NULL, &nbt[i]);
  }
  if (st == PT_OK) st = pt_st_writer_meta(w, "format", "pt");
  if (st == PT_OK) st = pt_st_writer_meta(w, "ptrain.model", m->spec.name);
  if (st == PT_OK && spec_text) st = pt_st_writer_meta(w, "ptrain.spec", spec_text);
  pt_dataset_kind kind;
  if (st == PT_OK && dataset && pt_dataset_kind_parse(dataset, &kind) == PT_OK)
    st = pt_st_writer_meta(w, "ptrain.dataset", pt_dataset_kind_name(kind));
  if (st == PT_OK) st = pt_st_writer_meta(w, "ptrain.checkpoint", id);
  if (st == PT_OK) st = pt_st_writer_checksum(w, CRC_KEY);
  if (st == PT_OK) st = pt_st_writer_write(w, path);
  pt_st_writer_free(w);
  free(room);
  return st;
}

static pt_status write_state(const char *path, const pt_model *m, const pt_optimizer *opt,
                             const pt_train_position *pos, const char *id) {
  float *room;
  PT_TRY(room_for(m, opt->nstate, &room));
  pt_st_writer *w = pt_st_writer_new();
  if (!w) {
    free(room);
    return PT_ERR_NOMEM;
  }
  pt_status st = PT_OK;
  float *scratch = room;
  char name[256];
  for (int k = 0; k < opt->nstate && st == PT_OK; k++)
    for (int i = 0; i < m->nparams && st == PT_OK; i++) {
      snprintf(name, sizeof name, "optimizer.%s.%s", m->params[i].name, opt->state_name[k]);
      st = add_tensor(w, name, &m->params[i], opt->hstate[k] + m->params[i].offset, &scratch);
    }
  const pt_opt_config *c = &opt->cfg;
  if (st == PT_OK) st = pt_st_writer_meta(w, "ptrain.state_version", META_FMT_VERSION);
  if (st == PT_OK) st = pt_st_writer_meta(w, "model", m->spec.name);
  if (st == PT_OK) st = pt_st_writer_meta(w, "optimizer", pt_opt_kind_name(c->kind));
  if (st == PT_OK) st = meta_i64(w, "optimizer_step", opt->step);
  if (st == PT_OK) st = meta_i64(w, "next_epoch", pos->next_epoch);
  if (st == PT_OK) st = meta_i64(w, "next_batch", pos->next_batch);
  if (st == PT_OK) st = meta_i64(w, "step", pos->step);
  if (st == PT_OK) {
    char seed[32];
    snprintf(seed, sizeof seed, "%" PRIu64, pos->seed);
    st = pt_st_writer_meta(w, "seed", seed);
  }
  if (st == PT_OK) st = meta_i64(w, "batch_size", pos->batch_size);
  if (st == PT_OK) st = meta_i64(w, "world", pos->world);
  if (st == PT_OK) st = meta_num(w, "epoch_loss_sum", pos->epoch_loss_sum);
  if (st == PT_OK) st = meta_i64(w, "epoch_samples", pos->epoch_samples);
  if (st == PT_OK) st = meta_num(w, "epoch_seconds", pos->epoch_seconds);
  if (st == PT_OK && pos->shuffle >= 0) st = meta_i64(w, "shuffle", pos->shuffle);
  if (st == PT_OK && pos->accum > 0) st = meta_i64(w, "accum_steps", pos->accum);
  if (st == PT_OK && pos->dataset[0]) st = pt_st_writer_meta(w, "dataset", pos->dataset);
  if (st == PT_OK && pos->train_samples >= 0) st = meta_i64(w, "train_samples", pos->train_samples);
  if (st == PT_OK && pos->eval_due) st = meta_i64(w, "eval_due", 1);
  if (st == PT_OK && pos->evaluated) st = meta_i64(w, "evaluated", 1);
  if (st == PT_OK) st = pt_st_writer_meta(w, "ptrain.checkpoint", id);
  if (st == PT_OK) st = pt_st_writer_checksum(w, CRC_KEY);
  if (st == PT_OK) st = pt_st_writer_write(w, path);
  pt_st_writer_free(w);
  free(room);
  return st;
}

/* ---- generations: DIR/step-NNNNNNNNNNNN/{model,state}.safetensors ---- */

/* Tests only: PTRAIN_TEST_KILL_AT=N kills the process (SIGKILL, as kill -9
 * or the end of a node would) at the Nth point of the saves below, so that
 * a test can stop a save at each of its steps and check what --resume
 * makes of the directory. */
static void fault_point(void) {
  static int target = -1, count;
  if (target < 0) {
    const char *e = getenv("PTRAIN_TEST_KILL_AT");
    target = e ? atoi(e) : 0;
  }
  if (target > 0 && ++count == target) raise(SIGKILL);
}

#define GEN_PREFIX "step-"

/* A generation's step from its directory name, or -1. */
static int64_t gen_step(const char *name) {
  if (strncmp(name, GEN_PREFIX, strlen(GEN_PREFIX))) return -1;
  const char *d = name + strlen(GEN_PREFIX);
  char *end;
  errno = 0;
  long long v = strtoll(d, &end, 10);
  return errno || end == d || *end || v < 0 ? -1 : (int64_t)v;
}

static int cmp_desc(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The generations in dir, newest first (malloc'd; *n of them). */
static int64_t *list_generations(const char *dir, int *n) {
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  int64_t *steps = NULL;
  int cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    const int64_t st = gen_step(e->d_name);
    if (st < 0) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *grown = realloc(steps, (size_t)cap * sizeof *steps);
      if (!grown) break;
      steps = grown;
    }
    steps[(*n)++] = st;
  }
  closedir(d);
  if (steps) qsort(steps, (size_t)*n, sizeof *steps, cmp_desc);
  return steps;
}

/* Removes a directory of plain files (a generation, or a partial one). */
static void remove_tree(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    char f[4400];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        unlink(f);
      }
    closedir(d);
  }
  rmdir(path);
}

/* How long another host's partial save may take before it counts as left
 * behind: no save of a live run lasts this long. */
#define PARTIAL_FOREIGN_SECONDS (6 * 3600)

/* This host's name as partial saves carry it: "localhost" where it has
 * none, or one that cannot be part of a file name. */
static void partial_host(char *out, size_t size) {
  if (gethostname(out, size - 1) || !out[0] || strchr(out, '/')) snprintf(out, size, "localhost");
  out[size - 1] = 0;
}

/* Whether .partial-step-N.PID@HOST was left by a process that is gone (or
 * by this one); host is this host's (partial_host). Only this host's PIDs
 * can be asked about: a checkpoint directory shared by nodes (NFS, where
 * locks may be missing) holds other hosts' saves too, whose PIDs mean
 * nothing here; those go only when old. A PID reused since leaves a save
 * until a later one: harmless. */
static int partial_is_stale(const char *dir, const char *name, const char *host) {
  const char *dot = strrchr(name, '.'), *at = strchr(name, '@');
  if (at) { /* the PID is the number before '@'; the host may hold dots */
    dot = at;
    while (dot > name && dot[-1] >= '0' && dot[-1] <= '9') dot--;
    dot--;
  }
  char *end;
  if (!dot || *dot != '.') return 1;
  errno = 0;
  const long pid = strtol(dot + 1, &end, 10);
  if (errno || end == dot + 1 || (at ? end != at : *end != 0) || pid <= 0 || pid > INT32_MAX) return 1;
  if (at && strcmp(at + 1, host)) {
    char path[4400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 && difftime(time(NULL), sb.st_mtime) > PARTIAL_FOREIGN_SECONDS;
  }
  if ((pid_t)pid == getpid()) return 1;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

#define LINK_PREFIX ".model.safetensors.link."

/* DIR/model.safetensors, the newest complete weights where PyTorch users
 * (and ptrain eval) look: a hard link to the generation's file, put in
 * place by a rename; a copy where the filesystem has no hard links. */
static pt_status publish_latest(const char *dir, const char *gen_model) {
  char tmp[4400], dst[4400];
  snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
  char host[256];
  partial_host(host, sizeof host);
  /* Named as a partial save is: one left by a kill -9 between the link
   * and the rename is swept as those are. */
  snprintf(tmp, sizeof tmp, "%s/" LINK_PREFIX "%d@%s", dir, (int)getpid(), host);
  unlink(tmp);
  if (link(gen_model, tmp) == 0) {
    fault_point(); /* 5: the link made, not yet renamed into place */
    if (rename(tmp, dst)) {
      unlink(tmp);
      return pt_fail_errno(PT_ERR_IO, "cannot rename %s to %s", tmp, dst);
    }
    return pt_sync_dir(dir);
  }
  FILE *in = fopen(gen_model, "rb");
  if (!in) return pt_fail_errno(PT_ERR_IO, "cannot read %s", gen_model);
  pt_atomic_file *out;
  pt_status st = pt_atomic_file_open(dst, &out);
  char buf[1 << 16];
  size_t got;
  while (st == PT_OK && (got = fread(buf, 1, sizeof buf, in)) > 0) st = pt_atomic_file_write(out, buf, got);
  if (st == PT_OK && ferror(in)) st = pt_fail_errno(PT_ERR_IO, "cannot read %s", gen_model);
  fclose(in);
  if (st == PT_OK) return pt_atomic_file_commit(out);
  pt_atomic_file_abort(out);
  return st;
}

/* The bytes a checkpoint takes: both files' tensors, headers aside. */
static uint64_t checkpoint_bytes(const pt_model *m, const pt_optimizer *opt) {
  return (uint64_t)(m->nparam_total * (size_t)(1 + opt->nstate) + m->nbuffer_total) * sizeof(float);
}

/* What a failed save leaves to resume from, said as it is: a user reading
 * "the previous checkpoint is kept" where there was none would count on it. */
static void kept_after_failure(const char *dir, char *out, size_t size) {
  int n;
  int64_t *steps = list_generations(dir, &n);
  char legacy[4400];
  snprintf(legacy, sizeof legacy, "%s/state.safetensors", dir);
  if (n > 0)
    snprintf(out, size, "the previous checkpoint, %s/" GEN_PREFIX "%012lld, is kept", dir, (long long)steps[0]);
  else if (!access(legacy, F_OK))
    snprintf(out, size, "the previous checkpoint, %s/model.safetensors and state.safetensors, is kept", dir);
  else
    snprintf(out, size, "%s holds no earlier checkpoint, so there is none to resume from", dir);
  free(steps);
}

static pt_status no_room(pt_status st, const char *path, const char *ckpt_dir, const pt_model *m,
                         const pt_optimizer *opt) {
  const int e = pt_error_errno(); /* the write's, whatever the cleanup did to errno since */
  if (e != ENOSPC && e != EDQUOT && e != EFBIG) return st;
  struct statvfs v;
  char kept[4600];
  const double need = (double)checkpoint_bytes(m, opt) / 1048576.0;
  struct rlimit lim;
  if (e == EFBIG && !getrlimit(RLIMIT_FSIZE, &lim) && lim.rlim_cur != RLIM_INFINITY) {
    /* Not a full disk: free space would not help, a higher limit would. */
    kept_after_failure(ckpt_dir, kept, sizeof kept);
    return pt_fail(PT_ERR_IO,
                   "%s: the checkpoint is larger than this process may write (its file-size limit, ulimit -f, is "
                   "%llu KiB): it needs about %.1f MiB; %s (raise the limit, or ask the batch system for a larger one)",
                   path, (unsigned long long)(lim.rlim_cur / 1024), need, kept);
  }
  /* Measured with the partial save removed: what a retry would have. */
  if (e == EFBIG || statvfs(ckpt_dir, &v)) return st;
  kept_after_failure(ckpt_dir, kept, sizeof kept);
  return pt_fail(PT_ERR_IO,
                 "%s: no space left for the checkpoint: it needs about %.1f MiB, %.1f MiB are free; %s (free space, "
                 "or pass --checkpoint-dir on a larger filesystem)",
                 path, need, (double)v.f_bavail * (double)v.f_frsize / 1048576.0, kept);
}

static int among(const pt_checkpoint_skipped *s, int64_t step) {
  for (int i = 0; s && i < s->n; i++)
    if (s->step[i] == step) return 1;
  return 0;
}

pt_status pt_checkpoint_save(const char *dir, const pt_model *m, const pt_optimizer *opt,
                             const pt_train_position *pos, const char *spec_text, int keep,
                             const pt_checkpoint_skipped *damaged) {
  PT_TRY(mkdir_p(dir));
  /* Both files go into a directory of their own, published by one rename:
   * a reader sees the whole pair or nothing. Each file names the save, so
   * that files moved between checkpoints are caught. */
  char part[4400], gen[4400], path[4500], id[64];
  /* The id: the step and a CRC-32 of the weights, so that the same run
   * writes the same bytes (tests compare checkpoints whole) and two saves
   * differ. */
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32_z(crc, (const Bytef *)m->hparam, m->nparam_total * sizeof(float));
  if (m->nbuffer_total) crc = crc32_z(crc, (const Bytef *)m->hbuffer, m->nbuffer_total * sizeof(float));
  snprintf(id, sizeof id, "%lld-%08lx", (long long)pos->step, (unsigned long)crc);
  snprintf(gen, sizeof gen, "%s/" GEN_PREFIX "%012lld", dir, (long long)pos->step);
  char host[256];
  partial_host(host, sizeof host);
  snprintf(part, sizeof part, "%s/.partial-" GEN_PREFIX "%012lld.%d@%s", dir, (long long)pos->step, (int)getpid(),
           host);
  /* Partial saves of runs killed while saving (kill -9, a second Ctrl-C).
   * The directory's lock (checkpoint_lock.h) keeps a second run out, but
   * where the filesystem has no locks a live run's save must not vanish
   * under it: only those of this process and of processes gone go. */
  /* Listed first and removed after: whether readdir still returns every
   * entry while others are removed is unspecified, and a skipped one
   * would stay. */
  /* The same for the hard link publish_latest renames into place. */
  DIR *d = opendir(dir);
  struct dirent *e;
  char stale[16][4400];
  int nstale = 0;
  while (d && nstale < 16 && (e = readdir(d)))
    if ((!strncmp(e->d_name, ".partial-", 9) || !strncmp(e->d_name, LINK_PREFIX, strlen(LINK_PREFIX))) &&
        partial_is_stale(dir, e->d_name, host))
      snprintf(stale[nstale++], sizeof stale[0], "%s/%s", dir, e->d_name);
  if (d) closedir(d);
  for (int i = 0; i < nstale; i++)
    if (unlink(stale[i])) remove_tree(stale[i]);
  if (mkdir(part, 0755)) return pt_fail_errno(PT_ERR_IO, "cannot create directory %s", part);
  fault_point(); /* 1: an empty partial directory */
  snprintf(path, sizeof path, "%s/model.safetensors", part);
  pt_status st = write_model(path, m, spec_text, pos->dataset, id);
  if (st == PT_OK) {
    fault_point(); /* 2: the weights alone */
    snprintf(path, sizeof path, "%s/state.safetensors", part);
    st = write_state(path, m, opt, pos, id);
  }
  if (st != PT_OK) {
    remove_tree(part); /* nothing half-written stays behind */
    return no_room(st, path, dir, m, opt);
  }
  /* each file's commit has already synced part */
  fault_point(); /* 3: both files, not yet published */
  remove_tree(gen); /* the same step saved again (a signal at an epoch's end) */
  if (rename(part, gen)) {
    st = pt_fail_errno(PT_ERR_IO, "cannot rename %s to %s", part, gen);
    remove_tree(part);
    return st;
  }
  /* published; like pt_atomic_file_commit, a failed sync after the rename is still reported */
  PT_TRY(pt_sync_dir(dir));
  fault_point(); /* 4: published; DIR/model.safetensors still the one before */
  snprintf(path, sizeof path, "%s/model.safetensors", gen);
  PT_TRY(publish_latest(dir, path));
  fault_point(); /* 6: DIR/model.safetensors moved on */
  /* A state file of the old single-pair layout would pair with nothing now. */
  snprintf(path, sizeof path, "%s/state.safetensors", dir);
  unlink(path);
  /* Older generations go only now that a newer one is complete. */
  int n;
  int64_t *steps = list_generations(dir, &n);
  /* The generations a resume skipped as damaged are neither counted (the
   * K kept are K a run can resume from) nor removed (the user was told of
   * them; a save of that step replaces one). The one just written is
   * always among the K. */
  int kept = 0;
  for (int i = 0; i < n; i++) {
    if ((steps[i] != pos->step && among(damaged, steps[i])) || kept++ < (keep > 0 ? keep : 1)) continue;
    snprintf(path, sizeof path, "%s/" GEN_PREFIX "%012lld", dir, (long long)steps[i]);
    remove_tree(path);
    fault_point(); /* 7...: each older generation removed */
  }
  free(steps);
  return PT_OK;
}

/* pt_st_read, and the file's CRC checked where it has one. */
static pt_status read_checked(const char *path, pt_st_file *f) {
  PT_TRY(pt_st_read(path, f));
  pt_status st = pt_st_verify_checksum(f, path, CRC_KEY);
  if (st != PT_OK) pt_st_free(f);
  return st;
}

/* NaN or infinity in weights (a run that diverged, or a file damaged
 * where no CRC guards it) would make every answer NaN without a word. */
static pt_status check_finite(const float *x, size_t n, const char *path, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i]))
      return pt_fail(PT_ERR_FORMAT,
                     "%s: tensor '%s' holds %s at element %zu of %zu: these weights are unusable (a run that "
                     "diverged, or a damaged file)",
                     path, name, isnan(x[i]) ? "NaN" : x[i] > 0 ? "+infinity" : "-infinity", i, n);
  return PT_OK;
}

/* A batch norm's running variance below 0 makes its square root NaN in
 * evaluation; PyTorch's loss is then NaN, and no checkpoint of a run
 * holds one. */
static pt_status check_variance(const float *x, size_t n, const char *path, const char *name) {
  const size_t len = strlen(name), sl = strlen(".running_var");
  if (len < sl || strcmp(name + len - sl, ".running_var")) return PT_OK;
  for (size_t i = 0; i < n; i++)
    if (x[i] < 0)
      return pt_fail(PT_ERR_FORMAT, "%s: tensor '%s' holds %g at element %zu of %zu: a variance is never below 0 "
                     "(a damaged file, or one not written as a running variance)", path, name, x[i], i, n);
  return PT_OK;
}

static pt_status load_into(const pt_st_file *f, const char *path, const char *prefix, const pt_tensor_info *t,
                           float *dst) {
  char name[256];
  snprintf(name, sizeof name, "%s%s", prefix, t->name);
  const pt_st_tensor *s = pt_st_find(f, name);
  if (!s) {
    /* A ptrain file names the model it holds: a wrong --model is then said. */
    const char *held = pt_st_meta(f, "ptrain.model");
    if (held)
      return pt_fail(PT_ERR_FORMAT, "%s: has no tensor '%s': it holds model %s (wrong --model?)", path, name, held);
    return pt_fail(PT_ERR_FORMAT, "%s: has no tensor '%s'", path, name);
  }
  int same = s->ndim == t->ndim;
  for (int d = 0; same && d < t->ndim; d++) same = s->shape[d] == t->shape[d];
  if (!same) {
    char want[64] = "", got[64] = "";
    for (int d = 0; d < t->ndim; d++)
      snprintf(want + strlen(want), sizeof want - strlen(want), "%s%" PRId64, d ? "," : "", t->shape[d]);
    for (int d = 0; d < s->ndim; d++)
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%" PRId64, d ? "," : "", s->shape[d]);
    return pt_fail(PT_ERR_FORMAT, "%s: tensor '%s' has shape [%s], the model expects [%s]", path, name, got, want);
  }
  float *tmp = NULL;
  if (t->panels && !(tmp = malloc(sizeof(float) * t->numel)))
    return pt_fail(PT_ERR_NOMEM, "%s: out of memory for tensor '%s'", path, name);
  pt_status st = pt_st_get_f32(f, name, tmp ? tmp : dst, t->numel);
  if (st == PT_OK) {
    st = check_finite(tmp ? tmp : dst, t->numel, path, name);
    if (st == PT_OK) st = check_variance(tmp ? tmp : dst, t->numel, path, name);
    if (st != PT_OK) {
      free(tmp);
      return st;
    }
  }
  if (tmp) {
    if (st == PT_OK) pt_tensor_from_torch(t, tmp, dst);
    free(tmp);
  }
  return st == PT_OK ? PT_OK : pt_wrap(st, "%s", path);
}

static int is_extra(const pt_st_file *f, int i, const pt_model *m) {
  const char *n = f->tensors[i].name, *dot = strrchr(n, '.');
  return !pt_model_find(m, n, NULL, NULL) && !(dot && !strcmp(dot, ".num_batches_tracked"));
}

/* Names the model has and the file lacks, beside names the file has and
 * the model lacks, said together as PyTorch's load_state_dict says them:
 * a renamed layer, or a state_dict saved from DataParallel or DDP, whose
 * names start with "module.". */
static pt_status check_names(const pt_st_file *f, const char *path, const pt_model *m) {
  const char *missing = NULL;
  int nmissing = 0, prefixed = 0;
  for (int i = 0; i < m->nparams + m->nbuffers; i++) {
    const char *n = i < m->nparams ? m->params[i].name : m->buffers[i - m->nparams].name;
    if (pt_st_find(f, n)) continue;
    if (!missing) missing = n;
    nmissing++;
    char wrapped[PT_NAME_LEN + 64];
    snprintf(wrapped, sizeof wrapped, "module.%s", n);
    prefixed += pt_st_find(f, wrapped) != NULL;
  }
  if (!nmissing) return PT_OK;
  if (prefixed == nmissing)
    return pt_fail(PT_ERR_FORMAT, "%s: its tensors are named 'module.%s' and so on, where model %s has '%s': a "
                   "state_dict saved from DataParallel or DistributedDataParallel; save model.module.state_dict() "
                   "instead, or strip 'module.' from the names", path, missing, m->spec.name, missing);
  int extra = -1, nextra = 0;
  for (int i = 0; i < f->count; i++)
    if (is_extra(f, i, m) && nextra++ == 0) extra = i;
  /* load_into says what is missing, and which model a file of ours holds */
  if (extra < 0 || pt_st_meta(f, "ptrain.model")) return PT_OK;
  return pt_fail(PT_ERR_FORMAT, "%s: has no tensor '%s'%s, and has '%s'%s, which model %s does not (a layer of "
                 "another name? wrong --model?)", path, missing, nmissing > 1 ? " (and others)" : "",
                 f->tensors[extra].name, nextra > 1 ? " (and others)" : "", m->spec.name);
}

static pt_status load_weights_from(const pt_st_file *f, const char *path, pt_model *m) {
  PT_TRY(check_names(f, path, m));
  for (int i = 0; i < m->nparams; i++) PT_TRY(load_into(f, path, "", &m->params[i], m->hparam + m->params[i].offset));
  for (int i = 0; i < m->nbuffers; i++)
    PT_TRY(load_into(f, path, "", &m->buffers[i], m->hbuffer + m->buffers[i].offset));
  for (int i = 0; i < m->nlayers; i++) {
    pt_layer *L = &m->layers[i];
    if (L->spec.kind != PT_L_BATCHNORM2D) continue;
    char name[PT_NAME_LEN + 32];
    snprintf(name, sizeof name, "%s.num_batches_tracked", L->spec.name);
    float v = 0.0f;
    if (pt_st_find(f, name) && pt_st_get_f32(f, name, &v, 1) != PT_OK) return pt_wrap(PT_ERR_FORMAT, "%s", path);
    L->num_batches_tracked = (int64_t)v;
  }
  /* Anything else in the file belongs to another model. */
  for (int i = 0; i < f->count; i++)
    if (is_extra(f, i, m))
      return pt_fail(PT_ERR_FORMAT, "%s: tensor '%s' is not a parameter of model %s (wrong --model?)", path,
                     f->tensors[i].name, m->spec.name);
  return PT_OK;
}

/* A checkpoint directory stands for its newest complete weights: *file is
 * path, or DIR/model.safetensors. */
static pt_status weights_path(const char *path, char *buf, size_t size, const char **file) {
  struct stat sb;
  *file = path;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(buf, size, "%s/model.safetensors", path);
    *file = buf;
    if (!access(buf, F_OK)) return PT_OK;
    /* A directory that may not be searched is not an empty one. */
    if (errno != ENOENT) return pt_fail_errno(PT_ERR_IO, "%s: cannot look into it for model.safetensors", path);
    /* DIR/model.safetensors gone (removed, or a copy of the directory
     * without it): the newest generation's weights are the same ones. */
    int n;
    int64_t *steps = list_generations(path, &n);
    for (int i = 0; i < n; i++) {
      snprintf(buf, size, "%s/" GEN_PREFIX "%012lld/model.safetensors", path, (long long)steps[i]);
      if (!access(buf, F_OK)) {
        free(steps);
        return PT_OK;
      }
    }
    free(steps);
    return pt_fail(PT_ERR_IO, "%s: a directory without model.safetensors, in it or in a " GEN_PREFIX "* generation; "
                   "expected a checkpoint directory or a .safetensors file", path);
  }
  return PT_OK;
}

/* The data set the file records, into dataset ("" where none). */
static void recorded_dataset(const pt_st_file *f, char *dataset, size_t dataset_size) {
  if (!dataset_size) return;
  dataset[0] = 0;
  const char *ds = pt_st_meta(f, "ptrain.dataset");
  pt_dataset_kind kind;
  if (ds && pt_dataset_kind_parse(ds, &kind) == PT_OK) snprintf(dataset, dataset_size, "%s", pt_dataset_kind_name(kind));
}

pt_status pt_checkpoint_load_weights(const char *path, pt_model *m, char *dataset, size_t dataset_size) {
  if (dataset_size) dataset[0] = 0;
  if (!*path) return pt_fail(PT_ERR_ARG, "empty path; expected a .safetensors file or a checkpoint directory");
  char buf[4400];
  PT_TRY(weights_path(path, buf, sizeof buf, &path));
  pt_st_file f;
  PT_TRY(read_checked(path, &f));
  pt_status st = load_weights_from(&f, path, m);
  if (st == PT_OK) recorded_dataset(&f, dataset, dataset_size);
  pt_st_free(&f);
  if (st == PT_OK) pt_model_from_host(m); /* a GPU model's own copy */
  return st;
}

static pt_status meta_int(const pt_st_file *f, const char *path, const char *key, int64_t *out) {
  const char *v = pt_st_meta(f, key);
  char *end;
  if (!v) return pt_fail(PT_ERR_FORMAT, "%s: metadata has no '%s'; not a ptrain training state", path, key);
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end) return pt_fail(PT_ERR_FORMAT, "%s: metadata '%s'='%s' is not an integer", path, key, v);
  *out = x;
  return PT_OK;
}

/* The seed spans all of uint64; states written before it was stored
 * unsigned hold seeds past INT64_MAX as negative int64, which cast back. */
static pt_status meta_seed(const pt_st_file *f, const char *path, uint64_t *out) {
  const char *v = pt_st_meta(f, "seed");
  if (!v) return pt_fail(PT_ERR_FORMAT, "%s: metadata has no 'seed'; not a ptrain training state", path);
  char *end = (char *)v;
  errno = 0;
  if (*v == '-') *out = (uint64_t)strtoll(v, &end, 10);
  else if (*v >= '0' && *v <= '9') *out = strtoull(v, &end, 10);
  if (end == v || errno || *end)
    return pt_fail(PT_ERR_FORMAT, "%s: metadata 'seed'='%s' is not an integer from 0 to %" PRIu64, path, v, UINT64_MAX);
  return PT_OK;
}

static pt_status meta_double(const pt_st_file *f, const char *path, const char *key, double *out) {
  const char *v = pt_st_meta(f, key);
  char *end;
  if (!v) return pt_fail(PT_ERR_FORMAT, "%s: metadata has no '%s'; not a ptrain training state", path, key);
  *out = strtod(v, &end);
  if (end == v || *end) return pt_fail(PT_ERR_FORMAT, "%s: metadata '%s'='%s' is not a number", path, key, v);
  return PT_OK;
}

/* A state written by a run configured otherwise: PT_ERR_ARG, which the
 * resume reports at once, since the generations before it were written by
 * the same run and differ from this one alike. */
static pt_status check_same_run(const pt_st_file *f, const char *path, const pt_model *m, const pt_optimizer *opt) {
  const char *kind = pt_st_meta(f, "optimizer");
  if (!kind) return pt_fail(PT_ERR_FORMAT, "%s: not a ptrain training state (no 'optimizer')", path);
  const char *model = pt_st_meta(f, "model");
  if (!model)
    return pt_fail(PT_ERR_FORMAT, "%s: metadata has no 'model'; not a ptrain training state", path);
  /* The model first: a forgotten --model also changes the optimizer (the
   * preset's), and following the optimizer's advice would only lead here. */
  if (strcmp(model, m->spec.name))
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed trained model '%s', not '%s'; resume with the model it "
                   "trained", path, model, m->spec.name);
  const char *want = pt_opt_kind_name(opt->cfg.kind);
  if (strcmp(kind, want))
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed used --optimizer %s, not %s; resume with --optimizer %s",
                   path, kind, want, kind);
  /* SGD keeps momentum buffers only with momentum: without this check a
   * resume without --momentum dropped them and trained on as plain SGD,
   * and one with it read their absence as damage. */
  if (opt->cfg.kind == PT_OPT_SGD && m->nparams > 0) {
    char name[PT_NAME_LEN + 64];
    snprintf(name, sizeof name, "optimizer.%s.momentum_buffer", m->params[0].name);
    const int saved = pt_st_find(f, name) != NULL, now = opt->nstate > 0;
    if (saved && !now)
      return pt_fail(PT_ERR_ARG, "%s: the run being resumed used SGD with momentum (its state holds momentum "
                     "buffers), and this one has none; resume with the --momentum it used", path);
    if (!saved && now)
      return pt_fail(PT_ERR_ARG, "%s: the run being resumed used SGD without momentum, and this one has --momentum "
                     "%g; resume without --momentum (or with --momentum 0)", path, (double)opt->cfg.momentum);
  }
  return PT_OK;
}

/* The model the weights record against the one being trained: a spec file
 * edited between the runs keeps its name, and often its tensors' shapes.
 * Weights with no recorded spec (from PyTorch, or older) pass. */
static pt_status check_same_model(const pt_st_file *f, const char *path, const pt_model *m) {
  const char *text = pt_st_meta(f, "ptrain.spec");
  if (!text) return PT_OK;
  pt_model_spec *saved = malloc(sizeof *saved);
  if (!saved) return pt_fail(PT_ERR_NOMEM, "%s: out of memory for its model spec", path);
  pt_status st = pt_spec_parse(text, path, saved);
  char what[256];
  if (st != PT_OK)
    st = pt_wrap(PT_ERR_FORMAT, "%s: the model it records does not parse", path);
  else if (pt_spec_differs(&m->spec, saved, what, sizeof what))
    st = pt_fail(PT_ERR_ARG, "%s: the run being resumed trained another model named '%s': in its model, %s; resume "
                 "with the model it trained", path, m->spec.name, what);
  free(saved);
  return st;
}

/* meta_int, held to [lo, hi]: a hand-edited state (its CRC dropped) must
 * not wrap into another position when narrowed to int. */
static pt_status meta_in(const pt_st_file *f, const char *path, const char *key, int64_t lo, int64_t hi,
                         int64_t *v) {
  PT_TRY(meta_int(f, path, key, v));
  if (*v < lo || *v > hi)
    return pt_fail(PT_ERR_FORMAT, "%s: the training state's %s is %lld, expected %lld to %lld", path, key,
                   (long long)*v, (long long)lo, (long long)hi);
  return PT_OK;
}

static pt_status meta_real_in(const pt_st_file *f, const char *path, const char *key, double *v) {
  PT_TRY(meta_double(f, path, key, v));
  if (!isfinite(*v) || *v < 0)
    return pt_fail(PT_ERR_FORMAT, "%s: the training state's %s is %g, expected a finite number >= 0", path, key, *v);
  return PT_OK;
}

static pt_status load_state(const pt_st_file *f, const char *path, pt_model *m, pt_optimizer *opt,
                            pt_train_position *pos) {
  const char *version = pt_st_meta(f, "ptrain.state_version");
  if (version && strcmp(version, META_FMT_VERSION))
    return pt_fail(PT_ERR_FORMAT, "%s: training state version %s; this ptrain reads version " META_FMT_VERSION
                   " (a newer ptrain wrote it?)", path, version);
  const int64_t big = INT64_MAX / 4, int_max = INT_MAX / 2;
  int64_t v;
  PT_TRY(meta_in(f, path, "optimizer_step", 0, big, &opt->step));
  PT_TRY(meta_in(f, path, "next_epoch", 0, int_max, &v));
  pos->next_epoch = (int)v;
  PT_TRY(meta_in(f, path, "next_batch", 0, int_max, &v));
  pos->next_batch = (int)v;
  PT_TRY(meta_in(f, path, "step", 0, big, &pos->step));
  PT_TRY(meta_seed(f, path, &pos->seed));
  PT_TRY(meta_in(f, path, "batch_size", 1, int_max, &v));
  pos->batch_size = (int)v;
  pos->world = 1; /* states written before data parallelism have no "world" */
  if (pt_st_meta(f, "world")) {
    PT_TRY(meta_in(f, path, "world", 1, 1 << 20, &v));
    pos->world = (int)v;
  }
  PT_TRY(meta_real_in(f, path, "epoch_loss_sum", &pos->epoch_loss_sum));
  PT_TRY(meta_in(f, path, "epoch_samples", 0, big, &pos->epoch_samples));
  PT_TRY(meta_real_in(f, path, "epoch_seconds", &pos->epoch_seconds));
  pos->shuffle = pos->accum = -1; /* not recorded by earlier versions */
  pos->dataset[0] = 0;
  if (pt_st_meta(f, "shuffle")) {
    PT_TRY(meta_in(f, path, "shuffle", 0, 1, &v));
    pos->shuffle = (int)v;
  }
  if (pt_st_meta(f, "accum_steps")) {
    PT_TRY(meta_in(f, path, "accum_steps", 1, 1 << 20, &v));
    pos->accum = (int)v;
  }
  const char *ds = pt_st_meta(f, "dataset");
  if (ds) snprintf(pos->dataset, sizeof pos->dataset, "%s", ds);
  pos->train_samples = -1;
  if (pt_st_meta(f, "train_samples")) PT_TRY(meta_in(f, path, "train_samples", 0, big, &pos->train_samples));
  pos->eval_due = 0;
  if (pt_st_meta(f, "eval_due")) {
    PT_TRY(meta_in(f, path, "eval_due", 0, 1, &v));
    pos->eval_due = (int)v;
  }
  pos->evaluated = 0;
  if (pt_st_meta(f, "evaluated")) {
    PT_TRY(meta_in(f, path, "evaluated", 0, 1, &v));
    pos->evaluated = (int)v;
  }
  char prefix[32];
  for (int k = 0; k < opt->nstate; k++)
    for (int i = 0; i < m->nparams; i++) {
      pt_tensor_info t = m->params[i];
      snprintf(t.name, sizeof t.name, "%s.%s", m->params[i].name, opt->state_name[k]);
      snprintf(prefix, sizeof prefix, "optimizer.");
      PT_TRY(load_into(f, path, prefix, &t, opt->hstate[k] + m->params[i].offset));
    }
  return PT_OK;
}

/* One pair: both files read, then checked to be one save's, then loaded. */
static pt_status resume_pair(const char *dir, pt_model *m, pt_optimizer *opt, pt_train_position *pos) {
  char mpath[4400], spath[4400];
  snprintf(mpath, sizeof mpath, "%s/model.safetensors", dir);
  snprintf(spath, sizeof spath, "%s/state.safetensors", dir);
  pt_st_file mf, sf;
  PT_TRY(read_checked(mpath, &mf));
  pt_status st = read_checked(spath, &sf);
  if (st != PT_OK) {
    pt_st_free(&mf);
    return st;
  }
  const char *mid = pt_st_meta(&mf, "ptrain.checkpoint"), *sid = pt_st_meta(&sf, "ptrain.checkpoint");
  /* Files of the old layout carry no id; a pair with one id is mixed. */
  if ((mid || sid) && (!mid || !sid || strcmp(mid, sid)))
    st = pt_fail(PT_ERR_FORMAT,
                 "%s: model.safetensors (save %s) and state.safetensors (save %s) are not from the same save; "
                 "resuming would pair these weights with another step's optimizer state and data position",
                 dir, mid ? mid : "unnamed", sid ? sid : "unnamed");
  if (st == PT_OK) st = check_same_run(&sf, spath, m, opt);
  if (st == PT_OK) st = check_same_model(&mf, mpath, m);
  if (st == PT_OK) st = load_weights_from(&mf, mpath, m);
  if (st == PT_OK) st = load_state(&sf, spath, m, opt, pos);
  pt_st_free(&mf);
  pt_st_free(&sf);
  if (st == PT_OK) {
    pt_model_from_host(m);
    pt_optimizer_from_host(opt);
  }
  return st;
}

/* What a checkpoint directory holds, for the resume's checks and its
 * errors alike. */
typedef enum {
  DIR_ABSENT,       /* stat failed (errno says why) */
  DIR_NOT_DIR,      /* another kind of file */
  DIR_GENERATIONS,  /* step-* generations */
  DIR_OLD_PAIR,     /* DIR/state.safetensors: the single pair of earlier versions */
  DIR_WEIGHTS_ONLY, /* DIR/model.safetensors and no state */
  DIR_UNREADABLE,   /* a directory that cannot be listed */
  DIR_EMPTY         /* none of these */
} dir_contents;

static dir_contents contents_of(const char *dir, char *model, size_t model_size) {
  struct stat sb;
  if (stat(dir, &sb)) return DIR_ABSENT;
  if (!S_ISDIR(sb.st_mode)) return DIR_NOT_DIR;
  int n;
  free(list_generations(dir, &n));
  if (n > 0) return DIR_GENERATIONS;
  char state[4400];
  snprintf(state, sizeof state, "%s/state.safetensors", dir);
  snprintf(model, model_size, "%s/model.safetensors", dir);
  if (!access(state, F_OK)) return DIR_OLD_PAIR;
  if (!access(model, F_OK)) return DIR_WEIGHTS_ONLY;
  DIR *d = opendir(dir);
  if (!d) return DIR_UNREADABLE;
  closedir(d);
  return DIR_EMPTY;
}

pt_status pt_checkpoint_present(const char *dir) {
  char model[4400];
  switch (contents_of(dir, model, sizeof model)) {
    case DIR_ABSENT:
      return pt_fail(PT_ERR_ARG, "--resume: no checkpoint to resume from: %s: %s; run without --resume to start a "
                     "new run, or name the run's --checkpoint-dir", dir,
                     errno == ENOENT ? "no such directory" : strerror(errno));
    case DIR_NOT_DIR:
      return pt_fail(PT_ERR_ARG, "--resume: %s is not a directory; expected the --checkpoint-dir of the run to "
                     "resume", dir);
    case DIR_GENERATIONS:
    case DIR_OLD_PAIR: return PT_OK;
    case DIR_WEIGHTS_ONLY:
      return pt_fail(PT_ERR_ARG, "--resume: %s holds weights (model.safetensors) but no training state to resume "
                     "from; to start a new run from these weights, use --init-from %s instead", dir, model);
    case DIR_UNREADABLE:
    case DIR_EMPTY: break;
  }
  return pt_fail(PT_ERR_ARG, "--resume: no checkpoint to resume from in %s (no " GEN_PREFIX "* directory in it); "
                 "run without --resume to start a new run, or name the run's --checkpoint-dir", dir);
}

pt_status pt_checkpoint_fresh_ok(const char *dir) {
  int n;
  int64_t *steps = list_generations(dir, &n);
  const int64_t newest = n > 0 && steps ? steps[0] : -1;
  free(steps);
  if (n <= 0) return PT_OK;
  return pt_fail(PT_ERR_ARG, "%s already holds a run's checkpoints (newest %s/" GEN_PREFIX "%012lld), and this run "
                 "does not --resume it: their generations would mix, and the pruning of the older ones would "
                 "remove one run's for the other's. Continue that run with --resume, give this one another "
                 "--checkpoint-dir, or remove %s/" GEN_PREFIX "* first",
                 dir, dir, (long long)newest, dir);
}

int pt_checkpoint_none_yet(const char *dir) {
  char model[4400];
  const dir_contents c = contents_of(dir, model, sizeof model);
  return (c == DIR_ABSENT && errno == ENOENT) || c == DIR_EMPTY;
}

pt_status pt_checkpoint_resume(const char *dir, pt_model *m, pt_optimizer *opt, pt_train_position *pos,
                               char *note, size_t note_size, pt_checkpoint_skipped *skipped) {
  if (skipped) skipped->n = 0;
  PT_TRY(pt_checkpoint_present(dir));
  int n;
  int64_t *steps = list_generations(dir, &n);
  char gen[4400], why[2048] = "";
  size_t at = 0;
  pt_status st = PT_ERR_IO;
  for (int i = 0; i < n; i++) {
    snprintf(gen, sizeof gen, "%s/" GEN_PREFIX "%012lld", dir, (long long)steps[i]);
    st = resume_pair(gen, m, opt, pos);
    if (st == PT_OK) break;
    if (st == PT_ERR_ARG) { /* another run's configuration: no older generation differs less */
      free(steps);
      return st;
    }
    /* a newer checkpoint that does not load: say why, and take the one before */
    if (skipped && skipped->n < (int)(sizeof skipped->step / sizeof skipped->step[0]))
      skipped->step[skipped->n++] = steps[i];
    if (at < sizeof why)
      at += (size_t)snprintf(why + at, sizeof why - at, "%sskipped %s: %s", at ? "; " : "", gen,
                             pt_error_message());
  }
  free(steps);
  if (n == 0) { /* the single pair of earlier versions */
    snprintf(gen, sizeof gen, "%s", dir);
    st = resume_pair(dir, m, opt, pos);
  }
  if (st != PT_OK) {
    if (n > 0) return pt_fail(PT_ERR_FORMAT, "%s: no complete checkpoint to resume from (%s)", dir, why);
    return st;
  }
  if (note && note_size) snprintf(note, note_size, "%s%s%s", gen, at ? " (" : "", at ? why : "");
  if (note && note_size && at) strncat(note, ")", note_size - strlen(note) - 1);
  return PT_OK;
}

pt_status pt_checkpoint_save_weights(const char *path, const pt_model *m, const char *spec_text,
                                     const char *dataset) {
  /* A lone weights file pairs with no state file: its id only says so. */
  return write_model(path, m, spec_text, dataset, "weights");
}

pt_status pt_checkpoint_spec_text(const char *path, char **text) {
  *text = NULL;
  char buf[4400];
  PT_TRY(weights_path(path, buf, sizeof buf, &path));
  pt_st_file f;
  PT_TRY(read_checked(path, &f));
  const char *s = pt_st_meta(&f, "ptrain.spec");
  pt_status st = PT_OK;
  if (!s && pt_st_meta(&f, "ptrain.state_version"))
    st = pt_fail(PT_ERR_ARG, "%s is a checkpoint's optimizer state, not its weights: give the model.safetensors "
                             "beside it, or the checkpoint directory", path);
  else if (s && !(*text = strdup(s))) st = pt_fail(PT_ERR_NOMEM, "%s: out of memory for the model spec", path);
  pt_st_free(&f);
  return st;
}

/* Checkpoint files; see checkpoint.h for the layout and the atomicity
 * argument. Metadata values are strings (safetensors allows nothing else),
 * so numbers are printed with enough digits to round-trip. */
#include "train/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"

#define META_FMT_VERSION "1"

static pt_status mkdir_p(const char *dir) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
    return pt_fail(PT_ERR_ARG, "checkpoint directory path too long: %s", dir);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) && errno != EEXIST) return pt_fail_errno(PT_ERR_IO, "cannot create directory %s", buf);
    *p = '/';
  }
  if (mkdir(buf, 0755) && errno != EEXIST) return pt_fail_errno(PT_ERR_IO, "cannot create directory %s", buf);
  struct stat st;
  if (stat(buf, &st) || !S_ISDIR(st.st_mode)) return pt_fail(PT_ERR_IO, "%s exists and is not a directory", buf);
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

static pt_status write_model(const char *path, const pt_model *m, const char *spec_text) {
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
  if (st == PT_OK) st = pt_st_writer_write(w, path);
  pt_st_writer_free(w);
  free(room);
  return st;
}

static pt_status write_state(const char *path, const pt_model *m, const pt_optimizer *opt,
                             const pt_train_position *pos) {
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
  if (st == PT_OK) st = meta_i64(w, "seed", (int64_t)pos->seed);
  if (st == PT_OK) st = meta_i64(w, "batch_size", pos->batch_size);
  if (st == PT_OK) st = meta_i64(w, "world", pos->world);
  if (st == PT_OK) st = meta_num(w, "epoch_loss_sum", pos->epoch_loss_sum);
  if (st == PT_OK) st = meta_i64(w, "epoch_samples", pos->epoch_samples);
  if (st == PT_OK) st = meta_num(w, "epoch_seconds", pos->epoch_seconds);
  if (st == PT_OK) st = pt_st_writer_write(w, path);
  pt_st_writer_free(w);
  free(room);
  return st;
}

pt_status pt_checkpoint_save(const char *dir, const pt_model *m, const pt_optimizer *opt,
                             const pt_train_position *pos, const char *spec_text) {
  PT_TRY(mkdir_p(dir));
  char path[4200];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  PT_TRY(write_model(path, m, spec_text));
  snprintf(path, sizeof path, "%s/state.safetensors", dir);
  return write_state(path, m, opt, pos);
}

static pt_status load_into(const pt_st_file *f, const char *path, const char *prefix, const pt_tensor_info *t,
                           float *dst) {
  char name[256];
  snprintf(name, sizeof name, "%s%s", prefix, t->name);
  const pt_st_tensor *s = pt_st_find(f, name);
  if (!s) return pt_fail(PT_ERR_FORMAT, "%s: has no tensor '%s'", path, name);
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
  if (tmp) {
    if (st == PT_OK) pt_tensor_from_torch(t, tmp, dst);
    free(tmp);
  }
  return st == PT_OK ? PT_OK : pt_wrap(st, "%s", path);
}

static pt_status load_weights_from(const pt_st_file *f, const char *path, pt_model *m) {
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
  for (int i = 0; i < f->count; i++) {
    const char *n = f->tensors[i].name;
    const char *dot = strrchr(n, '.');
    if (pt_model_find(m, n, NULL, NULL) || (dot && !strcmp(dot, ".num_batches_tracked"))) continue;
    return pt_fail(PT_ERR_FORMAT, "%s: tensor '%s' is not a parameter of model %s (wrong --model?)", path, n,
                   m->spec.name);
  }
  return PT_OK;
}

pt_status pt_checkpoint_load_weights(const char *path, pt_model *m) {
  pt_st_file f;
  PT_TRY(pt_st_read(path, &f));
  pt_status st = load_weights_from(&f, path, m);
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

static pt_status meta_double(const pt_st_file *f, const char *path, const char *key, double *out) {
  const char *v = pt_st_meta(f, key);
  char *end;
  if (!v) return pt_fail(PT_ERR_FORMAT, "%s: metadata has no '%s'; not a ptrain training state", path, key);
  *out = strtod(v, &end);
  if (end == v || *end) return pt_fail(PT_ERR_FORMAT, "%s: metadata '%s'='%s' is not a number", path, key, v);
  return PT_OK;
}

static pt_status load_state(const pt_st_file *f, const char *path, pt_model *m, pt_optimizer *opt,
                            pt_train_position *pos) {
  const char *kind = pt_st_meta(f, "optimizer");
  if (!kind) return pt_fail(PT_ERR_FORMAT, "%s: not a ptrain training state (no 'optimizer')", path);
  if (strcmp(kind, pt_opt_kind_name(opt->cfg.kind)))
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed used --optimizer %s, not %s", path, kind,
                   pt_opt_kind_name(opt->cfg.kind));
  const char *model = pt_st_meta(f, "model");
  if (!model || strcmp(model, m->spec.name))
    return pt_fail(PT_ERR_ARG, "%s: the run being resumed trained model '%s', not '%s'", path, model ? model : "?",
                   m->spec.name);
  int64_t v;
  PT_TRY(meta_int(f, path, "optimizer_step", &opt->step));
  PT_TRY(meta_int(f, path, "next_epoch", &v));
  pos->next_epoch = (int)v;
  PT_TRY(meta_int(f, path, "next_batch", &v));
  pos->next_batch = (int)v;
  PT_TRY(meta_int(f, path, "step", &pos->step));
  PT_TRY(meta_int(f, path, "seed", &v));
  pos->seed = (uint64_t)v;
  PT_TRY(meta_int(f, path, "batch_size", &v));
  pos->batch_size = (int)v;
  pos->world = 1; /* states written before data parallelism have no "world" */
  if (pt_st_meta(f, "world")) {
    PT_TRY(meta_int(f, path, "world", &v));
    pos->world = (int)v;
  }
  PT_TRY(meta_double(f, path, "epoch_loss_sum", &pos->epoch_loss_sum));
  PT_TRY(meta_int(f, path, "epoch_samples", &pos->epoch_samples));
  PT_TRY(meta_double(f, path, "epoch_seconds", &pos->epoch_seconds));
  if (pos->next_epoch < 0 || pos->next_batch < 0 || pos->step < 0 || opt->step < 0 || pos->world < 1 ||
      pos->batch_size < 1)
    return pt_fail(PT_ERR_FORMAT, "%s: negative position in the training state", path);
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

pt_status pt_checkpoint_resume(const char *dir, pt_model *m, pt_optimizer *opt, pt_train_position *pos) {
  char path[4200];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  PT_TRY(pt_checkpoint_load_weights(path, m));
  snprintf(path, sizeof path, "%s/state.safetensors", dir);
  pt_st_file f;
  PT_TRY(pt_st_read(path, &f));
  pt_status st = load_state(&f, path, m, opt, pos);
  pt_st_free(&f);
  if (st == PT_OK) pt_optimizer_from_host(opt);
  return st;
}

char *pt_checkpoint_spec_text(const char *path) {
  pt_st_file f;
  if (pt_st_read(path, &f) != PT_OK) return NULL;
  const char *s = pt_st_meta(&f, "ptrain.spec");
  char *out = s ? strdup(s) : NULL;
  pt_st_free(&f);
  return out;
}

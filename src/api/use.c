/* Using a trained net: evaluation on a split, probabilities for images. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "data/loader.h"
#include "ops/cpu/ops.h"
#include "train/config_bounds.h"
#include "train/evaluate.h"
#include "util/fpmode.h"

/* device -> a backend bound on this thread. */
static pt_status bind_device(const char *device, const pt_backend **be) {
  pt_backend_kind kind;
  int gpu = 0;
  PT_TRY(pt_device_parse_one(device ? device : "cpu", "device", &kind, &gpu));
  if (kind == PT_BACKEND_CPU) {
    *be = pt_backend_cpu();
    return PT_OK;
  }
  if (!(*be = pt_backend_cuda())) return pt_wrap(PT_ERR_DEVICE, "evaluating on cuda:%d", gpu);
  return pt_backend_bind(*be, gpu);
}

static pt_status evaluate(pt_net *net, const pt_data *data, const char *device, int batch_max, int flush,
                          pt_eval *out);

pt_status pt_evaluate(pt_net *net, const pt_data *data, const char *device, int threads, pt_eval *out) {
  return pt_evaluate_with(net, data, device, threads, 1000, 1, out);
}

pt_status pt_evaluate_with(pt_net *net, const pt_data *data, const char *device, int threads, int batch_max,
                           int flush, pt_eval *out) {
  if (!net || !data || !out) return pt_fail(PT_ERR_ARG, "pt_evaluate: net, data or out is NULL");
  memset(out, 0, sizeof *out);
  if (threads < 0 || threads > PT_THREADS_MAX)
    return pt_fail(PT_ERR_ARG, "pt_evaluate: threads %d: expected 0 (the cores) to %d", threads, PT_THREADS_MAX);
  if (!net->m)
    return pt_fail(PT_ERR_STATE, "model %s has no weights yet: train it or load a checkpoint", net->spec.name);
  const pt_model_spec *s = &net->spec;
  const pt_dataset *ds = &data->ds;
  if (ds->c != s->in_c || ds->h != s->in_h || ds->w != s->in_w)
    return pt_fail(PT_ERR_ARG, "model %s takes %dx%dx%d input but the %s images%s%s are %dx%dx%d", s->name, s->in_c,
                   s->in_h, s->in_w, data->kind >= 0 ? pt_dataset_kind_name((pt_dataset_kind)data->kind) : "given",
                   data->dir ? " in " : "", data->dir ? data->dir : "", ds->c, ds->h, ds->w);
  char what[64];
  snprintf(what, sizeof what, "the %s data",
           data->kind >= 0 ? pt_dataset_kind_name((pt_dataset_kind)data->kind) : "given");
  PT_TRY(pt_dataset_check_classes(ds, net->m->num_classes, s->name, what));
  /* In a training run's callback the thread's pool is the run's: this
   * evaluation's threads are its own, and the run goes on with the threads
   * it had (another count would change its sums, and so its weights). */
  const int in_run = pt_run_training_here();
  pt_ops_threads_saved saved;
  if (threads > 0 && (in_run ? pt_ops_push_threads(threads, &saved) : pt_ops_set_threads(threads)))
    return pt_fail(PT_ERR_STATE, "cannot start %d threads", threads);
  const pt_status st = evaluate(net, data, device, batch_max, flush, out);
  if (threads > 0 && in_run) pt_ops_pop_threads(&saved);
  return st;
}

/* pt_evaluate_with's work, its arguments checked and its threads set. */
static pt_status evaluate(pt_net *net, const pt_data *data, const char *device, int batch_max, int flush,
                          pt_eval *out) {
  const pt_dataset *ds = &data->ds;
  const pt_model_spec *s = &net->spec;
  const int batch = ds->n < batch_max ? ds->n : batch_max;
  pt_model *m = NULL;
  pt_loader *l = NULL;
  pt_device_data dd = {0};
  pt_loader_config lc;
  pt_eval_sums ev = {0};
  const pt_backend *be = NULL;
  PT_TRY(bind_device(device, &be));
  const int gpu = be->kind != PT_BACKEND_CPU;
  const int flushing = pt_fp_set_flush(flush); /* as training computed */
  pt_status st = pt_model_create_on(&m, s, batch, be);
  if (st == PT_OK) st = pt_model_copy_weights(m, net->m);
  pt_train_loader_config(s, batch, 0, &lc);
  lc.prefetch = 1;
  lc.indices_only = gpu; /* the GPU makes the images */
  if (st == PT_OK) st = pt_loader_create(&l, ds, &lc);
  if (st == PT_OK) st = pt_device_data_init(&dd, m->be, ds, &lc, batch);
  if (st == PT_OK) st = pt_evaluate_batches(m, l, &dd, &ev, 0);
  pt_device_data_free(&dd);
  pt_loader_destroy(l);
  pt_model_destroy(m); /* the GPU memory before the thread's stream and handles */
  if (gpu) {
    /* A fault in the evaluation's last kernels shows only here. */
    const pt_status ust = pt_backend_unbind(be);
    if (st == PT_OK) st = ust;
  }
  pt_fp_set_flush(flushing);
  if (st != PT_OK) return st;
  out->count = ev.count;
  out->correct = ev.correct;
  out->loss = ev.count ? ev.loss_sum / (double)ev.count : NAN;
  out->accuracy = ev.count ? (double)ev.correct / (double)ev.count : NAN;
  return PT_OK;
}

pt_status pt_predict(pt_net *net, const float *images, int n, float *probs) {
  if (!net || !images || !probs) return pt_fail(PT_ERR_ARG, "pt_predict: net, images or probs is NULL");
  if (n < 0) return pt_fail(PT_ERR_ARG, "pt_predict: %d images: expected a count of 0 or more", n);
  if (n == 0) return PT_OK;
  const pt_model_spec *s = &net->spec;
  const size_t px = (size_t)s->in_h * s->in_w, per = (size_t)s->in_c * px;
  /* Pixels scaled to [0, 1], as the header says: a NaN would come back as
   * NaN probabilities, and bytes not divided by 255 as a confident guess. */
  for (size_t i = 0; i < per * (size_t)n; i++)
    if (!(images[i] >= 0.0f && images[i] <= 1.0f))
      return pt_fail(PT_ERR_ARG, "pt_predict: image %zu, value %zu is %g: expected pixels scaled to [0, 1]", i / per,
                     i % per, (double)images[i]);
  pt_model *m;
  PT_TRY(pt_net_model_for(net, n, &m));
  const int classes = m->num_classes;
  float *x = pt_malloc(sizeof(float) * per * (size_t)m->max_batch); /* (chunk, c, h, w) normalised */
  if (!x) return PT_ERR_NOMEM;
  const int flushing = pt_fp_set_flush(1);
  m->training = 0;
  pt_status st = PT_OK;
  for (int i0 = 0; i0 < n && st == PT_OK; i0 += m->max_batch) {
    const int k = n - i0 < m->max_batch ? n - i0 : m->max_batch;
    for (int i = 0; i < k; i++)
      for (int c = 0; c < s->in_c; c++) {
        const float *src = images + (size_t)(i0 + i) * per + (size_t)c * px;
        float *dst = x + (size_t)i * per + (size_t)c * px;
        const float mean = s->mean[c], inv = 1.0f / s->std[c];
        for (size_t j = 0; j < px; j++) dst[j] = (src[j] - mean) * inv;
      }
    const float *y = pt_model_forward(m, x, k); /* (k, classes): logits or log-probabilities */
    st = pt_model_take_status(m);
    /* softmax either way: softmax(log_softmax(z)) = softmax(z) */
    for (int i = 0; i < k && st == PT_OK; i++) {
      const float *row = y + (size_t)i * classes;
      float *p = probs + (size_t)(i0 + i) * classes;
      double mx = row[0], sum = 0.0;
      for (int j = 1; j < classes; j++) mx = row[j] > mx ? row[j] : mx;
      for (int j = 0; j < classes; j++) sum += exp((double)row[j] - mx);
      for (int j = 0; j < classes; j++) p[j] = (float)(exp((double)row[j] - mx) / sum);
    }
  }
  pt_fp_set_flush(flushing);
  free(x);
  return st;
}

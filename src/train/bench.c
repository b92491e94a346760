#include "train/bench.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ops/cpu/isa/cpu_level.h"

#include "data/loader.h"
#include "train/profile.h"
#include "train/step.h"
#include "util/fpmode.h"
#include "util/timer.h"

#define STAGED 10 /* distinct batches cycled through */

static double peak_rss_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

pt_status pt_bench_train(const pt_train_config *cfg, int warmup, int steps, double min_seconds, int profile,
                         pt_bench_result *out) {
  memset(out, 0, sizeof *out);
  PT_TRY(pt_cpu_check_env());
  pt_train_plan plan;
  PT_TRY(pt_train_plan_make(cfg, &plan));
  if (pt_ops_set_threads(plan.threads)) return pt_fail(PT_ERR_STATE, "cannot start %d threads", plan.threads);
  const int flushing = pt_fp_set_flush(!cfg->keep_denormals); /* the caller's, back at the end */
  pt_dataset ds = {0};
  pt_model *m = NULL;
  pt_loader *l = NULL;
  pt_optimizer opt = {0};
  float *xs = NULL;
  int32_t *ys = NULL;
  int ns[STAGED];
  pt_status st = pt_dataset_load(&ds, plan.dataset, plan.data_dir, 1);
  if (st == PT_OK) st = pt_model_create(&m, &plan.spec, plan.batch);
  if (st == PT_OK) st = pt_optimizer_init(&opt, &plan.opt, m->nparam_total);
  pt_loader_config lc;
  pt_train_loader_config(&plan.spec, plan.batch, 0, &lc);
  lc.shuffle = 1;
  lc.seed = cfg->seed;
  if (st == PT_OK) st = pt_loader_create(&l, &ds, &lc);
  const size_t xsz = (size_t)plan.batch * plan.spec.in_c * plan.spec.in_h * plan.spec.in_w;
  /* aligned as the loader's batches are, so kernels read them as in training */
  if (st == PT_OK && (!(xs = pt_alloc_aligned(sizeof(float) * xsz * STAGED)) ||
                      !(ys = pt_malloc(sizeof(int32_t) * (size_t)plan.batch * STAGED))))
    st = PT_ERR_NOMEM;
  if (st == PT_OK) st = pt_loader_start_epoch(l, 0, 0);
  for (int k = 0; k < STAGED && st == PT_OK; k++) {
    pt_batch b;
    st = pt_loader_next(l, &b);
    if (st == PT_OK && b.n == 0) st = pt_fail(PT_ERR_ARG, "dataset too small to stage %d batches", STAGED);
    if (st != PT_OK) break;
    ns[k] = b.n;
    memcpy(xs + k * xsz, b.x, sizeof(float) * (size_t)b.n * (xsz / plan.batch));
    memcpy(ys + (size_t)k * plan.batch, b.y, sizeof(int32_t) * b.n);
  }
  if (st == PT_OK) {
    pt_model_init(m, cfg->seed);
    double t0 = 0.0;
    int64_t images = 0;
    pt_phase_times ph;
    int end = warmup + steps; /* grows by blocks of steps until min_seconds have passed */
    for (int i = 0; i < end; i++) {
      if (i == warmup) {
        m->profile = profile;
        pt_profile_reset(m, &ph);
        t0 = pt_now();
      }
      int k = i % STAGED;
      pt_train_step(m, &opt, xs + k * xsz, ys + (size_t)k * plan.batch, ns[k], (uint64_t)i, plan.opt.lr,
                    profile && i >= warmup ? &ph : NULL);
      if (i >= warmup) images += ns[k];
      if (i + 1 == end && end <= INT_MAX - steps && pt_now() - t0 < min_seconds) end += steps;
    }
    double dt = pt_now() - t0;
    steps = end - warmup;
    st = pt_model_take_status(m);
    if (st == PT_OK && profile) {
      ph.total_s = dt;
      pt_profile_print(stderr, m, &ph, 1);
    }
    out->batch = plan.batch;
    out->threads = plan.threads;
    out->steps = steps;
    out->images_per_s = images / dt;
    out->step_ms = 1e3 * dt / steps;
    out->flops_per_image = 3.0 * pt_model_flops(m);
    out->gflops = out->images_per_s * out->flops_per_image / 1e9;
    out->peak_rss_mb = peak_rss_mb();
  }
  free(xs);
  free(ys);
  pt_loader_destroy(l);
  pt_optimizer_free(&opt);
  pt_model_destroy(m);
  pt_dataset_free(&ds);
  pt_fp_set_flush(flushing);
  return st;
}

pt_status pt_bench_sgemm(int n, double *gflops) {
  size_t nn = (size_t)n * n;
  float *a = pt_alloc_aligned(sizeof(float) * nn), *b = pt_alloc_aligned(sizeof(float) * nn),
        *c = pt_alloc_aligned(sizeof(float) * nn);
  if (!a || !b || !c) {
    free(a); free(b); free(c);
    return PT_ERR_NOMEM;
  }
  for (size_t i = 0; i < nn; i++) {
    a[i] = (float)(i % 7) * 0.1f;
    b[i] = (float)(i % 5) * 0.1f;
  }
  double best = 1e30;
  for (int rep = 0; rep < 6; rep++) {
    double t0 = pt_now();
    pt_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double dt = pt_now() - t0;
    if (rep > 0 && dt < best) best = dt; /* the first call pays for page faults */
  }
  *gflops = 2.0 * n * (double)n * n / best / 1e9;
  free(a); free(b); free(c);
  return PT_OK;
}

#include "train/bench.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ops/cpu/isa/cpu_level.h"

#include "data/loader.h"
#include "ops/backend.h"
#include "train/device_data.h"
#include "train/graph_step.h"
#include "train/profile.h"
#include "train/step.h"
#include "util/fpmode.h"
#include "util/timer.h"

#define STAGED 10 /* distinct batches cycled through, where the dataset has as many */

static double peak_rss_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

pt_status pt_bench_train(const pt_train_config *cfg, int warmup, int steps, double min_seconds, int profile,
                         pt_bench_result *out) {
  memset(out, 0, sizeof *out);
  out->device = -1;
  PT_TRY(pt_cpu_check_env());
  pt_train_plan plan;
  PT_TRY(pt_train_plan_make(cfg, &plan));
  if (pt_ops_set_threads(plan.threads)) return pt_fail(PT_ERR_STATE, "cannot start %d threads", plan.threads);
  const int on_device = plan.backend != PT_BACKEND_CPU;
  const pt_backend *be = on_device ? pt_backend_cuda() : pt_backend_cpu();
  if (!be) return pt_wrap(PT_ERR_DEVICE, "benchmarking on cuda:%d", plan.devices[0]);
  PT_TRY(pt_backend_bind(be, plan.devices[0]));
  if (plan.precision != PT_PRECISION_FP32) {
    pt_status pst = be->set_precision ? be->set_precision(plan.precision)
                                      : pt_fail(PT_ERR_ARG, "--precision: the %s backend computes in fp32 only", be->name);
    if (pst != PT_OK) {
      (void)pt_backend_unbind(be);
      return pst;
    }
  }
  const int flushing = pt_fp_set_flush(!cfg->keep_denormals); /* the caller's, back at the end */
  pt_dataset ds = {0};
  pt_model *m = NULL;
  pt_loader *l = NULL;
  pt_optimizer opt = {0};
  /* The CPU's batches are staged whole; a GPU's as the dataset's indices,
   * from which the device makes each batch as in training. */
  float *xs = NULL;                /* (STAGED, room, c, h, w), CPU */
  int32_t *ys = NULL, *idx = NULL; /* (STAGED, room): labels; dataset indices (GPU) */
  pt_batch staged[STAGED];
  pt_device_data dd = {0};
  pt_graph_step graphs;
  pt_graph_step_init(&graphs, on_device && plan.cuda_graphs && !profile); /* --profile times each layer */
  pt_status st = pt_dataset_load(&ds, plan.dataset, plan.data_dir, 1);
  /* As train checks them: a batch of other images, or labels past the
   * outputs, would be read out of bounds. */
  if (st == PT_OK)
    st = pt_train_check_fit(&plan.spec, &ds, plan.data_name, "training",
                            cfg->dataset ? " (--dataset names a dataset the model cannot take)" : " (use --dataset)");
  /* A batch larger than the split holds the split, as in training. */
  const int room = st == PT_OK && ds.n < plan.batch ? ds.n : plan.batch;
  if (st == PT_OK) st = pt_model_create_on(&m, &plan.spec, room, be);
  if (st == PT_OK) st = pt_optimizer_init_on(&opt, &plan.opt, m->nparam_total, be);
  pt_loader_config lc;
  /* A GPU makes each batch within the step, cropped and flipped as in
   * training; the CPU's are made before the clock starts. */
  pt_train_loader_config(&plan.spec, plan.batch, on_device, &lc);
  lc.shuffle = 1;
  lc.seed = cfg->seed;
  lc.indices_only = on_device;
  /* Every staged batch of the size asked: an epoch's short last one among
   * them would time smaller steps under the batch's name. */
  lc.drop_last = room == plan.batch;
  if (st == PT_OK) st = pt_loader_create(&l, &ds, &lc);
  /* On a GPU the split goes to its memory whole, as for training; the loss
   * is queued into dd.sums and never read. */
  if (st == PT_OK) st = pt_device_data_init(&dd, be, &ds, &lc, room);
  const int nstaged = l && pt_loader_num_batches(l) < STAGED ? pt_loader_num_batches(l) : STAGED;
  const size_t per = (size_t)plan.spec.in_c * plan.spec.in_h * plan.spec.in_w, xsz = (size_t)room * per;
  /* aligned as the loader's batches are, so kernels read them as in training */
  if (st == PT_OK && ((!on_device && !(xs = pt_alloc_aligned(sizeof(float) * xsz * nstaged))) ||
                      !(ys = pt_malloc(sizeof(int32_t) * (size_t)room * nstaged)) ||
                      !(idx = pt_malloc(sizeof(int32_t) * (size_t)room * nstaged))))
    st = PT_ERR_NOMEM;
  if (st == PT_OK) st = pt_loader_start_epoch(l, 0, 0);
  for (int k = 0; k < nstaged && st == PT_OK; k++) {
    pt_batch b;
    st = pt_loader_next(l, &b);
    if (st == PT_OK && b.n == 0) st = pt_fail(PT_ERR_STATE, "the loader ended after %d of %d batches", k, nstaged);
    if (st != PT_OK) break;
    staged[k] = (pt_batch){b.n, xs ? xs + k * xsz : NULL, ys + (size_t)k * room, idx + (size_t)k * room};
    if (xs) memcpy(staged[k].x, b.x, sizeof(float) * (size_t)b.n * per);
    memcpy(staged[k].y, b.y, sizeof(int32_t) * b.n);
    memcpy(staged[k].index, b.index, sizeof(int32_t) * b.n);
  }
  if (st == PT_OK) {
    pt_model_init(m, cfg->seed);
    out->device = on_device ? plan.devices[0] : -1;
    double t0 = 0.0;
    int64_t images = 0, graphed_before = 0;
    pt_phase_times ph;
    int end = warmup + steps; /* grows by blocks of steps until min_seconds have passed */
    for (int i = 0; i < end; i++) {
      if (i == warmup) {
        if (on_device && (st = be->sync()) != PT_OK) break; /* the warm-up done, not only queued */
        m->profile = profile;
        pt_profile_reset(m, &ph);
        graphed_before = graphs.replays;
        t0 = pt_now();
      }
      const pt_batch *b = &staged[i % nstaged];
      pt_phase_times *timed = profile && i >= warmup ? &ph : NULL;
      if (on_device) { /* as the training loop queues a step: nothing waits for the GPU */
        int graphed = 0;
        if (graphs.on &&
            (st = pt_graph_step_run(&graphs, m, &opt, &dd, b, room, 0, (uint64_t)i, 1.0f, plan.opt.lr,
                                    &graphed)) != PT_OK)
          break;
        if (!graphed) {
          const float *x;
          const int32_t *y;
          pt_device_data_batch(&dd, b, 0, &x, &y);
          pt_train_micro_step_queued(m, x, y, b->n, (uint64_t)i, 1, 1.0f, timed, dd.sums);
          pt_train_update(m, &opt, plan.opt.lr, timed);
        }
      } else {
        pt_train_step(m, &opt, b->x, b->y, b->n, (uint64_t)i, plan.opt.lr, timed);
      }
      if (i >= warmup) images += b->n;
      if (i + 1 == end && end <= INT_MAX - steps && pt_now() - t0 < min_seconds) end += steps;
    }
    if (st == PT_OK && on_device) st = be->sync();
    double dt = pt_now() - t0;
    steps = end - warmup;
    if (st == PT_OK) st = pt_model_take_status(m);
    if (st == PT_OK && profile) {
      ph.total_s = dt;
      pt_profile_print(stderr, m, &ph, 1, 1);
    }
    out->batch = room; /* the batch asked, or the split where it is smaller */
    out->threads = plan.threads;
    out->steps = steps;
    out->images_per_s = images / dt;
    out->step_ms = 1e3 * dt / steps;
    out->flops_per_image = 3.0 * pt_model_flops(m);
    out->gflops = out->images_per_s * out->flops_per_image / 1e9;
    out->peak_rss_mb = peak_rss_mb();
    out->graph_steps = graphs.replays - graphed_before;
    snprintf(out->graphs_off, sizeof out->graphs_off, "%s", graphs.why_off);
  }
  pt_graph_step_free(&graphs, be);
  pt_device_data_free(&dd);
  free(xs);
  free(ys);
  free(idx);
  pt_loader_destroy(l);
  pt_optimizer_free(&opt);
  pt_model_destroy(m);
  pt_dataset_free(&ds);
  pt_fp_set_flush(flushing);
  const pt_status ust = pt_backend_unbind(be); /* the queued work's error, if the run had none */
  return st != PT_OK ? st : ust;
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

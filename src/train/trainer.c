/* The training loop. Everything a run needs is allocated before the first
 * step (model activations, loader buffers, optimizer state), so the steady
 * state allocates nothing. Each epoch: set the learning rate from the
 * schedule, train over this epoch's batches, evaluate on the test split,
 * report, checkpoint. A run stopped by --max-steps checkpoints its exact
 * position, and --resume continues from it bit for bit: data order,
 * augmentation and dropout are functions of (seed, epoch, step), and the
 * optimizer state travels in the checkpoint.
 */
#include "train/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "io/metrics.h"
#include "io/progress.h"
#include "nn/presets.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/profile.h"
#include "train/step.h"
#include "util/timer.h"
#include "util/trace.h"

/* Evaluation batches are cut to keep activation memory under this; results
 * do not depend on the cut (sums are per sample). */
#define EVAL_ACTIVATION_BUDGET (512u << 20)

void pt_train_config_defaults(pt_train_config *c) {
  memset(c, 0, sizeof *c);
  c->epochs = 1;
  c->batch_size = c->test_batch_size = PT_UNSET_INT;
  c->lr = c->momentum = c->weight_decay = c->gamma = NAN;
  c->seed = 1;
  c->threads = 0;
  c->log_interval = 10;
  c->checkpoint_dir = "checkpoints";
  c->prefetch = 1;
}

pt_status pt_train_load_spec(const char *model, const char *model_file, pt_model_spec *spec) {
  if (model && model_file) return pt_fail(PT_ERR_ARG, "give either --model or --model-file, not both");
  if (model_file) return pt_spec_parse_file(model_file, spec);
  return pt_preset_spec(model ? model : "mnist-cnn", spec);
}

static float torch_default_lr(pt_opt_kind k) {
  switch (k) {
    case PT_OPT_ADAM:
    case PT_OPT_ADAMW: return 0.001f;
    case PT_OPT_ADADELTA: return 1.0f;
    case PT_OPT_SGD: break;
  }
  return 0.01f;
}

pt_status pt_train_plan_make(const pt_train_config *c, pt_train_plan *r) {
  memset(r, 0, sizeof *r);
  PT_TRY(pt_train_load_spec(c->model, c->model_file, &r->spec));
  const pt_preset *p = c->model_file ? NULL : pt_preset_find(c->model ? c->model : "mnist-cnn");
  r->spec_text = p ? p->text : NULL;
  const pt_train_defaults *d = &r->spec.defaults;
  PT_TRY(pt_dataset_kind_parse(c->dataset ? c->dataset : d->dataset, &r->dataset));
  r->data_dir = c->data_dir ? c->data_dir : pt_dataset_default_dir(r->dataset);
  r->batch = c->batch_size != PT_UNSET_INT ? c->batch_size : d->batch;
  r->test_batch = c->test_batch_size != PT_UNSET_INT ? c->test_batch_size : d->test_batch;
  pt_opt_kind kind;
  PT_TRY(pt_opt_kind_parse(c->optimizer ? c->optimizer : d->optimizer, &kind));
  pt_opt_config_defaults(&r->opt, kind);
  /* The preset's learning rate was tuned for its optimizer; with another
   * optimizer, PyTorch's default for that one is the better start. */
  int preset_opt = !c->optimizer || !strcmp(c->optimizer, d->optimizer);
  r->opt.lr = !isnan(c->lr) ? c->lr : preset_opt ? d->lr : torch_default_lr(kind);
  r->opt.momentum = !isnan(c->momentum) ? c->momentum : preset_opt ? d->momentum : 0.0f;
  if (!isnan(c->weight_decay)) r->opt.weight_decay = c->weight_decay;
  else if (preset_opt && d->weight_decay > 0) r->opt.weight_decay = d->weight_decay;
  r->opt.nesterov = c->nesterov;
  if (kind != PT_OPT_SGD && (c->nesterov || (!isnan(c->momentum) && c->momentum > 0)))
    return pt_fail(PT_ERR_ARG, "--momentum and --nesterov apply to --optimizer sgd, not %s", pt_opt_kind_name(kind));
  PT_TRY(pt_opt_config_check(&r->opt));
  PT_TRY(pt_sched_kind_parse(c->scheduler ? c->scheduler : d->scheduler, &r->sched));
  r->gamma = !isnan(c->gamma) ? c->gamma : d->gamma;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  r->threads = c->threads > 0 ? c->threads : (int)(cores > 0 ? cores : 1);
  if (c->no_dropout)
    for (int i = 0; i < r->spec.nlayers; i++)
      if (r->spec.layers[i].kind == PT_L_DROPOUT) r->spec.layers[i].p = 0.0f;
  return PT_OK;
}

void pt_train_loader_config(const pt_model_spec *spec, int batch, int augment, pt_loader_config *lc) {
  memset(lc, 0, sizeof *lc);
  lc->batch_size = batch;
  lc->world = 1;
  memcpy(lc->mean, spec->mean, sizeof lc->mean);
  memcpy(lc->std, spec->std, sizeof lc->std);
  if (augment) {
    lc->crop_pad = spec->crop_pad;
    lc->hflip = spec->hflip;
  }
}

static int eval_batch_for(const pt_model_spec *spec, int batch, int test_batch) {
  pt_model_summary sum;
  if (pt_model_summarize(spec, &sum) != PT_OK) return batch;
  size_t fit = EVAL_ACTIVATION_BUDGET / (4 * (sum.activation_floats ? sum.activation_floats : 1));
  int eb = test_batch;
  if ((size_t)eb > fit) eb = (int)fit;
  return eb < batch ? batch : eb;
}

typedef struct {
  const pt_train_config *cfg;
  pt_train_plan r;
  pt_dataset train_ds, test_ds;
  pt_loader *train, *test;
  pt_model *model;
  pt_optimizer opt;
  pt_metrics *metrics;
  FILE *out;
} run_t;

static void run_free(run_t *R) {
  pt_loader_destroy(R->train);
  pt_loader_destroy(R->test);
  pt_dataset_free(&R->train_ds);
  pt_dataset_free(&R->test_ds);
  pt_model_destroy(R->model);
  pt_optimizer_free(&R->opt);
  if (R->metrics) pt_metrics_close(R->metrics);
}

static pt_status setup(run_t *R) {
  const pt_train_config *c = R->cfg;
  pt_train_plan *r = &R->r;
  PT_TRY(pt_train_plan_make(c, r));
  if (pt_ops_set_threads(r->threads))
    return pt_fail(PT_ERR_STATE, "cannot start %d threads (--threads)", r->threads);
  PT_TRY(pt_dataset_load(&R->train_ds, r->dataset, r->data_dir, 1));
  PT_TRY(pt_dataset_load(&R->test_ds, r->dataset, r->data_dir, 0));
  const pt_model_spec *s = &r->spec;
  if (R->train_ds.c != s->in_c || R->train_ds.h != s->in_h || R->train_ds.w != s->in_w)
    return pt_fail(PT_ERR_ARG, "model %s takes %dx%dx%d input but %s images are %dx%dx%d (use --dataset)", s->name,
                   s->in_c, s->in_h, s->in_w, pt_dataset_kind_name(r->dataset), R->train_ds.c, R->train_ds.h,
                   R->train_ds.w);
  r->eval_batch = eval_batch_for(s, r->batch, r->test_batch);
  PT_TRY(pt_model_create(&R->model, s, r->batch > r->eval_batch ? r->batch : r->eval_batch));
  if (R->model->num_classes < R->train_ds.num_classes)
    return pt_fail(PT_ERR_ARG, "model %s has %d outputs but %s has %d classes", s->name, R->model->num_classes,
                   pt_dataset_kind_name(r->dataset), R->train_ds.num_classes);
  pt_model_init(R->model, c->seed);
  PT_TRY(pt_optimizer_init(&R->opt, &r->opt, R->model->nparam_total));

  pt_loader_config lc;
  pt_train_loader_config(s, r->batch, 1, &lc);
  lc.shuffle = !c->no_shuffle;
  lc.seed = c->seed;
  lc.prefetch = c->prefetch;
  PT_TRY(pt_loader_create(&R->train, &R->train_ds, &lc));
  pt_train_loader_config(s, r->eval_batch, 0, &lc);
  lc.seed = c->seed;
  lc.prefetch = c->prefetch;
  PT_TRY(pt_loader_create(&R->test, &R->test_ds, &lc));
  if (c->metrics_path) PT_TRY(pt_metrics_open(c->metrics_path, 1, &R->metrics));
  if (c->save_model) PT_TRY(pt_checkpoint_prepare_dir(c->checkpoint_dir));
  return PT_OK;
}

static void print_header(run_t *R) {
  const pt_train_plan *r = &R->r;
  const pt_model *m = R->model;
  fprintf(R->out, "ptrain %s: %s (%zu parameters, %.1f MFLOP/image forward), %s from %s (%d train, %d test)\n",
          PT_VERSION, m->spec.name, m->nparam_total, pt_model_flops(m) / 1e6, pt_dataset_kind_name(r->dataset),
          r->data_dir, R->train_ds.n, R->test_ds.n);
  fprintf(R->out, "optimizer %s lr %g", pt_opt_kind_name(r->opt.kind), r->opt.lr);
  if (r->opt.momentum > 0) fprintf(R->out, " momentum %g%s", r->opt.momentum, r->opt.nesterov ? " nesterov" : "");
  if (r->opt.weight_decay > 0) fprintf(R->out, " weight decay %g", r->opt.weight_decay);
  fprintf(R->out, ", scheduler %s", pt_sched_kind_name(r->sched));
  if (r->sched == PT_SCHED_STEP) fprintf(R->out, " gamma %g", r->gamma);
  fprintf(R->out, ", batch %d, %d thread%s, seed %llu\n", r->batch, r->threads, r->threads == 1 ? "" : "s",
          (unsigned long long)R->cfg->seed);
  fflush(R->out);
}

static pt_status report_epoch(run_t *R, int epoch, int64_t step, double train_loss, const pt_eval_sums *ev,
                              double ips, double seconds, float lr, int partial) {
  double test_loss = ev->count ? ev->loss_sum / ev->count : NAN;
  double acc = ev->count ? (double)ev->correct / ev->count : NAN;
  if (!R->cfg->quiet || epoch == R->cfg->epochs) {
    fprintf(R->out,
            "epoch %d/%d%s: train loss %.4f, test loss %.4f, test accuracy %.4f (%lld/%lld), %.0f img/s, %.1f s, lr %g\n",
            epoch, R->cfg->epochs, partial ? " (stopped early)" : "", train_loss, test_loss, acc,
            (long long)ev->correct, (long long)ev->count, ips, seconds, lr);
    fflush(R->out);
  }
  if (!R->metrics) return PT_OK;
  pt_metrics_begin(R->metrics, "epoch");
  pt_metrics_int(R->metrics, "epoch", epoch);
  pt_metrics_int(R->metrics, "step", step);
  pt_metrics_num(R->metrics, "train_loss", train_loss);
  pt_metrics_num(R->metrics, "test_loss", test_loss);
  pt_metrics_num(R->metrics, "test_acc", acc);
  pt_metrics_num(R->metrics, "images_per_s", ips);
  pt_metrics_num(R->metrics, "seconds", seconds);
  /* The float lr as the decimal a person wrote (0.01, not 0.009999999776). */
  char lrs[32];
  snprintf(lrs, sizeof lrs, "%.7g", lr);
  pt_metrics_num(R->metrics, "lr", strtod(lrs, NULL));
  if (partial) pt_metrics_bool(R->metrics, "partial", 1);
  return pt_metrics_end(R->metrics);
}

static pt_status train_loop(run_t *R, pt_train_result *res) {
  const pt_train_config *c = R->cfg;
  pt_model *m = R->model;
  pt_train_position pos = {0};
  pos.seed = c->seed;
  pos.batch_size = R->r.batch;
  if (c->resume) {
    PT_TRY(pt_checkpoint_resume(c->checkpoint_dir, m, &R->opt, &pos));
    if (pos.batch_size != R->r.batch)
      return pt_fail(PT_ERR_ARG, "%s: the run being resumed used batch size %d; resume with --batch-size %d",
                     c->checkpoint_dir, pos.batch_size, pos.batch_size);
    if (pos.seed != c->seed)
      return pt_fail(PT_ERR_ARG, "%s: the run being resumed used seed %llu; resume with --seed %llu",
                     c->checkpoint_dir, (unsigned long long)pos.seed, (unsigned long long)pos.seed);
    if (!c->quiet)
      fprintf(R->out, "resuming from %s at epoch %d, batch %d (step %lld)\n", c->checkpoint_dir, pos.next_epoch + 1,
              pos.next_batch, (long long)pos.step);
  } else if (c->init_from) {
    PT_TRY(pt_checkpoint_load_weights(c->init_from, m));
  }
  if (pos.next_epoch >= c->epochs && !c->quiet)
    fprintf(R->out, "nothing to train: the checkpoint has %d epoch%s; ask for more with --epochs\n", pos.next_epoch,
            pos.next_epoch == 1 ? "" : "s");
  const int nb = pt_loader_num_batches(R->train);
  const double t_run = pt_now();
  pt_phase_times ph;
  pt_profile_reset(m, &ph);
  m->profile = c->profile;
  const int timing = c->profile || pt_trace_enabled();
  int64_t samples_total = 0;
  double train_seconds_total = 0.0;
  for (int epoch = pos.next_epoch; epoch < c->epochs; epoch++) {
    if (c->max_steps && pos.step >= c->max_steps) break;
    const float lr = pt_sched_lr(R->r.sched, R->r.opt.lr, R->r.gamma, epoch, c->epochs);
    int b = epoch == pos.next_epoch ? pos.next_batch : 0;
    double loss_sum = b ? pos.epoch_loss_sum : 0.0, prior_seconds = b ? pos.epoch_seconds : 0.0;
    int64_t samples = b ? pos.epoch_samples : 0, fresh = 0;
    PT_TRY(pt_loader_start_epoch(R->train, epoch, b));
    pt_progress prog;
    pt_progress_start(&prog, c->quiet ? NULL : stderr, c->progress, c->log_interval, epoch + 1, c->epochs, nb);
    m->training = 1;
    const double t0 = pt_now();
    int stopped = 0;
    for (; b < nb; b++) {
      if (c->max_steps && pos.step >= c->max_steps) {
        stopped = 1;
        break;
      }
      pt_batch batch;
      const double ta = timing ? pt_now() : 0.0;
      PT_TRY(pt_loader_next(R->train, &batch));
      if (batch.n == 0) break;
      if (timing) {
        const double tb = pt_now();
        pt_trace_span("wait for data", "data", ta, tb);
        ph.data_s += tb - ta;
      }
      const double loss =
          pt_train_step(m, &R->opt, batch.x, batch.y, batch.n, (uint64_t)pos.step, lr, timing ? &ph : NULL);
      if (!isfinite(loss))
        return pt_fail(PT_ERR_STATE, "loss became %g at epoch %d, step %lld: lower the learning rate (now %g)", loss,
                       epoch + 1, (long long)pos.step, lr);
      if (timing) ph.total_s += pt_now() - ta;
      pos.step++;
      loss_sum += loss * batch.n;
      samples += batch.n;
      fresh += batch.n;
      double dt = pt_now() - t0;
      pt_progress_update(&prog, b + 1, pos.step, loss_sum / (double)samples, dt > 0 ? fresh / dt : 0.0);
    }
    pt_progress_finish(&prog);
    const double train_s = pt_now() - t0;
    samples_total += fresh;
    train_seconds_total += train_s;
    pos.next_epoch = b < nb ? epoch : epoch + 1;
    pos.next_batch = b < nb ? b : 0;
    pos.epoch_loss_sum = b < nb ? loss_sum : 0.0;
    pos.epoch_samples = b < nb ? samples : 0;
    pos.epoch_seconds = b < nb ? prior_seconds + train_s : 0.0;
    pt_eval_sums ev;
    const double te0 = pt_now();
    m->profile = 0; /* the profile is of training steps */
    PT_TRY(pt_evaluate(m, R->test, &ev));
    m->profile = c->profile;
    pt_trace_span("evaluate", "eval", te0, pt_now());
    double ips = train_s > 0 ? fresh / train_s : 0.0;
    double train_loss = samples ? loss_sum / (double)samples : NAN;
    PT_TRY(report_epoch(R, epoch + 1, pos.step, train_loss, &ev, ips, prior_seconds + train_s, lr, b < nb));
    if (c->save_model) {
      const double tk = pt_now();
      PT_TRY(pt_checkpoint_save(c->checkpoint_dir, m, &R->opt, &pos, R->r.spec_text));
      pt_trace_span("checkpoint", "io", tk, pt_now());
    }
    res->epochs_done = epoch + 1;
    res->train_loss = train_loss;
    res->test_loss = ev.count ? ev.loss_sum / ev.count : NAN;
    res->test_acc = ev.count ? (double)ev.correct / ev.count : NAN;
    if (stopped || b < nb) break;
  }
  if (c->profile) pt_profile_print(R->out, m, &ph);
  res->steps = pos.step;
  res->seconds = pt_now() - t_run;
  res->images_per_s = train_seconds_total > 0 ? samples_total / train_seconds_total : 0.0;
  return PT_OK;
}

pt_status pt_train_run(const pt_train_config *cfg, FILE *out, pt_train_result *result) {
  run_t R;
  memset(&R, 0, sizeof R);
  R.cfg = cfg;
  R.out = out;
  pt_train_result local;
  if (!result) result = &local;
  memset(result, 0, sizeof *result);
  if (cfg->epochs < 1) return pt_fail(PT_ERR_ARG, "--epochs %d: expected at least 1", cfg->epochs);
  /* Tracing starts first so the loader thread names its track. 2M events
   * (~64 MB) hold about 40,000 steps of a 10-layer model. */
  if (cfg->trace_path) {
    PT_TRY(pt_trace_start((size_t)2 << 20));
    pt_trace_thread_name("trainer");
  }
  pt_status st = setup(&R);
  if (st == PT_OK) {
    if (!cfg->quiet) print_header(&R);
    st = train_loop(&R, result);
  }
  if (st == PT_OK && !cfg->quiet) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(out, "done: %lld steps in %.1f s, %.0f img/s, peak memory %.0f MiB%s%s\n", (long long)result->steps,
            result->seconds, result->images_per_s, ru.ru_maxrss / 1024.0, cfg->save_model ? ", checkpoint in " : "",
            cfg->save_model ? cfg->checkpoint_dir : "");
  }
  /* Before run_free: trace events point at the model's layer labels. */
  if (cfg->trace_path) {
    pt_status ts = pt_trace_finish(cfg->trace_path);
    if (st == PT_OK) st = ts;
    if (ts == PT_OK && !cfg->quiet) fprintf(out, "trace written to %s (open in Perfetto or chrome://tracing)\n", cfg->trace_path);
  }
  run_free(&R);
  return st;
}
